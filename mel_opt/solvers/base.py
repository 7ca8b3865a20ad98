"""The contract every solver backend keeps: availability, why it stopped, what came back.

Two axes, as in Pyomo's ``contrib.solver`` and linopy: :class:`TerminationCondition` says why
the solver stopped, :class:`SolutionStatus` what it handed back. A backend maps its native codes
into both through dicts with a default (never an elif chain) and returns one
:class:`SolverResult`. Whether the point returned may be used is decided here, once, by
:func:`usable_point`; ``Status`` in :mod:`mel_opt.result` is the user-facing summary of the pair.

A problem method reports its outcome in one word, :class:`Termination` (``MethodOutput``'s
field): a name for one (condition, solution status) pair, so that methods that call no backend
(exact searches, closed forms, baselines) can say ``OPTIMAL`` or ``FEASIBLE`` directly, and
methods that do call one translate the backend's pair with :func:`method_termination`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Availability",
    "SolutionStatus",
    "SolverResult",
    "Termination",
    "TerminationCondition",
    "method_termination",
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


class TerminationCondition(enum.Enum):
    """Why a solver stopped."""

    CONVERGED = "optimal"  # the solver's optimality criterion holds (global for LP/MILP)
    LOCALLY_OPTIMAL = "locally_optimal"  # KKT point of an NLP (local solver)
    INFEASIBLE = "infeasible"  # proven (or, for a local solver, locally) infeasible
    UNBOUNDED = "unbounded"
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    OBJECTIVE_LIMIT = "objective_limit"  # a user-set objective bound or target was reached
    NUMERICAL = "numerical_difficulties"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    UNKNOWN = "unknown"


class SolutionStatus(enum.Enum):
    """What came back with the termination."""

    OPTIMAL = "optimal"  # a point the solver claims optimal (locally, for a local solver)
    FEASIBLE = "feasible"  # primal feasible within the backend's tolerance, no optimality claim
    INFEASIBLE = "infeasible"  # a point, but it violates a constraint beyond the tolerance
    NONE = "none"  # no point at all


# Stops that are not a convergence: their point counts only when it is primal feasible.
_LIMITS = frozenset(
    {
        TerminationCondition.TIME_LIMIT,
        TerminationCondition.ITERATION_LIMIT,
        TerminationCondition.OBJECTIVE_LIMIT,
        TerminationCondition.INTERRUPTED,
    }
)
_CONVERGED = frozenset({TerminationCondition.CONVERGED, TerminationCondition.LOCALLY_OPTIMAL})
_POINTS = frozenset({SolutionStatus.OPTIMAL, SolutionStatus.FEASIBLE})


def usable_point(termination: TerminationCondition, solution: SolutionStatus) -> bool:
    """The one rule deciding whether a backend's point may be used.

    A converged solve's point is usable whenever there is one (optimal or feasible). A point
    from a limit (time, iterations, objective limit, interruption) is usable if and only if the
    backend reports it primal feasible within its tolerance (``FEASIBLE`` or ``OPTIMAL``). Any
    other stop (infeasible, unbounded, numerical trouble, error, unknown) gives no usable point.
    """
    if solution not in _POINTS:
        return False
    return termination in _CONVERGED or termination in _LIMITS


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
    def gap(self) -> float | None:
        """Relative gap ``|objective - bound| / |objective|`` (None without both)."""
        if self.objective is None or self.bound is None:
            return None
        return abs(self.objective - self.bound) / max(1e-10, abs(self.objective))

    @property
    def outcome(self) -> Termination:
        """The method-level word for this result (:func:`method_termination`)."""
        return method_termination(self.termination, self.solution_status)


class Termination(enum.Enum):
    """A method's outcome in one word: a name for one (condition, solution status) pair.

    :attr:`condition` and :attr:`solution_status` give the pair; ``mel_opt.result`` maps the
    pair to the user-facing ``Status``.
    """

    OPTIMAL = "optimal"  # proven global optimum (MILP/LP, exact algorithms)
    LOCALLY_OPTIMAL = "locally_optimal"  # KKT point of an NLP
    FEASIBLE = "feasible"  # a feasible point, no optimality claim
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    TIME_LIMIT = "time_limit"  # stopped by the time limit without a usable point
    ITERATION_LIMIT = "iteration_limit"  # stopped by the iteration limit without a usable point
    NUMERICAL = "numerical_difficulties"
    ERROR = "error"
    INTERRUPTED = "interrupted"
    UNKNOWN = "unknown"

    @property
    def condition(self) -> TerminationCondition:
        return _PAIR[self][0]

    @property
    def solution_status(self) -> SolutionStatus:
        return _PAIR[self][1]


_TC, _SS = TerminationCondition, SolutionStatus

# The pair each method-level word stands for.
_PAIR: dict[Termination, tuple[TerminationCondition, SolutionStatus]] = {
    Termination.OPTIMAL: (_TC.CONVERGED, _SS.OPTIMAL),
    Termination.LOCALLY_OPTIMAL: (_TC.LOCALLY_OPTIMAL, _SS.OPTIMAL),
    Termination.FEASIBLE: (_TC.CONVERGED, _SS.FEASIBLE),
    Termination.INFEASIBLE: (_TC.INFEASIBLE, _SS.NONE),
    Termination.UNBOUNDED: (_TC.UNBOUNDED, _SS.NONE),
    Termination.TIME_LIMIT: (_TC.TIME_LIMIT, _SS.NONE),
    Termination.ITERATION_LIMIT: (_TC.ITERATION_LIMIT, _SS.NONE),
    Termination.NUMERICAL: (_TC.NUMERICAL, _SS.NONE),
    Termination.ERROR: (_TC.ERROR, _SS.NONE),
    Termination.INTERRUPTED: (_TC.INTERRUPTED, _SS.NONE),
    Termination.UNKNOWN: (_TC.UNKNOWN, _SS.NONE),
}

# A stop without a usable point, by its condition (the objective limit names no method word).
_WITHOUT_POINT: dict[TerminationCondition, Termination] = {
    pair[0]: word for word, pair in _PAIR.items() if pair[1] is _SS.NONE
}

# A usable point: an optimality claim survives only a convergence.
_WITH_POINT: dict[tuple[TerminationCondition, SolutionStatus], Termination] = {
    (_TC.CONVERGED, _SS.OPTIMAL): Termination.OPTIMAL,
    (_TC.LOCALLY_OPTIMAL, _SS.OPTIMAL): Termination.LOCALLY_OPTIMAL,
}


def method_termination(termination: TerminationCondition, solution: SolutionStatus) -> Termination:
    """The method-level word for a backend's pair, after the usable-point rule.

    A usable point is ``OPTIMAL``/``LOCALLY_OPTIMAL`` after a convergence with an optimal
    point and ``FEASIBLE`` otherwise (e.g. a feasible point from a time limit); without a
    usable point the word names why the solver stopped (``TIME_LIMIT``, ``INFEASIBLE``...;
    ``UNKNOWN`` for a convergence that returned nothing usable).
    """
    if usable_point(termination, solution):
        return _WITH_POINT.get((termination, solution), Termination.FEASIBLE)
    if termination in _CONVERGED:
        return Termination.UNKNOWN
    return _WITHOUT_POINT.get(termination, Termination.UNKNOWN)
