"""The time of one run of med's branch and bound: when it started, its deadline, and where
the share of the time limit a phase may use ends.

Every phase of the search reads the one :class:`SearchClock` of its run; none keeps a
deadline of its own.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

__all__ = ["SearchClock"]


@dataclass(frozen=True)
class SearchClock:
    """The clock of one run.

    Attributes
    ----------
    start : float
        ``time.perf_counter()`` when the run started [s].
    time_limit : float or None
        The run's time limit [s] (None: none, the search runs to its proof).
    deadline : float
        ``start + time_limit`` (inf without a limit) [s].
    """

    start: float
    time_limit: float | None
    deadline: float

    @classmethod
    def starting_now(cls, time_limit: float | None) -> SearchClock:
        """A clock that starts now and ends ``time_limit`` seconds later (None: never)."""
        start = time.perf_counter()
        return cls(start, time_limit,
                   start + (time_limit if time_limit is not None else math.inf))

    def share_end(self, share: float) -> float:
        """The end of a phase that may use ``share`` of the time limit (deadline if none)."""
        return self.deadline if self.time_limit is None else self.start + share * self.time_limit

    def left(self) -> float:
        """Seconds to the deadline (0 once past)."""
        return max(0.0, self.deadline - time.perf_counter())
