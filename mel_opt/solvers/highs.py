"""HiGHS (LP/MILP): Pyomo models through Pyomo's APPSI interface, array models through highspy.

Three phases, as in cvxpy's backends: hand the model to HiGHS, solve, map the answer back
(termination through a dict with a default, values without touching the model unless asked).
The result is the contract's :class:`~mel_opt.solvers.base.SolverResult`.

:func:`solve_milp` takes a Pyomo model (formulations, ``melopt export``); :func:`solve_arrays`
takes the model as sparse arrays and talks to highspy directly, for methods that must not pay
Pyomo's import (the mel-async ``exact`` second stage).

HiGHS runs its threads in one scheduler per process, sized by the first solve; a later solve
asking for another ``threads`` value stops with an error. Each solve here therefore resets the
scheduler first (no HiGHS solve is running in between in mel_opt's single-threaded use).
"""

from __future__ import annotations

import os
import sys
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

__all__ = [
    "IncrementalLp",
    "available",
    "native_termination_map",
    "solution_status",
    "solve_arrays",
    "solve_milp",
    "termination_map",
    "version",
]


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
        return _no_time("time limit reached before HiGHS started")
    opt = Highs()
    opt.config.load_solution = False
    opt.config.stream_solver = False
    opt.config.mip_gap = float(mip_gap)
    highs_options = {"mip_rel_gap": float(mip_gap), "output_flag": False}
    if threads is not None:
        highs_options["threads"] = int(threads)
    highs_options.update(options or {})
    opt.highs_options = highs_options
    _reset_scheduler()
    start = time.perf_counter()
    # Translate first (a thousand learners of med: about a second of Pyomo work that HiGHS's
    # own clock would not see), then give HiGHS what is left; solve() must not re-scan the
    # model it was just handed.
    opt.set_instance(model)
    for flag in _NO_RESCAN:
        setattr(opt.update_config, flag, False)
    if until.time_limit is not None:
        if until.expired():
            return _no_time("time limit reached while handing the model to HiGHS")
        # 5 % of what remains is kept for reading the answer back.
        opt.config.time_limit = max(1e-3, 0.95 * until.remaining())
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


def _no_time(message: str) -> SolverResult:
    """The limit passed before HiGHS could run: no point."""
    return SolverResult(termination=TerminationCondition.TIME_LIMIT,
                        solution_status=SolutionStatus.NONE, objective=None, message=message)


# APPSI's update checks, off for a solve right after set_instance (nothing changed between).
_NO_RESCAN = (
    "check_for_new_or_removed_constraints",
    "check_for_new_or_removed_vars",
    "check_for_new_or_removed_params",
    "check_for_new_objective",
    "update_constraints",
    "update_vars",
    "update_params",
    "update_named_expressions",
    "update_objective",
)


def _reset_scheduler() -> None:
    """Let this solve size HiGHS's thread pool (module docstring)."""
    import highspy

    highspy.Highs.resetGlobalScheduler(True)


def _quiet_highs() -> Any:
    """A ``highspy.Highs`` with output off. The first one built in a process prints a banner
    straight to file descriptor 1 (not through Python), which would land in the middle of
    ``melopt solve --json``: it goes to /dev/null instead."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    h.setOptionValue("output_flag", False)
    return h


def native_termination_map() -> dict[Any, TerminationCondition]:
    """highspy ``HighsModelStatus`` -> the contract's; every member is mapped."""
    import highspy

    S = highspy.HighsModelStatus
    return {
        S.kNotset: TerminationCondition.UNKNOWN,
        S.kLoadError: TerminationCondition.ERROR,
        S.kModelError: TerminationCondition.ERROR,
        S.kPresolveError: TerminationCondition.ERROR,
        S.kSolveError: TerminationCondition.ERROR,
        S.kPostsolveError: TerminationCondition.ERROR,
        S.kModelEmpty: TerminationCondition.CONVERGED,
        S.kOptimal: TerminationCondition.CONVERGED,
        S.kInfeasible: TerminationCondition.INFEASIBLE,
        S.kUnboundedOrInfeasible: TerminationCondition.INFEASIBLE,
        S.kUnbounded: TerminationCondition.UNBOUNDED,
        S.kObjectiveBound: TerminationCondition.OBJECTIVE_LIMIT,
        S.kObjectiveTarget: TerminationCondition.OBJECTIVE_LIMIT,
        S.kTimeLimit: TerminationCondition.TIME_LIMIT,
        S.kIterationLimit: TerminationCondition.ITERATION_LIMIT,
        S.kUnknown: TerminationCondition.UNKNOWN,
        S.kSolutionLimit: TerminationCondition.ITERATION_LIMIT,
        S.kInterrupt: TerminationCondition.INTERRUPTED,
        S.kHighsInterrupt: TerminationCondition.INTERRUPTED,  # type: ignore[attr-defined]
        S.kMemoryLimit: TerminationCondition.ERROR,
    }


def solve_arrays(
    cost: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    values: np.ndarray,
    row_bounds: tuple[np.ndarray, np.ndarray],
    col_bounds: tuple[np.ndarray, np.ndarray],
    integer: np.ndarray,
    *,
    time_limit: float | None = None,
    mip_gap: float = 1e-9,
    threads: int | None = 1,
) -> SolverResult:
    """Minimise ``cost @ x`` subject to ``row_lo <= A x <= row_hi``, ``col_lo <= x <= col_hi``.

    Parameters
    ----------
    cost : (n,) array
        Objective coefficients (minimised).
    rows, cols, values : arrays of equal length
        The non-zeros of A as triplets (duplicates are summed).
    row_bounds, col_bounds : pairs of arrays
        Lower and upper bounds of the rows (m each) and the columns (n each); +-inf allowed.
    integer : (n,) bool array
        Columns that must take whole values.
    time_limit, mip_gap, threads
        As :func:`solve_milp` (the current deadline of :mod:`mel_opt.deadline` holds too).

    Returns
    -------
    SolverResult
        ``x`` holds the columns' values when HiGHS has a point; ``values`` is empty.
    """
    import highspy

    until = deadline.current().within(time_limit)
    if deadline.current().expired():
        return _no_time("time limit reached before HiGHS started")
    n = int(cost.shape[0])
    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = int(row_bounds[0].shape[0])
    lp.col_cost_ = np.asarray(cost, dtype=float)
    lp.col_lower_ = np.asarray(col_bounds[0], dtype=float)
    lp.col_upper_ = np.asarray(col_bounds[1], dtype=float)
    lp.row_lower_ = np.asarray(row_bounds[0], dtype=float)
    lp.row_upper_ = np.asarray(row_bounds[1], dtype=float)
    order = np.lexsort((rows, cols))  # column-wise storage
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.searchsorted(cols[order], np.arange(n + 1)).astype(np.int32)
    lp.a_matrix_.index_ = np.asarray(rows, dtype=np.int32)[order]
    lp.a_matrix_.value_ = np.asarray(values, dtype=float)[order]
    lp.integrality_ = [highspy.HighsVarType.kInteger if flag else highspy.HighsVarType.kContinuous
                       for flag in integer]
    h = _quiet_highs()
    h.setOptionValue("mip_rel_gap", float(mip_gap))
    if threads is not None:
        h.setOptionValue("threads", int(threads))
    if until.time_limit is not None:
        h.setOptionValue("time_limit", max(1e-9, 0.95 * until.remaining()))
    h.passModel(lp)
    _reset_scheduler()
    start = time.perf_counter()
    h.run()
    return _answer(h, bool(integer.any()), time.perf_counter() - start)


def _answer(h: Any, integer: bool, elapsed: float) -> SolverResult:
    """The answer of ``h``'s last run: its model status through :func:`native_termination_map`
    (unknown codes: ``UNKNOWN``), what came back through :func:`solution_status`.

    Parameters
    ----------
    h : highspy.Highs
        The instance that just ran.
    integer : bool
        The model has integer columns: the bound is HiGHS's MIP dual bound, else the LP's
        objective.
    elapsed : float
        Seconds inside ``run()``.
    """
    import highspy

    status = h.getModelStatus()
    term = native_termination_map().get(status, TerminationCondition.UNKNOWN)
    info = h.getInfo()
    has_point = info.primal_solution_status != highspy.SolutionStatus.kSolutionStatusNone
    feasible = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    x = np.array(h.getSolution().col_value, dtype=float) if has_point else np.zeros(0)
    bound = float(info.mip_dual_bound) if integer else float(info.objective_function_value)
    return SolverResult(
        termination=term,
        solution_status=solution_status(term, has_point, feasible),
        objective=float(info.objective_function_value) if has_point else None,
        bound=bound if np.isfinite(bound) else None,
        x=x,
        solve_time_s=elapsed,
        message=h.modelStatusToString(status),
    )


class IncrementalLp:
    """A linear programme kept in one HiGHS instance and solved again after small changes:
    rows added (:meth:`add_rows`), column bounds moved (:meth:`set_col_bounds`); each
    :meth:`minimise` starts from the last basis, which takes a few pivots where a solve from
    scratch takes many (a cutting-plane model that gains a row per step, say).

    Parameters
    ----------
    cost : (n,) array
        Objective coefficients of the n columns (minimised); the columns start free.
    """

    def __init__(self, cost: np.ndarray) -> None:
        self.n = int(cost.shape[0])
        self._h = _quiet_highs()
        self._h.setOptionValue("threads", 1)
        # highspy's infinity is the float inf (kHighsInf), so +-inf bounds pass as they are
        self._h.addVars(self.n, np.full(self.n, -np.inf), np.full(self.n, np.inf))
        self._h.changeColsCost(self.n, np.arange(self.n, dtype=np.int32),
                               np.asarray(cost, dtype=float))

    def add_rows(self, lower: np.ndarray, upper: np.ndarray, starts: np.ndarray,
                 index: np.ndarray, values: np.ndarray) -> None:
        """Rows lower <= a . x <= upper (+-inf allowed), row k's non-zeros at
        ``index[starts[k]:starts[k + 1]]`` (column) with ``values``."""
        k = int(np.asarray(lower).shape[0])
        if k == 0:
            return
        self._h.addRows(k, np.asarray(lower, dtype=float), np.asarray(upper, dtype=float),
                        int(np.asarray(index).shape[0]), np.asarray(starts, dtype=np.int32),
                        np.asarray(index, dtype=np.int32), np.asarray(values, dtype=float))

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Bounds of the given columns (+-inf allowed)."""
        self._h.changeColsBounds(int(np.asarray(cols).shape[0]),
                                 np.asarray(cols, dtype=np.int32),
                                 np.asarray(lower, dtype=float), np.asarray(upper, dtype=float))

    def minimise(self) -> SolverResult:
        """Solve from the last basis, within the current deadline of :mod:`mel_opt.deadline`.

        Returns
        -------
        SolverResult
            The two axes as :func:`solve_arrays` maps them (one mapping: optimal,
            infeasible, unbounded, a time limit, an error... each its own pair), with ``x``
            (the n columns) and ``objective`` when HiGHS has a point. A deadline already
            passed: ``TIME_LIMIT`` and no point, HiGHS not called. A point that is not n
            finite values (never seen) is reported as ``NUMERICAL`` with no point.
        """
        until = deadline.current()
        if until.expired():
            return _no_time("time limit reached before HiGHS started")
        if until.time_limit is not None:
            self._h.setOptionValue("time_limit", max(1e-9, until.remaining()))
        start = time.perf_counter()
        self._h.run()
        res = _answer(self._h, False, time.perf_counter() - start)
        if res.solution_status is not SolutionStatus.NONE and (
                res.x.shape != (self.n,) or not np.all(np.isfinite(res.x))):
            return SolverResult(TerminationCondition.NUMERICAL, SolutionStatus.NONE, None,
                                solve_time_s=res.solve_time_s,
                                message=f"HiGHS gave {res.x.size} values for {self.n} "
                                        f"columns, not all finite ({res.message})")
        return res
