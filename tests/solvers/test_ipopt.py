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
from mel_opt.solvers.base import Termination
from mel_opt.solvers.ipopt import (
    STATUS_MAP,
    NLPResult,
    available,
    compile_nlp,
    solve_nlp,
    version,
)

pytestmark = pytest.mark.skipif(not available(), reason=f"cyipopt: {available().reason}")


def assert_optimal(res: NLPResult) -> None:
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


def test_start_point_projected_into_bounds() -> None:
    m = pyo.ConcreteModel()
    m.a = pyo.Var(bounds=(1, 5))
    m.b = pyo.Var(bounds=(-5, -1))
    m.c = pyo.Var()
    m.d = pyo.Var(bounds=(0, 1), initialize=7.0)  # a given value is kept as is
    m.obj = pyo.Objective(expr=m.a + m.b + m.c**2 + m.d)
    nlp = compile_nlp(m)
    np.testing.assert_array_equal(nlp.x0, [1.0, -1.0, 0.0, 7.0])


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


# --- compiled derivatives against finite differences ---------------------------------------------


N_KINDS = 18


def random_model(seed: int, structured: bool = False, kind: int | None = None) -> pyo.ConcreteModel:
    """A random smooth model on x in [0.5, 2]^6 mixing every supported kind of term.

    With ``structured``, every term kind drawn is repeated over the six rotations of the
    variable indices with fresh coefficients, as an indexed constraint would be: the adapter
    then evaluates those terms as vectorised shapes rather than scalar code. ``kind`` forces
    every family to that kind of term.
    """
    rng = np.random.default_rng(seed)
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, 5)
    m.x = pyo.Var(m.I, bounds=(0.5, 2.0), initialize=1.0)
    m.f = pyo.Var(initialize=1.3)
    m.f.fix()
    m.p = pyo.Param(initialize=0.7, mutable=True)
    m.e = pyo.Expression(expr=m.x[0] * m.x[1] + pyo.sqrt(m.x[2]))
    x = m.x

    def term(kind: int, i: int, j: int, k: int):
        a = float(rng.uniform(-2, 2))
        kinds = [
            lambda: a * x[i],
            lambda: a * x[i] * x[j],
            lambda: a * x[i] ** 2,
            lambda: a / x[i],
            lambda: a * pyo.sqrt(x[i]),
            lambda: a * x[i] ** float(rng.uniform(-1.5, 2.5)),
            lambda: a * x[i] ** -0.5,
            lambda: a * pyo.exp(0.5 * x[i]),
            lambda: a * pyo.log(x[i]),
            lambda: a * x[i] * x[j] * x[k],
            lambda: (x[i] + a) / (x[j] + 1.5),
            lambda: a * x[i] ** x[j],
            lambda: a * 2 ** x[i],
            lambda: pyo.sin(x[i]) * x[j] + pyo.cos(a * x[k]),
            lambda: pyo.tanh(x[i] - x[j]) + pyo.atan(x[k]),
            lambda: m.p * m.f * x[i] / x[j] + m.e * a,
            lambda: -(x[i] * pyo.log(x[j])),
            lambda: abs(x[i] - 3) * x[j],
        ]
        assert len(kinds) == N_KINDS
        return kinds[kind]()

    def random_term():
        i, j, k = (int(v) for v in rng.choice(6, 3, replace=False))
        return term(int(rng.integers(N_KINDS)), i, j, k)

    def family(kind: int, shift: int = 0):
        # Six instances of one kind: indices (s, s+1, s+3) mod 6 for s = 0..5.
        return [
            term(kind, (s + shift) % 6, (s + shift + 1) % 6, (s + shift + 3) % 6) for s in range(6)
        ]

    def draw_kind() -> int:
        return int(rng.integers(N_KINDS)) if kind is None else kind

    if structured:
        objective = sum(sum(family(draw_kind())) for _ in range(3))
    else:
        objective = sum(random_term() for _ in range(6))
    m.obj = pyo.Objective(expr=objective + 1.5, sense=pyo.maximize if seed % 2 else pyo.minimize)

    # Right-hand sides are set from the bodies' values at a random point, so that the model is
    # feasible (that point satisfies every constraint) and solves can be compared.
    if structured:
        # Rows r = 0..5 share two kinds (one instance of each per row), as c[i] would.
        kinds = [draw_kind(), draw_kind()]
        cols = list(zip(*(family(kd) for kd in kinds), strict=True))
        bodies = [sum(row) for row in cols]
    else:
        bodies = [sum(random_term() for _ in range(3)) for _ in range(5)]
    feasible = rng.uniform(0.6, 1.9, 6)
    for i in m.I:
        x[i].set_value(float(feasible[i]))
    m.c = pyo.ConstraintList()
    for r, body in enumerate(bodies):
        at = float(pyo.value(body))
        relation = r % 4
        if relation == 0:
            m.c.add(body == at)
        elif relation == 1:
            m.c.add(body <= at + 0.5)
        elif relation == 2:
            m.c.add(body + 1 >= at - 0.5)
        else:
            m.c.add(pyo.inequality(at - 1.0, body, at + 1.0))
    for i in m.I:
        x[i].set_value(1.0)
    return m


def dense(rows, cols, vals, shape) -> np.ndarray:
    out = np.zeros(shape)
    np.add.at(out, (rows, cols), vals)
    return out


def check_against_pyomo_and_finite_differences(m: pyo.ConcreteModel, seed: int) -> None:
    """Compiled values equal Pyomo's; gradient, Jacobian and Hessian equal central differences."""
    nlp = compile_nlp(m)
    n, mm = nlp.n, nlp.m
    rng = np.random.default_rng(100 + seed)
    cons = nlp.constraints
    # Patterns are fixed at build time: no duplicates, Hessian in the lower triangle.
    jr, jc = nlp.jacobianstructure()
    assert len(set(zip(jr.tolist(), jc.tolist(), strict=True))) == len(jr)
    hr, hc = nlp.hessianstructure()
    assert np.all(hr >= hc)
    assert len(set(zip(hr.tolist(), hc.tolist(), strict=True))) == len(hr)
    for _ in range(3):
        x = rng.uniform(0.6, 1.9, n)
        for var, val in zip(nlp.variables, x, strict=True):
            var.set_value(float(val))
        # Values: the compiled functions against Pyomo's own evaluation.
        assert nlp.sense * nlp.objective(x) == pytest.approx(pyo.value(m.obj), rel=1e-12)
        g = nlp.constraints_values(x)
        for r, con in enumerate(cons):
            body = pyo.value(con.body)
            if con.lb is not None:
                assert g[r] - nlp.g_lb[r] == pytest.approx(body - con.lb, abs=1e-11)
            if con.ub is not None:
                assert g[r] - nlp.g_ub[r] == pytest.approx(body - con.ub, abs=1e-11)

        h = 1e-6
        eye = np.eye(n)
        fd_grad = np.array(
            [(nlp.objective(x + h * e) - nlp.objective(x - h * e)) / (2 * h) for e in eye]
        )
        np.testing.assert_allclose(nlp.gradient(x), fd_grad, rtol=1e-6, atol=1e-7)

        jac = dense(jr, jc, nlp.jacobian(x), (mm, n))
        fd_jac = np.column_stack(
            [
                (nlp.constraints_values(x + h * e) - nlp.constraints_values(x - h * e)) / (2 * h)
                for e in eye
            ]
        )
        np.testing.assert_allclose(jac, fd_jac, rtol=1e-6, atol=1e-7)

        lam = rng.normal(size=mm)
        sigma = float(rng.uniform(0.5, 2))
        lower = dense(hr, hc, nlp.hessian(x, lam, sigma), (n, n))
        hess = lower + np.tril(lower, -1).T

        def grad_lagrangian(y: np.ndarray, lam=lam, sigma=sigma) -> np.ndarray:
            jy = dense(jr, jc, nlp.jacobian(y), (mm, n))
            return sigma * nlp.gradient(y) + jy.T @ lam

        fd_hess = np.column_stack(
            [(grad_lagrangian(x + h * e) - grad_lagrangian(x - h * e)) / (2 * h) for e in eye]
        )
        np.testing.assert_allclose(hess, fd_hess, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("structured", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_compiled_functions_match_pyomo_and_finite_differences(seed: int, structured: bool) -> None:
    check_against_pyomo_and_finite_differences(random_model(seed, structured), seed)


@pytest.mark.parametrize("kind", range(3, N_KINDS))  # kinds 0-2 are linear or quadratic
def test_every_nonlinear_kind_vectorised(kind: int) -> None:
    m = random_model(kind, structured=True, kind=kind)
    nlp = compile_nlp(m)
    # Six instances of one signature: evaluated as numpy shapes, not scalar code.
    assert nlp._obj.nl is not None and nlp._obj.nl.shapes
    assert nlp._con.nl is not None and nlp._con.nl.shapes
    check_against_pyomo_and_finite_differences(m, kind)


@pytest.mark.parametrize("structured", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_random_models_solve_alike_with_both_hessians(seed: int, structured: bool) -> None:
    # No closed form here, and the models are nonconvex, so cold starts may end at different
    # local optima. Both modes must converge (the models are feasible by construction).
    # L-BFGS warm-started at the exact run's local optimum must stay there; the exact run
    # warm-started at the L-BFGS point may only improve on it (L-BFGS, blind to negative
    # curvature, can stop at a saddle point that the exact Hessian escapes).
    m_exact, m_lbfgs = random_model(seed, structured), random_model(seed, structured)
    exact = solve_nlp(m_exact)
    lbfgs = solve_nlp(m_lbfgs, hessian="lbfgs")
    assert_optimal(exact)
    assert_optimal(lbfgs)
    lbfgs_warm = solve_nlp(m_exact, hessian="lbfgs")
    exact_warm = solve_nlp(m_lbfgs)
    assert_optimal(lbfgs_warm)
    assert_optimal(exact_warm)
    assert lbfgs_warm.objective == pytest.approx(exact.objective, rel=1e-6, abs=1e-7)
    sense = -1.0 if seed % 2 else 1.0  # random_model maximises for odd seeds
    assert sense * exact_warm.objective <= sense * lbfgs.objective + 1e-6 * (
        1 + abs(lbfgs.objective)
    )


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
