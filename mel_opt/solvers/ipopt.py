"""Ipopt (through cyipopt) for continuous Pyomo models, without ASL or an ``ipopt`` executable.

Pyomo's own ``cyipopt`` interface needs PyNumero's compiled ASL library, which is not shipped
here, so this module compiles a Pyomo model into numpy callbacks itself. It works in three
phases, all before Ipopt starts:

1. *Split.* ``generate_standard_repn(..., quadratic=True)`` splits the objective and every
   constraint body into constant + linear + quadratic + nonlinear remainder.
2. *Vectorise.* Linear parts become one sparse matrix per block (objective, constraints);
   quadratic parts become ``(row, i, j, coef)`` arrays evaluated with numpy fancy indexing.
   Their Jacobian is linear in ``x`` (a sparse matrix product) and their Hessian constant per
   multiplier (another sparse product), so none of this touches Python per term.
3. *Generate code.* Only the nonlinear remainders (``1/x``, ``sqrt``, ``exp``, products of
   three variables, ...) are translated into a small hash-consed expression graph and split
   into terms. Terms with the same structure (``a[i] / x[i]`` for every ``i``) form a
   *shape*: one template with per-instance variables and constants, differentiated
   symbolically once and emitted as numpy source evaluated over all instances at once. The
   few one-off terms are differentiated individually and emitted as straight-line scalar
   Python (one function per block and derivative order, shared sub-expressions computed once).

The sparsity patterns of the constraint Jacobian and of the lower triangle of the Lagrangian
Hessian are fixed at build time; callbacks only fill value arrays. Pyomo trees are never
walked inside a callback.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from mel_opt.errors import SolverUnavailableError, UsageError
from mel_opt.solvers.base import Termination

__all__ = [
    "STATUS_MAP",
    "STATUS_NAMES",
    "Availability",
    "CompiledNLP",
    "NLPEvaluationError",
    "NLPResult",
    "available",
    "compile_nlp",
    "solve_nlp",
    "version",
]

# Ipopt's ApplicationReturnStatus (IpReturnCodes_inc.h) -> Termination. Ipopt is a local
# solver, so success is LOCALLY_OPTIMAL; "acceptable level" is Ipopt's own (looser)
# convergence claim and is reported the same way (the message tells them apart).
STATUS_MAP: dict[int, Termination] = {
    0: Termination.LOCALLY_OPTIMAL,  # Solve_Succeeded
    1: Termination.LOCALLY_OPTIMAL,  # Solved_To_Acceptable_Level
    2: Termination.INFEASIBLE,  # Infeasible_Problem_Detected (locally infeasible)
    3: Termination.NUMERICAL,  # Search_Direction_Becomes_Too_Small
    4: Termination.UNBOUNDED,  # Diverging_Iterates
    5: Termination.UNKNOWN,  # User_Requested_Stop (never requested here)
    6: Termination.FEASIBLE,  # Feasible_Point_Found (square problems)
    -1: Termination.ITERATION_LIMIT,  # Maximum_Iterations_Exceeded
    -2: Termination.NUMERICAL,  # Restoration_Failed
    -3: Termination.NUMERICAL,  # Error_In_Step_Computation
    -4: Termination.TIME_LIMIT,  # Maximum_CpuTime_Exceeded
    -5: Termination.TIME_LIMIT,  # Maximum_WallTime_Exceeded (Ipopt >= 3.14)
    -10: Termination.ERROR,  # Not_Enough_Degrees_Of_Freedom
    -11: Termination.ERROR,  # Invalid_Problem_Definition
    -12: Termination.ERROR,  # Invalid_Option
    -13: Termination.NUMERICAL,  # Invalid_Number_Detected
    -100: Termination.ERROR,  # Unrecoverable_Exception
    -101: Termination.ERROR,  # NonIpopt_Exception_Thrown
    -102: Termination.ERROR,  # Insufficient_Memory
    -199: Termination.ERROR,  # Internal_Error
}

STATUS_NAMES: dict[int, str] = {
    0: "Solve_Succeeded",
    1: "Solved_To_Acceptable_Level",
    2: "Infeasible_Problem_Detected",
    3: "Search_Direction_Becomes_Too_Small",
    4: "Diverging_Iterates",
    5: "User_Requested_Stop",
    6: "Feasible_Point_Found",
    -1: "Maximum_Iterations_Exceeded",
    -2: "Restoration_Failed",
    -3: "Error_In_Step_Computation",
    -4: "Maximum_CpuTime_Exceeded",
    -5: "Maximum_WallTime_Exceeded",
    -10: "Not_Enough_Degrees_Of_Freedom",
    -11: "Invalid_Problem_Definition",
    -12: "Invalid_Option",
    -13: "Invalid_Number_Detected",
    -100: "Unrecoverable_Exception",
    -101: "NonIpopt_Exception_Thrown",
    -102: "Insufficient_Memory",
    -199: "Internal_Error",
}

# cyipopt 1.7 has no text for codes added in Ipopt 3.14; these fill the gap.
_EXTRA_MESSAGES: dict[int, str] = {-5: "Maximum wall time exceeded."}

# Ipopt treats |bound| >= 1e19 as "no bound"; passing a finite sentinel avoids relying on how
# infinities travel through the C interface.
_IPOPT_INF = 1e20

_HESSIAN_MODES = ("exact", "lbfgs")


# --------------------------------------------------------------------------------------------
# Availability
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Availability:
    """Whether cyipopt can be used here; truthy only when it can.

    Attributes
    ----------
    ok : bool
        True when cyipopt imports and solved a one-variable test problem.
    reason : str
        Why not, when ``ok`` is False (empty otherwise).
    """

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


class _Probe:
    """Callbacks of the one-variable problem min (x - 1)^2 used to probe cyipopt."""

    def objective(self, x: np.ndarray) -> float:
        return float((x[0] - 1.0) ** 2)

    def gradient(self, x: np.ndarray) -> np.ndarray:
        return np.array([2.0 * (x[0] - 1.0)])

    def hessianstructure(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array([0]), np.array([0])

    def hessian(self, x: np.ndarray, lagrange: np.ndarray, obj_factor: float) -> np.ndarray:
        return np.array([2.0 * obj_factor])


@functools.cache
def available() -> Availability:
    """Report whether cyipopt imports and solves a trivial problem.

    The result is cached for the process: the probe costs a few milliseconds once.

    Returns
    -------
    Availability
        Truthy when usable; otherwise ``.reason`` says why not.
    """
    try:
        import cyipopt
    except Exception as exc:  # pragma: no cover - depends on the installation
        return Availability(False, f"cyipopt is not importable: {exc}")
    try:
        prob = cyipopt.Problem(n=1, m=0, problem_obj=_Probe(), lb=[-10.0], ub=[10.0])
        prob.add_option("print_level", 0)
        prob.add_option("sb", "yes")
        x, info = prob.solve(np.array([0.0]))
        prob.close()
    except Exception as exc:  # pragma: no cover - broken binary wheel
        return Availability(False, f"cyipopt imports but cannot solve: {exc}")
    if info["status"] != 0 or abs(float(x[0]) - 1.0) > 1e-6:  # pragma: no cover
        return Availability(False, f"cyipopt probe solve failed (status {info['status']})")
    return Availability(True)


def version() -> str:
    """Return the Ipopt and cyipopt versions, e.g. ``"Ipopt 3.14.11 (cyipopt 1.7.0)"``.

    Raises
    ------
    SolverUnavailableError
        When cyipopt cannot be imported.
    """
    try:
        import cyipopt
    except Exception as exc:  # pragma: no cover - depends on the installation
        raise SolverUnavailableError(f"cyipopt is not importable: {exc}") from exc
    ipopt = ".".join(str(p) for p in getattr(cyipopt, "IPOPT_VERSION", ()))
    return f"Ipopt {ipopt or '?'} (cyipopt {getattr(cyipopt, '__version__', '?')})"


# --------------------------------------------------------------------------------------------
# Expression graph: hash-consed DAG with folding, symbolic derivatives and code generation
# --------------------------------------------------------------------------------------------

# Node kinds. _PARAM only occurs in shape templates: a per-instance constant (see _Shape).
_CONST, _VAR, _ADD, _MUL, _DIV, _POW, _FUNC, _PARAM = range(8)

# Unary functions Pyomo can put in a model (UnaryFunctionExpression.getname()), evaluated with
# the math module so that domain errors raise instead of returning complex numbers.
_MATH_FUNCS: dict[str, Callable[[float], float]] = {
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
_NUMPY_FUNCS: dict[str, Callable[..., Any]] = {
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


def _checked_pow(a: float, b: float) -> float:
    # math.pow raises ValueError for a negative base with a fractional exponent, where the
    # ** operator would silently return a complex number.
    return math.pow(a, b)


class NLPEvaluationError(ArithmeticError):
    """A compiled function was evaluated outside its domain (log of a negative, 1/0, ...)."""


class _Graph:
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
        return self._intern((_CONST, float(value)), frozenset())

    def var(self, index: int) -> int:
        return self._intern((_VAR, index), frozenset((index,)))

    def param(self, index: int) -> int:
        return self._intern((_PARAM, index), frozenset())

    def is_const(self, nid: int) -> bool:
        return self.node[nid][0] == _CONST

    def value_of(self, nid: int) -> float:
        return float(self.node[nid][1])

    def children(self, nid: int) -> tuple[int, ...]:
        nd = self.node[nid]
        op = nd[0]
        if op == _ADD:
            return nd[1]  # type: ignore[no-any-return]
        if op in (_MUL, _DIV, _POW):
            return (nd[1], nd[2])
        if op == _FUNC:
            return (nd[2],)
        return ()

    def add(self, terms: Iterable[int]) -> int:
        constant = 0.0
        rest: list[int] = []
        for t in terms:
            nd = self.node[t]
            if nd[0] == _CONST:
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
        return self._intern((_ADD, tuple(rest)), deps)

    def sub(self, a: int, b: int) -> int:
        return self.add((a, self.mul(self.const(-1.0), b)))

    def mul(self, a: int, b: int) -> int:
        na, nb = self.node[a], self.node[b]
        if na[0] == _CONST and nb[0] == _CONST:
            return self.const(na[1] * nb[1])
        if nb[0] == _CONST:
            a, b, na, nb = b, a, nb, na
        if na[0] == _CONST:
            c = na[1]
            if c == 0.0:
                return self.ZERO
            if c == 1.0:
                return b
            # c * (d * y) -> (c*d) * y keeps derivative chains of constants flat.
            if nb[0] == _MUL and self.node[nb[1]][0] == _CONST:
                return self.mul(self.const(c * self.node[nb[1]][1]), nb[2])
            return self._intern((_MUL, a, b), self.deps[b])
        if a > b:
            a, b = b, a
        return self._intern((_MUL, a, b), self.deps[a] | self.deps[b])

    def div(self, a: int, b: int) -> int:
        na, nb = self.node[a], self.node[b]
        if nb[0] == _CONST and nb[1] != 0.0:
            return self.mul(self.const(1.0 / nb[1]), a)
        if na[0] == _CONST and na[1] == 0.0:
            return self.ZERO
        return self._intern((_DIV, a, b), self.deps[a] | self.deps[b])

    def pow(self, a: int, b: int) -> int:
        na, nb = self.node[a], self.node[b]
        if nb[0] == _CONST:
            p = nb[1]
            if p == 0.0:
                return self.ONE
            if p == 1.0:
                return a
            if na[0] == _CONST:
                try:
                    return self.const(_checked_pow(na[1], p))
                except (ArithmeticError, ValueError):
                    pass  # keep the node: the error then surfaces at evaluation time
        elif na[0] == _CONST and na[1] == 1.0:
            return self.ONE
        return self._intern((_POW, a, b), self.deps[a] | self.deps[b])

    def func(self, name: str, a: int) -> int:
        if name not in _MATH_FUNCS:
            raise UsageError(f"unsupported function {name!r} in a nonlinear expression")
        na = self.node[a]
        if na[0] == _CONST:
            try:
                return self.const(_MATH_FUNCS[name](na[1]))
            except (ArithmeticError, ValueError):
                pass
        return self._intern((_FUNC, name, a), self.deps[a])

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
        if op == _VAR:
            return self.ONE  # deps contains j, so this is x_j itself
        if op == _ADD:
            return self.add([self.diff(t, j) for t in self._terms_with(nid, j)])
        if op == _MUL:
            a, b = nd[1], nd[2]
            return self.add((self.mul(self.diff(a, j), b), self.mul(a, self.diff(b, j))))
        if op == _DIV:
            # d(a/b) = (a' - (a/b) b') / b reuses the node a/b itself.
            a, b = nd[1], nd[2]
            return self.div(self.sub(self.diff(a, j), self.mul(nid, self.diff(b, j))), b)
        if op == _POW:
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
        if op == _FUNC:
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

    # -- code generation ---------------------------------------------------------------------

    def _topological(self, roots: Sequence[int]) -> list[int]:
        """Return every node reachable from ``roots``, children before parents."""
        order: list[int] = []
        seen: set[int] = set()
        stack: list[tuple[int, bool]] = [(r, False) for r in reversed(roots)]
        while stack:
            nid, expanded = stack.pop()
            if expanded:
                order.append(nid)
                continue
            if nid in seen:
                continue
            seen.add(nid)
            stack.append((nid, True))
            for c in self.children(nid):
                if c not in seen:
                    stack.append((c, False))
        return order

    def compile(self, roots: Sequence[int], name: str, *, vector: bool = False) -> Callable:
        """Emit and compile straight-line code computing ``roots``.

        Scalar form, ``def name(v): ...; return (root0, root1, ...)``: ``v`` is ``x.tolist()``,
        since arithmetic on Python floats is several times faster than on numpy scalars and
        math-module functions raise on domain errors.

        Vector form (shape templates), ``def name(X, P, out)``: ``X[l]`` and ``P[k]`` are arrays
        over all instances of the shape (local variable ``l``, parameter ``k``) and root ``i``
        is written to ``out[i]`` (scalars broadcast).
        """
        lines = [f"def {name}(X, P, out):" if vector else f"def {name}(v):"]
        ref: dict[int, str] = {}
        for nid in self._topological(roots):
            nd = self.node[nid]
            op = nd[0]
            if op == _CONST:
                ref[nid] = _literal(nd[1])
                continue
            if op == _VAR:
                ref[nid] = f"x{nd[1]}"
                lines.append(f"    x{nd[1]} = {'X' if vector else 'v'}[{nd[1]}]")
                continue
            if op == _PARAM:
                ref[nid] = f"p{nd[1]}"
                lines.append(f"    p{nd[1]} = P[{nd[1]}]")
                continue
            target = f"t{nid}"
            if op == _ADD:
                terms = [ref[t] for t in nd[1]]
                # Chunks keep the compiler's recursion (a+b+c+... nests) bounded.
                chunk = 32
                lines.append(f"    {target} = " + " + ".join(terms[:chunk]))
                for k in range(chunk, len(terms), chunk):
                    lines.append(f"    {target} += " + " + ".join(terms[k : k + chunk]))
            else:
                lines.append(f"    {target} = {self._source(nd, ref)}")
            ref[nid] = target
        if vector:
            lines += [f"    out[{k}] = {ref[r]}" for k, r in enumerate(roots)]
            namespace: dict[str, Any] = {f"_{k}": f for k, f in _NUMPY_FUNCS.items()}
            namespace["_pow"] = np.power
        else:
            lines.append("    return (" + "".join(f"{ref[r]}, " for r in roots) + ")")
            namespace = {f"_{k}": f for k, f in _MATH_FUNCS.items()}
            namespace["_pow"] = _checked_pow
        namespace.update(_INF=math.inf, _NAN=math.nan)
        code = compile("\n".join(lines), f"<mel_opt.solvers.ipopt:{name}>", "exec")
        exec(code, namespace)  # noqa: S102 - source generated above from numbers and names only
        fn: Callable = namespace[name]
        return fn

    def _source(self, nd: tuple[Any, ...], ref: dict[int, str]) -> str:
        op = nd[0]
        if op == _MUL:
            return f"{ref[nd[1]]} * {ref[nd[2]]}"
        if op == _DIV:
            return f"{ref[nd[1]]} / {ref[nd[2]]}"
        if op == _POW:
            base = ref[nd[1]]
            if self.is_const(nd[2]):
                p = self.value_of(nd[2])
                if p == 2.0:
                    return f"{base} * {base}"
                if p == 0.5:
                    return f"_sqrt({base})"
                if p.is_integer() and abs(p) <= 64:
                    # float ** int is exact for integers and fine for negative bases.
                    return f"{base} ** {int(p)}"
            return f"_pow({base}, {ref[nd[2]]})"
        if op == _FUNC:
            return f"_{nd[1]}({ref[nd[2]]})"
        raise AssertionError(f"node kind {op} cannot be emitted")  # pragma: no cover


def _literal(value: float) -> str:
    if math.isnan(value):
        return "_NAN"
    if math.isinf(value):
        return "_INF" if value > 0 else "(-_INF)"
    text = repr(float(value))
    return f"({text})" if value < 0 else text


def _pyomo_to_graph(graph: _Graph, var_index: dict[int, int]) -> Callable[[Any], int]:
    """Return a converter from Pyomo expressions to graph nodes (fixed vars become constants)."""
    from pyomo.common.numeric_types import native_numeric_types, value
    from pyomo.core.expr import numeric_expr as ne
    from pyomo.core.expr.visitor import StreamBasedExpressionVisitor

    def _sum(node: Any, data: list[int]) -> int:
        return graph.add(data)

    def _product(node: Any, data: list[int]) -> int:
        return functools.reduce(graph.mul, data)

    def _division(node: Any, data: list[int]) -> int:
        return graph.div(data[0], data[1])

    def _power(node: Any, data: list[int]) -> int:
        return graph.pow(data[0], data[1])

    def _negation(node: Any, data: list[int]) -> int:
        return graph.mul(graph.const(-1.0), data[0])

    def _unary(node: Any, data: list[int]) -> int:
        return graph.func(node.getname(), data[0])

    # Order matters only for subclasses; lookups are cached per concrete class below.
    handlers: list[tuple[type, Callable[[Any, list[int]], int]]] = [
        (ne.SumExpression, _sum),
        (ne.ProductExpression, _product),
        (ne.DivisionExpression, _division),
        (ne.PowExpression, _power),
        (ne.NegationExpression, _negation),
        (ne.UnaryFunctionExpression, _unary),
    ]
    cache: dict[type, Callable[[Any, list[int]], int]] = {}
    named: dict[int, int] = {}

    def leaf(child: Any) -> int:
        if child.is_variable_type():
            if child.fixed:
                if child.value is None:
                    raise UsageError(f"fixed variable {child.name} has no value")
                return graph.const(child.value)
            return graph.var(var_index[id(child)])
        return graph.const(value(child))

    class _Walker(StreamBasedExpressionVisitor):  # type: ignore[misc]
        def initializeWalker(self, expr: Any) -> tuple[bool, Any]:
            descend, result = self.beforeChild(None, expr, 0)
            return (True, expr) if descend else (False, result)

        def beforeChild(self, node: Any, child: Any, child_idx: int) -> tuple[bool, Any]:
            if child.__class__ in native_numeric_types:
                return False, graph.const(child)
            if not child.is_expression_type():
                return False, leaf(child)
            if not child.is_potentially_variable():
                # Parameter-only sub-trees are constants: evaluate once, never descend.
                return False, graph.const(value(child))
            if child.is_named_expression_type() and id(child) in named:
                return False, named[id(child)]
            return True, None

        def exitNode(self, node: Any, data: list[int]) -> int:
            if node.is_named_expression_type():
                named[id(node)] = data[0]
                return data[0]
            handler = cache.get(node.__class__)
            if handler is None:
                for cls, fn in handlers:
                    if isinstance(node, cls):
                        handler = fn
                        break
                else:
                    raise UsageError(
                        f"unsupported expression type {type(node).__name__} in: {node}"
                    )
                cache[node.__class__] = handler
            return handler(node, data)

    walker = _Walker()
    return walker.walk_expression  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# Nonlinear terms: shape templates (vectorised over instances) and one-off terms (scalar code)
# --------------------------------------------------------------------------------------------

# Instances of one term shape from which a numpy template beats straight-line scalar code.
# Below it, numpy's per-call overhead on tiny arrays costs more than it saves.
_VECTOR_MIN = 4


def _int_array(values: Sequence[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _float_array(values: Sequence[float]) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


def _canonical(graph: _Graph, root: int) -> tuple[tuple[Any, ...], list[int], list[float]]:
    """Describe the sub-DAG of ``root`` independently of which variables and numbers it uses.

    Returns ``(signature, variables, parameters)``: the signature lists the nodes in a
    deterministic post-order with children as positions in that list, variables as local
    indices (first-use order) and every constant as a parameter slot. Terms of an indexed
    constraint (``a[i] * exp(b[i] * x[i])`` for all ``i``) share one signature. Grouping only
    affects speed: a term whose signature is unique is still evaluated exactly.
    """
    local: dict[int, int] = {}
    entries: list[tuple[Any, ...]] = []
    variables: list[int] = []
    params: list[float] = []
    stack: list[tuple[int, bool]] = [(root, False)]
    while stack:
        nid, expanded = stack.pop()
        if nid in local:
            continue
        if not expanded:
            stack.append((nid, True))
            stack.extend((c, False) for c in reversed(graph.children(nid)) if c not in local)
            continue
        nd = graph.node[nid]
        op = nd[0]
        if op == _VAR:
            entry: tuple[Any, ...] = (_VAR, len(variables))
            variables.append(nd[1])
        elif op == _CONST:
            entry = (_PARAM, len(params))
            params.append(nd[1])
        elif op == _ADD:
            entry = (_ADD, tuple(local[c] for c in nd[1]))
        elif op == _FUNC:
            entry = (_FUNC, nd[1], local[nd[2]])
        else:
            entry = (op, local[nd[1]], local[nd[2]])
        local[nid] = len(entries)
        entries.append(entry)
    return tuple(entries), variables, params


class _Shape:
    """``R`` instances of one term signature: differentiated once, evaluated with numpy.

    Outputs are laid out output-major: derivative ``k`` of instance ``r`` is ``k * R + r``.
    """

    def __init__(
        self,
        signature: tuple[Any, ...],
        rows: list[int],
        variables: list[list[int]],
        params: list[list[float]],
        name: str,
    ) -> None:
        tg = self.graph = _Graph()
        ids: list[int] = []
        for entry in signature:
            op = entry[0]
            if op == _VAR:
                ids.append(tg.var(entry[1]))
            elif op == _PARAM:
                ids.append(tg.param(entry[1]))
            elif op == _ADD:
                ids.append(tg.add([ids[k] for k in entry[1]]))
            elif op == _FUNC:
                ids.append(tg.func(entry[1], ids[entry[2]]))
            elif op == _MUL:
                ids.append(tg.mul(ids[entry[1]], ids[entry[2]]))
            elif op == _DIV:
                ids.append(tg.div(ids[entry[1]], ids[entry[2]]))
            else:
                ids.append(tg.pow(ids[entry[1]], ids[entry[2]]))
        self.root = ids[-1]
        self.name = name
        self.R = r = len(rows)
        self.rows = _int_array(rows)
        n_vars = len(variables[0])
        self.V = np.asarray(variables, dtype=np.int64).T.reshape(n_vars, r)
        self.P = np.asarray(params, dtype=np.float64).T.reshape(len(params[0]), r)
        self.value_fn = tg.compile([self.root], f"{name}_value", vector=True)
        self.grad = [(k, d) for k in range(n_vars) if (d := tg.diff(self.root, k)) != tg.ZERO]
        self.grad_fn = (
            tg.compile([d for _, d in self.grad], f"{name}_grad", vector=True)
            if self.grad
            else None
        )
        self.hess: list[tuple[int, int, int]] = []
        self.hess_fn: Callable | None = None

    def grad_pattern(self) -> tuple[np.ndarray, np.ndarray]:
        """(function row, variable) of every gradient output, output-major."""
        rows = np.tile(self.rows, len(self.grad))
        cols = self.V[[k for k, _ in self.grad]].ravel() if self.grad else _int_array([])
        return rows, cols

    def build_hessian(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Second derivatives; returns (function row, hi, lo) of every output, output-major."""
        tg = self.graph
        for k, d in self.grad:
            for i in sorted(tg.deps[d]):
                if i <= k:
                    h = tg.diff(d, i)
                    if h != tg.ZERO:
                        self.hess.append((k, i, h))
        if self.hess:
            self.hess_fn = tg.compile(
                [h for _, _, h in self.hess], f"{self.name}_hess", vector=True
            )
        a = self.V[[k for k, _, _ in self.hess]].ravel() if self.hess else _int_array([])
        b = self.V[[i for _, i, _ in self.hess]].ravel() if self.hess else _int_array([])
        return np.tile(self.rows, len(self.hess)), np.maximum(a, b), np.minimum(a, b)


class _Nonlinear:
    """All nonlinear terms of one block, as flat arrays of values and derivative entries.

    Terms sharing a signature with at least ``_VECTOR_MIN`` others become a :class:`_Shape`;
    the rest are emitted together as one scalar function per derivative order.
    """

    def __init__(self, graph: _Graph, terms: list[tuple[int, int]], name: str) -> None:
        self.graph = graph
        groups: dict[tuple[Any, ...], list[tuple[int, int, list[int], list[float]]]] = {}
        for row, root in terms:
            sig, variables, params = _canonical(graph, root)
            groups.setdefault(sig, []).append((row, root, variables, params))
        self.shapes: list[_Shape] = []
        self.single: list[tuple[int, int]] = []
        for sig, members in groups.items():
            if len(members) >= _VECTOR_MIN:
                shape = _Shape(
                    sig,
                    [m[0] for m in members],
                    [m[2] for m in members],
                    [m[3] for m in members],
                    f"{name}_shape{len(self.shapes)}",
                )
                self.shapes.append(shape)
            else:
                self.single.extend((m[0], m[1]) for m in members)
        self.name = name

        single_roots = [root for _, root in self.single]
        self._value_fn = graph.compile(single_roots, f"{name}_value") if self.single else None
        self._grad_entries: list[tuple[int, int, int]] = [
            (row, j, d)
            for row, root in self.single
            for j in sorted(graph.deps[root])
            if (d := graph.diff(root, j)) != graph.ZERO
        ]
        self._grad_fn = (
            graph.compile([d for _, _, d in self._grad_entries], f"{name}_grad")
            if self._grad_entries
            else None
        )
        self.value_rows = np.concatenate(
            [_int_array([row for row, _ in self.single])] + [s.rows for s in self.shapes]
        )
        patterns = [s.grad_pattern() for s in self.shapes]
        self.grad_rows = np.concatenate(
            [_int_array([e[0] for e in self._grad_entries])] + [p[0] for p in patterns]
        )
        self.grad_cols = np.concatenate(
            [_int_array([e[1] for e in self._grad_entries])] + [p[1] for p in patterns]
        )
        self._hess_fn: Callable | None = None
        self._n_hess_single = 0

    def build_hessian(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Build second derivatives; return (function row, hi, lo) of every Hessian output."""
        graph = self.graph
        entries = [
            (row, j, i, h)
            for row, j, d in self._grad_entries
            for i in sorted(graph.deps[d])
            if i <= j and (h := graph.diff(d, i)) != graph.ZERO
        ]
        self._n_hess_single = len(entries)
        if entries:
            self._hess_fn = graph.compile([e[3] for e in entries], f"{self.name}_hess")
        parts = [s.build_hessian() for s in self.shapes]
        rows = np.concatenate([_int_array([e[0] for e in entries])] + [p[0] for p in parts])
        hi = np.concatenate([_int_array([e[1] for e in entries])] + [p[1] for p in parts])
        lo = np.concatenate([_int_array([e[2] for e in entries])] + [p[2] for p in parts])
        return rows, hi, lo

    def _evaluate(
        self,
        x: np.ndarray,
        single_fn: Callable | None,
        shape_fns: Sequence[tuple[_Shape, Callable | None, int]],
        size: int,
        what: str,
    ) -> np.ndarray:
        out = np.empty(size)
        pos = 0
        if single_fn is not None:
            vals = single_fn(x.tolist())
            pos = len(vals)
            out[:pos] = vals
        with np.errstate(all="ignore"):
            for shape, fn, count in shape_fns:
                if fn is None or count == 0:
                    continue
                end = pos + count * shape.R
                fn(x[shape.V], shape.P, out[pos:end].reshape(count, shape.R))
                pos = end
        # numpy reports domain errors as NaN/inf; so may overflow in scalar code.
        if not np.isfinite(out).all():
            raise NLPEvaluationError(f"{what} is not finite at this point")
        return out

    def values(self, x: np.ndarray) -> np.ndarray:
        fns = [(s, s.value_fn, 1) for s in self.shapes]
        return self._evaluate(x, self._value_fn, fns, self.value_rows.size, "a nonlinear term")

    def gradient(self, x: np.ndarray) -> np.ndarray:
        fns = [(s, s.grad_fn, len(s.grad)) for s in self.shapes]
        return self._evaluate(x, self._grad_fn, fns, self.grad_rows.size, "a first derivative")

    def hessian(self, x: np.ndarray, size: int) -> np.ndarray:
        fns = [(s, s.hess_fn, len(s.hess)) for s in self.shapes]
        return self._evaluate(x, self._hess_fn, fns, size, "a second derivative")


# --------------------------------------------------------------------------------------------
# Compiled blocks of rows (the objective is a one-row block, the constraints another)
# --------------------------------------------------------------------------------------------


@dataclass
class _Rows:
    """Split parts of several functions: constants, linear and quadratic triplets, and
    nonlinear terms (several per row when the remainder is a sum)."""

    constant: list[float] = field(default_factory=list)
    lin_r: list[int] = field(default_factory=list)
    lin_j: list[int] = field(default_factory=list)
    lin_c: list[float] = field(default_factory=list)
    q_r: list[int] = field(default_factory=list)
    q_i: list[int] = field(default_factory=list)
    q_j: list[int] = field(default_factory=list)
    q_c: list[float] = field(default_factory=list)
    nl_r: list[int] = field(default_factory=list)
    nl_root: list[int] = field(default_factory=list)


class _Block:
    """Values, Jacobian and Hessian contributions of ``m`` functions of ``n`` variables."""

    def __init__(self, rows: _Rows, n: int, graph: _Graph, name: str) -> None:
        self.n = n
        self.m = m = len(rows.constant)
        self.name = name
        self.b = _float_array(rows.constant)
        lin_r, lin_j, lin_c = (
            _int_array(rows.lin_r),
            _int_array(rows.lin_j),
            _float_array(rows.lin_c),
        )
        self.A = sp.csr_array((lin_c, (lin_r, lin_j)), shape=(m, n))
        self.q_r = _int_array(rows.q_r)
        self.q_i = _int_array(rows.q_i)
        self.q_j = _int_array(rows.q_j)
        self.q_c = _float_array(rows.q_c)
        self.has_quad = bool(self.q_c.size)
        self.nl = (
            _Nonlinear(graph, list(zip(rows.nl_r, rows.nl_root, strict=True)), name)
            if rows.nl_r
            else None
        )
        g_r = self.nl.grad_rows if self.nl else _int_array([])
        g_j = self.nl.grad_cols if self.nl else _int_array([])

        # Jacobian pattern: union of linear, quadratic and nonlinear entries, row-major.
        keys = np.concatenate(
            [lin_r * n + lin_j, self.q_r * n + self.q_i, self.q_r * n + self.q_j, g_r * n + g_j]
        )
        self.jac_keys = np.unique(keys)
        self.jac_rows = self.jac_keys // n if n else self.jac_keys
        self.jac_cols = self.jac_keys % n if n else self.jac_keys
        nnz = self.jac_keys.size
        self.jac_const = np.bincount(self._jpos(lin_r, lin_j), weights=lin_c, minlength=nnz).astype(
            np.float64
        )
        # d(c x_i x_j) = c x_j dx_i + c x_i dx_j: a constant matrix times x (i == j sums to 2c).
        self.Jq = sp.csr_array(
            (
                np.concatenate([self.q_c, self.q_c]),
                (
                    np.concatenate(
                        [self._jpos(self.q_r, self.q_i), self._jpos(self.q_r, self.q_j)]
                    ),
                    np.concatenate([self.q_j, self.q_i]),
                ),
            ),
            shape=(nnz, n),
        )
        # Terms of one row may share a variable: accumulate with bincount, not fancy +=.
        self.nl_jpos = self._jpos(g_r, g_j)
        self.hess_nnz = 0

    def _jpos(self, r: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.jac_keys, r * self.n + j)

    # -- Hessian -----------------------------------------------------------------------------

    def hessian_keys(self) -> np.ndarray:
        """Lower-triangle keys (row * n + col) this block contributes; builds 2nd derivatives."""
        n = self.n
        hi = np.maximum(self.q_i, self.q_j)
        lo = np.minimum(self.q_i, self.q_j)
        if self.nl is not None:
            self.nl_hrow, nl_hi, nl_lo = self.nl.build_hessian()
        else:
            self.nl_hrow, nl_hi, nl_lo = _int_array([]), _int_array([]), _int_array([])
        self._nl_hkeys = nl_hi * n + nl_lo
        return np.concatenate([hi * n + lo, self._nl_hkeys])

    def set_hessian_pattern(self, hess_keys: np.ndarray) -> None:
        """Precompute where this block's second derivatives land in the global pattern."""
        n = self.n
        nnz = hess_keys.size
        hi = np.maximum(self.q_i, self.q_j)
        lo = np.minimum(self.q_i, self.q_j)
        factor = np.where(self.q_i == self.q_j, 2.0, 1.0)
        # One column per function: the quadratic contribution is Hq @ multipliers.
        self.Hq = sp.csr_array(
            (self.q_c * factor, (np.searchsorted(hess_keys, hi * n + lo), self.q_r)),
            shape=(nnz, self.m),
        )
        self.nl_hpos = np.searchsorted(hess_keys, self._nl_hkeys)
        self.hess_nnz = nnz

    # -- evaluation --------------------------------------------------------------------------

    def values(self, x: np.ndarray) -> np.ndarray:
        out = self.A @ x + self.b
        if self.has_quad:
            out += np.bincount(
                self.q_r, weights=self.q_c * x[self.q_i] * x[self.q_j], minlength=self.m
            )
        if self.nl is not None:
            out += np.bincount(self.nl.value_rows, weights=self.nl.values(x), minlength=self.m)
        return out

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        out = self.jac_const.copy()
        if self.has_quad:
            out += self.Jq @ x
        if self.nl is not None and self.nl_jpos.size:
            out += np.bincount(
                self.nl_jpos, weights=self.nl.gradient(x), minlength=self.jac_keys.size
            )
        return out

    def hessian(self, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
        out = self.Hq @ weights if self.has_quad else np.zeros(self.hess_nnz)
        if self.nl is not None and self.nl_hpos.size:
            hv = self.nl.hessian(x, self.nl_hpos.size)
            out += np.bincount(
                self.nl_hpos, weights=hv * weights[self.nl_hrow], minlength=self.hess_nnz
            )
        return out


# --------------------------------------------------------------------------------------------
# The compiled NLP
# --------------------------------------------------------------------------------------------

_EVAL_ERRORS = (ArithmeticError, ValueError)


class CompiledNLP:
    """A Pyomo model compiled into Ipopt's callback form (see :func:`compile_nlp`).

    The objective is in minimisation form: ``objective(x) == sense * f(x)`` where ``f`` is the
    Pyomo objective and ``sense`` is +1 (minimise) or -1 (maximise).

    Attributes
    ----------
    variables : list
        Pyomo ``VarData`` of the free (unfixed) variables, in the order of ``x``.
    var_names, con_names : list of str
        Names of ``variables`` and of the compiled constraints (Pyomo ``.name``).
    constraints : list
        Pyomo ``ConstraintData`` in the row order of :meth:`constraints_values`.
    n, m : int
        Number of variables and of (non-constant) constraints.
    x_lb, x_ub, g_lb, g_ub : numpy.ndarray
        Variable and constraint bounds, +-inf where absent; ``g_*`` already have the body's
        constant moved to the bound side.
    x0 : numpy.ndarray
        Starting point: current values, ``None`` replaced by 0 projected into the bounds.
    sense : int
        +1 for minimise, -1 for maximise.
    constant_constraints : list of tuple(str, float)
        Active constraints without free variables (not passed to Ipopt) and their violation.
    build_time_s : float
        Seconds spent compiling.
    """

    def __init__(
        self,
        *,
        variables: list[Any],
        constraints: list[Any],
        x_lb: np.ndarray,
        x_ub: np.ndarray,
        g_lb: np.ndarray,
        g_ub: np.ndarray,
        x0: np.ndarray,
        sense: int,
        obj_block: _Block,
        con_block: _Block,
        constant_constraints: list[tuple[str, float]],
        with_hessian: bool,
    ) -> None:
        self.variables = variables
        self.var_names = [v.name for v in variables]
        self.constraints = constraints
        self.con_names = [c.name for c in constraints]
        self.n = len(variables)
        self.m = len(constraints)
        self.x_lb, self.x_ub, self.g_lb, self.g_ub = x_lb, x_ub, g_lb, g_ub
        self.x0 = x0
        self.sense = sense
        self.constant_constraints = constant_constraints
        self.build_time_s = 0.0
        self._obj = obj_block
        self._con = con_block
        self._obj_cols = obj_block.jac_cols
        self.with_hessian = with_hessian
        if with_hessian:
            keys = np.unique(np.concatenate([obj_block.hessian_keys(), con_block.hessian_keys()]))
            obj_block.set_hessian_pattern(keys)
            con_block.set_hessian_pattern(keys)
            n = max(self.n, 1)
            self._hess_rows = keys // n
            self._hess_cols = keys % n

    def objective(self, x: np.ndarray) -> float:
        """Objective in minimisation form, ``sense * f(x)``."""
        try:
            return float(self._obj.values(x)[0])
        except _EVAL_ERRORS as exc:
            raise NLPEvaluationError(f"objective: {exc}") from exc

    def gradient(self, x: np.ndarray) -> np.ndarray:
        """Dense gradient of :meth:`objective`."""
        try:
            vals = self._obj.jacobian(x)
        except _EVAL_ERRORS as exc:
            raise NLPEvaluationError(f"objective gradient: {exc}") from exc
        grad = np.zeros(self.n)
        grad[self._obj_cols] = vals
        return grad

    def constraints_values(self, x: np.ndarray) -> np.ndarray:
        """Constraint bodies ``g(x)`` (without the constants moved into ``g_lb``/``g_ub``)."""
        try:
            return self._con.values(x)
        except _EVAL_ERRORS as exc:
            raise NLPEvaluationError(f"constraints: {exc}") from exc

    def jacobianstructure(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column indices of the constraint Jacobian's nonzeros (row-major)."""
        return self._con.jac_rows, self._con.jac_cols

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """Jacobian values in the order of :meth:`jacobianstructure`."""
        try:
            return self._con.jacobian(x)
        except _EVAL_ERRORS as exc:
            raise NLPEvaluationError(f"constraint Jacobian: {exc}") from exc

    def hessianstructure(self) -> tuple[np.ndarray, np.ndarray]:
        """Row and column indices (row >= col) of the Lagrangian Hessian's lower triangle."""
        if not self.with_hessian:
            raise UsageError("compiled without Hessian (hessian='lbfgs')")
        return self._hess_rows, self._hess_cols

    def hessian(self, x: np.ndarray, lagrange: np.ndarray, obj_factor: float) -> np.ndarray:
        """Values of ``obj_factor * H_f + sum_i lagrange_i * H_gi`` on :meth:`hessianstructure`."""
        if not self.with_hessian:
            raise UsageError("compiled without Hessian (hessian='lbfgs')")
        try:
            out = self._obj.hessian(x, np.array([obj_factor], dtype=float))
            out += self._con.hessian(x, np.asarray(lagrange, dtype=float))
        except _EVAL_ERRORS as exc:
            raise NLPEvaluationError(f"Hessian: {exc}") from exc
        return out

    def constraint_violation(self, x: np.ndarray) -> float:
        """Largest absolute violation of a constraint or variable bound at ``x`` (0 if none).

        Constant constraints (not passed to Ipopt) count too; NaN when the constraints
        cannot be evaluated at ``x``.
        """
        worst = max((viol for _, viol in self.constant_constraints), default=0.0)
        if self.n:
            worst = max(
                worst,
                float(np.max(self.x_lb - x, initial=0.0)),
                float(np.max(x - self.x_ub, initial=0.0)),
            )
        if self.m:
            try:
                g = self.constraints_values(x)
            except NLPEvaluationError:
                return math.nan
            if not np.all(np.isfinite(g)):
                return math.nan
            worst = max(
                worst,
                float(np.max(self.g_lb - g, initial=0.0)),
                float(np.max(g - self.g_ub, initial=0.0)),
            )
        return worst


def _split_sum(graph: _Graph, root: int) -> list[int]:
    """The terms of ``root`` if it is a (possibly nested) sum, else ``[root]``.

    Terms are grouped into shapes separately: ``sum_i a_i / x_i`` becomes one vectorised shape.
    """
    terms: list[int] = []
    stack = [root]
    while stack:
        nid = stack.pop()
        nd = graph.node[nid]
        if nd[0] == _ADD:
            stack.extend(reversed(nd[1]))
        else:
            terms.append(nid)
    return terms


def _bound(value: Any, default: float) -> float:
    return default if value is None else float(value)


def compile_nlp(model: Any, *, hessian: bool = True) -> CompiledNLP:
    """Compile a continuous Pyomo model into vectorised callbacks for Ipopt.

    Parameters
    ----------
    model : pyomo.environ.ConcreteModel
        Exactly one active Objective; active Constraints anywhere in active Blocks (equality,
        one-sided, ranged; indexed or scalar). Fixed variables and parameters are constants
        with their current values; only variables that appear in the objective or an active
        constraint become columns of ``x``.
    hessian : bool
        Also build the exact Lagrangian Hessian (second derivatives and sparsity pattern).

    Returns
    -------
    CompiledNLP

    Raises
    ------
    UsageError
        No or several active objectives, an integer or binary variable, a fixed variable
        without value, or an expression the compiler does not support.
    """
    import pyomo.environ as pyo
    from pyomo.repn import generate_standard_repn

    start = time.perf_counter()
    objectives = list(model.component_data_objects(pyo.Objective, active=True, descend_into=True))
    if len(objectives) != 1:
        raise UsageError(f"the model needs exactly one active objective, found {len(objectives)}")
    objective = objectives[0]
    sense = -1 if objective.sense == pyo.maximize else 1

    def repn_of(expr: Any, what: str) -> Any:
        try:
            return generate_standard_repn(expr, quadratic=True, compute_values=True)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"cannot compile {what}: {exc}") from exc

    obj_repn = repn_of(objective.expr, f"objective {objective.name}")
    con_data: list[tuple[Any, Any, float | None, float | None]] = []
    for con in model.component_data_objects(pyo.Constraint, active=True, descend_into=True):
        try:
            lb, ub = con.lb, con.ub
        except (TypeError, ValueError) as exc:
            raise UsageError(f"constraint {con.name}: {exc}") from exc
        if lb is None and ub is None:
            continue  # no bound at all: nothing to enforce
        con_data.append((con, repn_of(con.body, f"constraint {con.name}"), lb, ub))

    # Free variables in first-use order, then re-ordered to follow the model's declarations.
    used: dict[int, Any] = {}

    def note(var: Any) -> None:
        if id(var) not in used:
            if not var.is_continuous():
                raise UsageError(
                    f"variable {var.name} is integer or binary; Ipopt solves continuous models "
                    "only (relax it or use a MILP/MINLP method)"
                )
            used[id(var)] = var

    for repn in [obj_repn] + [c[1] for c in con_data]:
        for var in repn.linear_vars:
            note(var)
        for v1, v2 in repn.quadratic_vars:
            note(v1)
            note(v2)
        for var in repn.nonlinear_vars:
            note(var)
    ordered = [v for v in model.component_data_objects(pyo.Var, descend_into=True) if id(v) in used]
    if len(ordered) < len(used):  # variables declared outside this model
        in_model = {id(v) for v in ordered}
        ordered += [v for k, v in used.items() if k not in in_model]
    index = {id(v): k for k, v in enumerate(ordered)}
    n = len(ordered)

    graph = _Graph()
    to_graph = _pyomo_to_graph(graph, index)

    def add_row(rows: _Rows, r: int, repn: Any, scale: float, what: str) -> None:
        rows.constant.append(scale * float(repn.constant))
        for var, coef in zip(repn.linear_vars, repn.linear_coefs, strict=True):
            rows.lin_r.append(r)
            rows.lin_j.append(index[id(var)])
            rows.lin_c.append(scale * float(coef))
        for (v1, v2), coef in zip(repn.quadratic_vars, repn.quadratic_coefs, strict=True):
            rows.q_r.append(r)
            rows.q_i.append(index[id(v1)])
            rows.q_j.append(index[id(v2)])
            rows.q_c.append(scale * float(coef))
        if repn.nonlinear_expr is None:
            return
        for term in _split_sum(graph, to_graph(repn.nonlinear_expr)):
            if scale != 1.0:
                term = graph.mul(graph.const(scale), term)
            if graph.is_const(term):
                rows.constant[-1] += graph.value_of(term)
            elif not graph.deps[term]:
                raise UsageError(f"a constant part of {what} cannot be evaluated")
            else:
                rows.nl_r.append(r)
                rows.nl_root.append(term)

    obj_rows = _Rows()
    add_row(obj_rows, 0, obj_repn, float(sense), f"objective {objective.name}")

    con_rows = _Rows()
    kept: list[Any] = []
    g_lb: list[float] = []
    g_ub: list[float] = []
    constant_constraints: list[tuple[str, float]] = []
    for con, repn, lb, ub in con_data:
        if repn.is_fixed():
            # No free variable: check it here rather than hand Ipopt an empty Jacobian row.
            body = float(repn.constant)
            if repn.nonlinear_expr is not None:
                node = to_graph(repn.nonlinear_expr)
                if not graph.is_const(node):
                    raise UsageError(f"constraint {con.name}: cannot evaluate its fixed body")
                body += graph.value_of(node)
            low = _bound(lb, -math.inf) - body
            high = body - _bound(ub, math.inf)
            constant_constraints.append((con.name, max(0.0, low, high)))
            continue
        r = len(kept)
        kept.append(con)
        add_row(con_rows, r, repn, 1.0, f"constraint {con.name}")
        # Moving the constant to the bounds keeps g(x) free of the constant term.
        const = con_rows.constant[-1]
        con_rows.constant[-1] = 0.0
        g_lb.append(_bound(lb, -math.inf) - const)
        g_ub.append(_bound(ub, math.inf) - const)

    x_lb = np.array([_bound(v.lb, -math.inf) for v in ordered], dtype=float)
    x_ub = np.array([_bound(v.ub, math.inf) for v in ordered], dtype=float)
    start_vals = np.array([0.0 if v.value is None else float(v.value) for v in ordered])
    unset = np.array([v.value is None for v in ordered], dtype=bool)
    x0 = start_vals.copy()
    if n:
        # Only unset values are projected: Ipopt itself pushes given values into the interior.
        x0[unset] = np.clip(0.0, x_lb[unset], x_ub[unset])

    nlp = CompiledNLP(
        variables=ordered,
        constraints=kept,
        x_lb=x_lb,
        x_ub=x_ub,
        g_lb=np.array(g_lb, dtype=float),
        g_ub=np.array(g_ub, dtype=float),
        x0=x0,
        sense=sense,
        obj_block=_Block(obj_rows, n, graph, "objective"),
        con_block=_Block(con_rows, n, graph, "constraints"),
        constant_constraints=constant_constraints,
        with_hessian=hessian,
    )
    nlp.build_time_s = time.perf_counter() - start
    return nlp


# --------------------------------------------------------------------------------------------
# Solving
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NLPResult:
    """Outcome of :func:`solve_nlp`.

    Attributes
    ----------
    termination : Termination
        Ipopt's return status mapped through :data:`STATUS_MAP`.
    objective : float or None
        Objective of the Pyomo model (original sense) at ``x``; None when ``x`` is not finite
        or the objective cannot be evaluated there.
    values : dict of str to float
        Value of each free variable, keyed by its Pyomo name (e.g. ``"d[3]"``).
    x : numpy.ndarray
        The same values in the adapter's variable order (:attr:`CompiledNLP.var_names`).
    iterations : int
        Ipopt iterations.
    message : str
        Ipopt's status name and message.
    solve_time_s : float
        Wall time inside Ipopt.
    constraint_violation : float
        Largest absolute constraint or bound violation at ``x``, from the compiled functions.
    multipliers : dict of str to float
        Ipopt's constraint multipliers ``lambda`` keyed by constraint name. Ipopt solves
        ``min sense*f`` with Lagrangian ``sense*f(x) + lambda^T g(x)``, so for a minimisation
        ``lambda_i = -d f*/d rhs_i`` and for a maximisation ``lambda_i = +d f*/d rhs_i``
        (an active ``>=`` constraint of a minimisation has ``lambda <= 0``). Constant
        constraints, not seen by Ipopt, get 0.
    build_time_s : float
        Seconds spent compiling the model before Ipopt started.
    """

    termination: Termination
    objective: float | None
    values: dict[str, float]
    x: np.ndarray
    iterations: int
    message: str
    solve_time_s: float
    constraint_violation: float
    multipliers: dict[str, float]
    build_time_s: float = 0.0


class _Callbacks:
    """cyipopt's problem object: forwards to a CompiledNLP and counts iterations."""

    def __init__(self, nlp: CompiledNLP, evaluation_error: type[Exception]) -> None:
        self._nlp = nlp
        self._err = evaluation_error
        self.iterations = 0

    def objective(self, x: np.ndarray) -> float:
        try:
            return self._nlp.objective(x)
        except NLPEvaluationError:
            # Ipopt cuts the step back when f or g cannot be evaluated at a trial point.
            raise self._err() from None

    def gradient(self, x: np.ndarray) -> np.ndarray:
        try:
            return self._nlp.gradient(x)
        except NLPEvaluationError:
            raise self._err() from None

    def constraints(self, x: np.ndarray) -> np.ndarray:
        try:
            return self._nlp.constraints_values(x)
        except NLPEvaluationError:
            raise self._err() from None

    def jacobianstructure(self) -> tuple[np.ndarray, np.ndarray]:
        return self._nlp.jacobianstructure()

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        try:
            return self._nlp.jacobian(x)
        except NLPEvaluationError:
            raise self._err() from None

    def intermediate(self, alg_mod: int, iter_count: int, *_: Any) -> bool:
        self.iterations = int(iter_count)
        return True


class _CallbacksWithHessian(_Callbacks):
    """Adds the exact Hessian; cyipopt switches to L-BFGS when these methods are absent."""

    def hessianstructure(self) -> tuple[np.ndarray, np.ndarray]:
        return self._nlp.hessianstructure()

    def hessian(self, x: np.ndarray, lagrange: np.ndarray, obj_factor: float) -> np.ndarray:
        try:
            return self._nlp.hessian(x, lagrange, obj_factor)
        except NLPEvaluationError:
            raise self._err() from None


def _option_value(key: str, val: Any) -> str | float | int:
    # cyipopt accepts exactly str, float or int (it checks type(val) ==, not isinstance).
    if isinstance(val, bool | np.bool_):
        return "yes" if val else "no"
    if isinstance(val, int | np.integer):
        return int(val)
    if isinstance(val, float | np.floating):
        return float(val)
    if isinstance(val, str):
        return val
    raise UsageError(f"Ipopt option {key}: unsupported value type {type(val).__name__}")


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _load(nlp: CompiledNLP, x: np.ndarray) -> None:
    # skip_validation: values may sit a hair outside a domain bound after Ipopt's bound
    # relaxation, and Pyomo would warn about each one.
    for var, val in zip(nlp.variables, x.tolist(), strict=True):
        var.set_value(val, skip_validation=True)


def _trivial_result(nlp: CompiledNLP, termination: Termination, message: str) -> NLPResult:
    """Result without calling Ipopt (nothing free to optimise, or a violated constant row)."""
    x = nlp.x0.copy()
    try:
        obj: float | None = nlp.sense * nlp.objective(x)
    except NLPEvaluationError:
        obj = None
    return NLPResult(
        termination=termination,
        objective=obj,
        values=dict(zip(nlp.var_names, x.tolist(), strict=True)),
        x=x,
        iterations=0,
        message=message,
        solve_time_s=0.0,
        constraint_violation=nlp.constraint_violation(x),
        multipliers={name: 0.0 for name in nlp.con_names}
        | {name: 0.0 for name, _ in nlp.constant_constraints},
        build_time_s=nlp.build_time_s,
    )


def _crossed_bounds(nlp: CompiledNLP) -> str:
    """Describe the first variable or constraint whose lower bound exceeds its upper bound."""
    for names, low, high, kind in (
        (nlp.var_names, nlp.x_lb, nlp.x_ub, "variable"),
        (nlp.con_names, nlp.g_lb, nlp.g_ub, "constraint"),
    ):
        bad = np.flatnonzero(low > high)
        if bad.size:
            k = int(bad[0])
            return f"{kind} {names[k]} has lower bound {low[k]:.6g} > upper bound {high[k]:.6g}"
    return ""


def solve_nlp(
    model: Any,
    *,
    time_limit: float | None = None,
    hessian: str = "exact",
    tol: float = 1e-8,
    max_iter: int = 3000,
    options: dict[str, Any] | None = None,
    load_solutions: bool = True,
    print_level: int = 0,
) -> NLPResult:
    """Solve a continuous Pyomo model with Ipopt (local optimum).

    Parameters
    ----------
    model : pyomo.environ.ConcreteModel
        Continuous variables (bounds honoured, fixed variables are constants), exactly one
        active Objective (minimise or maximise), any active Constraints (equality, one-sided,
        ranged, indexed, inside active Blocks). The variables' current values are the
        starting point; a variable without value starts at 0 projected into its bounds.
    time_limit : float, optional
        Wall-clock seconds for the whole call; what remains after compiling becomes Ipopt's
        ``max_wall_time``.
    hessian : {"exact", "lbfgs"}
        Exact Lagrangian Hessian, or Ipopt's limited-memory quasi-Newton approximation
        (second derivatives are then not even built).
    tol : float
        Ipopt's ``tol`` (relative convergence tolerance).
    max_iter : int
        Ipopt's ``max_iter``.
    options : dict, optional
        Further Ipopt options, applied last so they override the above (e.g.
        ``{"nlp_scaling_method": "none"}``; the default is Ipopt's ``gradient-based``).
        Booleans become ``"yes"``/``"no"``.
    load_solutions : bool
        Write the returned point into the model's free variables whenever it is finite,
        whatever the termination. This is the only mutation of the model.
    print_level : int
        Ipopt's ``print_level`` (0 = silent; the banner is always suppressed).

    Returns
    -------
    NLPResult

    Raises
    ------
    SolverUnavailableError
        cyipopt is not usable here.
    UsageError
        Invalid arguments or options, integer variables, no single active objective, or an
        unsupported expression.
    """
    if hessian not in _HESSIAN_MODES:
        raise UsageError(f"hessian must be one of {_HESSIAN_MODES}, got {hessian!r}")
    if time_limit is not None and not time_limit > 0:
        raise UsageError(f"time_limit must be positive, got {time_limit}")
    if not tol > 0:
        raise UsageError(f"tol must be positive, got {tol}")
    if int(max_iter) < 0:
        raise UsageError(f"max_iter must be >= 0, got {max_iter}")
    avail = available()
    if not avail:
        raise SolverUnavailableError(f"Ipopt unavailable: {avail.reason}")
    import cyipopt

    start = time.perf_counter()
    nlp = compile_nlp(model, hessian=hessian == "exact")

    violated = [(name, viol) for name, viol in nlp.constant_constraints if viol > 1e-6]
    if violated:
        name, viol = violated[0]
        return _trivial_result(
            nlp,
            Termination.INFEASIBLE,
            f"constraint {name} has no free variable and is violated by {viol:.3g}",
        )
    crossed = _crossed_bounds(nlp)
    if crossed:
        # Ipopt would stop with Invalid_Problem_Definition; this is plain infeasibility.
        return _trivial_result(nlp, Termination.INFEASIBLE, crossed)
    if nlp.n == 0:
        return _trivial_result(
            nlp, Termination.LOCALLY_OPTIMAL, "no free variables: nothing to optimise"
        )

    cls = _CallbacksWithHessian if hessian == "exact" else _Callbacks
    callbacks = cls(nlp, cyipopt.CyIpoptEvaluationError)
    problem = cyipopt.Problem(
        n=nlp.n,
        m=nlp.m,
        problem_obj=callbacks,
        lb=np.clip(nlp.x_lb, -_IPOPT_INF, _IPOPT_INF),
        ub=np.clip(nlp.x_ub, -_IPOPT_INF, _IPOPT_INF),
        cl=np.clip(nlp.g_lb, -_IPOPT_INF, _IPOPT_INF),
        cu=np.clip(nlp.g_ub, -_IPOPT_INF, _IPOPT_INF),
    )
    opts: dict[str, Any] = {
        "print_level": int(print_level),
        "sb": "yes",
        "tol": float(tol),
        "max_iter": int(max_iter),
        "nlp_scaling_method": "gradient-based",
        # Ipopt 3.14 defaults to "no" and may return x a hair (~1e-8) outside its bounds.
        "honor_original_bounds": "yes",
    }
    if hessian == "lbfgs":
        opts["hessian_approximation"] = "limited-memory"
    if time_limit is not None:
        remaining = float(time_limit) - (time.perf_counter() - start)
        # Ipopt rejects a non-positive limit; a tiny one still stops at the first check.
        opts["max_wall_time"] = max(remaining, 1e-6)
    opts.update(options or {})
    try:
        for key, val in opts.items():
            try:
                problem.add_option(key, _option_value(key, val))
            except (TypeError, ValueError) as exc:
                raise UsageError(f"Ipopt rejected option {key}={val!r}: {exc}") from exc

        t0 = time.perf_counter()
        x, info = problem.solve(nlp.x0.copy())
        solve_time = time.perf_counter() - t0
    finally:
        problem.close()

    code = int(info["status"])
    termination = STATUS_MAP.get(code, Termination.ERROR)
    raw_msg = info.get("status_msg", b"")
    text = raw_msg.decode(errors="replace") if isinstance(raw_msg, bytes) else str(raw_msg)
    if not text or text == "Unknown status":
        text = _EXTRA_MESSAGES.get(code, text or "Unknown status")
    message = f"{STATUS_NAMES.get(code, f'status {code}')}: {text}"

    x = np.asarray(x, dtype=float)
    finite = bool(np.all(np.isfinite(x)))
    objective: float | None = None
    violation = math.nan
    if finite:
        try:
            objective = _finite_or_none(nlp.sense * nlp.objective(x))
        except NLPEvaluationError:
            objective = None
        violation = nlp.constraint_violation(x)
        if load_solutions:
            _load(nlp, x)
    mult = np.asarray(info.get("mult_g", np.zeros(nlp.m)), dtype=float)
    multipliers = dict(zip(nlp.con_names, mult.tolist(), strict=True))
    multipliers.update({name: 0.0 for name, _ in nlp.constant_constraints})
    return NLPResult(
        termination=termination,
        objective=objective,
        values=dict(zip(nlp.var_names, x.tolist(), strict=True)),
        x=x,
        iterations=callbacks.iterations,
        message=message,
        solve_time_s=solve_time,
        constraint_violation=violation,
        multipliers=multipliers,
        build_time_s=nlp.build_time_s,
    )
