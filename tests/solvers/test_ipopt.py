"""Known-answer and derivative tests of the Pyomo-to-cyipopt adapter (mel_opt.solvers.ipopt).

Every expected optimum below is derived by hand in a comment, or computed independently of the
adapter (bisection for the mel-async model, finite differences for derivatives).
"""

from __future__ import annotations

import math

import numpy as np
import pyomo.environ as pyo
import pytest

from mel_opt.errors import UsageError
from mel_opt.solvers.base import SolverResult
from mel_opt.solvers.base import TerminationCondition as Termination
from mel_opt.solvers.ipopt import (
    STATUS_MAP,
    available,
    solve_nlp,
    version,
)

pytestmark = pytest.mark.skipif(not available(), reason=f"cyipopt: {available().reason}")


def assert_optimal(res: SolverResult) -> None:
    assert res.termination is Termination.LOCALLY_OPTIMAL, res.message
    assert res.constraint_violation < 1e-6


# --- availability and status mapping -----------------------------------------------------------


def test_available_and_version() -> None:
    avail = available()
    assert avail and avail.ok and avail.reason == ""
    assert version().startswith("Ipopt 3.")


def test_status_map_defaults_to_error() -> None:
    assert STATUS_MAP[0] is Termination.LOCALLY_OPTIMAL
    assert STATUS_MAP[2] is Termination.INFEASIBLE
    assert STATUS_MAP[-1] is Termination.ITERATION_LIMIT
    assert STATUS_MAP[-4] is Termination.TIME_LIMIT
    assert STATUS_MAP.get(12345, Termination.ERROR) is Termination.ERROR


# --- classic known answers ---------------------------------------------------------------------


def hs071() -> pyo.ConcreteModel:
    """Hock-Schittkowski 71: optimum 17.0140173 at (1, 4.7429994, 3.8211503, 1.3794082)."""
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(1, 4)
    m.x = pyo.Var(m.I, bounds=(1, 5), initialize={1: 1.0, 2: 5.0, 3: 5.0, 4: 1.0})
    x = m.x
    m.obj = pyo.Objective(expr=x[1] * x[4] * (x[1] + x[2] + x[3]) + x[3])
    m.prod = pyo.Constraint(expr=x[1] * x[2] * x[3] * x[4] >= 25)
    m.sq = pyo.Constraint(expr=sum(x[i] ** 2 for i in m.I) == 40)
    return m


HS071_X = [1.0, 4.7429994, 3.8211503, 1.3794082]


def test_hs071() -> None:
    m = hs071()
    res = solve_nlp(m)
    assert_optimal(res)
    assert res.objective == pytest.approx(17.0140173, abs=1e-6)
    assert list(res.values) == ["x[1]", "x[2]", "x[3]", "x[4]"]
    np.testing.assert_allclose(res.x, HS071_X, atol=1e-5)
    # The solution is loaded into the model.
    assert pyo.value(m.obj) == pytest.approx(17.0140173, abs=1e-6)
    assert m.x[2].value == pytest.approx(4.7429994, abs=1e-5)
    assert 0 < res.iterations < 50
    assert res.solve_time_s > 0 and res.build_time_s > 0
    # Multipliers published with the Ipopt HS071 example (same sign convention).
    assert res.multipliers["prod"] == pytest.approx(-0.55229366, abs=1e-5)
    assert res.multipliers["sq"] == pytest.approx(0.16146857, abs=1e-5)


def test_hs071_lbfgs_agrees_with_exact() -> None:
    exact = solve_nlp(hs071())
    lbfgs = solve_nlp(hs071(), hessian="lbfgs")
    assert_optimal(lbfgs)
    assert lbfgs.objective == pytest.approx(exact.objective, abs=1e-6)
    np.testing.assert_allclose(lbfgs.x, exact.x, atol=1e-5)


def rosenbrock() -> pyo.ConcreteModel:
    """min (1 - x)^2 + 100 (y - x^2)^2: minimum 0 at (1, 1); classic start (-1.2, 1)."""
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=-1.2)
    m.y = pyo.Var(initialize=1.0)
    m.obj = pyo.Objective(expr=(1 - m.x) ** 2 + 100 * (m.y - m.x**2) ** 2)
    return m


def test_rosenbrock() -> None:
    res = solve_nlp(rosenbrock())
    assert_optimal(res)
    np.testing.assert_allclose(res.x, [1.0, 1.0], atol=1e-6)
    assert res.objective == pytest.approx(0.0, abs=1e-10)
    assert res.multipliers == {}


def test_rosenbrock_lbfgs() -> None:
    res = solve_nlp(rosenbrock(), hessian="lbfgs")
    assert_optimal(res)
    np.testing.assert_allclose(res.x, [1.0, 1.0], atol=1e-4)


def test_max_iter_gives_iteration_limit() -> None:
    res = solve_nlp(rosenbrock(), max_iter=2)
    assert res.termination is Termination.ITERATION_LIMIT
    assert res.iterations == 2
    assert "Maximum_Iterations_Exceeded" in res.message


def test_time_limit() -> None:
    # Chained Rosenbrock in 200 variables needs many iterations; 1 ns stops it at the first
    # check, whatever the machine.
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, 199)
    m.x = pyo.Var(m.I, initialize=-1.2)
    m.obj = pyo.Objective(
        expr=sum((1 - m.x[i]) ** 2 + 100 * (m.x[i + 1] - m.x[i] ** 2) ** 2 for i in range(199))
    )
    res = solve_nlp(m, time_limit=1e-9)
    assert res.termination is Termination.TIME_LIMIT, res.message


def test_bilinear_product_constraint() -> None:
    # min x + y s.t. x y >= 4, x, y >= 0: by AM-GM x + y >= 2 sqrt(xy) >= 4, equality at x=y=2.
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.NonNegativeReals)
    m.y = pyo.Var(domain=pyo.NonNegativeReals)
    m.obj = pyo.Objective(expr=m.x + m.y)
    m.c = pyo.Constraint(expr=m.x * m.y >= 4)
    res = solve_nlp(m)  # no initial values: the start is (0, 0) projected into the bounds
    assert_optimal(res)
    np.testing.assert_allclose(res.x, [2.0, 2.0], atol=1e-6)
    assert res.objective == pytest.approx(4.0, abs=1e-7)
    # grad f + lambda grad g = 0: (1, 1) + lambda (y, x) = 0 -> lambda = -1/2.
    assert res.multipliers["c"] == pytest.approx(-0.5, abs=1e-6)


# --- elementary nonlinear terms with closed-form optima -----------------------------------------


def one_var(expr_of, bounds=(None, None), init=None, sense=pyo.minimize) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=bounds, initialize=init)
    m.obj = pyo.Objective(expr=expr_of(m.x), sense=sense)
    return m


@pytest.mark.parametrize(
    ("expr_of", "bounds", "x_star", "f_star"),
    [
        # a/x + b x, a=8, b=2: f' = -a/x^2 + b = 0 -> x = sqrt(a/b) = 2, f = 2 sqrt(ab) = 8.
        (lambda x: 8 / x + 2 * x, (0.01, None), 2.0, 8.0),
        # a/x + b sqrt(x), a=2, b=1: f' = -a/x^2 + b/(2 sqrt x) = 0 -> x^(3/2) = 2a/b = 4,
        # x = 4^(2/3); f = 2/x + sqrt(x).
        (
            lambda x: 2 / x + pyo.sqrt(x),
            (0.01, None),
            4 ** (2 / 3),
            2 / 4 ** (2 / 3) + 4 ** (1 / 3),
        ),
        # c x^-0.5 + x, c=16: f' = -c/2 x^-1.5 + 1 = 0 -> x = (c/2)^(2/3) = 4, f = 8 + 4 = 12.
        (lambda x: 16 * x**-0.5 + x, (0.01, None), 4.0, 12.0),
        # x^2.5 - 5x: f' = 2.5 x^1.5 - 5 = 0 -> x = 2^(2/3), f = 2x - 5x = -3 * 2^(2/3).
        (lambda x: x**2.5 - 5 * x, (0, None), 2 ** (2 / 3), -3 * 2 ** (2 / 3)),
        # exp(x) - 2x: f' = e^x - 2 = 0 -> x = ln 2, f = 2 - 2 ln 2.
        (lambda x: pyo.exp(x) - 2 * x, (None, None), math.log(2), 2 - 2 * math.log(2)),
        # x - 2 log x: f' = 1 - 2/x = 0 -> x = 2, f = 2 - 2 ln 2.
        (lambda x: x - 2 * pyo.log(x), (0.01, None), 2.0, 2 - 2 * math.log(2)),
        # Division of expressions: (x^2 + 1)/x = x + 1/x -> x = 1, f = 2.
        (lambda x: (x**2 + 1) / x, (0.1, 10), 1.0, 2.0),
    ],
)
def test_unary_known_optima(expr_of, bounds, x_star, f_star) -> None:
    res = solve_nlp(one_var(expr_of, bounds=bounds, init=1.0))
    assert_optimal(res)
    assert res.x[0] == pytest.approx(x_star, rel=1e-6)
    assert res.objective == pytest.approx(f_star, rel=1e-7, abs=1e-9)


def test_evaluation_errors_cut_the_step() -> None:
    # min x - 2 log x with x unbounded, from x = 10: the Newton step (-40) lands at x < 0 where
    # log is undefined; Ipopt must back off instead of failing. Optimum x = 2 (see above).
    res = solve_nlp(one_var(lambda x: x - 2 * pyo.log(x), init=10.0))
    assert_optimal(res)
    assert res.x[0] == pytest.approx(2.0, rel=1e-7)


def test_long_nonlinear_sum() -> None:
    # sum_i a_i/x_i + b_i x_i separates: x_i = sqrt(a_i/b_i), f = sum 2 sqrt(a_i b_i).
    rng = np.random.default_rng(7)
    n = 300
    a, b = rng.uniform(0.5, 5, n), rng.uniform(0.5, 5, n)
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, n - 1)
    m.x = pyo.Var(m.I, bounds=(1e-3, None), initialize=1.0)
    m.obj = pyo.Objective(expr=sum(a[i] / m.x[i] + b[i] * m.x[i] for i in m.I))
    res = solve_nlp(m)
    assert_optimal(res)
    np.testing.assert_allclose(res.x, np.sqrt(a / b), rtol=1e-6)
    assert res.objective == pytest.approx(float(np.sum(2 * np.sqrt(a * b))), rel=1e-9)


def test_maximisation_and_multiplier_sign() -> None:
    # max log x + log y s.t. x + 2y <= 4: x = 2, y = 1 (equal budget shares), f = log 2.
    # Ipopt minimises -f: (-1/x, -1/y) + lambda (1, 2) = 0 -> lambda = 1/2 = +df*/db
    # (f*(b) = log(b/2) + log(b/4), df*/db = 2/b = 1/2 at b = 4).
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(1e-6, None), initialize=1.0)
    m.y = pyo.Var(bounds=(1e-6, None), initialize=1.0)
    m.obj = pyo.Objective(expr=pyo.log(m.x) + pyo.log(m.y), sense=pyo.maximize)
    m.budget = pyo.Constraint(expr=m.x + 2 * m.y <= 4)
    res = solve_nlp(m)
    assert_optimal(res)
    np.testing.assert_allclose(res.x, [2.0, 1.0], atol=1e-7)
    # Ipopt relaxes the bound by ~1e-8 (bound_relax_factor), hence abs=1e-7.
    assert res.objective == pytest.approx(math.log(2), abs=1e-7)
    assert res.multipliers["budget"] == pytest.approx(0.5, abs=1e-7)


@pytest.mark.parametrize("relation", ["eq", "ge"])
def test_multiplier_of_minimisation(relation: str) -> None:
    # min x^2 + y^2 s.t. x + y (= or >=) 2: x = y = 1, f*(b) = b^2/2, df*/db = 2.
    # Ipopt: (2x, 2y) + lambda (1, 1) = 0 -> lambda = -2 = -df*/db.
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.y = pyo.Var()
    m.obj = pyo.Objective(expr=m.x**2 + m.y**2)
    body = m.x + m.y
    m.c = pyo.Constraint(expr=body == 2 if relation == "eq" else body >= 2)
    res = solve_nlp(m)
    assert_optimal(res)
    np.testing.assert_allclose(res.x, [1.0, 1.0], atol=1e-7)
    assert res.multipliers["c"] == pytest.approx(-2.0, abs=1e-6)


def test_multiplier_of_upper_bounded_constraint() -> None:
    # min -(x + y) s.t. x^2 + y^2 <= 2: x = y = 1; (-1, -1) + lambda (2x, 2y) = 0 -> lambda = 1/2.
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=0.5)
    m.y = pyo.Var(initialize=0.5)
    m.obj = pyo.Objective(expr=-(m.x + m.y))
    m.c = pyo.Constraint(expr=m.x**2 + m.y**2 <= 2)
    res = solve_nlp(m)
    assert_optimal(res)
    np.testing.assert_allclose(res.x, [1.0, 1.0], atol=1e-7)
    assert res.multipliers["c"] == pytest.approx(0.5, abs=1e-6)


def test_constants_on_both_sides() -> None:
    # min (x-1)^2 + (y-3)^2 s.t. x + 3 == 2y + 1, i.e. x = 2y - 2:
    # g(y) = (2y-3)^2 + (y-3)^2, g' = 4(2y-3) + 2(y-3) = 10y - 18 = 0 -> y = 1.8, x = 1.6,
    # f = 0.6^2 + 1.2^2 = 1.8.
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.y = pyo.Var()
    m.obj = pyo.Objective(expr=(m.x - 1) ** 2 + (m.y - 3) ** 2 + 5 - 5)
    m.c = pyo.Constraint(expr=m.x + 3 == 2 * m.y + 1)
    res = solve_nlp(m)
    assert_optimal(res)
    np.testing.assert_allclose(res.x, [1.6, 1.8], atol=1e-8)
    assert res.objective == pytest.approx(1.8, abs=1e-9)


@pytest.mark.parametrize(("target", "x_star"), [(5.0, 2.0), (-5.0, 0.5), (1.0, 1.0)])
def test_ranged_constraint(target: float, x_star: float) -> None:
    # min (x - target)^2 s.t. 1 <= 2x <= 4: the projection of target onto [0.5, 2].
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.obj = pyo.Objective(expr=(m.x - target) ** 2)
    m.c = pyo.Constraint(expr=pyo.inequality(1, 2 * m.x, 4))
    res = solve_nlp(m)
    assert_optimal(res)
    assert res.x[0] == pytest.approx(x_star, abs=1e-7)


def test_fixed_variables_are_constants() -> None:
    # x fixed at 3: x*y >= 9 becomes y >= 3; min (y-2)^2 + (x-1)^2 -> y = 3, f = 1 + 4 = 5.
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=3.0)
    m.x.fix()
    m.y = pyo.Var(initialize=0.0)
    m.p = pyo.Param(initialize=2.0, mutable=True)
    m.obj = pyo.Objective(expr=(m.y - m.p) ** 2 + (m.x - 1) ** 2)
    m.c = pyo.Constraint(expr=m.x * m.y >= 9)
    m.only_fixed = pyo.Constraint(expr=pyo.sqrt(m.x) <= 2)  # true, not given to Ipopt
    res = solve_nlp(m)
    assert_optimal(res)
    assert list(res.values) == ["y"]
    assert res.values["y"] == pytest.approx(3.0, abs=1e-7)
    assert res.objective == pytest.approx(5.0, abs=1e-6)
    assert m.x.value == 3.0 and m.x.fixed
    assert res.multipliers["only_fixed"] == 0.0


def test_violated_constant_constraint_is_infeasible() -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=3.0)
    m.x.fix()
    m.y = pyo.Var()
    m.obj = pyo.Objective(expr=m.y**2)
    m.bad = pyo.Constraint(expr=m.x <= 1)
    res = solve_nlp(m)
    assert res.termination is Termination.INFEASIBLE
    assert "bad" in res.message
    assert res.constraint_violation == pytest.approx(2.0)


def test_constraints_in_blocks() -> None:
    # min (x-3)^2 + (y-3)^2 with b.c: x + y <= 2 (active) -> x = y = 1;
    # the deactivated block's x >= 5 must be ignored.
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.b = pyo.Block()
    m.b.y = pyo.Var()
    m.b.c = pyo.Constraint(expr=m.x + m.b.y <= 2)
    m.off = pyo.Block()
    m.off.c = pyo.Constraint(expr=m.x >= 5)
    m.off.deactivate()
    m.obj = pyo.Objective(expr=(m.x - 3) ** 2 + (m.b.y - 3) ** 2)
    res = solve_nlp(m)
    assert_optimal(res)
    assert res.values == pytest.approx({"x": 1.0, "b.y": 1.0}, abs=1e-7)
    assert set(res.multipliers) == {"b.c"}


def test_infeasible_problem() -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=1.0)
    m.obj = pyo.Objective(expr=m.x)
    m.c = pyo.Constraint(expr=m.x**2 <= -1)
    res = solve_nlp(m)
    assert res.termination is Termination.INFEASIBLE, res.message
    assert res.constraint_violation >= 1.0 - 1e-6


def test_no_free_variables() -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=2.0)
    m.x.fix()
    m.obj = pyo.Objective(expr=m.x**2)
    res = solve_nlp(m)
    assert res.termination is Termination.LOCALLY_OPTIMAL
    assert res.objective == pytest.approx(4.0)
    assert res.values == {}


# --- options and model mutation -----------------------------------------------------------------


def test_load_solutions_false_leaves_model_untouched() -> None:
    m = hs071()
    before = [m.x[i].value for i in m.I]
    res = solve_nlp(m, load_solutions=False)
    assert_optimal(res)
    assert [m.x[i].value for i in m.I] == before


def test_options_passthrough() -> None:
    res = solve_nlp(hs071(), options={"nlp_scaling_method": "none", "mu_strategy": "adaptive"})
    assert_optimal(res)
    assert res.objective == pytest.approx(17.0140173, abs=1e-6)
    with pytest.raises(UsageError, match="no_such_option"):
        solve_nlp(hs071(), options={"no_such_option": 1})


@pytest.mark.parametrize("domain", [pyo.Integers, pyo.Binary, pyo.NonNegativeIntegers])
def test_integer_variables_rejected(domain) -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    m.z = pyo.Var(domain=domain)
    m.obj = pyo.Objective(expr=m.x**2 + m.z)
    with pytest.raises(UsageError, match="z"):
        solve_nlp(m)


def test_usage_errors() -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var()
    with pytest.raises(UsageError, match="exactly one active objective"):
        solve_nlp(m)
    m.o1 = pyo.Objective(expr=m.x**2)
    m.o2 = pyo.Objective(expr=m.x)
    with pytest.raises(UsageError, match="exactly one active objective"):
        solve_nlp(m)
    m.o2.deactivate()
    with pytest.raises(UsageError, match="hessian"):
        solve_nlp(m, hessian="bfgs")
    with pytest.raises(UsageError, match="time_limit"):
        solve_nlp(m, time_limit=0)


# --- the mel-async time model --------------------------------------------------------------------


def common_tau(c2, c1, c0, T, D) -> float:
    """tau with sum_k (T - c0_k)/(c2_k tau + c1_k) == D; the sum decreases in tau: bisect."""

    def total(tau: float) -> float:
        return float(np.sum((T - c0) / (c2 * tau + c1)))

    lo, hi = 0.0, 1.0
    while total(hi) > D:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if total(mid) > D else (lo, mid)
    return 0.5 * (lo + hi)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mel_async_time_model(seed: int) -> None:
    # c2 tau_k d_k + c1 d_k + c0 == T, sum d == D, min z with tau_k - tau_l <= z for all k != l.
    # z = 0 is reachable (all tau equal to the bisection root tau*), so it is the optimum, and
    # then d_k = (T - c0_k)/(c2_k tau* + c1_k) is unique.
    rng = np.random.default_rng(seed)
    k = 5
    c2, c1, c0 = rng.uniform(1e-3, 5e-3, k), rng.uniform(1e-3, 1e-2, k), rng.uniform(0.5, 2, k)
    T, D = 60.0, 500.0 * k
    m = pyo.ConcreteModel()
    m.K = pyo.RangeSet(0, k - 1)
    m.tau = pyo.Var(m.K, domain=pyo.NonNegativeReals)
    m.d = pyo.Var(m.K, domain=pyo.NonNegativeReals)
    m.z = pyo.Var()
    m.time = pyo.Constraint(
        m.K, rule=lambda m, i: c2[i] * m.tau[i] * m.d[i] + c1[i] * m.d[i] + c0[i] == T
    )
    m.data = pyo.Constraint(expr=sum(m.d[i] for i in m.K) == D)
    m.spread = pyo.Constraint(
        [(i, j) for i in m.K for j in m.K if i != j],
        rule=lambda m, i, j: m.tau[i] - m.tau[j] <= m.z,
    )
    m.obj = pyo.Objective(expr=m.z)
    res = solve_nlp(m)
    assert_optimal(res)
    tau_star = common_tau(c2, c1, c0, T, D)
    tau = np.array([res.values[f"tau[{i}]"] for i in range(k)])
    d = np.array([res.values[f"d[{i}]"] for i in range(k)])
    np.testing.assert_allclose(tau, tau_star, rtol=1e-6)
    np.testing.assert_allclose(d, (T - c0) / (c2 * tau_star + c1), rtol=1e-6)
    assert res.objective == pytest.approx(0.0, abs=1e-6)


def test_crossed_bounds_are_infeasible() -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(2, 1))
    m.obj = pyo.Objective(expr=m.x**2)
    res = solve_nlp(m)
    assert res.termination is Termination.INFEASIBLE
    assert "x" in res.message and res.iterations == 0


def test_invalid_start_is_reported_not_raised() -> None:
    # log(-1) at the start: Ipopt cannot begin; the result says so and holds no objective.
    m = one_var(lambda x: pyo.log(x), init=-1.0)
    res = solve_nlp(m)
    assert res.termination is Termination.NUMERICAL
    assert res.objective is None
    assert "Invalid_Number_Detected" in res.message
