"""The search around med's companion process, on both sides: what the companion searches
beside the branching, and the parent's handle on it.

The process and its mailboxes are ``companion``; what each side sends and what it keeps of
what it receives are ``exchange``. This module is what each side does with them:

- :class:`CompanionSearch`, in the companion: the local search from the greedy start, which
  between learners polishes the root's starting points once the parent hands them over, then
  rounds of iterated local search from the best allocation either process knows; every
  improvement is published to the parent at once.
- :class:`CompanionHandle`, in the parent: forks the companion, takes its allocations before
  each node (counted when they improve the incumbent), hands it the root's starting points and
  each node's rounded master, and stops it when branching ends.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from mel_opt.problems.med.search import companion
from mel_opt.problems.med.search.exchange import Exchange, Mailboxes
from mel_opt.problems.med.search.local import iterated_local_search
from mel_opt.problems.med.search.primal import ILS_PATIENCE_TIMED, Primal
from mel_opt.problems.med.search.search_stats import SearchStats
from mel_opt.problems.med.search.types import REL_GAP, better

__all__ = ["CompanionHandle", "CompanionSearch"]


class CompanionSearch:
    """The companion process's search (a copy of the parent's primal heuristics, forked before
    the root bound or right after it).

    Parameters
    ----------
    primal : Primal
        The companion's copy of the primal heuristics (its evaluator, incumbent and clock).
    """

    def __init__(self, primal: Primal) -> None:
        self.primal = primal

    def take_root(self, exchange: Exchange) -> float | None:
        """Polish the root's starting points if the parent has handed them over (the master's
        rounding as long as the first local search, the cover's as one polish); the root
        bound, or None before the hand-over."""
        got = exchange.root()
        if got is None:
            return None
        primal = self.primal
        bound, starts = got
        for k, cand in enumerate(starts):
            if time.perf_counter() >= primal.clock.deadline:
                break
            if k == 0 and len(starts) == 2:  # the master's rounding
                found, val = primal.first_search(cand)
                primal.best.offer(val, found)
            else:
                primal.polish(cand)
        return bound

    def run(self, box: Mailboxes, start_assign: np.ndarray, floor: float) -> None:
        """The companion's body: the local search from the greedy start, which between
        learners polishes the root's starting points as soon as the parent hands them over
        (:meth:`CompanionHandle.hand_root`; the descent from the greedy start ends once they
        did better), then rounds of iterated local search, each from the best allocation
        either process knows, until the deadline or the bound (``floor``, the tasks' least
        levels, until the root bound arrives); every improvement is published to the
        parent."""
        primal = self.primal
        best, deadline = primal.best, primal.clock.deadline
        exchange = Exchange(box, best, primal.ev)
        exchange.listen()
        bound: list[float] = [floor]

        def take_root() -> bool:
            got = self.take_root(exchange)
            if got is not None:
                bound[0] = max(bound[0], got)
            return got is not None

        rooted = take_root()

        def poll(value: float) -> bool:  # between learners of the descent from greedy
            nonlocal rooted
            rooted = take_root() or rooted
            # the root's points did better: the iterated search goes on from them
            return rooted and better(best.value, value)

        assign, value = primal.first_search(start_assign, poll=poll)
        best.offer(value, assign)

        def between(found: np.ndarray, value: float) -> tuple[np.ndarray, float] | None:
            best.offer(value, found)  # published at once, not at the round's end
            take_root()
            start = exchange.pull()
            if start is not None:
                primal.polish(start)
            if best.assign is None or not better(best.value, value):
                return None
            return best.assign, best.value

        for seed in itertools.count():
            take_root()
            target = bound[0] + REL_GAP * max(1.0, abs(bound[0]))
            if time.perf_counter() >= deadline or best.value <= target:
                break
            begin = best.assign if best.assign is not None else start_assign
            got, val, _ = iterated_local_search(
                primal.ev, begin, best.value, deadline, patience=ILS_PATIENCE_TIMED,
                target=target, seed=seed, between=between)
            best.offer(val, got)


class CompanionHandle:
    """The parent's side of a running companion.

    Records that a companion ran and how many of its allocations improved the incumbent in
    ``stats``.

    Parameters
    ----------
    box : companion.Companion
        The forked process and its mailboxes.
    exchange : Exchange
        The parent's side of the incumbent exchange over ``box``.
    stats : SearchStats
        The run's statistics.
    """

    def __init__(self, box: companion.Companion, exchange: Exchange, stats: SearchStats
                 ) -> None:
        self.box, self.exchange, self.stats = box, exchange, stats

    @classmethod
    def start(cls, primal: Primal, stats: SearchStats, start_assign: np.ndarray, floor: float
              ) -> CompanionHandle:
        """Fork the companion (:meth:`CompanionSearch.run` on a copy of ``primal``) and open
        the parent's exchange."""
        box = companion.Companion(primal.ev.inst.n_learners)
        exchange = Exchange(box, primal.best, primal.ev)
        box.start(lambda b: CompanionSearch(primal).run(b, start_assign, floor))
        stats.companion = True
        return cls(box, exchange, stats)

    def sync(self) -> None:
        """Take the companion's latest allocation, send it ours (``Exchange.sync``)."""
        if self.exchange.sync():
            self.stats.companion_allocations += 1

    def suggest(self, assign: np.ndarray) -> None:
        """A starting point (not valued) for the companion to polish."""
        self.exchange.suggest(assign)

    def hand_root(self, bound: float, rounding: np.ndarray | None, cover: np.ndarray) -> None:
        """The root bound and its starting points (the root master's rounding, the root's
        cover as an assignment), for the companion to polish first."""
        self.exchange.hand_root(bound, rounding, cover)

    def stop(self) -> None:
        """End and reap the companion, then take what it published last (it survives in the
        mailbox)."""
        self.box.stop()
        self.sync()
