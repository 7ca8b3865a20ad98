"""The exact method for instances with many learner types: Lagrangian branch and bound.

When learners are all different (random heterogeneous instances) the type programme has too
many states. This module proves optimality (or reports a gap at the time limit) with three
parts.

Primal (``local``). A greedy assignment; after the root bound, the restricted master LP over
the root's subproblem answers, rounded and polished by local search (each candidate valued
exactly, ``evaluate``); an iterated local search then improves the incumbent; during
branching, every ``POLISH_EVERY`` nodes the restricted master over a child's columns is rounded
and polished the same way (a child's fixings make its master more integral). Where a second
core is there (``companion``), all of this runs in a companion process beside the branching,
which also hands it each node's master rounded; incumbents go both ways.

Bound (``lagrangian``). The Lagrangian relaxation of "each learner serves exactly one task" and
of the budget. At the root a short subgradient warm start, then a box-step bundle method
(``bundle``) that stops with a certificate at the dual optimum; children run the same bundle
method (at most ``CHILD_ITERS`` steps) from their parent's multipliers, its model warm from
every column seen so far that the child's subproblems can still answer.

Branching. Best bound first (the global bound at a time limit is the least open bound). Each
node solves the restricted master LP over the columns it allows: when a task mixes columns
whose levels spread by more than ``LEVEL_SPREAD`` of their mean, it branches on that task's
level (H_i up to the mix's mean in one child, above it in the other; the subproblems and the
columns keep to the window); otherwise on the free learner whose master share in a task is
nearest one half, fixed to that task in one child and barred from it in the other (an integral
master: the learner whose subproblem answers disagree most). Each node re-optimises the
multipliers from its parent's. A node is cut when its bound reaches the incumbent. Without a
time limit the search runs to the end (proof); with one, the root bound gets up to
``ROOT_SHARE`` of it, then (one core) the iterated local search up to ``ILS_SHARE`` and
branching the rest, or (a companion) branching all of the rest; the best allocation and the
best bound at the limit are returned.

Parts of their own: the branching rules (``branching``), the incumbent and its exchange with
the companion (``exchange``), the statistics (``search_stats``). This module holds the phases
(``_Search``: root bound, primal heuristics, branching, answer) and the entry point
:func:`solve`; a caller that must read the incumbent while the search runs (the guard timer)
passes a :class:`Running` for it.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time

import numpy as np

from mel_opt.problems.med import split
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import Coefficients, budget_can_bind
from mel_opt.problems.med.search import branching, bundle, companion
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.exchange import Exchange, Incumbent, Mailboxes
from mel_opt.problems.med.search.lagrangian import Lagrangian, Node, OutOfTime
from mel_opt.problems.med.search.local import greedy, iterated_local_search, local_search
from mel_opt.problems.med.search.search_stats import SearchStats
from mel_opt.problems.med.search.types import REL_GAP, TOL, SearchOutcome, better, parts_of
from mel_opt.status import TerminationCondition as TC

__all__ = ["Running", "solve"]

ROOT_SHARE = 0.35  # with a time limit: the root bound stops at this share of it
ILS_SHARE = 0.5  # ... and the iterated local search at this share (branching gets the rest)
CHILD_ITERS = 40  # bundle steps per child node (from the parent's multipliers and columns)
ROOT_WARM_ITERS = 30  # subgradient steps at the root before the bundle method
ROOT_ITERS = 300  # bundle steps at the root
FIRST_SEARCH_CAP = 30.0  # s, the first local search's cap
COVER_SEARCH_CAP = 3.0  # s, the cap of one polish (a subproblem cover or a child's master)
POLISH_EVERY = 3  # while branching: every this many nodes, polish the last child's master
ILS_PATIENCE = 30  # kicks in a row without a gain that end the iterated local search (no limit)
ILS_PATIENCE_TIMED = 100  # the same with a time limit (its share of the time ends it first)
EARLY_COMPANION_CELLS = 200  # tasks x learners from which the companion starts before the
# root bound (from the greedy start; the root's starting points are handed over later): the
# root takes seconds there (5.9 s at 100 x 10) and the second core would idle; smaller
# instances, often proven at the root, start it after the root only if they need it

HeapEntry = tuple[float, int, int, Node, np.ndarray]  # bound, -depth, order, node, cover


def _floor_levels(inst: MedInstance, coef: Coefficients) -> np.ndarray:
    """Per task, the least level any subset of the learners reaches within the deadline [s]."""
    return np.array([split.best_case_level(coef.A[i], coef.C[i], coef.L, int(inst.shards[i]),
                                           float(inst.deadline[i]) * (1 + TOL))
                     for i in range(inst.n_tasks)])


class _Search:
    """One run of the branch and bound: the incumbent, the bound and the time shares.

    :meth:`run` goes through the phases: the root bound (:meth:`root`); the primal heuristics,
    before branching on one core (:meth:`primal_first`) or beside it in a companion process
    (:meth:`companion_work`, the incumbents exchanged by ``self.exchange``); the branching
    (:meth:`branch`); the answer (:meth:`outcome`).
    """

    def __init__(self, inst: MedInstance, coef: Coefficients, time_limit: float | None
                 ) -> None:
        self.start = time.perf_counter()
        self.time_limit = time_limit
        self.deadline = self.start + (time_limit if time_limit is not None else math.inf)
        self.inst, self.coef = inst, coef
        self.ev = Evaluator(inst, coef, budget_can_bind(inst))
        self.m, self.n = inst.n_tasks, inst.n_learners
        self.stats = SearchStats()
        self.best = Incumbent()
        self.columns = bundle.Columns()
        self.child_columns = self.columns
        self.exchange: Exchange | None = None  # the parent's side, while a companion runs
        self.box: companion.Companion | None = None  # that companion

    # -- time and proof -----------------------------------------------------------------------
    def _share_end(self, share: float) -> float:
        """The end of a phase that may use ``share`` of the time limit (deadline if none)."""
        return self.deadline if self.time_limit is None else self.start + share * self.time_limit

    def _left(self) -> float:
        """Seconds to the deadline (0 once past)."""
        return max(0.0, self.deadline - time.perf_counter())

    def proven(self, bound: float) -> bool:
        return bound >= self.best.value - REL_GAP * max(1.0, abs(self.best.value))

    # -- the bound ----------------------------------------------------------------------------
    def root(self, lag: Lagrangian, root: Node, upper: float) -> tuple[float, np.ndarray]:
        """The root bound: a short subgradient warm start, then the box-step bundle method
        (``bundle``) until its certificate, the root's share of the time or ``ROOT_ITERS``."""
        end = min(self.deadline, self._share_end(ROOT_SHARE))
        warm, cover = lag.optimise(root, upper, ROOT_WARM_ITERS, end)
        if not math.isfinite(warm):
            return warm, cover
        got = bundle.ascend(lag, root, upper, ROOT_ITERS, end, self.columns)
        self.stats.root_ascent = got
        self.stats.note_ascent(got)
        return (got.bound, got.cover) if got.bound >= warm else (warm, cover)

    def child_bound(self, lag: Lagrangian, child: Node) -> tuple[float, np.ndarray]:
        """A child's bound: the box-step bundle method from its parent's multipliers, its
        model of the dual function warm from the columns seen so far that the child's
        subproblems can still answer (a few subgradient steps from the parent's multipliers
        raised no child's bound on the benchmark instances); its new columns join the pool."""
        cols = self.columns.consistent(child)
        got = bundle.ascend(lag, child, self.best.value, CHILD_ITERS, self.deadline, cols)
        self.stats.note_ascent(got)
        self.columns.merge(cols)
        self.child_columns = cols
        return got.bound, got.cover

    def node_master(self, lag: Lagrangian, node: Node) -> bundle.Master | None:
        """The restricted master LP over every column seen so far that the node allows
        (what the branching reads)."""
        return bundle.master(lag, self.columns.consistent(node), self._left())

    # -- primal heuristics --------------------------------------------------------------------
    def polish(self, cand: np.ndarray) -> None:
        got, val = local_search(self.ev, cand,
                                min(self.deadline, time.perf_counter() + COVER_SEARCH_CAP))
        self.best.offer(val, got)

    def improve_from(self, cover: np.ndarray) -> None:
        """Turn a subproblem cover into an assignment and polish it."""
        self.polish(self.cover_assignment(cover))

    def primal_from_master(self, lag: Lagrangian) -> None:
        """Round the restricted master LP over the root's columns and polish it."""
        cand = bundle.rounded_assignment(lag, self.columns, self._left())
        if cand is None:
            return
        got, val = local_search(self.ev, cand,
                                min(self.deadline, time.perf_counter() + FIRST_SEARCH_CAP))
        self.stats.incumbent_from_master = val
        self.best.offer(val, got)

    def first_local_search(self, start_assign: np.ndarray) -> None:
        """The local search from the greedy start (at most ``FIRST_SEARCH_CAP``)."""
        assign, value = local_search(self.ev, start_assign,
                                     min(self.deadline, time.perf_counter() + FIRST_SEARCH_CAP))
        self.best.offer(value, assign)

    def iterate(self, fallback: np.ndarray, root_bound: float) -> None:
        """The iterated local search before branching: a good incumbent is what prunes."""
        start_assign = self.best.assign if self.best.assign is not None else fallback
        got, val, kicks = iterated_local_search(
            self.ev, start_assign, self.best.value,
            min(self.deadline, self._share_end(ILS_SHARE)),
            patience=ILS_PATIENCE if self.time_limit is None else ILS_PATIENCE_TIMED,
            target=root_bound + REL_GAP * max(1.0, abs(root_bound)))
        self.stats.ils_kicks = kicks
        self.best.offer(val, got)

    def polish_master(self, lag: Lagrangian) -> None:
        """The restricted master LP over the last child's columns, rounded and polished: its
        fixings make the master more integral than the root's, and on the benchmark instances
        these roundings found better allocations than the iterated local search's kicks."""
        cand = bundle.rounded_assignment(lag, self.child_columns, self._left())
        if cand is None:
            return
        if self.exchange is not None:  # the companion polishes it; this process branches on
            self.exchange.suggest(cand)
        else:
            self.polish(cand)

    def primal_first(self, lag: Lagrangian, cover: np.ndarray, start_assign: np.ndarray,
                     root_bound: float, floor_levels: np.ndarray) -> Lagrangian | None:
        """One core: the primal heuristics before branching (the root master's rounding, the
        cover's polish, a local search from the greedy start, the iterated local search), then
        the tables again for the better incumbent (fewer levels). None: no time for them."""
        stats = self.stats
        if not self.proven(root_bound):
            self.primal_from_master(lag)
            self.improve_from(cover)
        if self.best.assign is None or not self.proven(root_bound):
            self.first_local_search(start_assign)
        stats.incumbent_after_local_search = self.best.value
        if not self.proven(root_bound):
            self.iterate(start_assign, root_bound)
        stats.incumbent_before_branching = self.best.value
        if math.isfinite(self.best.value):  # tables for the incumbent: fewer levels
            try:
                return Lagrangian(self.inst, self.coef, self.ev.binds, floor_levels,
                                  self.best.value, self.deadline)
            except OutOfTime:
                return None
        return lag

    def cover_assignment(self, cover: np.ndarray) -> np.ndarray:
        """A subproblem cover turned into an assignment (each learner to the covering task
        where its shards are cheapest in time; an uncovered one unused, or where allowed)."""
        inst, coef = self.inst, self.coef
        cand = np.full(self.n, -1, dtype=np.int64)
        for j in range(self.n):
            tasks = np.nonzero(cover[:, j])[0]
            if tasks.size:
                cand[j] = int(tasks[np.argmin(coef.C[tasks, j])])
            elif inst.min_shards == 0:
                cand[j] = -1
            else:
                ok = np.nonzero(coef.allowed[:, j])[0]
                cand[j] = int(ok[np.argmin(coef.C[ok, j])]) if ok.size else 0
        return cand

    def hand_root(self, lag: Lagrangian, cover: np.ndarray, root_bound: float) -> None:
        """The parent's side, once the root bound is there: the root master's rounding and
        the root's cover, for the companion to polish first."""
        assert self.exchange is not None
        rounding = bundle.rounded_assignment(lag, self.columns, self._left())
        self.exchange.hand_root(root_bound, rounding, self.cover_assignment(cover))

    def _take_root(self, exchange: Exchange) -> float | None:
        """In the companion: polish the root's starting points if the parent has handed them
        over (the master's rounding as long as the first local search, the cover's as one
        polish); the root bound, or None before the hand-over."""
        got = exchange.root()
        if got is None:
            return None
        bound, starts = got
        for k, cand in enumerate(starts):
            if time.perf_counter() >= self.deadline:
                break
            if k == 0 and len(starts) == 2:  # the master's rounding
                found, val = local_search(self.ev, cand, min(
                    self.deadline, time.perf_counter() + FIRST_SEARCH_CAP))
                self.best.offer(val, found)
            else:
                self.polish(cand)
        return bound

    def companion_work(self, box: Mailboxes, start_assign: np.ndarray, floor: float) -> None:
        """In the companion process (a copy of this search, forked before the root bound or
        right after it): the local search from the greedy start, which between learners
        polishes the root's starting points as soon as the parent hands them over
        (:meth:`hand_root`; the descent from the greedy start ends once they did better),
        then rounds of iterated local search, each from the best
        allocation either process knows, until the deadline or the bound (``floor``, the
        tasks' least levels, until the root bound arrives); every improvement is published to
        the parent."""
        exchange = Exchange(box, self.best, self.ev)
        exchange.listen()
        bound: list[float] = [floor]

        def take_root() -> bool:
            got = self._take_root(exchange)
            if got is not None:
                bound[0] = max(bound[0], got)
            return got is not None

        rooted = take_root()

        def poll(value: float) -> bool:  # between learners of the descent from greedy
            nonlocal rooted
            rooted = take_root() or rooted
            # the root's points did better: the iterated search goes on from them
            return rooted and better(self.best.value, value)

        assign, value = local_search(
            self.ev, start_assign, min(self.deadline, time.perf_counter() + FIRST_SEARCH_CAP),
            poll=poll)
        self.best.offer(value, assign)

        def between(best: np.ndarray, value: float) -> tuple[np.ndarray, float] | None:
            self.best.offer(value, best)  # published at once, not at the round's end
            take_root()
            start = exchange.pull()
            if start is not None:
                self.polish(start)
            if self.best.assign is None or not better(self.best.value, value):
                return None
            return self.best.assign, self.best.value

        for seed in itertools.count():
            take_root()
            target = bound[0] + REL_GAP * max(1.0, abs(bound[0]))
            if time.perf_counter() >= self.deadline or self.best.value <= target:
                break
            begin = self.best.assign if self.best.assign is not None else start_assign
            got, val, _ = iterated_local_search(
                self.ev, begin, self.best.value, self.deadline, patience=ILS_PATIENCE_TIMED,
                target=target, seed=seed, between=between)
            self.best.offer(val, got)

    # -- branching ----------------------------------------------------------------------------
    def sync(self) -> None:
        """The parent's exchange with the companion (nothing without one)."""
        if self.exchange is not None and self.exchange.sync():
            self.stats.companion_allocations += 1

    def branch(self, lag: Lagrangian, root: Node, root_bound: float, cover: np.ndarray
               ) -> tuple[bool, list[float]]:
        """Best bound first (ties: deeper first): the global bound at a time limit is the least
        open bound, so expanding that node is what raises it. With a companion
        (``self.exchange``), allocations are exchanged with it before each node.

        Returns whether the time limit stopped it and the bounds of the nodes still open.
        """
        heap: list[HeapEntry] = []
        counter = itertools.count()
        if not self.proven(root_bound):
            heapq.heappush(heap, (root_bound, 0, next(counter), root, cover))
        while heap:
            if time.perf_counter() > self.deadline:
                return True, [b for b, *_ in heap]
            self.sync()
            bound, _, _, node, cover = heapq.heappop(heap)
            self.stats.nodes += 1
            if self.proven(bound):
                continue
            got = self.node_master(lag, node)
            if self.exchange is not None and got is not None:  # its rounding, for the companion
                self.exchange.suggest(bundle.round_scores(lag, got.score))
            kids = [(c, *self.child_bound(lag, c)) for c in branching.level_split(
                node, got, branching.free_learners(node, self.coef))]
            if not kids:
                kids = self.learner_split(lag, node, cover, got)
            if not kids:  # every learner fixed (or barred everywhere: unused): a leaf
                leaf = node.fixed.copy()
                excess, leaf_value, _ = self.ev.value(parts_of(leaf, self.m))
                if excess == 0:
                    self.best.offer(leaf_value, leaf)
                continue
            for child, b, cov in kids:
                b = max(b, bound)
                if (self.stats.nodes % POLISH_EVERY == 1
                        and time.perf_counter() < self.deadline):
                    self.polish_master(lag)
                if not self.proven(b):
                    heapq.heappush(heap, (b, -child.depth, next(counter), child, cov))
        return False, []

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
        return [(c, *self.child_bound(lag, c)) for c in kids]

    # -- the answer ---------------------------------------------------------------------------
    def allocation(self, assignment: np.ndarray) -> tuple[float, np.ndarray]:
        """The value of a feasible assignment and its whole shards d (m, n) at its levels."""
        inst, coef = self.inst, self.coef
        parts = parts_of(assignment, self.m)
        _, val, levels = self.ev.value(parts)
        assert levels is not None  # the incumbent was feasible when it was stored
        d = np.zeros((self.m, self.n), dtype=np.int64)
        for i, p in enumerate(parts):
            W = np.array(p, dtype=np.int64)
            part = split.split_at(coef.A[i, W], coef.C[i, W], inst.price[W], coef.L,
                                  int(inst.shards[i]), levels[i])
            assert part is not None  # the level was computed from these learners
            d[i, W] = part
        return val, d

    def outcome(self, timed_out: bool, open_bounds: list[float], root_bound: float,
                bound_kind: str = "a Lagrangian bound") -> SearchOutcome:
        stats = self.stats
        final_bound = min([self.best.value, *open_bounds]) if timed_out else self.best.value
        if self.best.assign is None:
            if timed_out:
                return SearchOutcome(TC.TIME_LIMIT, bound=root_bound, stats=stats.as_dict(),
                                     message="time limit without a feasible allocation")
            return SearchOutcome(TC.INFEASIBLE, bound=math.inf, stats=stats.as_dict(),
                                 message="no feasible allocation (search exhausted)")
        assignment = self.best.assign
        val, d = self.allocation(assignment)
        stats.bound = final_bound
        if timed_out:
            return SearchOutcome(TC.TIME_LIMIT, assignment, d, val, final_bound,
                                 stats=stats.as_dict(),
                                 message=f"time limit: best allocation found and {bound_kind}")
        return SearchOutcome(TC.CONVERGED, assignment, d, val, val, stats=stats.as_dict(),
                             message="proven optimal (Lagrangian branch and bound)")

    def start_companion(self, start_assign: np.ndarray, floor: float) -> companion.Companion:
        """Fork the companion (:meth:`companion_work`) and open the parent's exchange."""
        box = self.box = companion.Companion(self.n)
        self.exchange = Exchange(box, self.best, self.ev)
        box.start(lambda b: self.companion_work(b, start_assign, floor))
        self.stats.companion = True
        return box

    def run(self) -> SearchOutcome:
        inst, coef = self.inst, self.coef
        start_assign = greedy(self.ev)
        excess, value, _ = self.ev.value(parts_of(start_assign, self.m))
        if excess == 0:
            self.best.offer(value, start_assign)
        floor_levels = _floor_levels(inst, coef)
        if not np.all(np.isfinite(floor_levels)):
            return SearchOutcome(TC.INFEASIBLE, message="a task cannot meet its deadline "
                                 "even with every learner", stats=self.stats.as_dict())
        box = None
        if self.m * self.n >= EARLY_COMPANION_CELLS and companion.available():
            box = self.start_companion(start_assign, float(floor_levels.sum()))
        try:
            ended = self.bound_and_branch(start_assign, floor_levels, box)
        finally:
            if self.box is not None:
                self.box.stop()
                self.box = None
                self.sync()  # what it published last survives in the mailbox
                self.exchange = None
        return self.outcome(*ended)

    def bound_and_branch(self, start_assign: np.ndarray, floor_levels: np.ndarray,
                         box: companion.Companion | None
                         ) -> tuple[bool, list[float], float, str]:
        """The root bound, the primal heuristics (here on one core, else the companion's,
        started already (``box``) or now) and the branching; the arguments of
        :meth:`outcome`."""
        inst, coef, stats = self.inst, self.coef, self.stats
        try:
            lag = Lagrangian(inst, coef, self.ev.binds, floor_levels, self.best.value,
                             self.deadline)
            root = Node(np.full(self.n, -1, dtype=np.int64),
                        np.zeros((self.m, self.n), dtype=bool), np.zeros(self.n), 0.0)
            root_bound, cover = self.root(lag, root, self.best.value)
        except OutOfTime:  # many learners: the level tables took the time the bound needed
            if box is None:
                assign, value = local_search(self.ev, start_assign,
                                             min(self.deadline, self.start + FIRST_SEARCH_CAP))
                self.best.offer(value, assign)
            else:  # the companion searched from the greedy start meanwhile
                self.sync()
            floor = float(floor_levels.sum())
            stats.root_bound = floor
            return True, [floor], floor, "the tasks' least levels"
        stats.root_bound = root_bound
        if box is None and not self.proven(root_bound) and companion.available():
            box = self.start_companion(start_assign, float(floor_levels.sum()))
        if box is not None:
            self.sync()  # the companion's allocations so far: a better one prunes
            if not self.proven(root_bound):
                self.hand_root(lag, cover, root_bound)
        else:
            lag_or_none = self.primal_first(lag, cover, start_assign, root_bound, floor_levels)
            if lag_or_none is None:
                return True, [root_bound], root_bound, "a Lagrangian bound"
            lag = lag_or_none
        timed_out, open_bounds = self.branch(lag, root, root_bound, cover)
        return timed_out, open_bounds, root_bound, "a Lagrangian bound"


class Running:
    """Where :func:`solve` leaves its search while it runs, for a caller that must read the
    incumbent from outside the search's own control flow: a stop by the guard timer
    (:func:`mel_opt.deadline.keep_incumbent`) calls :meth:`snapshot`. The caller creates one
    and passes it down (``methods.solve_exact`` through ``dispatch.solve``); no global holds
    the running search."""

    def __init__(self) -> None:
        self.search: _Search | None = None

    def snapshot(self) -> SearchOutcome | None:
        """The running search's incumbent as a time-limit outcome, bounded by its root bound
        (or the tasks' least levels before the root is done); None without a running search
        or an incumbent. What a stop by the guard timer keeps."""
        search = self.search
        if search is None or search.best.assign is None:
            return None
        floor = search.stats.root_bound
        if floor is None:
            floor = float(_floor_levels(search.inst, search.coef).sum())
        return search.outcome(True, [float(floor)], float(floor),
                              bound_kind="its root bound (stopped by the guard timer)")


def solve(inst: MedInstance, coef: Coefficients, *, time_limit: float | None = None,
          running: Running | None = None) -> SearchOutcome:
    """Lagrangian branch and bound (module docstring) within ``time_limit`` seconds (None: to
    the end, a proof). ``running``, if given, holds the search while it runs (cleared when it
    ends, however it ends)."""
    search = _Search(inst, coef, time_limit)
    if running is None:
        return search.run()
    running.search = search
    try:
        return search.run()
    finally:
        running.search = None
