"""The lower bounds of med's branch and bound: the root's, each child's, and the restricted
master LP the branching reads.

The root bound is a short subgradient warm start of the Lagrangian relaxation
(``lagrangian``), then the box-step bundle method (``bundle``) until its certificate at the
dual optimum, ``ROOT_ITERS`` steps or ``ROOT_SHARE`` of the time limit. A child runs the same
bundle method (at most ``CHILD_ITERS`` steps) from its parent's multipliers, its model of the
dual function warm from every column seen so far that the child's subproblems can still
answer. :class:`Bounding` keeps that pool of columns; the restricted master LP over the
columns a node allows, and its rounding to an assignment, come from the same pool.

Before any of it, :func:`floor_levels` gives each task's least level, whose sum is the trivial
bound (the answer's bound when the Lagrangian tables run out of time).
"""

from __future__ import annotations

import math

import numpy as np

from mel_opt.problems.med import split
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import Coefficients
from mel_opt.problems.med.search import bundle
from mel_opt.problems.med.search.exchange import Incumbent
from mel_opt.problems.med.search.lagrangian import Lagrangian, Node
from mel_opt.problems.med.search.search_clock import SearchClock
from mel_opt.problems.med.search.search_stats import SearchStats
from mel_opt.problems.med.search.types import TOL

__all__ = ["CHILD_ITERS", "ROOT_ITERS", "ROOT_SHARE", "ROOT_WARM_ITERS", "Bounding",
           "floor_levels"]

ROOT_SHARE = 0.35  # with a time limit: the root bound stops at this share of it
CHILD_ITERS = 40  # bundle steps per child node (from the parent's multipliers and columns)
ROOT_WARM_ITERS = 30  # subgradient steps at the root before the bundle method
ROOT_ITERS = 300  # bundle steps at the root


def floor_levels(inst: MedInstance, coef: Coefficients) -> np.ndarray:
    """Per task, the least level any subset of the learners reaches within the deadline [s]."""
    return np.array([split.best_case_level(coef.A[i], coef.C[i], coef.L, int(inst.shards[i]),
                                           float(inst.deadline[i]) * (1 + TOL))
                     for i in range(inst.n_tasks)])


class Bounding:
    """The bounds of one run and the columns behind them.

    Records the root's ascent and every ascent the box LP ended in ``stats``.

    Parameters
    ----------
    clock : SearchClock
        The run's clock (the root's share of the time, the deadline, the master's time).
    best : Incumbent
        The run's incumbent: a child's bundle method stops once its bound reaches it.
    stats : SearchStats
        The run's statistics.
    """

    def __init__(self, clock: SearchClock, best: Incumbent, stats: SearchStats) -> None:
        self.clock, self.best, self.stats = clock, best, stats
        self.columns = bundle.Columns()  # every column seen so far
        self.child_columns = self.columns  # those of the last child bounded

    def root(self, lag: Lagrangian, root: Node, upper: float) -> tuple[float, np.ndarray]:
        """The root bound: a short subgradient warm start, then the box-step bundle method
        (``bundle``) until its certificate, the root's share of the time or ``ROOT_ITERS``."""
        end = min(self.clock.deadline, self.clock.share_end(ROOT_SHARE))
        warm, cover = lag.optimise(root, upper, ROOT_WARM_ITERS, end)
        if not math.isfinite(warm):
            return warm, cover
        got = bundle.ascend(lag, root, upper, ROOT_ITERS, end, self.columns)
        self.stats.root_ascent = got
        self.stats.note_ascent(got)
        return (got.bound, got.cover) if got.bound >= warm else (warm, cover)

    def child(self, lag: Lagrangian, child: Node) -> tuple[float, np.ndarray]:
        """A child's bound: the box-step bundle method from its parent's multipliers, its
        model of the dual function warm from the columns seen so far that the child's
        subproblems can still answer (a few subgradient steps from the parent's multipliers
        raised no child's bound on the benchmark instances); its new columns join the pool."""
        cols = self.columns.consistent(child)
        got = bundle.ascend(lag, child, self.best.value, CHILD_ITERS, self.clock.deadline, cols)
        self.stats.note_ascent(got)
        self.columns.merge(cols)
        self.child_columns = cols
        return got.bound, got.cover

    def node_master(self, lag: Lagrangian, node: Node) -> bundle.Master | None:
        """The restricted master LP over every column seen so far that the node allows
        (what the branching reads)."""
        return bundle.master(lag, self.columns.consistent(node), self.clock.left())

    def root_rounding(self, lag: Lagrangian) -> np.ndarray | None:
        """The restricted master LP over every column seen so far (called after the root:
        the root's), rounded (None: no point)."""
        return bundle.rounded_assignment(lag, self.columns, self.clock.left())

    def child_rounding(self, lag: Lagrangian) -> np.ndarray | None:
        """The restricted master LP over the last child's columns, rounded (None: no point):
        its fixings make it more integral than the root's."""
        return bundle.rounded_assignment(lag, self.child_columns, self.clock.left())
