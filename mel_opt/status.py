"""Why a solve stopped, what came back, and the one user-facing status derived from both.

Two axes, as in Pyomo's ``contrib.solver`` and linopy, travel from the backend (HiGHS, IPOPT)
or from a method of mel_opt's own (an exact search, a closed form, a baseline) all the way to
the :class:`~mel_opt.result.Result`:

- :class:`TerminationCondition`: why the solve stopped (converged, a limit, infeasible...);
- :class:`SolutionStatus`: what came back (an optimal point, a feasible one, an infeasible
  one, none).

Everything else is derived, here and nowhere else: :func:`usable_point` decides whether a
point may be used, :meth:`Status.of` gives the ``status`` word of the result JSON, and
:attr:`Status.exit_code` the command line's exit code.
"""

from __future__ import annotations

import enum

__all__ = ["SolutionStatus", "Status", "TerminationCondition", "usable_point"]


class TerminationCondition(enum.Enum):
    """Why a solve stopped."""

    CONVERGED = "optimal"  # the optimality criterion holds (global for LP/MILP, exact methods)
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

    OPTIMAL = "optimal"  # a point claimed optimal (locally, for a local solver)
    FEASIBLE = "feasible"  # primal feasible within the tolerance, no optimality claim
    INFEASIBLE = "infeasible"  # a point, but it violates a constraint beyond the tolerance
    NONE = "none"  # no point at all


# Stops that are not a convergence: their point counts only when it is primal feasible.
_LIMITS = frozenset({
    TerminationCondition.TIME_LIMIT,
    TerminationCondition.ITERATION_LIMIT,
    TerminationCondition.OBJECTIVE_LIMIT,
    TerminationCondition.INTERRUPTED,
})
_CONVERGED = frozenset({TerminationCondition.CONVERGED, TerminationCondition.LOCALLY_OPTIMAL})
_POINTS = frozenset({SolutionStatus.OPTIMAL, SolutionStatus.FEASIBLE})


def usable_point(termination: TerminationCondition, solution: SolutionStatus) -> bool:
    """The one rule deciding whether a returned point may be used.

    A converged solve's point is usable whenever there is one (optimal or feasible). A point
    from a limit (time, iterations, objective limit, interruption) is usable if and only if it
    is primal feasible within the tolerance (``FEASIBLE`` or ``OPTIMAL``). Any other stop
    (infeasible, unbounded, numerical trouble, error, unknown) gives no usable point.
    """
    if solution not in _POINTS:
        return False
    return termination in _CONVERGED or termination in _LIMITS


class Status(enum.Enum):
    """User-facing status of a result (the ``status`` field of the result JSON).

    Never stored on its own: :meth:`of` derives it from the two axes.
    """

    OPTIMAL = "optimal"
    LOCALLY_OPTIMAL = "locally_optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    ERROR = "error"

    @classmethod
    def of(cls, termination: TerminationCondition, solution: SolutionStatus) -> Status:
        """The status of a (termination condition, solution status) pair.

        With a usable point (:func:`usable_point`): ``optimal`` or ``locally_optimal`` when
        the solve converged and claims its point optimal, ``feasible`` otherwise (a heuristic's
        answer, a feasible point from a limit). Without one, the reason it stopped when that
        is infeasibility or a limit, ``error`` for anything else (unbounded, numerical
        trouble, a crash, an unknown stop, or an answer that failed verification).
        """
        if usable_point(termination, solution):
            if solution is SolutionStatus.OPTIMAL and termination is TerminationCondition.CONVERGED:
                return cls.OPTIMAL
            if solution is SolutionStatus.OPTIMAL and termination in _CONVERGED:
                return cls.LOCALLY_OPTIMAL
            return cls.FEASIBLE
        if termination is TerminationCondition.INFEASIBLE:
            return cls.INFEASIBLE
        if termination is TerminationCondition.TIME_LIMIT:
            return cls.TIME_LIMIT
        if termination is TerminationCondition.ITERATION_LIMIT:
            return cls.ITERATION_LIMIT
        return cls.ERROR

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.LOCALLY_OPTIMAL, Status.FEASIBLE)

    @property
    def exit_code(self) -> int:
        """0 when an answer came back, 1 otherwise (bad input, 2, is an exception's)."""
        return 0 if self.has_solution else 1
