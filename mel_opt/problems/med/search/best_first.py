"""The branching of med's branch and bound: nodes taken best bound first, each bounded,
split, cut or closed as a leaf.

Best bound first (ties: deeper first): the global bound at a time limit is the least open
bound, so expanding that node is what raises it. Each node solves the restricted master LP
over the columns it allows (``bounding``); the rules of ``branching`` split it on a task's
level or on a learner, and each child gets its bound from its parent's multipliers. A node is
cut when its bound reaches the incumbent; a node with every learner fixed is a leaf, valued
exactly. Every ``POLISH_EVERY`` nodes the last child's master is rounded and polished (on one
core) or handed to the companion, which also gets each node's master rounded; with a
companion, allocations are exchanged with it before each node.
"""

from __future__ import annotations

import heapq
import itertools
import time

import numpy as np

from mel_opt.problems.med.search import branching, bundle
from mel_opt.problems.med.search.bounding import Bounding
from mel_opt.problems.med.search.companion_search import CompanionHandle
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.exchange import Incumbent
from mel_opt.problems.med.search.lagrangian import Lagrangian, Node
from mel_opt.problems.med.search.primal import Primal
from mel_opt.problems.med.search.search_clock import SearchClock
from mel_opt.problems.med.search.search_stats import SearchStats
from mel_opt.problems.med.search.types import parts_of

__all__ = ["POLISH_EVERY", "BestFirst"]

POLISH_EVERY = 3  # while branching: every this many nodes, polish the last child's master

HeapEntry = tuple[float, int, int, Node, np.ndarray]  # bound, -depth, order, node, cover


class BestFirst:
    """The branching of one run.

    Records the nodes taken from the heap in ``stats``.

    Parameters
    ----------
    ev : Evaluator
        The run's evaluator (a leaf's exact value; its instance and coefficients).
    best : Incumbent
        The run's incumbent: what prunes, and what a leaf improves.
    stats : SearchStats
        The run's statistics.
    clock : SearchClock
        The run's clock.
    bounding : Bounding
        The nodes' masters and the children's bounds.
    primal : Primal
        The polish of the children's masters on one core.
    link : CompanionHandle or None
        The companion, if one runs beside the branching.
    """

    def __init__(self, ev: Evaluator, best: Incumbent, stats: SearchStats, clock: SearchClock,
                 bounding: Bounding, primal: Primal, link: CompanionHandle | None) -> None:
        self.ev, self.best, self.stats, self.clock = ev, best, stats, clock
        self.bounding, self.primal, self.link = bounding, primal, link
        self.inst, self.coef = ev.inst, ev.coef

    def run(self, lag: Lagrangian, root: Node, root_bound: float, cover: np.ndarray
            ) -> tuple[bool, list[float]]:
        """Branch from the root (its bound and cover) until no node is open or the deadline.

        Returns whether the time limit stopped it and the bounds of the nodes still open.
        """
        heap: list[HeapEntry] = []
        counter = itertools.count()
        if not self.best.proven_by(root_bound):
            heapq.heappush(heap, (root_bound, 0, next(counter), root, cover))
        while heap:
            if time.perf_counter() > self.clock.deadline:
                return True, [b for b, *_ in heap]
            self._sync()
            bound, _, _, node, cover = heapq.heappop(heap)
            self.stats.nodes += 1
            if self.best.proven_by(bound):
                continue
            got = self.bounding.node_master(lag, node)
            if self.link is not None and got is not None:  # its rounding, for the companion
                self.link.suggest(bundle.round_scores(lag, got.score))
            kids = [(c, *self.bounding.child(lag, c)) for c in branching.level_split(
                node, got, branching.free_learners(node, self.coef))]
            if not kids:
                kids = self.learner_split(lag, node, cover, got)
            if not kids:  # every learner fixed (or barred everywhere: unused): a leaf
                self._leaf(node)
                continue
            for child, b, cov in kids:
                b = max(b, bound)
                if (self.stats.nodes % POLISH_EVERY == 1
                        and time.perf_counter() < self.clock.deadline):
                    self.polish_master(lag)
                if not self.best.proven_by(b):
                    heapq.heappush(heap, (b, -child.depth, next(counter), child, cov))
        return False, []

    def _sync(self) -> None:
        """The exchange with the companion before a node (nothing without one)."""
        if self.link is not None:
            self.link.sync()

    def _leaf(self, node: Node) -> None:
        """A node with every learner fixed: its allocation, offered if feasible."""
        leaf = node.fixed.copy()
        excess, leaf_value, _ = self.ev.value(parts_of(leaf, self.ev.m))
        if excess == 0:
            self.best.offer(leaf_value, leaf)

    def learner_split(self, lag: Lagrangian, node: Node, cover: np.ndarray,
                      got: bundle.Master | None) -> list[tuple[Node, float, np.ndarray]]:
        """The children of the ``branching.branch_learner`` split with their bounds and
        covers; [] at a leaf."""
        free = branching.free_learners(node, self.coef)
        if not free.any():
            return []
        j, likely = branching.branch_learner(cover, None if got is None else got.score,
                                             self.coef, free)
        kids = branching.learner_split(node, j, likely, self.coef, self.inst.min_shards > 0)
        return [(c, *self.bounding.child(lag, c)) for c in kids]

    def polish_master(self, lag: Lagrangian) -> None:
        """The restricted master LP over the last child's columns, rounded and polished: its
        fixings make the master more integral than the root's, and on the benchmark instances
        these roundings found better allocations than the iterated local search's kicks."""
        cand = self.bounding.child_rounding(lag)
        if cand is None:
            return
        if self.link is not None:  # the companion polishes it; this process branches on
            self.link.suggest(cand)
        else:
            self.primal.polish(cand)
