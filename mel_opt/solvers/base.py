"""The contract every solver backend keeps: availability, why it stopped, what came back.

A backend maps its native codes into the two axes of :mod:`mel_opt.status`
(:class:`TerminationCondition`: why the solver stopped; :class:`SolutionStatus`: what it handed
back) through dicts with a default (never an elif chain) and returns one
:class:`SolverResult`. Whether its point may be used is :func:`usable_point`'s decision, and
methods pass the pair on unchanged when they keep the backend's answer; the user-facing status
is derived from the pair in :mod:`mel_opt.status` alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mel_opt.status import SolutionStatus, TerminationCondition, usable_point

__all__ = [
    "Availability",
    "SolutionStatus",
    "SolverResult",
    "TerminationCondition",
    "usable_point",
]


@dataclass(frozen=True)
class Availability:
    """Whether a backend can be used here; truthy only when it can.

    Attributes
    ----------
    ok : bool
        True when the backend imports (and, where checked, solved a probe problem).
    reason : str
        Why not, when ``ok`` is False (empty otherwise).
    """

    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class SolverResult:
    """Outcome of one backend solve (HiGHS or IPOPT), in the same form for both.

    Attributes
    ----------
    termination : TerminationCondition
        Why the solver stopped (native code mapped through the backend's dict).
    solution_status : SolutionStatus
        What came back: an optimal, feasible or infeasible point, or none.
    objective : float or None
        Objective of the returned point in the model's own sense; None without a point (or
        where it cannot be evaluated).
    bound : float or None
        Proven bound on the optimum (dual bound of a MILP); None when the backend proves none
        (IPOPT, a local solver).
    values : dict of str to float
        Value of each variable, keyed by its Pyomo name (e.g. ``"d[3]"``); empty without a point.
    x : numpy.ndarray
        The same values as an array in the backend's variable order (empty without a point).
    solve_time_s : float
        Wall time inside the solver, seconds.
    iterations : int
        Solver iterations (IPOPT iterations; simplex iterations or 0 for HiGHS).
    message : str
        The backend's native status name and text.
    constraint_violation : float
        Largest absolute constraint or bound violation of ``x`` as the backend measured it;
        NaN when not measured or not computable.
    multipliers : dict of str to float
        Constraint multipliers by constraint name, when the backend reports them (IPOPT).
    build_time_s : float
        Seconds spent translating the model before the solver started.
    """

    termination: TerminationCondition
    solution_status: SolutionStatus
    objective: float | None
    bound: float | None = None
    values: dict[str, float] = field(default_factory=dict)
    x: np.ndarray = field(default_factory=lambda: np.zeros(0))
    solve_time_s: float = 0.0
    iterations: int = 0
    message: str = ""
    constraint_violation: float = math.nan
    multipliers: dict[str, float] = field(default_factory=dict)
    build_time_s: float = 0.0

    @property
    def has_solution(self) -> bool:
        """True when a point came back with an objective value (usable or not)."""
        return self.objective is not None and self.solution_status is not SolutionStatus.NONE

    @property
    def is_usable(self) -> bool:
        """True when the point may be used (:func:`usable_point`)."""
        return usable_point(self.termination, self.solution_status)

    @property
    def is_optimal(self) -> bool:
        """True when the solver converged and claims its point optimal (a global optimum for
        HiGHS, a local one for IPOPT's ``LOCALLY_OPTIMAL``, which this excludes)."""
        return (self.termination is TerminationCondition.CONVERGED
                and self.solution_status is SolutionStatus.OPTIMAL)

    @property
    def gap(self) -> float | None:
        """Relative gap ``|objective - bound| / |objective|`` (None without both)."""
        if self.objective is None or self.bound is None:
            return None
        return abs(self.objective - self.bound) / max(1e-10, abs(self.objective))
