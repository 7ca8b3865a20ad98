"""Pyomo model -> graph nodes and split rows (Pyomo's standard representation).

``generate_standard_repn(..., quadratic=True)`` splits the objective and every constraint body
into constant + linear + quadratic + nonlinear remainder; only the remainder is translated into
graph nodes (:func:`pyomo_to_graph`), term by term (:func:`split_sum`). Pyomo trees are read
here, once, at build time and never inside a callback.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mel_opt.errors import UsageError
from mel_opt.nlp.blocks import Rows
from mel_opt.nlp.graph import ADD, Graph


def _handlers(graph: Graph) -> list[tuple[type, Callable[[Any, list[int]], int]]]:
    """(Pyomo expression class, builder of its graph node from the children's nodes)."""
    from pyomo.core.expr import numeric_expr as ne

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

    # Order matters only for subclasses; lookups are cached per concrete class.
    return [
        (ne.SumExpression, _sum),
        (ne.ProductExpression, _product),
        (ne.DivisionExpression, _division),
        (ne.PowExpression, _power),
        (ne.NegationExpression, _negation),
        (ne.UnaryFunctionExpression, _unary),
    ]


def pyomo_to_graph(graph: Graph, var_index: dict[int, int]) -> Callable[[Any], int]:
    """Return a converter from Pyomo expressions to graph nodes (fixed vars become constants)."""
    from pyomo.common.numeric_types import native_numeric_types, value
    from pyomo.core.expr.visitor import StreamBasedExpressionVisitor

    handlers = _handlers(graph)
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




def split_sum(graph: Graph, root: int) -> list[int]:
    """The terms of ``root`` if it is a (possibly nested) sum, else ``[root]``.

    Terms are grouped into shapes separately: ``sum_i a_i / x_i`` becomes one vectorised shape.
    """
    terms: list[int] = []
    stack = [root]
    while stack:
        nid = stack.pop()
        nd = graph.node[nid]
        if nd[0] == ADD:
            stack.extend(reversed(nd[1]))
        else:
            terms.append(nid)
    return terms


def bound(value: Any, default: float) -> float:
    """A Pyomo bound as a float, ``default`` (+-inf) when absent."""
    return default if value is None else float(value)


# --------------------------------------------------------------------------------------------
# Reading the model: objective, constraints and the free variables, all as standard repns
# --------------------------------------------------------------------------------------------


@dataclass
class ModelRepn:
    """The active parts of a Pyomo model in standard representation.

    Attributes
    ----------
    objective : ObjectiveData
    sense : int
        +1 for minimise, -1 for maximise.
    objective_repn : StandardRepn
    constraints : list of (ConstraintData, StandardRepn, lb, ub)
        Active constraints with at least one bound, in model order.
    variables : list of VarData
        Free variables in the order of ``x``: the model's declaration order.
    """

    objective: Any
    sense: int
    objective_repn: Any
    constraints: list[tuple[Any, Any, float | None, float | None]]
    variables: list[Any]


def _repn_of(expr: Any, what: str) -> Any:
    from pyomo.repn import generate_standard_repn

    try:
        return generate_standard_repn(expr, quadratic=True, compute_values=True)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"cannot compile {what}: {exc}") from exc


def _objective(model: Any) -> tuple[Any, int]:
    import pyomo.environ as pyo

    objectives = list(model.component_data_objects(pyo.Objective, active=True, descend_into=True))
    if len(objectives) != 1:
        raise UsageError(f"the model needs exactly one active objective, found {len(objectives)}")
    objective = objectives[0]
    return objective, -1 if objective.sense == pyo.maximize else 1


def _constraints(model: Any) -> list[tuple[Any, Any, float | None, float | None]]:
    import pyomo.environ as pyo

    out: list[tuple[Any, Any, float | None, float | None]] = []
    for con in model.component_data_objects(pyo.Constraint, active=True, descend_into=True):
        try:
            lb, ub = con.lb, con.ub
        except (TypeError, ValueError) as exc:
            raise UsageError(f"constraint {con.name}: {exc}") from exc
        if lb is None and ub is None:
            continue  # no bound at all: nothing to enforce
        out.append((con, _repn_of(con.body, f"constraint {con.name}"), lb, ub))
    return out


def _free_variables(model: Any, repns: list[Any]) -> list[Any]:
    """Variables used by ``repns``, in the model's declaration order (others appended)."""
    import pyomo.environ as pyo

    used: dict[int, Any] = {}

    def note(var: Any) -> None:
        if id(var) not in used:
            if not var.is_continuous():
                raise UsageError(
                    f"variable {var.name} is integer or binary; Ipopt solves continuous models "
                    "only (relax it or use a MILP/MINLP method)"
                )
            used[id(var)] = var

    for repn in repns:
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
    return ordered


def read_model(model: Any) -> ModelRepn:
    """Read the active objective, constraints and free variables of ``model``.

    Raises
    ------
    UsageError
        No or several active objectives, an integer or binary variable, or an expression
        Pyomo's standard representation rejects.
    """
    objective, sense = _objective(model)
    obj_repn = _repn_of(objective.expr, f"objective {objective.name}")
    cons = _constraints(model)
    variables = _free_variables(model, [obj_repn] + [c[1] for c in cons])
    return ModelRepn(objective, sense, obj_repn, cons, variables)


class RowReader:
    """Appends standard repns to :class:`~mel_opt.nlp.blocks.Rows`, nonlinear parts as nodes.

    Parameters
    ----------
    graph : Graph
        The one graph shared by every row of the model.
    variables : list of VarData
        The free variables; their position is the column of ``x``.
    """

    def __init__(self, graph: Graph, variables: list[Any]) -> None:
        self.graph = graph
        self.index = {id(v): k for k, v in enumerate(variables)}
        self.to_graph = pyomo_to_graph(graph, self.index)

    def add_row(self, rows: Rows, r: int, repn: Any, scale: float, what: str) -> None:
        """Append row ``r`` = ``scale`` times the function of ``repn`` (``what`` names it)."""
        graph, index = self.graph, self.index
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
        for term in split_sum(graph, self.to_graph(repn.nonlinear_expr)):
            if scale != 1.0:
                term = graph.mul(graph.const(scale), term)
            if graph.is_const(term):
                rows.constant[-1] += graph.value_of(term)
            elif not graph.deps[term]:
                raise UsageError(f"a constant part of {what} cannot be evaluated")
            else:
                rows.nl_r.append(r)
                rows.nl_root.append(term)

    def constant_violation(self, con: Any, repn: Any, lb: float | None, ub: float | None) -> float:
        """Violation of a constraint without free variables (checked here, not by Ipopt)."""
        body = float(repn.constant)
        if repn.nonlinear_expr is not None:
            node = self.to_graph(repn.nonlinear_expr)
            if not self.graph.is_const(node):
                raise UsageError(f"constraint {con.name}: cannot evaluate its fixed body")
            body += self.graph.value_of(node)
        low = bound(lb, -math.inf) - body
        high = body - bound(ub, math.inf)
        return max(0.0, low, high)
