"""Nonlinear terms of one block: shape templates (vectorised) and one-off terms (scalar code).

Terms with the same structure (``a[i] / x[i]`` for every ``i``) form a :class:`Shape`: one
template with per-instance variables and constants, differentiated symbolically once and
evaluated with numpy over all instances at once. The few one-off terms are differentiated
individually and emitted together as straight-line scalar code, one function per derivative
order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mel_opt.nlp.codegen import emit
from mel_opt.nlp.graph import (
    ADD,
    CONST,
    DIV,
    FUNC,
    MUL,
    PARAM,
    VAR,
    Graph,
    NLPEvaluationError,
)

# Instances of one term shape from which a numpy template beats straight-line scalar code.
# Below it, numpy's per-call overhead on tiny arrays costs more than it saves.
_VECTOR_MIN = 4


def int_array(values: Sequence[int]) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def float_array(values: Sequence[float]) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


def _canonical(graph: Graph, root: int) -> tuple[tuple[Any, ...], list[int], list[float]]:
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
        if op == VAR:
            entry: tuple[Any, ...] = (VAR, len(variables))
            variables.append(nd[1])
        elif op == CONST:
            entry = (PARAM, len(params))
            params.append(nd[1])
        elif op == ADD:
            entry = (ADD, tuple(local[c] for c in nd[1]))
        elif op == FUNC:
            entry = (FUNC, nd[1], local[nd[2]])
        else:
            entry = (op, local[nd[1]], local[nd[2]])
        local[nid] = len(entries)
        entries.append(entry)
    return tuple(entries), variables, params


class Shape:
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
        tg = self.graph = Graph()
        ids: list[int] = []
        for entry in signature:
            op = entry[0]
            if op == VAR:
                ids.append(tg.var(entry[1]))
            elif op == PARAM:
                ids.append(tg.param(entry[1]))
            elif op == ADD:
                ids.append(tg.add([ids[k] for k in entry[1]]))
            elif op == FUNC:
                ids.append(tg.func(entry[1], ids[entry[2]]))
            elif op == MUL:
                ids.append(tg.mul(ids[entry[1]], ids[entry[2]]))
            elif op == DIV:
                ids.append(tg.div(ids[entry[1]], ids[entry[2]]))
            else:
                ids.append(tg.pow(ids[entry[1]], ids[entry[2]]))
        self.root = ids[-1]
        self.name = name
        self.R = r = len(rows)
        self.rows = int_array(rows)
        n_vars = len(variables[0])
        self.V = np.asarray(variables, dtype=np.int64).T.reshape(n_vars, r)
        self.P = np.asarray(params, dtype=np.float64).T.reshape(len(params[0]), r)
        self.value_fn = emit(tg, [self.root], f"{name}_value", vector=True)
        self.grad = [(k, d) for k in range(n_vars) if (d := tg.diff(self.root, k)) != tg.ZERO]
        self.grad_fn = (
            emit(tg, [d for _, d in self.grad], f"{name}_grad", vector=True)
            if self.grad
            else None
        )
        self.hess: list[tuple[int, int, int]] = []
        self.hess_fn: Callable | None = None

    def grad_pattern(self) -> tuple[np.ndarray, np.ndarray]:
        """(function row, variable) of every gradient output, output-major."""
        rows = np.tile(self.rows, len(self.grad))
        cols = self.V[[k for k, _ in self.grad]].ravel() if self.grad else int_array([])
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
            roots = [h for _, _, h in self.hess]
            self.hess_fn = emit(tg, roots, f"{self.name}_hess", vector=True)
        a = self.V[[k for k, _, _ in self.hess]].ravel() if self.hess else int_array([])
        b = self.V[[i for _, i, _ in self.hess]].ravel() if self.hess else int_array([])
        return np.tile(self.rows, len(self.hess)), np.maximum(a, b), np.minimum(a, b)


class NonlinearTerms:
    """All nonlinear terms of one block, as flat arrays of values and derivative entries.

    Terms sharing a signature with at least ``_VECTOR_MIN`` others become a :class:`Shape`;
    the rest are emitted together as one scalar function per derivative order.
    """

    def __init__(self, graph: Graph, terms: list[tuple[int, int]], name: str) -> None:
        self.graph = graph
        groups: dict[tuple[Any, ...], list[tuple[int, int, list[int], list[float]]]] = {}
        for row, root in terms:
            sig, variables, params = _canonical(graph, root)
            groups.setdefault(sig, []).append((row, root, variables, params))
        self.shapes: list[Shape] = []
        self.single: list[tuple[int, int]] = []
        for sig, members in groups.items():
            if len(members) >= _VECTOR_MIN:
                shape = Shape(
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
        self._value_fn = emit(graph, single_roots, f"{name}_value") if self.single else None
        self._grad_entries: list[tuple[int, int, int]] = [
            (row, j, d)
            for row, root in self.single
            for j in sorted(graph.deps[root])
            if (d := graph.diff(root, j)) != graph.ZERO
        ]
        self._grad_fn = (
            emit(graph, [d for _, _, d in self._grad_entries], f"{name}_grad")
            if self._grad_entries
            else None
        )
        self.value_rows = np.concatenate(
            [int_array([row for row, _ in self.single])] + [s.rows for s in self.shapes]
        )
        patterns = [s.grad_pattern() for s in self.shapes]
        self.grad_rows = np.concatenate(
            [int_array([e[0] for e in self._grad_entries])] + [p[0] for p in patterns]
        )
        self.grad_cols = np.concatenate(
            [int_array([e[1] for e in self._grad_entries])] + [p[1] for p in patterns]
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
            self._hess_fn = emit(graph, [e[3] for e in entries], f"{self.name}_hess")
        parts = [s.build_hessian() for s in self.shapes]
        rows = np.concatenate([int_array([e[0] for e in entries])] + [p[0] for p in parts])
        hi = np.concatenate([int_array([e[1] for e in entries])] + [p[1] for p in parts])
        lo = np.concatenate([int_array([e[2] for e in entries])] + [p[2] for p in parts])
        return rows, hi, lo

    def _evaluate(
        self,
        x: np.ndarray,
        single_fn: Callable | None,
        shape_fns: Sequence[tuple[Shape, Callable | None, int]],
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

