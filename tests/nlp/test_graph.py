"""The expression graph and its generated code, node kind by node kind.

Each node kind (sum, product, division, power with constant, parameter and variable exponent,
constant base, negation, every supported unary function) is built directly on a
:class:`~mel_opt.nlp.graph.Graph`, evaluated through generated scalar and vector code, and its
first and second symbolic derivatives are compared with central differences.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mel_opt.errors import UsageError
from mel_opt.nlp.codegen import emit
from mel_opt.nlp.graph import MATH_FUNCS, NUMPY_FUNCS, Graph

# A point inside every function's domain: x0 in (0, 1) (asin, acos, atanh), x1 > 1 (acosh).
POINT = [0.3, 1.7]
H = 1e-6


def _scalar(g: Graph, roots: list[int]):
    fn = emit(g, roots, "f")
    # Generated scalar code receives Python floats (x.tolist()), as in the compiled blocks.
    return lambda x: np.array(fn(np.asarray(x, dtype=float).tolist()), dtype=float)


def check_derivatives(g: Graph, root: int, x: list[float], value: float) -> None:
    """Value of ``root`` at ``x``; symbolic gradient and Hessian against central differences."""
    n = len(x)
    f = _scalar(g, [root])
    assert f(x)[0] == pytest.approx(value, rel=1e-12, abs=1e-15)
    grad_nodes = [g.diff(root, j) for j in range(n)]
    grad = _scalar(g, grad_nodes)
    eye = np.eye(n)
    xa = np.asarray(x)
    fd = [(f(xa + H * e)[0] - f(xa - H * e)[0]) / (2 * H) for e in eye]
    np.testing.assert_allclose(grad(x), fd, rtol=1e-6, atol=1e-8)
    hess = _scalar(g, [g.diff(d, i) for d in grad_nodes for i in range(n)])
    fd_h = np.column_stack([(grad(xa + H * e) - grad(xa - H * e)) / (2 * H) for e in eye])
    np.testing.assert_allclose(hess(x).reshape(n, n), fd_h, rtol=1e-5, atol=1e-6)


def check_vector_matches_scalar(g: Graph, root: int, rows: np.ndarray) -> None:
    """Vector code (numpy) over several points equals scalar code (math) at each."""
    roots = [root] + [g.diff(root, j) for j in range(rows.shape[1])]
    vec = emit(g, roots, "fv", vector=True)
    out = np.empty((len(roots), rows.shape[0]))
    vec(rows.T, np.empty((0, rows.shape[0])), out)
    scalar = _scalar(g, roots)
    for k, x in enumerate(rows):
        np.testing.assert_allclose(out[:, k], scalar(x), rtol=1e-13, atol=1e-15)


# (name, builder(g, x0, x1) -> node, value at POINT)
X0, X1 = POINT
CASES = [
    ("sum", lambda g, a, b: g.add([a, b, g.const(2.0)]), X0 + X1 + 2),
    ("product", lambda g, a, b: g.mul(a, b), X0 * X1),
    ("division", lambda g, a, b: g.div(a, b), X0 / X1),
    ("negation", lambda g, a, b: g.mul(g.const(-1.0), g.mul(a, b)), -X0 * X1),
    ("power-const", lambda g, a, b: g.pow(b, g.const(2.5)), X1**2.5),
    ("power-negative", lambda g, a, b: g.pow(b, g.const(-3.0)), X1**-3),
    ("power-var-var", lambda g, a, b: g.pow(b, a), X1**X0),
    ("power-const-base", lambda g, a, b: g.pow(g.const(2.0), g.mul(a, b)), 2.0 ** (X0 * X1)),
    ("sub", lambda g, a, b: g.sub(a, g.mul(b, b)), X0 - X1 * X1),
]
UNARY_AT = {  # each function of a x0 + b x1 chosen to stay in its domain near POINT
    "exp": (0.3, 0.2), "log": (1.0, 1.0), "log10": (1.0, 1.0), "sqrt": (1.0, 1.0),
    "sin": (1.0, 0.5), "cos": (1.0, 0.5), "tan": (1.0, 0.2), "asin": (1.0, 0.1),
    "acos": (1.0, 0.1), "atan": (1.0, 1.0), "sinh": (1.0, 0.3), "cosh": (1.0, 0.3),
    "tanh": (1.0, 0.3), "asinh": (1.0, 1.0), "acosh": (0.5, 1.0), "atanh": (1.0, 0.1),
    "abs": (1.0, -1.0), "ceil": (1.0, 0.5), "floor": (1.0, 0.5), "sign": (1.0, -1.0),
}


def test_every_supported_function_is_tested() -> None:
    assert set(UNARY_AT) == set(MATH_FUNCS) == set(NUMPY_FUNCS)


@pytest.mark.parametrize(("name", "build", "value"), CASES, ids=[c[0] for c in CASES])
def test_node_kind(name, build, value) -> None:
    g = Graph()
    root = build(g, g.var(0), g.var(1))
    check_derivatives(g, root, POINT, value)
    check_vector_matches_scalar(g, root, np.array([POINT, [0.4, 1.3], [0.2, 2.1], [0.6, 1.1]]))


@pytest.mark.parametrize("fname", sorted(UNARY_AT))
def test_unary_function(fname) -> None:
    a, b = UNARY_AT[fname]
    g = Graph()
    inner = g.add([g.mul(g.const(a), g.var(0)), g.mul(g.const(b), g.var(1))])
    # Multiplying by x0 makes the Hessian mix f, f' and f''.
    root = g.mul(g.var(0), g.func(fname, inner))
    value = X0 * MATH_FUNCS[fname](a * X0 + b * X1)
    check_derivatives(g, root, POINT, value)
    check_vector_matches_scalar(g, root, np.array([POINT, [0.31, 1.69], [0.29, 1.72], [0.3, 1.71]]))


def test_hash_consing_and_folding() -> None:
    g = Graph()
    x, y = g.var(0), g.var(1)
    assert g.add([x, y]) == g.add([y, x])  # a + b and b + a are one node
    assert g.mul(x, y) == g.mul(y, x)
    assert g.mul(g.const(1.0), x) == x and g.mul(g.const(0.0), x) == g.ZERO
    assert g.pow(x, g.const(1.0)) == x and g.pow(x, g.const(0.0)) == g.ONE
    assert g.value_of(g.add([g.const(2.0), g.const(3.0)])) == 5.0
    assert g.value_of(g.func("exp", g.const(0.0))) == 1.0
    # c * (d * y) folds to (c d) * y.
    assert g.mul(g.const(2.0), g.mul(g.const(3.0), y)) == g.mul(g.const(6.0), y)
    assert g.diff(g.mul(x, x), 1) == g.ZERO  # y does not occur


def test_long_sum_derivative_uses_only_its_terms() -> None:
    # sum_i c_i / x_i over 40 variables (above the indexed-sum threshold): d/dx_k = -c_k/x_k^2.
    g = Graph()
    c = np.linspace(1.0, 2.0, 40)
    root = g.add([g.div(g.const(float(ci)), g.var(i)) for i, ci in enumerate(c)])
    x = np.linspace(0.5, 1.5, 40)
    grad = emit(g, [g.diff(root, k) for k in range(40)], "grad")
    np.testing.assert_allclose(grad(x.tolist()), -c / x**2, rtol=1e-14)


def test_unsupported_function_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unsupported function 'erf'"):
        Graph().func("erf", Graph().var(0))


@pytest.mark.parametrize(
    ("build", "x", "error"),
    [
        (lambda g: g.func("log", g.var(0)), -1.0, ValueError),
        (lambda g: g.func("sqrt", g.var(0)), -1.0, ValueError),
        (lambda g: g.div(g.const(1.0), g.var(0)), 0.0, ZeroDivisionError),
        (lambda g: g.pow(g.var(0), g.const(0.5)), -4.0, ValueError),
        (lambda g: g.pow(g.var(0), g.const(1.5)), -4.0, ValueError),
    ],
)
def test_domain_errors_raise_in_scalar_and_give_nan_in_vector_code(build, x, error) -> None:
    g = Graph()
    root = build(g)
    with pytest.raises(error):
        emit(g, [root], "f")([x])
    out = np.empty((1, 1))
    with np.errstate(all="ignore"):
        emit(g, [root], "fv", vector=True)(np.array([[x]]), np.empty((0, 1)), out)
    assert not np.isfinite(out).all()


def test_constant_folding_keeps_an_undefined_constant() -> None:
    # (-8) ** 0.5 is not real: the node is kept and the error surfaces when evaluated.
    g = Graph()
    node = g.pow(g.const(-8.0), g.const(0.5))
    assert not g.is_const(node)
    assert math.isnan(g.value_of(g.const(math.nan)))
