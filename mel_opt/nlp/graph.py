"""Hash-consed expression DAG with constant folding and symbolic derivatives.

Every nonlinear remainder of one model is a node of one :class:`Graph`; structurally equal
sub-expressions share a node id, so the generated code (:mod:`mel_opt.nlp.codegen`) computes
them once. Derivatives are built symbolically, node by node, with the usual rules of calculus.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from mel_opt.errors import UsageError

# Node kinds. PARAM only occurs in shape templates: a per-instance constant (see Shape).
CONST, VAR, ADD, MUL, DIV, POW, FUNC, PARAM = range(8)

# Unary functions Pyomo can put in a model (UnaryFunctionExpression.getname()), evaluated with
# the math module so that domain errors raise instead of returning complex numbers.
MATH_FUNCS: dict[str, Callable[[float], float]] = {
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "sinh": math.sinh,
    "cosh": math.cosh,
    "tanh": math.tanh,
    "asinh": math.asinh,
    "acosh": math.acosh,
    "atanh": math.atanh,
    "ceil": math.ceil,
    "floor": math.floor,
    "abs": abs,
    "sign": lambda a: float((a > 0) - (a < 0)),
}


# The same functions on arrays, for shape templates evaluated over all their instances at once.
# Domain errors give NaN/inf there; callers check finiteness instead of catching exceptions.
NUMPY_FUNCS: dict[str, Callable[..., Any]] = {
    "exp": np.exp,
    "log": np.log,
    "log10": np.log10,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "ceil": np.ceil,
    "floor": np.floor,
    "abs": np.abs,
    "sign": np.sign,
}


def checked_pow(a: float, b: float) -> float:
    # math.pow raises ValueError for a negative base with a fractional exponent, where the
    # ** operator would silently return a complex number.
    return math.pow(a, b)


class NLPEvaluationError(ArithmeticError):
    """A compiled function was evaluated outside its domain (log of a negative, 1/0, ...)."""



class Graph:
    """Expression DAG shared by every nonlinear remainder of one model.

    Nodes are tuples interned in a dict, so structurally equal sub-expressions (within one
    constraint, across constraints and across derivative orders) get one id and are computed
    once by the generated code. Constructors fold constants and drop neutral elements so that
    symbolic derivatives stay small.
    """

    _SUM_INDEX_MIN = 16  # build a var -> terms index for sums at least this long

    def __init__(self) -> None:
        self.node: list[tuple[Any, ...]] = []
        self.deps: list[frozenset[int]] = []
        self._ids: dict[tuple[Any, ...], int] = {}
        self._diff_memo: dict[tuple[int, int], int] = {}
        self._sum_index: dict[int, dict[int, list[int]]] = {}
        self.ZERO = self.const(0.0)
        self.ONE = self.const(1.0)

    # -- construction ------------------------------------------------------------------------

    def _intern(self, key: tuple[Any, ...], deps: frozenset[int]) -> int:
        nid = self._ids.get(key)
        if nid is None:
            nid = len(self.node)
            self.node.append(key)
            self.deps.append(deps)
            self._ids[key] = nid
        return nid

    def const(self, value: float) -> int:
        return self._intern((CONST, float(value)), frozenset())

    def var(self, index: int) -> int:
        return self._intern((VAR, index), frozenset((index,)))

    def param(self, index: int) -> int:
        return self._intern((PARAM, index), frozenset())

    def is_const(self, nid: int) -> bool:
        return self.node[nid][0] == CONST

    def value_of(self, nid: int) -> float:
        return float(self.node[nid][1])

    def children(self, nid: int) -> tuple[int, ...]:
        nd = self.node[nid]
        op = nd[0]
        if op == ADD:
            return nd[1]  # type: ignore[no-any-return]
        if op in (MUL, DIV, POW):
            return (nd[1], nd[2])
        if op == FUNC:
            return (nd[2],)
        return ()

    def add(self, terms: Iterable[int]) -> int:
        constant = 0.0
        rest: list[int] = []
        for t in terms:
            nd = self.node[t]
            if nd[0] == CONST:
                constant += nd[1]
            else:
                rest.append(t)
        if not rest:
            return self.const(constant)
        if constant != 0.0:
            rest.append(self.const(constant))
        if len(rest) == 1:
            return rest[0]
        # Sorting makes a+b and b+a the same node.
        rest.sort()
        deps = frozenset().union(*(self.deps[t] for t in rest))
        return self._intern((ADD, tuple(rest)), deps)

    def sub(self, a: int, b: int) -> int:
        return self.add((a, self.mul(self.const(-1.0), b)))

    def mul(self, a: int, b: int) -> int:
        na, nb = self.node[a], self.node[b]
        if na[0] == CONST and nb[0] == CONST:
            return self.const(na[1] * nb[1])
        if nb[0] == CONST:
            a, b, na, nb = b, a, nb, na
        if na[0] == CONST:
            c = na[1]
            if c == 0.0:
                return self.ZERO
            if c == 1.0:
                return b
            # c * (d * y) -> (c*d) * y keeps derivative chains of constants flat.
            if nb[0] == MUL and self.node[nb[1]][0] == CONST:
                return self.mul(self.const(c * self.node[nb[1]][1]), nb[2])
            return self._intern((MUL, a, b), self.deps[b])
        if a > b:
            a, b = b, a
        return self._intern((MUL, a, b), self.deps[a] | self.deps[b])

    def div(self, a: int, b: int) -> int:
        na, nb = self.node[a], self.node[b]
        if nb[0] == CONST and nb[1] != 0.0:
            return self.mul(self.const(1.0 / nb[1]), a)
        if na[0] == CONST and na[1] == 0.0:
            return self.ZERO
        return self._intern((DIV, a, b), self.deps[a] | self.deps[b])

    def pow(self, a: int, b: int) -> int:
        na, nb = self.node[a], self.node[b]
        if nb[0] == CONST:
            p = nb[1]
            if p == 0.0:
                return self.ONE
            if p == 1.0:
                return a
            if na[0] == CONST:
                try:
                    return self.const(checked_pow(na[1], p))
                except (ArithmeticError, ValueError):
                    pass  # keep the node: the error then surfaces at evaluation time
        elif na[0] == CONST and na[1] == 1.0:
            return self.ONE
        return self._intern((POW, a, b), self.deps[a] | self.deps[b])

    def func(self, name: str, a: int) -> int:
        if name not in MATH_FUNCS:
            raise UsageError(f"unsupported function {name!r} in a nonlinear expression")
        na = self.node[a]
        if na[0] == CONST:
            try:
                return self.const(MATH_FUNCS[name](na[1]))
            except (ArithmeticError, ValueError):
                pass
        return self._intern((FUNC, name, a), self.deps[a])

    # -- differentiation ---------------------------------------------------------------------

    def diff(self, nid: int, j: int) -> int:
        """Return the node of d(node)/d(x_j), memoised per (node, variable)."""
        if j not in self.deps[nid]:
            return self.ZERO
        key = (nid, j)
        hit = self._diff_memo.get(key)
        if hit is not None:
            return hit
        result = self._diff_rule(nid, j)
        self._diff_memo[key] = result
        return result

    def _terms_with(self, nid: int, j: int) -> list[int]:
        terms: tuple[int, ...] = self.node[nid][1]
        if len(terms) < self._SUM_INDEX_MIN:
            return [t for t in terms if j in self.deps[t]]
        # Long sums (e.g. sum_i a_i/x_i) would make a gradient quadratic in their length.
        index = self._sum_index.get(nid)
        if index is None:
            index = {}
            for t in terms:
                for v in self.deps[t]:
                    index.setdefault(v, []).append(t)
            self._sum_index[nid] = index
        return index.get(j, [])

    def _diff_rule(self, nid: int, j: int) -> int:
        nd = self.node[nid]
        op = nd[0]
        if op == VAR:
            return self.ONE  # deps contains j, so this is x_j itself
        if op == ADD:
            return self.add([self.diff(t, j) for t in self._terms_with(nid, j)])
        if op == MUL:
            a, b = nd[1], nd[2]
            return self.add((self.mul(self.diff(a, j), b), self.mul(a, self.diff(b, j))))
        if op == DIV:
            # d(a/b) = (a' - (a/b) b') / b reuses the node a/b itself.
            a, b = nd[1], nd[2]
            return self.div(self.sub(self.diff(a, j), self.mul(nid, self.diff(b, j))), b)
        if op == POW:
            a, b = nd[1], nd[2]
            if not self.deps[b]:
                # Constant or per-instance parameter exponent: p a^(p-1) a'.
                p_minus_1 = self.add((b, self.const(-1.0)))
                inner = self.mul(b, self.pow(a, p_minus_1))
                return self.mul(inner, self.diff(a, j))
            if not self.deps[a]:
                # c^b: c^b log(c) b' (log(c) folds to a number for a constant c > 0).
                scale = self.mul(nid, self.func("log", a))
                return self.mul(scale, self.diff(b, j))
            # d(a^b) = a^b (b' log a + b a'/a)
            part = self.add(
                (
                    self.mul(self.diff(b, j), self.func("log", a)),
                    self.div(self.mul(b, self.diff(a, j)), a),
                )
            )
            return self.mul(nid, part)
        if op == FUNC:
            outer = self._func_derivative(nd[1], nd[2], nid)
            return self.mul(outer, self.diff(nd[2], j))
        raise AssertionError(f"node kind {op} has no derivative rule")  # pragma: no cover

    def _func_derivative(self, name: str, a: int, nid: int) -> int:
        """Return f'(a) as a node, for f the unary function ``name`` and ``nid`` = f(a)."""
        one = self.ONE
        sq = self.mul(a, a)
        if name == "exp":
            return nid
        if name == "log":
            return self.div(one, a)
        if name == "log10":
            return self.div(self.const(1.0 / math.log(10.0)), a)
        if name == "sqrt":
            return self.div(self.const(0.5), nid)
        if name == "sin":
            return self.func("cos", a)
        if name == "cos":
            return self.mul(self.const(-1.0), self.func("sin", a))
        if name == "tan":
            return self.add((one, self.mul(nid, nid)))
        if name == "asin":
            return self.pow(self.sub(one, sq), self.const(-0.5))
        if name == "acos":
            return self.mul(self.const(-1.0), self.pow(self.sub(one, sq), self.const(-0.5)))
        if name == "atan":
            return self.div(one, self.add((one, sq)))
        if name == "sinh":
            return self.func("cosh", a)
        if name == "cosh":
            return self.func("sinh", a)
        if name == "tanh":
            return self.sub(one, self.mul(nid, nid))
        if name == "asinh":
            return self.pow(self.add((sq, one)), self.const(-0.5))
        if name == "acosh":
            return self.pow(self.sub(sq, one), self.const(-0.5))
        if name == "atanh":
            return self.div(one, self.sub(one, sq))
        if name == "abs":
            return self.func("sign", a)
        # ceil, floor and sign are piecewise constant.
        return self.ZERO
