"""Straight-line Python source for graph nodes, compiled once per block and derivative order.

Scalar code works on Python floats (several times faster than numpy scalars, and the math
module raises on domain errors); vector code evaluates a shape template over all its instances
with numpy (domain errors give NaN/inf, which callers check).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mel_opt.nlp.graph import (
    ADD,
    CONST,
    DIV,
    FUNC,
    MATH_FUNCS,
    MUL,
    NUMPY_FUNCS,
    PARAM,
    POW,
    VAR,
    Graph,
    checked_pow,
)


def topological(graph: Graph, roots: Sequence[int]) -> list[int]:
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
        for c in graph.children(nid):
            if c not in seen:
                stack.append((c, False))
    return order

def emit(graph: Graph, roots: Sequence[int], name: str, *, vector: bool = False) -> Callable:
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
    for nid in topological(graph, roots):
        nd = graph.node[nid]
        op = nd[0]
        if op == CONST:
            ref[nid] = _literal(nd[1])
            continue
        if op == VAR:
            ref[nid] = f"x{nd[1]}"
            lines.append(f"    x{nd[1]} = {'X' if vector else 'v'}[{nd[1]}]")
            continue
        if op == PARAM:
            ref[nid] = f"p{nd[1]}"
            lines.append(f"    p{nd[1]} = P[{nd[1]}]")
            continue
        target = f"t{nid}"
        if op == ADD:
            terms = [ref[t] for t in nd[1]]
            # Chunks keep the compiler's recursion (a+b+c+... nests) bounded.
            chunk = 32
            lines.append(f"    {target} = " + " + ".join(terms[:chunk]))
            for k in range(chunk, len(terms), chunk):
                lines.append(f"    {target} += " + " + ".join(terms[k : k + chunk]))
        else:
            lines.append(f"    {target} = {_source(graph, nd, ref)}")
        ref[nid] = target
    if vector:
        lines += [f"    out[{k}] = {ref[r]}" for k, r in enumerate(roots)]
        namespace: dict[str, Any] = {f"_{k}": f for k, f in NUMPY_FUNCS.items()}
        namespace["_pow"] = np.power
    else:
        lines.append("    return (" + "".join(f"{ref[r]}, " for r in roots) + ")")
        namespace = {f"_{k}": f for k, f in MATH_FUNCS.items()}
        namespace["_pow"] = checked_pow
    namespace.update(_INF=math.inf, _NAN=math.nan)
    code = compile("\n".join(lines), f"<mel_opt.nlp:{name}>", "exec")
    exec(code, namespace)  # noqa: S102 - source generated above from numbers and names only
    fn: Callable = namespace[name]
    return fn

def _source(graph: Graph, nd: tuple[Any, ...], ref: dict[int, str]) -> str:
    op = nd[0]
    if op == MUL:
        return f"{ref[nd[1]]} * {ref[nd[2]]}"
    if op == DIV:
        return f"{ref[nd[1]]} / {ref[nd[2]]}"
    if op == POW:
        base = ref[nd[1]]
        if graph.is_const(nd[2]):
            p = graph.value_of(nd[2])
            if p == 2.0:
                return f"{base} * {base}"
            if p == 0.5:
                return f"_sqrt({base})"
            if p.is_integer() and abs(p) <= 64:
                # float ** int is exact for integers and fine for negative bases.
                return f"{base} ** {int(p)}"
        return f"_pow({base}, {ref[nd[2]]})"
    if op == FUNC:
        return f"_{nd[1]}({ref[nd[2]]})"
    raise AssertionError(f"node kind {op} cannot be emitted")  # pragma: no cover


def _literal(value: float) -> str:
    if math.isnan(value):
        return "_NAN"
    if math.isinf(value):
        return "_INF" if value > 0 else "(-_INF)"
    text = repr(float(value))
    return f"({text})" if value < 0 else text
