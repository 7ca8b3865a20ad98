"""Compiled values and derivatives of random models against Pyomo and finite differences.

Random smooth models mix every supported kind of term; the compiled objective and constraints
must equal Pyomo's own evaluation, and the gradient, Jacobian and Lagrangian Hessian must equal
central differences of the compiled functions. Structured models repeat each kind over six
index rotations so that terms run as vectorised shapes instead of scalar code.
"""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest

from mel_opt.nlp import compile_nlp
from mel_opt.solvers import ipopt
from mel_opt.solvers.base import SolverResult, TerminationCondition

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


def _assert_converged(res: SolverResult) -> None:
    assert res.termination is TerminationCondition.LOCALLY_OPTIMAL, res.message
    assert res.constraint_violation < 1e-6


@pytest.mark.skipif(not ipopt.available(), reason="cyipopt unavailable")
@pytest.mark.parametrize("structured", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_random_models_solve_alike_with_both_hessians(seed: int, structured: bool) -> None:
    # No closed form here, and the models are nonconvex, so cold starts may end at different
    # local optima. Both modes must converge (the models are feasible by construction).
    # L-BFGS warm-started at the exact run's local optimum must stay there; the exact run
    # warm-started at the L-BFGS point may only improve on it (L-BFGS, blind to negative
    # curvature, can stop at a saddle point that the exact Hessian escapes).
    m_exact, m_lbfgs = random_model(seed, structured), random_model(seed, structured)
    exact = ipopt.solve_nlp(m_exact)
    lbfgs = ipopt.solve_nlp(m_lbfgs, hessian="lbfgs")
    _assert_converged(exact)
    _assert_converged(lbfgs)
    lbfgs_warm = ipopt.solve_nlp(m_exact, hessian="lbfgs")
    exact_warm = ipopt.solve_nlp(m_lbfgs)
    _assert_converged(lbfgs_warm)
    _assert_converged(exact_warm)
    assert lbfgs_warm.objective == pytest.approx(exact.objective, rel=1e-6, abs=1e-7)
    sense = -1.0 if seed % 2 else 1.0  # random_model maximises for odd seeds
    assert sense * exact_warm.objective <= sense * lbfgs.objective + 1e-6 * (
        1 + abs(lbfgs.objective)
    )
