"""The primal heuristics of med's branch and bound in one process: what finds the incumbent
and improves it.

A starting point (a subproblem cover turned into an assignment, a rounded restricted master
LP, the greedy start) is polished by the local search of ``local``: ``FIRST_SEARCH_CAP`` for
the first searches, ``COVER_SEARCH_CAP`` for each later polish. The iterated local search
then improves the incumbent, up to ``ILS_SHARE`` of the time limit. On one core
:meth:`Primal.before_branching` runs them in turn once the root bound is there (a good
incumbent is what prunes); with a companion the same pieces run in the companion process
(``companion_search``), and the branching polishes or hands over its children's master
roundings (``best_first``).
"""

from __future__ import annotations

import time

import numpy as np

from mel_opt.problems.med.search.bounding import Bounding
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.exchange import Incumbent
from mel_opt.problems.med.search.lagrangian import Lagrangian
from mel_opt.problems.med.search.local import Poll, iterated_local_search, local_search
from mel_opt.problems.med.search.search_clock import SearchClock
from mel_opt.problems.med.search.search_stats import SearchStats
from mel_opt.problems.med.search.types import REL_GAP

__all__ = ["COVER_SEARCH_CAP", "FIRST_SEARCH_CAP", "ILS_PATIENCE", "ILS_PATIENCE_TIMED",
           "ILS_SHARE", "Primal"]

FIRST_SEARCH_CAP = 30.0  # s, the first local search's cap
COVER_SEARCH_CAP = 3.0  # s, the cap of one polish (a subproblem cover or a child's master)
ILS_SHARE = 0.5  # with a time limit: the iterated local search stops at this share of it
ILS_PATIENCE = 30  # kicks in a row without a gain that end the iterated local search (no limit)
ILS_PATIENCE_TIMED = 100  # the same with a time limit (its share of the time ends it first)


class Primal:
    """The primal heuristics of one process, each offering what it finds to the incumbent.

    Records, on one core, the incumbent after each stage and the kicks of the iterated local
    search in ``stats``.

    Parameters
    ----------
    ev : Evaluator
        This process's evaluator (the exact value of an assignment).
    best : Incumbent
        This process's incumbent.
    clock : SearchClock
        The run's clock.
    stats : SearchStats
        The run's statistics.
    bounding : Bounding
        The run's bounds: their columns give the root master's rounding.
    """

    def __init__(self, ev: Evaluator, best: Incumbent, clock: SearchClock, stats: SearchStats,
                 bounding: Bounding) -> None:
        self.ev, self.best, self.clock, self.stats = ev, best, clock, stats
        self.bounding = bounding

    def first_search(self, cand: np.ndarray, poll: Poll | None = None
                     ) -> tuple[np.ndarray, float]:
        """A local search from ``cand`` for at most ``FIRST_SEARCH_CAP`` (``poll``: see
        ``local.local_search``); what it reached and its value (not offered)."""
        return local_search(self.ev, cand,
                            min(self.clock.deadline, time.perf_counter() + FIRST_SEARCH_CAP),
                            poll=poll)

    def polish(self, cand: np.ndarray) -> None:
        """A local search from ``cand`` for at most ``COVER_SEARCH_CAP``, offered."""
        got, val = local_search(self.ev, cand,
                                min(self.clock.deadline, time.perf_counter() + COVER_SEARCH_CAP))
        self.best.offer(val, got)

    def cover_assignment(self, cover: np.ndarray) -> np.ndarray:
        """A subproblem cover turned into an assignment (each learner to the covering task
        where its shards are cheapest in time; an uncovered one unused, or where allowed)."""
        inst, coef = self.ev.inst, self.ev.coef
        n = inst.n_learners
        cand = np.full(n, -1, dtype=np.int64)
        for j in range(n):
            tasks = np.nonzero(cover[:, j])[0]
            if tasks.size:
                cand[j] = int(tasks[np.argmin(coef.C[tasks, j])])
            elif inst.min_shards == 0:
                cand[j] = -1
            else:
                ok = np.nonzero(coef.allowed[:, j])[0]
                cand[j] = int(ok[np.argmin(coef.C[ok, j])]) if ok.size else 0
        return cand

    def improve_from(self, cover: np.ndarray) -> None:
        """Turn a subproblem cover into an assignment and polish it."""
        self.polish(self.cover_assignment(cover))

    def from_root_master(self, lag: Lagrangian) -> None:
        """Round the restricted master LP over the root's columns and search from it (as long
        as the first local search)."""
        cand = self.bounding.root_rounding(lag)
        if cand is None:
            return
        got, val = self.first_search(cand)
        self.stats.incumbent_from_master = val
        self.best.offer(val, got)

    def first_local_search(self, start_assign: np.ndarray) -> None:
        """The local search from the greedy start (at most ``FIRST_SEARCH_CAP``)."""
        assign, value = self.first_search(start_assign)
        self.best.offer(value, assign)

    def fallback_search(self, start_assign: np.ndarray) -> None:
        """The local search from the greedy start when the bound's tables took the time,
        until ``FIRST_SEARCH_CAP`` after the run's start."""
        assign, value = local_search(
            self.ev, start_assign, min(self.clock.deadline, self.clock.start + FIRST_SEARCH_CAP))
        self.best.offer(value, assign)

    def iterate(self, fallback: np.ndarray, root_bound: float) -> None:
        """The iterated local search before branching: a good incumbent is what prunes."""
        start_assign = self.best.assign if self.best.assign is not None else fallback
        got, val, kicks = iterated_local_search(
            self.ev, start_assign, self.best.value,
            min(self.clock.deadline, self.clock.share_end(ILS_SHARE)),
            patience=ILS_PATIENCE if self.clock.time_limit is None else ILS_PATIENCE_TIMED,
            target=root_bound + REL_GAP * max(1.0, abs(root_bound)))
        self.stats.ils_kicks = kicks
        self.best.offer(val, got)

    def before_branching(self, lag: Lagrangian, cover: np.ndarray, start_assign: np.ndarray,
                         root_bound: float) -> None:
        """One core: the primal heuristics before branching, each unless the root bound
        proves the incumbent already (the root master's rounding, the cover's polish, a local
        search from the greedy start, the iterated local search)."""
        best, stats = self.best, self.stats
        if not best.proven_by(root_bound):
            self.from_root_master(lag)
            self.improve_from(cover)
        if best.assign is None or not best.proven_by(root_bound):
            self.first_local_search(start_assign)
        stats.incumbent_after_local_search = best.value
        if not best.proven_by(root_bound):
            self.iterate(start_assign, root_bound)
        stats.incumbent_before_branching = best.value
