"""HiGHS (LP/MILP) through Pyomo's APPSI interface to highspy.

Three phases, as in cvxpy's backends: hand the Pyomo model to HiGHS, solve, map the answer back
(termination through a dict with a default, values without touching the model unless asked).
The result is the contract's :class:`~mel_opt.solvers.base.SolverResult`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mel_opt import deadline
from mel_opt.errors import SolverUnavailableError
from mel_opt.solvers.base import (
    Availability,
    SolutionStatus,
    SolverResult,
    TerminationCondition,
)

__all__ = ["available", "solution_status", "solve_milp", "termination_map", "version"]


def available() -> Availability:
    """Report whether Pyomo's APPSI HiGHS interface and highspy are usable here."""
    try:
        from pyomo.contrib.appsi.solvers.highs import Highs
    except Exception as exc:  # pragma: no cover - depends on the installation
        return Availability(False, f"pyomo APPSI HiGHS interface not importable: {exc}")
    try:
        if not Highs().available():
            return Availability(False, "highspy is not installed")
    except Exception as exc:  # pragma: no cover
        return Availability(False, f"highspy not usable: {exc}")
    return Availability(True)


def version() -> str:
    """HiGHS version, e.g. ``"1.7.2"`` (empty when unavailable)."""
    try:
        from pyomo.contrib.appsi.solvers.highs import Highs

        return ".".join(str(p) for p in Highs().version())
    except Exception:  # pragma: no cover
        return ""


def termination_map() -> dict[Any, TerminationCondition]:
    """APPSI ``TerminationCondition`` -> the contract's; every member is mapped."""
    from pyomo.contrib.appsi.base import TerminationCondition as T

    return {
        T.unknown: TerminationCondition.UNKNOWN,
        T.maxTimeLimit: TerminationCondition.TIME_LIMIT,
        T.maxIterations: TerminationCondition.ITERATION_LIMIT,
        T.objectiveLimit: TerminationCondition.OBJECTIVE_LIMIT,
        T.minStepLength: TerminationCondition.NUMERICAL,
        T.optimal: TerminationCondition.CONVERGED,
        T.unbounded: TerminationCondition.UNBOUNDED,
        T.infeasible: TerminationCondition.INFEASIBLE,
        T.infeasibleOrUnbounded: TerminationCondition.INFEASIBLE,
        T.error: TerminationCondition.ERROR,
        T.interrupted: TerminationCondition.INTERRUPTED,
        T.licensingProblems: TerminationCondition.ERROR,
    }


def solution_status(
    termination: TerminationCondition, has_incumbent: bool, primal_feasible: bool
) -> SolutionStatus:
    """What HiGHS handed back.

    ``has_incumbent``: APPSI returned values (it does so only when HiGHS has valid ones);
    ``primal_feasible``: HiGHS's own verdict on them (within its primal feasibility tolerance).
    """
    if not has_incumbent:
        return SolutionStatus.NONE
    if not primal_feasible:
        return SolutionStatus.INFEASIBLE
    if termination is TerminationCondition.CONVERGED:
        return SolutionStatus.OPTIMAL
    return SolutionStatus.FEASIBLE


def _primal_feasible(opt: Any) -> bool:
    """HiGHS's ``primal_solution_status`` of the last solve is "feasible".

    APPSI exposes no public accessor for it; without the underlying highspy object, APPSI's
    own rule (values only for a valid solution) is taken as the verdict.
    """
    model = getattr(opt, "_solver_model", None)
    if model is None:  # pragma: no cover - other APPSI versions
        return True
    import highspy

    feasible = highspy.SolutionStatus.kSolutionStatusFeasible
    return bool(model.getInfo().primal_solution_status == feasible)


def solve_milp(
    model: Any,
    *,
    time_limit: float | None = None,
    mip_gap: float = 1e-9,
    threads: int | None = 1,
    load_solutions: bool = True,
    options: dict[str, Any] | None = None,
) -> SolverResult:
    """Solve a Pyomo LP/MILP with HiGHS.

    Parameters
    ----------
    model : pyomo ConcreteModel
        Linear objective and constraints; integer and binary variables allowed.
    time_limit : float, optional
        Seconds, within the current deadline of :mod:`mel_opt.deadline` (whichever ends
        first holds); on expiry the incumbent (if any) is returned with ``TIME_LIMIT``. A
        deadline already passed returns ``TIME_LIMIT`` without calling HiGHS.
    mip_gap : float
        Relative MIP gap at which HiGHS stops (default near-exact).
    load_solutions : bool
        Write the incumbent into the model's variables (the only mutation made).
    """
    avail = available()
    if not avail:
        raise SolverUnavailableError(f"HiGHS unavailable: {avail.reason}")
    from pyomo.contrib.appsi.solvers.highs import Highs

    until = deadline.current().within(time_limit)
    if deadline.current().expired():  # the solve in progress has run out
        return SolverResult(termination=TerminationCondition.TIME_LIMIT,
                            solution_status=SolutionStatus.NONE, objective=None,
                            message="time limit reached before HiGHS started")
    opt = Highs()
    opt.config.load_solution = False
    opt.config.stream_solver = False
    if until.time_limit is not None:
        # HiGHS counts from its own start, which comes after the translation below; 5 % of
        # what remains is kept for that translation and for reading the answer back.
        opt.config.time_limit = max(1e-9, 0.95 * until.remaining())
    opt.config.mip_gap = float(mip_gap)
    highs_options = {"mip_rel_gap": float(mip_gap), "output_flag": False}
    if threads is not None:
        highs_options["threads"] = int(threads)
    highs_options.update(options or {})
    opt.highs_options = highs_options
    start = time.perf_counter()
    res = opt.solve(model)
    elapsed = time.perf_counter() - start
    term = termination_map().get(res.termination_condition, TerminationCondition.UNKNOWN)
    objective = res.best_feasible_objective
    bound = res.best_objective_bound
    values: dict[str, float] = {}
    if objective is not None:
        primals = res.solution_loader.get_primals()
        values = {var.name: float(val) for var, val in primals.items()}
        if load_solutions:
            res.solution_loader.load_vars()
    return SolverResult(
        termination=term,
        solution_status=solution_status(term, objective is not None, _primal_feasible(opt)),
        objective=None if objective is None else float(objective),
        bound=None if bound is None else float(bound),
        values=values,
        x=np.array(list(values.values()), dtype=float),
        solve_time_s=elapsed,
        message=str(res.termination_condition.name),
    )
