"""Statuses shared by every backend: why the solver stopped, and what came back.

Two axes, as in Pyomo's contrib.solver and linopy: a backend maps its native codes into
``Termination`` through a dict with a default, never an elif chain. ``Status`` in
:mod:`mel_opt.result` is the single user-facing summary derived from both.
"""

from __future__ import annotations

import enum


class Termination(enum.Enum):
    """Why a solver stopped."""

    OPTIMAL = "optimal"  # proven global optimum (MILP/LP, exact algorithms)
    LOCALLY_OPTIMAL = "locally_optimal"  # KKT point of an NLP
    FEASIBLE = "feasible"  # stopped with a feasible point, no optimality claim
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    NUMERICAL = "numerical_difficulties"
    ERROR = "error"
    UNKNOWN = "unknown"
