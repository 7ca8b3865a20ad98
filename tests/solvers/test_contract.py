"""The solver contract of ``mel_opt.solvers.base``, checked once for both backends.

Every native termination code of each backend (every Ipopt return status, every APPSI
``TerminationCondition`` member) is mapped to the expected condition and user-facing status;
the usable-point rule is checked on its own and through real solves with limits.
"""

from __future__ import annotations

import math

import pyomo.environ as pyo
import pytest

from mel_opt.solvers import highs, ipopt
from mel_opt.solvers.base import (
    Availability,
    SolutionStatus,
    SolverResult,
    TerminationCondition,
    usable_point,
)
from mel_opt.status import Status

status_of = Status.of

TC, SS = TerminationCondition, SolutionStatus

BACKENDS = {"highs": highs, "ipopt": ipopt}
needs = {
    name: pytest.mark.skipif(not mod.available(), reason=f"{name}: {mod.available().reason}")
    for name, mod in BACKENDS.items()
}

# Ipopt's ApplicationReturnStatus values (IpReturnCodes_inc.h) and what each must become,
# written out here independently of the adapter's table.
IPOPT_EXPECTED: dict[int, TerminationCondition] = {
    0: TC.LOCALLY_OPTIMAL,
    1: TC.LOCALLY_OPTIMAL,
    2: TC.INFEASIBLE,
    3: TC.NUMERICAL,
    4: TC.UNBOUNDED,
    5: TC.INTERRUPTED,
    6: TC.CONVERGED,
    -1: TC.ITERATION_LIMIT,
    -2: TC.NUMERICAL,
    -3: TC.NUMERICAL,
    -4: TC.TIME_LIMIT,
    -5: TC.TIME_LIMIT,
    -10: TC.ERROR,
    -11: TC.ERROR,
    -12: TC.ERROR,
    -13: TC.NUMERICAL,
    -100: TC.ERROR,
    -101: TC.ERROR,
    -102: TC.ERROR,
    -199: TC.ERROR,
}

# APPSI TerminationCondition member name -> expected condition.
APPSI_EXPECTED: dict[str, TerminationCondition] = {
    "unknown": TC.UNKNOWN,
    "maxTimeLimit": TC.TIME_LIMIT,
    "maxIterations": TC.ITERATION_LIMIT,
    "objectiveLimit": TC.OBJECTIVE_LIMIT,
    "minStepLength": TC.NUMERICAL,
    "optimal": TC.CONVERGED,
    "unbounded": TC.UNBOUNDED,
    "infeasible": TC.INFEASIBLE,
    "infeasibleOrUnbounded": TC.INFEASIBLE,
    "error": TC.ERROR,
    "interrupted": TC.INTERRUPTED,
    "licensingProblems": TC.ERROR,
}

# User-facing status of each condition, with a usable feasible point and without any point.
STATUS_WITH_POINT = {
    TC.CONVERGED: Status.FEASIBLE,
    TC.LOCALLY_OPTIMAL: Status.FEASIBLE,
    TC.TIME_LIMIT: Status.FEASIBLE,
    TC.ITERATION_LIMIT: Status.FEASIBLE,
    TC.OBJECTIVE_LIMIT: Status.FEASIBLE,
    TC.INTERRUPTED: Status.FEASIBLE,
    TC.INFEASIBLE: Status.INFEASIBLE,
    TC.UNBOUNDED: Status.ERROR,
    TC.NUMERICAL: Status.ERROR,
    TC.ERROR: Status.ERROR,
    TC.UNKNOWN: Status.ERROR,
}
STATUS_WITHOUT_POINT = {
    TC.CONVERGED: Status.ERROR,
    TC.LOCALLY_OPTIMAL: Status.ERROR,
    TC.TIME_LIMIT: Status.TIME_LIMIT,
    TC.ITERATION_LIMIT: Status.ITERATION_LIMIT,
    TC.OBJECTIVE_LIMIT: Status.ERROR,
    TC.INTERRUPTED: Status.ERROR,
    TC.INFEASIBLE: Status.INFEASIBLE,
    TC.UNBOUNDED: Status.ERROR,
    TC.NUMERICAL: Status.ERROR,
    TC.ERROR: Status.ERROR,
    TC.UNKNOWN: Status.ERROR,
}


def native_cases() -> list[tuple[str, object, TerminationCondition]]:
    """(backend, native code, expected condition) for every code of both backends."""
    cases: list[tuple[str, object, TerminationCondition]] = [
        ("ipopt", code, tc) for code, tc in IPOPT_EXPECTED.items()
    ]
    cases += [("highs", name, tc) for name, tc in APPSI_EXPECTED.items()]
    return cases


def native_map(backend: str) -> dict[object, TerminationCondition]:
    if backend == "ipopt":
        return dict(ipopt.STATUS_MAP)
    return {member.name: tc for member, tc in highs.termination_map().items()}


# --- the native code tables ------------------------------------------------------------------


def test_every_native_code_is_listed() -> None:
    from pyomo.contrib.appsi.base import TerminationCondition as AppsiTC

    assert set(APPSI_EXPECTED) == set(AppsiTC.__members__)
    assert set(native_map("highs")) == set(AppsiTC.__members__)
    assert set(native_map("ipopt")) == set(IPOPT_EXPECTED) == set(ipopt.STATUS_NAMES)


@pytest.mark.parametrize(("backend", "code", "expected"), native_cases())
def test_native_code_maps_to_condition_and_status(backend, code, expected) -> None:
    tc = native_map(backend)[code]
    assert tc is expected
    assert status_of(tc, SS.FEASIBLE) is STATUS_WITH_POINT[tc]
    for nothing in (SS.NONE, SS.INFEASIBLE):
        assert status_of(tc, nothing) is STATUS_WITHOUT_POINT[tc]


def test_unknown_native_codes_get_the_default() -> None:
    assert ipopt.STATUS_MAP.get(12345, TC.ERROR) is TC.ERROR
    assert status_of(TC.UNKNOWN, SS.OPTIMAL) is Status.ERROR


def test_success_codes_keep_their_optimality_claim() -> None:
    assert status_of(TC.CONVERGED, SS.OPTIMAL) is Status.OPTIMAL
    assert status_of(TC.LOCALLY_OPTIMAL, SS.OPTIMAL) is Status.LOCALLY_OPTIMAL
    # No optimality claim survives a limit.
    assert status_of(TC.TIME_LIMIT, SS.OPTIMAL) is Status.FEASIBLE


# --- the usable-point rule -------------------------------------------------------------------


@pytest.mark.parametrize("limit", [TC.TIME_LIMIT, TC.ITERATION_LIMIT])
@pytest.mark.parametrize(
    ("solution", "usable"),
    [(SS.FEASIBLE, True), (SS.OPTIMAL, True), (SS.INFEASIBLE, False), (SS.NONE, False)],
)
def test_limit_point_usable_iff_feasible(limit, solution, usable) -> None:
    assert usable_point(limit, solution) is usable
    res = SolverResult(limit, solution, objective=None if solution is SS.NONE else 1.0)
    assert res.is_usable is usable
    assert not res.is_optimal  # no optimality claim survives a limit
    expected = Status.FEASIBLE if usable else Status[limit.name]
    assert status_of(res.termination, res.solution_status) is expected


@pytest.mark.parametrize("tc", list(TC))
@pytest.mark.parametrize("solution", list(SS))
def test_status_agrees_with_the_rule(tc, solution) -> None:
    # Every pair: the user-facing status carries a solution exactly when the point is usable,
    # and an optimality claim only after a convergence with an optimal point.
    usable = usable_point(tc, solution)
    status = status_of(tc, solution)
    assert status.has_solution is usable
    claims = status in (Status.OPTIMAL, Status.LOCALLY_OPTIMAL)
    assert claims is (usable and solution is SS.OPTIMAL
                      and tc in (TC.CONVERGED, TC.LOCALLY_OPTIMAL))
    assert status.exit_code == (0 if usable else 1)


@pytest.mark.parametrize("tc", [TC.INFEASIBLE, TC.UNBOUNDED, TC.NUMERICAL, TC.ERROR, TC.UNKNOWN])
def test_other_stops_give_no_usable_point(tc) -> None:
    assert not usable_point(tc, SS.FEASIBLE)


@pytest.mark.parametrize("tc", list(TC))
def test_a_stop_without_a_point_names_its_reason(tc) -> None:
    # Infeasibility and the limits are reported as such; every other stop without a point is
    # an error (unbounded, numerical trouble, a crash, an unknown stop).
    named = {TC.INFEASIBLE: Status.INFEASIBLE, TC.TIME_LIMIT: Status.TIME_LIMIT,
             TC.ITERATION_LIMIT: Status.ITERATION_LIMIT}
    for nothing in (SS.NONE, SS.INFEASIBLE):
        assert status_of(tc, nothing) is named.get(tc, Status.ERROR)


def test_iteration_limit_is_its_own_status() -> None:
    assert status_of(TC.ITERATION_LIMIT, SS.NONE) is Status.ITERATION_LIMIT
    assert Status.ITERATION_LIMIT.value == "iteration_limit"
    assert Status.ITERATION_LIMIT.exit_code == 1


def test_gap_and_has_solution() -> None:
    res = SolverResult(TC.TIME_LIMIT, SS.FEASIBLE, objective=10.0, bound=8.0)
    assert res.gap == pytest.approx(0.2) and res.has_solution
    empty = SolverResult(TC.TIME_LIMIT, SS.NONE, objective=None, bound=8.0)
    assert empty.gap is None and not empty.has_solution and not empty.is_usable


# --- availability ------------------------------------------------------------------------------


def test_availability_truthiness() -> None:
    assert Availability(True) and Availability(True).reason == ""
    no = Availability(False, "not installed")
    assert not no and no.reason == "not installed"


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_backends_report_the_one_availability_type(backend) -> None:
    avail = BACKENDS[backend].available()
    assert type(avail) is Availability
    assert bool(avail) is avail.ok


# --- real solves -------------------------------------------------------------------------------


def lp(integer: bool) -> pyo.ConcreteModel:
    """max 3x + 2y s.t. x + 2y <= 4, 3x + y <= 6, x, y >= 0.

    LP: both rows tight at x = 8/5, y = 6/5, objective 36/5 (vertices (2, 0) and (0, 2) give 6
    and 4). Integers: the feasible lattice points with x + y >= 2 are (2, 0), (1, 1), (0, 2),
    ((2, 1) breaks 3x + y <= 6), so the optimum is 6 at (2, 0).
    """
    m = pyo.ConcreteModel()
    dom = pyo.NonNegativeIntegers if integer else pyo.NonNegativeReals
    m.x = pyo.Var(domain=dom)
    m.y = pyo.Var(domain=dom)
    m.a = pyo.Constraint(expr=m.x + 2 * m.y <= 4)
    m.b = pyo.Constraint(expr=3 * m.x + m.y <= 6)
    m.obj = pyo.Objective(expr=3 * m.x + 2 * m.y, sense=pyo.maximize)
    return m


def covering_lp() -> pyo.ConcreteModel:
    """min 2x + 3y s.t. x + y >= 1, x + 3y >= 2, x, y >= 0: optimum 5/2 at (1/2, 1/2)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.NonNegativeReals)
    m.y = pyo.Var(domain=pyo.NonNegativeReals)
    m.a = pyo.Constraint(expr=m.x + m.y >= 1)
    m.b = pyo.Constraint(expr=m.x + 3 * m.y >= 2)
    m.obj = pyo.Objective(expr=2 * m.x + 3 * m.y)
    return m


def circle() -> pyo.ConcreteModel:
    """min x + y on x^2 + y^2 = 1: optimum -sqrt(2) at x = y = -1/sqrt(2); start (3, 1/2)
    violates the circle by 9 + 1/4 - 1 = 8.25."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=3.0)
    m.y = pyo.Var(initialize=0.5)
    m.c = pyo.Constraint(expr=m.x**2 + m.y**2 == 1)
    m.obj = pyo.Objective(expr=m.x + m.y)
    return m


def box_rosenbrock() -> pyo.ConcreteModel:
    """Rosenbrock on [-2, 2]^2 from (-1.2, 1): f = 2.2^2 + 100 * 0.44^2 = 24.2 there; every
    point Ipopt visits is inside the box, hence feasible."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(-2, 2), initialize=-1.2)
    m.y = pyo.Var(bounds=(-2, 2), initialize=1.0)
    m.obj = pyo.Objective(expr=(1 - m.x) ** 2 + 100 * (m.y - m.x**2) ** 2)
    return m


def solve(backend: str, model: pyo.ConcreteModel, **kw) -> SolverResult:
    if backend == "highs":
        return highs.solve_milp(model, **kw)
    return ipopt.solve_nlp(model, **kw)


# (backend, model, solve keywords, condition, solution status, user status, objective)
SOLVES = [
    ("highs", lambda: lp(False), {}, TC.CONVERGED, SS.OPTIMAL, Status.OPTIMAL, 7.2),
    ("highs", lambda: lp(True), {}, TC.CONVERGED, SS.OPTIMAL, Status.OPTIMAL, 6.0),
    ("highs", covering_lp, {}, TC.CONVERGED, SS.OPTIMAL, Status.OPTIMAL, 2.5),
    # Zero simplex iterations: the slack basis (0, 0) is feasible for lp, not for covering_lp.
    ("highs", lambda: lp(False), {"options": {"simplex_iteration_limit": 0}},
     TC.ITERATION_LIMIT, SS.FEASIBLE, Status.FEASIBLE, 0.0),
    ("highs", covering_lp, {"options": {"simplex_iteration_limit": 0}},
     TC.ITERATION_LIMIT, SS.INFEASIBLE, Status.ITERATION_LIMIT, 0.0),
    ("highs", lambda: lp(True), {"time_limit": 1e-9},
     TC.TIME_LIMIT, SS.NONE, Status.TIME_LIMIT, None),
    ("ipopt", circle, {}, TC.LOCALLY_OPTIMAL, SS.OPTIMAL, Status.LOCALLY_OPTIMAL, -math.sqrt(2)),
    ("ipopt", circle, {"max_iter": 0}, TC.ITERATION_LIMIT, SS.INFEASIBLE,
     Status.ITERATION_LIMIT, 3.5),
    ("ipopt", circle, {"time_limit": 1e-9}, TC.TIME_LIMIT, SS.INFEASIBLE, Status.TIME_LIMIT, 3.5),
    ("ipopt", box_rosenbrock, {"max_iter": 0}, TC.ITERATION_LIMIT, SS.FEASIBLE,
     Status.FEASIBLE, 24.2),
    ("ipopt", box_rosenbrock, {"time_limit": 1e-9}, TC.TIME_LIMIT, SS.FEASIBLE,
     Status.FEASIBLE, 24.2),
]


@pytest.mark.parametrize(
    ("backend", "build", "kw", "tc", "solution", "status", "objective"),
    [pytest.param(*case, marks=needs[case[0]], id=f"{case[0]}-{k}") for k, case in
     enumerate(SOLVES)],
)
def test_real_solve(backend, build, kw, tc, solution, status, objective) -> None:
    res = solve(backend, build(), **kw)
    assert isinstance(res, SolverResult)
    assert res.termination is tc, res.message
    assert res.solution_status is solution, res.message
    assert status_of(res.termination, res.solution_status) is status
    assert res.is_usable is status.has_solution
    if objective is None:
        assert res.objective is None and not res.has_solution
    else:
        assert res.objective == pytest.approx(objective, abs=1e-6)
    if backend == "ipopt":
        assert res.bound is None and res.gap is None
    elif res.termination is TC.CONVERGED:
        assert res.gap == pytest.approx(0.0, abs=1e-9)


@needs["highs"]
def test_highs_values_of_the_milp() -> None:
    res = highs.solve_milp(lp(True))
    assert res.values == pytest.approx({"x": 2.0, "y": 0.0})


@needs["highs"]
def test_highs_infeasible() -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.c = pyo.Constraint(expr=m.x >= 2)
    m.obj = pyo.Objective(expr=m.x)
    res = highs.solve_milp(m)
    assert res.termination is TC.INFEASIBLE and not res.is_usable
    assert status_of(res.termination, res.solution_status) is Status.INFEASIBLE


@needs["ipopt"]
def test_ipopt_solution_status_of_a_point() -> None:
    assert ipopt.solution_status(-1, 1e-6, 1e-4) is SS.FEASIBLE
    assert ipopt.solution_status(-1, 1e-3, 1e-4) is SS.INFEASIBLE
    assert ipopt.solution_status(-4, math.nan, 1e-4) is SS.NONE
    assert ipopt.solution_status(0, 1e-6, 1e-4) is SS.OPTIMAL
    assert ipopt.solution_status(6, 0.0, 1e-4) is SS.FEASIBLE
    # The caller's constr_viol_tol moves the line.
    res = ipopt.solve_nlp(circle(), max_iter=0, options={"constr_viol_tol": 10.0})
    assert res.solution_status is SS.FEASIBLE and res.is_usable


@needs["highs"]
def test_highs_time_limit_counts_after_the_model_is_handed_over(monkeypatch) -> None:
    # A large Pyomo model takes seconds to translate, outside HiGHS's own clock: HiGHS gets
    # what is left after the translation (5 % kept back), and none if nothing is left.
    import time

    from pyomo.contrib.appsi.solvers.highs import Highs

    translate, run = Highs.set_instance, Highs.solve
    seen: dict[str, float] = {}

    def slow_translate(self, model):
        time.sleep(0.3)
        return translate(self, model)

    def spy(self, model, timer=None):
        seen["limit"] = self.config.time_limit
        seen["at"] = time.perf_counter()
        return run(self, model)

    monkeypatch.setattr(Highs, "set_instance", slow_translate)
    monkeypatch.setattr(Highs, "solve", spy)
    # No wall-clock bound: the limit HiGHS got is compared with readings taken around the
    # call, so a loaded machine (a slower translation) cannot break it. HiGHS got at most what
    # the 0.3 s (at least) of translation left, and at least what was left when it started.
    t = time.perf_counter()
    res = highs.solve_milp(lp(True), time_limit=100.0)
    assert res.termination is TC.CONVERGED
    assert 0.95 * (100.0 - (seen["at"] - t)) - 1e-9 <= seen["limit"]
    assert seen["limit"] <= 0.95 * (100.0 - 0.3) + 1e-9
    seen.clear()
    # the translation (0.3 s at least) outlasts a 0.2 s limit: HiGHS is never called
    res = highs.solve_milp(lp(True), time_limit=0.2)
    assert res.termination is TC.TIME_LIMIT and res.solution_status is SS.NONE
    assert "handing the model to HiGHS" in res.message and "limit" not in seen
