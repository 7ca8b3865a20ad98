"""HiGHS (LP/MILP) through Pyomo's APPSI interface to highspy.

Three phases, as in cvxpy's backends: hand the Pyomo model to HiGHS, solve, map the answer back
(termination through a dict with a default, values without touching the model unless asked).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from mel_opt.errors import SolverUnavailableError
from mel_opt.solvers.base import Termination


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


def available() -> Availability:
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
    try:
        from pyomo.contrib.appsi.solvers.highs import Highs

        return ".".join(str(p) for p in Highs().version())
    except Exception:  # pragma: no cover
        return ""


@dataclass(frozen=True)
class MILPResult:
    """Outcome of a HiGHS solve.

    ``objective`` is the best feasible objective (None without an incumbent), ``bound`` the
    proven dual bound; ``gap`` the relative gap between them (0 when proven optimal).
    """

    termination: Termination
    objective: float | None
    bound: float | None
    values: dict[str, float] = field(default_factory=dict)
    solve_time_s: float = 0.0
    message: str = ""

    @property
    def has_solution(self) -> bool:
        return self.objective is not None

    @property
    def gap(self) -> float | None:
        if self.objective is None or self.bound is None:
            return None
        return abs(self.objective - self.bound) / max(1e-10, abs(self.objective))


def _termination_map() -> dict[Any, Termination]:
    from pyomo.contrib.appsi.base import TerminationCondition as T

    return {
        T.optimal: Termination.OPTIMAL,
        T.infeasible: Termination.INFEASIBLE,
        T.infeasibleOrUnbounded: Termination.INFEASIBLE,
        T.unbounded: Termination.UNBOUNDED,
        T.maxTimeLimit: Termination.TIME_LIMIT,
        T.maxIterations: Termination.ITERATION_LIMIT,
        T.objectiveLimit: Termination.FEASIBLE,
        T.interrupted: Termination.TIME_LIMIT,
        T.error: Termination.ERROR,
    }


def solve_milp(
    model: Any,
    *,
    time_limit: float | None = None,
    mip_gap: float = 1e-9,
    threads: int | None = 1,
    load_solutions: bool = True,
    options: dict[str, Any] | None = None,
) -> MILPResult:
    """Solve a Pyomo LP/MILP with HiGHS.

    Parameters
    ----------
    model : pyomo ConcreteModel
        Linear objective and constraints; integer and binary variables allowed.
    time_limit : float, optional
        Seconds; on expiry the incumbent (if any) is returned with ``TIME_LIMIT``.
    mip_gap : float
        Relative MIP gap at which HiGHS stops (default near-exact).
    load_solutions : bool
        Write the incumbent into the model's variables (the only mutation made).
    """
    avail = available()
    if not avail:
        raise SolverUnavailableError(f"HiGHS unavailable: {avail.reason}")
    from pyomo.contrib.appsi.solvers.highs import Highs

    opt = Highs()
    opt.config.load_solution = False
    opt.config.stream_solver = False
    if time_limit is not None:
        opt.config.time_limit = float(time_limit)
    opt.config.mip_gap = float(mip_gap)
    highs_options = {"mip_rel_gap": float(mip_gap), "output_flag": False}
    if threads is not None:
        highs_options["threads"] = int(threads)
    highs_options.update(options or {})
    opt.highs_options = highs_options
    start = time.perf_counter()
    res = opt.solve(model)
    elapsed = time.perf_counter() - start
    term = _termination_map().get(res.termination_condition, Termination.UNKNOWN)
    objective = res.best_feasible_objective
    bound = res.best_objective_bound
    values: dict[str, float] = {}
    if objective is not None:
        primals = res.solution_loader.get_primals()
        values = {var.name: float(val) for var, val in primals.items()}
        if load_solutions:
            res.solution_loader.load_vars()
        if term in (Termination.UNKNOWN, Termination.ERROR):
            term = Termination.FEASIBLE
    return MILPResult(
        termination=term,
        objective=None if objective is None else float(objective),
        bound=None if bound is None else float(bound),
        values=values,
        solve_time_s=elapsed,
        message=str(res.termination_condition.name),
    )
