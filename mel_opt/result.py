"""The one result type of every method (numerical, analytical, exact, baseline).

A :class:`Result` serialises to the result JSON of the design brief::

    {"instance", "problem", "method", "status", "objective", "solution", "metrics",
     "verification": {"feasible", "max_violation", ...}, "solve_time_s",
     "solver": {"name", "version"}}
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt.solvers.base import (
    SolutionStatus,
    Termination,
    TerminationCondition,
    usable_point,
)


class Status(enum.Enum):
    """User-facing status of a result (the ``status`` field of the result JSON)."""

    OPTIMAL = "optimal"
    LOCALLY_OPTIMAL = "locally_optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.LOCALLY_OPTIMAL, Status.FEASIBLE)

    @property
    def exit_code(self) -> int:
        """0 when an answer came back, 1 otherwise (design brief, "Command line").

        The one place exit codes of results come from (bad input, 2, is an exception's).
        """
        return 0 if self.has_solution else 1


_TC, _SS = TerminationCondition, SolutionStatus

# (why the solver stopped, what came back) -> Status; dict with a default (``error``), not elif.
# The solution status is first reduced to NONE when the point is not usable, so the rule of
# solvers.base decides alone which pairs carry a solution.
_STATUS: dict[tuple[TerminationCondition, SolutionStatus], Status] = {
    (_TC.CONVERGED, _SS.OPTIMAL): Status.OPTIMAL,
    (_TC.CONVERGED, _SS.FEASIBLE): Status.FEASIBLE,
    (_TC.LOCALLY_OPTIMAL, _SS.OPTIMAL): Status.LOCALLY_OPTIMAL,
    (_TC.LOCALLY_OPTIMAL, _SS.FEASIBLE): Status.FEASIBLE,
    # A limit's feasible point is an answer without an optimality claim.
    (_TC.TIME_LIMIT, _SS.OPTIMAL): Status.FEASIBLE,
    (_TC.TIME_LIMIT, _SS.FEASIBLE): Status.FEASIBLE,
    (_TC.ITERATION_LIMIT, _SS.OPTIMAL): Status.FEASIBLE,
    (_TC.ITERATION_LIMIT, _SS.FEASIBLE): Status.FEASIBLE,
    (_TC.OBJECTIVE_LIMIT, _SS.OPTIMAL): Status.FEASIBLE,
    (_TC.OBJECTIVE_LIMIT, _SS.FEASIBLE): Status.FEASIBLE,
    (_TC.INTERRUPTED, _SS.OPTIMAL): Status.FEASIBLE,
    (_TC.INTERRUPTED, _SS.FEASIBLE): Status.FEASIBLE,
    # No usable point.
    (_TC.INFEASIBLE, _SS.NONE): Status.INFEASIBLE,
    (_TC.TIME_LIMIT, _SS.NONE): Status.TIME_LIMIT,
    (_TC.ITERATION_LIMIT, _SS.NONE): Status.ITERATION_LIMIT,
}


def status_of(termination: TerminationCondition, solution: SolutionStatus) -> Status:
    """Map a (termination condition, solution status) pair to the user-facing status."""
    if not usable_point(termination, solution):
        solution = SolutionStatus.NONE
    return _STATUS.get((termination, solution), Status.ERROR)


def status_from_termination(term: Termination) -> Status:
    """Map a method's outcome (:class:`~mel_opt.solvers.base.Termination`) to its status."""
    return status_of(term.condition, term.solution_status)


@dataclass(frozen=True)
class Verification:
    """Outcome of the independent re-check of a solution against its instance.

    ``max_violation`` is the largest violation of any hard constraint, in the constraint's own
    units relative to its scale (0 for a feasible integer answer). ``checks`` names each check
    with its violation so a reader can see what was looked at.
    """

    feasible: bool
    max_violation: float
    checks: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "feasible": self.feasible,
            "max_violation": self.max_violation,
            "checks": dict(self.checks),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class SolverInfo:
    name: str
    version: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version}


@dataclass(frozen=True)
class Result:
    """Answer of one method on one instance, verified independently.

    Attributes
    ----------
    instance : str
        Instance name (file stem or ``name`` field).
    problem, method : str
        Problem and method identifiers (``mel-async``, ``exact``...).
    status : Status
    objective : float | None
        Objective value of ``solution`` as recomputed by the verifier (None without a solution).
    solution : dict
        Decision values in the keys of the design brief (``d``, ``tau``...), plain lists.
    metrics : dict
        Problem metrics recomputed from the solution, plus method extras (prefixed by nothing;
        method-reported extras never overwrite a recomputed metric).
    verification : Verification | None
    solve_time_s : float
        Wall time of the method alone (loading and verification excluded).
    solver : SolverInfo
    message : str
        Short human note (why infeasible, which tie-break was used...).
    """

    instance: str
    problem: str
    method: str
    status: Status
    objective: float | None
    solution: dict[str, Any]
    metrics: dict[str, Any]
    verification: Verification | None
    solve_time_s: float
    solver: SolverInfo
    message: str = ""

    @property
    def exit_code(self) -> int:
        """Exit code of the command line: the status's, or ``error``'s when the verifier
        rejected the answer."""
        rejected = self.verification is not None and not self.verification.feasible
        return (Status.ERROR if rejected else self.status).exit_code

    @property
    def ok(self) -> bool:
        """True when a solution came back and it passed verification."""
        return (
            self.status.has_solution
            and self.verification is not None
            and self.verification.feasible
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "problem": self.problem,
            "method": self.method,
            "status": self.status.value,
            "objective": _plain(self.objective),
            "solution": _plain(self.solution),
            "metrics": _plain(self.metrics),
            "verification": (
                None if self.verification is None else _plain(self.verification.to_dict())
            ),
            "solve_time_s": self.solve_time_s,
            "solver": self.solver.to_dict(),
            "message": self.message,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def __repr__(self) -> str:  # readable, as linopy's Result
        obj = "-" if self.objective is None else f"{self.objective:.6g}"
        ver = "unverified" if self.verification is None else (
            "verified" if self.verification.feasible else "VERIFICATION FAILED"
        )
        return (
            f"Result({self.problem}/{self.method} on {self.instance!r}: {self.status.value}, "
            f"objective {obj}, {ver}, {self.solve_time_s:.3g} s)"
        )


def _plain(value: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into JSON-safe Python values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value
