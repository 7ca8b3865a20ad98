"""The compiled NLP: a Pyomo model as vectorised numpy callbacks with fixed sparsity patterns.

:func:`compile_nlp` reads the model (:mod:`mel_opt.nlp.pyomo_reader`), splits every function
into constant, linear, quadratic and nonlinear parts (:mod:`mel_opt.nlp.blocks`), groups
nonlinear terms into vectorised shapes (:mod:`mel_opt.nlp.terms`) and generates their code
(:mod:`mel_opt.nlp.codegen`) from symbolic derivatives (:mod:`mel_opt.nlp.graph`). The sparsity
patterns of the constraint Jacobian and of the lower triangle of the Lagrangian Hessian are
fixed at build time; callbacks only fill value arrays.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.nlp.blocks import Block, Rows
from mel_opt.nlp.graph import Graph, NLPEvaluationError
from mel_opt.nlp.pyomo_reader import ModelRepn, RowReader, bound, read_model

__all__ = ["CompiledNLP", "NLPEvaluationError", "compile_nlp"]

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
        obj_block: Block,
        con_block: Block,
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
    start = time.perf_counter()
    parts = read_model(model)
    variables = parts.variables
    n = len(variables)
    graph = Graph()
    reader = RowReader(graph, variables)

    obj_rows = Rows()
    objective = parts.objective
    reader.add_row(
        obj_rows, 0, parts.objective_repn, float(parts.sense), f"objective {objective.name}"
    )
    con_rows, kept, g_lb, g_ub, constant_constraints = _constraint_rows(parts, reader)
    x_lb = np.array([bound(v.lb, -math.inf) for v in variables], dtype=float)
    x_ub = np.array([bound(v.ub, math.inf) for v in variables], dtype=float)

    nlp = CompiledNLP(
        variables=variables,
        constraints=kept,
        x_lb=x_lb,
        x_ub=x_ub,
        g_lb=g_lb,
        g_ub=g_ub,
        x0=_start_point(variables, x_lb, x_ub),
        sense=parts.sense,
        obj_block=Block(obj_rows, n, graph, "objective"),
        con_block=Block(con_rows, n, graph, "constraints"),
        constant_constraints=constant_constraints,
        with_hessian=hessian,
    )
    nlp.build_time_s = time.perf_counter() - start
    return nlp


def _constraint_rows(
    parts: ModelRepn, reader: RowReader
) -> tuple[Rows, list[Any], np.ndarray, np.ndarray, list[tuple[str, float]]]:
    """Rows of the constraints with free variables, their bounds, and the constant ones.

    Returns ``(rows, kept, g_lb, g_ub, constant_constraints)``: the body's constant is moved
    to the bound side, so ``g(x)`` of each kept row has none.
    """
    rows = Rows()
    kept: list[Any] = []
    g_lb: list[float] = []
    g_ub: list[float] = []
    constant_constraints: list[tuple[str, float]] = []
    for con, repn, lb, ub in parts.constraints:
        if repn.is_fixed():
            # No free variable: check it here rather than hand Ipopt an empty Jacobian row.
            constant_constraints.append((con.name, reader.constant_violation(con, repn, lb, ub)))
            continue
        r = len(kept)
        kept.append(con)
        reader.add_row(rows, r, repn, 1.0, f"constraint {con.name}")
        const = rows.constant[-1]
        rows.constant[-1] = 0.0
        g_lb.append(bound(lb, -math.inf) - const)
        g_ub.append(bound(ub, math.inf) - const)
    return (
        rows,
        kept,
        np.array(g_lb, dtype=float),
        np.array(g_ub, dtype=float),
        constant_constraints,
    )


def _start_point(variables: list[Any], x_lb: np.ndarray, x_ub: np.ndarray) -> np.ndarray:
    """Current values; a variable without value starts at 0 projected into its bounds."""
    x0 = np.array([0.0 if v.value is None else float(v.value) for v in variables])
    unset = np.array([v.value is None for v in variables], dtype=bool)
    if x0.size:
        # Only unset values are projected: Ipopt itself pushes given values into the interior.
        x0[unset] = np.clip(0.0, x_lb[unset], x_ub[unset])
    return x0
