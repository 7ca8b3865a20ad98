"""The exact method for instances with many learner types: Lagrangian branch and bound.

When learners are all different (random heterogeneous instances) the type programme has too
many states. This module proves optimality (or reports a gap at the time limit) with three
parts.

Primal (``primal``, on ``local``). A greedy assignment; after the root bound, the restricted
master LP over the root's subproblem answers, rounded and polished by local search (each
candidate valued exactly, ``evaluate``); an iterated local search then improves the incumbent;
during branching, every ``POLISH_EVERY`` nodes the restricted master over a child's columns is
rounded and polished the same way (a child's fixings make its master more integral). Where a
second core is there (``companion``), all of this runs in a companion process beside the
branching, which also hands it each node's master rounded; incumbents go both ways.

Bound (``bounding``, on ``lagrangian``). The Lagrangian relaxation of "each learner serves
exactly one task" and of the budget. At the root a short subgradient warm start, then a
box-step bundle method (``bundle``) that stops with a certificate at the dual optimum; children
run the same bundle method (at most ``CHILD_ITERS`` steps) from their parent's multipliers, its
model warm from every column seen so far that the child's subproblems can still answer.

Branching (``best_first``, the rules of ``branching``). Best bound first (the global bound at a
time limit is the least open bound). Each node solves the restricted master LP over the columns
it allows: when a task mixes columns whose levels spread by more than ``LEVEL_SPREAD`` of their
mean, it branches on that task's level (H_i up to the mix's mean in one child, above it in the
other; the subproblems and the columns keep to the window); otherwise on the free learner whose
master share in a task is nearest one half, fixed to that task in one child and barred from it
in the other (an integral master: the learner whose subproblem answers disagree most). Each
node re-optimises the multipliers from its parent's. A node is cut when its bound reaches the
incumbent. Without a time limit the search runs to the end (proof); with one, the root bound
gets up to ``ROOT_SHARE`` of it, then (one core) the iterated local search up to ``ILS_SHARE``
and branching the rest, or (a companion) branching all of the rest; the best allocation and the
best bound at the limit are returned.

Parts of their own, one module each: the bounds and their columns (``bounding``:
``Bounding``, ``floor_levels``); the primal heuristics of one process (``primal``:
``Primal``); the companion's search and the parent's handle on it (``companion_search``:
``CompanionSearch``, ``CompanionHandle``), over the incumbent exchange (``exchange``); the
branching, best bound first (``best_first``: ``BestFirst``, with the splitting rules of
``branching``); the answer (``answer``); the time (``search_clock``) and the statistics
(``search_stats``). This module runs the phases in their order (:class:`BranchAndBound`: the
greedy start, the root bound, the primal heuristics on one core or the companion's start, the
branching, the answer) and holds the entry point :func:`solve`; a caller that must read the
incumbent while the search runs (the guard timer) passes a :class:`Running` for it.
"""

from __future__ import annotations

import math

import numpy as np

from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import Coefficients, budget_can_bind
from mel_opt.problems.med.search import answer, companion
from mel_opt.problems.med.search.best_first import BestFirst
from mel_opt.problems.med.search.bounding import Bounding, floor_levels
from mel_opt.problems.med.search.companion_search import CompanionHandle
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.exchange import Incumbent
from mel_opt.problems.med.search.lagrangian import Lagrangian, Node, OutOfTime
from mel_opt.problems.med.search.local import greedy
from mel_opt.problems.med.search.primal import Primal
from mel_opt.problems.med.search.search_clock import SearchClock
from mel_opt.problems.med.search.search_stats import SearchStats
from mel_opt.problems.med.search.types import SearchOutcome, parts_of
from mel_opt.status import TerminationCondition as TC

__all__ = ["BranchAndBound", "Running", "solve"]

EARLY_COMPANION_CELLS = 200  # tasks x learners from which the companion starts before the
# root bound (from the greedy start; the root's starting points are handed over later): the
# root takes seconds there (5.9 s at 100 x 10) and the second core would idle; smaller
# instances, often proven at the root, start it after the root only if they need it


class BranchAndBound:
    """One run of the branch and bound: its parts, and the phases in their order.

    The parts share the run's clock, incumbent and statistics: ``bounding`` (the root's and
    the children's bounds), ``primal`` (the primal heuristics of this process), ``link`` (the
    companion, while one runs) and the branching (:meth:`best_first`). :meth:`run` goes
    through the phases: the greedy start; the root bound; the primal heuristics, before
    branching on one core (:meth:`one_core`) or beside it in a companion process
    (:meth:`start_companion`); the branching; the answer (``answer.outcome``).
    """

    def __init__(self, inst: MedInstance, coef: Coefficients, time_limit: float | None
                 ) -> None:
        self.clock = SearchClock.starting_now(time_limit)
        self.inst, self.coef = inst, coef
        self.ev = Evaluator(inst, coef, budget_can_bind(inst))
        self.m, self.n = inst.n_tasks, inst.n_learners
        self.stats = SearchStats()
        self.best = Incumbent()
        self.bounding = Bounding(self.clock, self.best, self.stats)
        self.primal = Primal(self.ev, self.best, self.clock, self.stats, self.bounding)
        self.link: CompanionHandle | None = None  # the companion, while one runs

    def best_first(self) -> BestFirst:
        """The branching over this run's parts (and its companion, if one runs)."""
        return BestFirst(self.ev, self.best, self.stats, self.clock, self.bounding,
                         self.primal, self.link)

    def start_companion(self, start_assign: np.ndarray, floor: float) -> CompanionHandle:
        """Fork the companion (``CompanionSearch``) and keep the parent's handle on it."""
        self.link = CompanionHandle.start(self.primal, self.stats, start_assign, floor)
        return self.link

    def run(self) -> SearchOutcome:
        start_assign = greedy(self.ev)
        excess, value, _ = self.ev.value(parts_of(start_assign, self.m))
        if excess == 0:
            self.best.offer(value, start_assign)
        floors = floor_levels(self.inst, self.coef)
        if not np.all(np.isfinite(floors)):
            return SearchOutcome(TC.INFEASIBLE, message="a task cannot meet its deadline "
                                 "even with every learner", stats=self.stats.as_dict())
        if self.m * self.n >= EARLY_COMPANION_CELLS and companion.available():
            self.start_companion(start_assign, float(floors.sum()))
        try:
            ended = self.bound_and_branch(start_assign, floors)
        finally:
            link, self.link = self.link, None
            if link is not None:
                link.stop()  # what it published last survives in the mailbox
        return answer.outcome(self.ev, self.best, self.stats, *ended)

    def bound_and_branch(self, start_assign: np.ndarray, floors: np.ndarray
                         ) -> tuple[bool, list[float], float, str]:
        """The root bound, the primal heuristics (here on one core, else the companion's,
        started already or now) and the branching; the last arguments of
        ``answer.outcome``."""
        inst, coef, stats = self.inst, self.coef, self.stats
        try:
            lag = Lagrangian(inst, coef, self.ev.binds, floors, self.best.value,
                             self.clock.deadline)
            root = Node(np.full(self.n, -1, dtype=np.int64),
                        np.zeros((self.m, self.n), dtype=bool), np.zeros(self.n), 0.0)
            root_bound, cover = self.bounding.root(lag, root, self.best.value)
        except OutOfTime:  # many learners: the level tables took the time the bound needed
            if self.link is None:
                self.primal.fallback_search(start_assign)
            else:  # the companion searched from the greedy start meanwhile
                self.link.sync()
            floor = float(floors.sum())
            stats.root_bound = floor
            return True, [floor], floor, "the tasks' least levels"
        stats.root_bound = root_bound
        link = self.link
        if link is None and not self.best.proven_by(root_bound) and companion.available():
            link = self.start_companion(start_assign, float(floors.sum()))
        if link is not None:
            link.sync()  # the companion's allocations so far: a better one prunes
            if not self.best.proven_by(root_bound):
                link.hand_root(root_bound, self.bounding.root_rounding(lag),
                               self.primal.cover_assignment(cover))
        else:
            lag_or_none = self.one_core(lag, cover, start_assign, root_bound, floors)
            if lag_or_none is None:
                return True, [root_bound], root_bound, "a Lagrangian bound"
            lag = lag_or_none
        timed_out, open_bounds = self.best_first().run(lag, root, root_bound, cover)
        return timed_out, open_bounds, root_bound, "a Lagrangian bound"

    def one_core(self, lag: Lagrangian, cover: np.ndarray, start_assign: np.ndarray,
                 root_bound: float, floors: np.ndarray) -> Lagrangian | None:
        """One core: the primal heuristics before branching (``Primal.before_branching``),
        then the tables again for the better incumbent (fewer levels). None: no time for
        them."""
        self.primal.before_branching(lag, cover, start_assign, root_bound)
        if math.isfinite(self.best.value):  # tables for the incumbent: fewer levels
            try:
                return Lagrangian(self.inst, self.coef, self.ev.binds, floors,
                                  self.best.value, self.clock.deadline)
            except OutOfTime:
                return None
        return lag


class Running:
    """Where :func:`solve` leaves its search while it runs, for a caller that must read the
    incumbent from outside the search's own control flow: a stop by the guard timer
    (:func:`mel_opt.deadline.keep_incumbent`) calls :meth:`snapshot`. The caller creates one
    and passes it down (``methods.solve_exact`` through ``dispatch.solve``); no global holds
    the running search."""

    def __init__(self) -> None:
        self.search: BranchAndBound | None = None

    def snapshot(self) -> SearchOutcome | None:
        """The running search's incumbent as a time-limit outcome, bounded by its root bound
        (or the tasks' least levels before the root is done); None without a running search
        or an incumbent. What a stop by the guard timer keeps."""
        search = self.search
        if search is None or search.best.assign is None:
            return None
        floor = search.stats.root_bound
        if floor is None:
            floor = float(floor_levels(search.inst, search.coef).sum())
        return answer.outcome(search.ev, search.best, search.stats, True, [float(floor)],
                              float(floor),
                              bound_kind="its root bound (stopped by the guard timer)")


def solve(inst: MedInstance, coef: Coefficients, *, time_limit: float | None = None,
          running: Running | None = None) -> SearchOutcome:
    """Lagrangian branch and bound (module docstring) within ``time_limit`` seconds (None: to
    the end, a proof). ``running``, if given, holds the search while it runs (cleared when it
    ends, however it ends)."""
    search = BranchAndBound(inst, coef, time_limit)
    if running is None:
        return search.run()
    running.search = search
    try:
        return search.run()
    finally:
        running.search = None
