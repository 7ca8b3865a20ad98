"""What every part of med's search shares: the tolerance, the outcome and two small helpers.

This module imports nothing else of the search, so every search module may import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt.status import TerminationCondition

TOL = 1e-9  # relative slack on deadlines, budgets and "strictly better" (round-off only)
REL_GAP = 1e-6  # a bound within this relative distance of the incumbent proves it


@dataclass
class SearchOutcome:
    """What med's exact search found (the type programme's or the branch and bound's answer,
    which ``methods.solve_exact`` turns into a ``MethodOutput``).

    ``objective`` is the sum of the tasks' levels of the returned allocation [s]; ``bound`` a
    proven lower bound on the optimum [s] (equal to ``objective`` when optimal).
    """

    termination: TerminationCondition
    assignment: np.ndarray | None = None
    d: np.ndarray | None = None
    objective: float | None = None
    bound: float | None = None
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


def better(value: float, than: float) -> bool:
    """value beats than by more than the relative tolerance (anything finite beats inf)."""
    if not math.isfinite(than):
        return math.isfinite(value)
    return value < than - TOL * max(1.0, abs(than))


def parts_of(assign: np.ndarray, m: int) -> list[tuple[int, ...]]:
    """The learners of each of the ``m`` tasks (ascending tuples) from a task-per-learner array
    (-1: unused)."""
    return [tuple(int(j) for j in np.nonzero(assign == i)[0]) for i in range(m)]
