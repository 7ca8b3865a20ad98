"""compile_nlp on small models worked by hand: patterns, values, Pyomo node types, errors."""

from __future__ import annotations

import math

import numpy as np
import pyomo.environ as pyo
import pytest

from mel_opt.errors import UsageError
from mel_opt.nlp import NLPEvaluationError, compile_nlp


def small_model() -> pyo.ConcreteModel:
    """Three variables, one of each row kind (linear, quadratic, nonlinear).

    objective  x0^2 + sin(x1)
    c0         x0 + 2 x1 <= 3            Jacobian row 0: columns 0, 1
    c1         x0 x2 == 1                 Jacobian row 1: columns 0, 2
    c2         exp(x1) + x2^3 >= 0        Jacobian row 2: columns 1, 2
    Lagrangian Hessian, lower triangle: (0,0) from x0^2; (1,1) from sin and exp; (2,0) from
    x0 x2; (2,2) from x2^3. The unused variable u is not a column.
    """
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1, 2], initialize=1.0)
    m.u = pyo.Var(initialize=5.0)
    m.obj = pyo.Objective(expr=m.x[0] ** 2 + pyo.sin(m.x[1]))
    m.c0 = pyo.Constraint(expr=m.x[0] + 2 * m.x[1] <= 3)
    m.c1 = pyo.Constraint(expr=m.x[0] * m.x[2] == 1)
    m.c2 = pyo.Constraint(expr=pyo.exp(m.x[1]) + m.x[2] ** 3 >= 0)
    return m


def test_patterns_and_values_of_the_small_model() -> None:
    nlp = compile_nlp(small_model())
    assert nlp.var_names == ["x[0]", "x[1]", "x[2]"]
    assert nlp.con_names == ["c0", "c1", "c2"]
    assert (nlp.n, nlp.m, nlp.sense) == (3, 3, 1)
    rows, cols = nlp.jacobianstructure()
    assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == [
        (0, 0), (0, 1), (1, 0), (1, 2), (2, 1), (2, 2)
    ]
    hr, hc = nlp.hessianstructure()
    assert list(zip(hr.tolist(), hc.tolist(), strict=True)) == [(0, 0), (1, 1), (2, 0), (2, 2)]
    np.testing.assert_array_equal(nlp.g_lb, [-math.inf, 1.0, 0.0])
    np.testing.assert_array_equal(nlp.g_ub, [3.0, 1.0, math.inf])

    x = np.array([1.0, 2.0, 3.0])
    assert nlp.objective(x) == pytest.approx(1.0 + math.sin(2.0), rel=1e-15)
    np.testing.assert_allclose(nlp.gradient(x), [2.0, math.cos(2.0), 0.0], rtol=1e-15)
    np.testing.assert_allclose(nlp.constraints_values(x), [5.0, 3.0, math.exp(2.0) + 27.0])
    np.testing.assert_allclose(nlp.jacobian(x), [1.0, 2.0, 3.0, 1.0, math.exp(2.0), 27.0])
    sigma, lam = 0.5, np.array([7.0, -2.0, 3.0])
    expected = [
        2.0 * sigma,  # d2/dx0^2 of x0^2
        -sigma * math.sin(2.0) + lam[2] * math.exp(2.0),  # sin(x1) and exp(x1)
        lam[1],  # x0 x2
        lam[2] * 6.0 * 3.0,  # x2^3
    ]
    np.testing.assert_allclose(nlp.hessian(x, lam, sigma), expected, rtol=1e-14)
    # Violation at x: c0 by 5 - 3 = 2, c1 by 3 - 1 = 2.
    assert nlp.constraint_violation(x) == pytest.approx(2.0)


def test_repeated_terms_share_a_vectorised_shape_with_the_same_pattern() -> None:
    # c_i: x_i / x_{i+1} <= 2 for i = 0..5 (six instances of one shape): row i has columns i and
    # i + 1; the Hessian of x_i / x_{i+1} has entries (i, i+1) and (i+1, i+1) only.
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, 6)
    m.x = pyo.Var(m.I, bounds=(0.5, 2), initialize=1.0)
    m.obj = pyo.Objective(expr=sum(m.x[i] for i in m.I))
    m.c = pyo.Constraint(pyo.RangeSet(0, 5), rule=lambda m, i: m.x[i] / m.x[i + 1] <= 2)
    nlp = compile_nlp(m)
    assert nlp._con.nl is not None and nlp._con.nl.shapes and not nlp._con.nl.single
    rows, cols = nlp.jacobianstructure()
    assert sorted(zip(rows.tolist(), cols.tolist(), strict=True)) == [
        (i, j) for i in range(6) for j in (i, i + 1)
    ]
    hr, hc = nlp.hessianstructure()
    assert sorted(zip(hr.tolist(), hc.tolist(), strict=True)) == sorted(
        {(i + 1, i) for i in range(6)} | {(i + 1, i + 1) for i in range(6)}
    )
    x = np.linspace(0.6, 1.8, 7)
    np.testing.assert_allclose(nlp.constraints_values(x), x[:-1] / x[1:], rtol=1e-15)
    # d(a/b) = (1/b, -a/b^2) for each row, in row-major order.
    expected = np.ravel([[1 / x[i + 1], -x[i] / x[i + 1] ** 2] for i in range(6)])
    np.testing.assert_allclose(nlp.jacobian(x), expected, rtol=1e-14)


def test_every_pyomo_node_type_and_constant() -> None:
    # Sum, product, division, power, negation, unary function, named Expression, a mutable
    # Param sub-tree and a fixed variable, against Pyomo's own evaluation.
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=1.3)
    m.y = pyo.Var(initialize=0.7)
    m.f = pyo.Var(initialize=2.0)
    m.f.fix()
    m.p = pyo.Param(initialize=3.0, mutable=True)
    m.e = pyo.Expression(expr=m.x * m.y)
    body = (m.x + m.y) * m.x / (1 + m.y) + m.x ** m.y - (m.e**2) + pyo.log(m.x) * m.p * m.f
    m.obj = pyo.Objective(expr=body, sense=pyo.maximize)
    nlp = compile_nlp(m)
    assert nlp.var_names == ["x", "y"] and nlp.sense == -1
    x = np.array([1.3, 0.7])
    assert -nlp.objective(x) == pytest.approx(pyo.value(body), rel=1e-14)
    nlp_lbfgs = compile_nlp(m, hessian=False)
    with pytest.raises(UsageError, match="without Hessian"):
        nlp_lbfgs.hessianstructure()


def test_constant_constraints_are_checked_not_passed() -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=1.0)
    m.f = pyo.Var(initialize=3.0)
    m.f.fix()
    m.obj = pyo.Objective(expr=m.x**2)
    m.ok = pyo.Constraint(expr=m.f**2 <= 10)  # 9 <= 10
    m.bad = pyo.Constraint(expr=m.f + 1 >= 6)  # 4 >= 6: violated by 2
    nlp = compile_nlp(m)
    assert nlp.m == 0
    assert dict(nlp.constant_constraints) == {"ok": 0.0, "bad": pytest.approx(2.0)}
    assert nlp.constraint_violation(np.array([0.0])) == pytest.approx(2.0)


def test_start_point_projected_into_bounds() -> None:
    m = pyo.ConcreteModel()
    m.a = pyo.Var(bounds=(1, 5))
    m.b = pyo.Var(bounds=(-5, -1))
    m.c = pyo.Var()
    m.d = pyo.Var(bounds=(0, 1), initialize=7.0)  # a given value is kept as is
    m.obj = pyo.Objective(expr=m.a + m.b + m.c**2 + m.d)
    nlp = compile_nlp(m)
    np.testing.assert_array_equal(nlp.x0, [1.0, -1.0, 0.0, 7.0])


def log_model(n: int) -> pyo.ConcreteModel:
    m = pyo.ConcreteModel()
    m.I = pyo.RangeSet(0, n - 1)
    m.x = pyo.Var(m.I, initialize=1.0)
    m.obj = pyo.Objective(expr=sum(pyo.log(m.x[i]) for i in m.I))
    m.c = pyo.Constraint(expr=sum(1 / m.x[i] for i in m.I) <= 10)
    return m


@pytest.mark.parametrize("n", [1, 8], ids=["scalar-code", "vector-shape"])
def test_evaluation_errors(n: int) -> None:
    # log of a negative number / division by zero, in scalar code (1 term) and in a numpy
    # shape (8 terms): both end as NLPEvaluationError, and the violation becomes NaN.
    nlp = compile_nlp(log_model(n))
    x = np.ones(n)
    assert nlp.objective(x) == 0.0
    x[0] = -1.0
    with pytest.raises(NLPEvaluationError):
        nlp.objective(x)  # log(-1)
    x[0] = 0.0  # log(0), and 1/0 in every derivative and in the constraint
    for call in (nlp.objective, nlp.gradient, nlp.constraints_values, nlp.jacobian):
        with pytest.raises(NLPEvaluationError):
            call(x)
    with pytest.raises(NLPEvaluationError):
        nlp.hessian(x, np.zeros(1), 1.0)
    assert math.isnan(nlp.constraint_violation(x))


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda m: m.add_component("o2", pyo.Objective(expr=m.x)), "exactly one active objective"),
        (lambda m: m.add_component("z", pyo.Var(domain=pyo.Binary)) or m.add_component(
            "cz", pyo.Constraint(expr=m.x + m.z <= 3)), "integer or binary"),
        (lambda m: m.add_component("ce", pyo.Constraint(
            expr=pyo.Expr_if(m.x >= 0, m.x, -m.x) <= 3)), "unsupported expression"),
    ],
    ids=["two-objectives", "binary", "expr-if"],
)
def test_usage_errors(build, match) -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=1.0)
    m.obj = pyo.Objective(expr=m.x**2)
    build(m)
    with pytest.raises(UsageError, match=match):
        compile_nlp(m)


def test_fixed_variable_without_value_is_a_usage_error() -> None:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=1.0)
    m.f = pyo.Var()
    m.f.fixed = True
    m.obj = pyo.Objective(expr=pyo.exp(m.x * m.f))
    with pytest.raises(UsageError, match="cannot compile objective obj: .* f"):
        compile_nlp(m)
