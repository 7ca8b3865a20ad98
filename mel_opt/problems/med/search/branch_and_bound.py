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
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.problems.med import split
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import Coefficients, budget_can_bind
from mel_opt.problems.med.search import bundle, companion
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.lagrangian import Lagrangian, Node, OutOfTime
from mel_opt.problems.med.search.local import greedy, iterated_local_search, local_search
from mel_opt.problems.med.search.types import REL_GAP, TOL, Outcome, better, parts_of
from mel_opt.status import TerminationCondition as TC

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

LEVEL_SPREAD: float | None = 0.005  # branch on a task's level above this spread of its mix

HeapEntry = tuple[float, int, int, Node, np.ndarray]  # bound, -depth, order, node, cover


def _branch_learner(cover: np.ndarray, score: np.ndarray | None, coef: Coefficients,
                    free: np.ndarray) -> tuple[int, np.ndarray]:
    """The learner to branch on, with the tasks to fix it to (the first open one is taken):
    the free learner whose share of a task in the node's restricted master LP is nearest one
    half; when the master is integral on every free learner (or missing), the learner whose
    subproblem answers disagree most (it appears in no task or in several). (Strong branching
    over the three most fractional learners was tried and bounded no better.)"""
    speed = 1e-3 * (1.0 / coef.C).sum(axis=0)
    if score is not None:
        frac = np.where(free[None, :], np.minimum(score, 1.0 - score), 0.0)
        best_task = np.argmax(frac, axis=0)
        share = frac[best_task, np.arange(frac.shape[1])]
        j = int(np.argmax(share + 1e-9 * speed))
        if share[j] > 1e-6:
            return j, np.array([int(best_task[j])])
    counts = cover.sum(axis=0)
    j = int(np.argmax(np.where(free, np.abs(counts - 1) + speed, -1.0)))
    return j, np.nonzero(cover[:, j])[0]


def _level_split(node: Node, got: bundle.Master | None, free: np.ndarray) -> list[Node]:
    """Branch on a task's level when the master mixes columns of levels spread by more than
    ``LEVEL_SPREAD`` of their mean (by any amount when the master is integral on every free
    learner; the widest such task): H_i up to the mean in one child, above it in the other.
    [] when no task's mix is that spread."""
    if got is None or LEVEL_SPREAD is None:
        return []
    shares = got.score[:, free]
    integral = not np.any((shares > 1e-6) & (shares < 1 - 1e-6))
    threshold = 0.0 if integral else LEVEL_SPREAD
    best, task, cut = 0.0, -1, 0.0
    for i, (w, h) in enumerate(got.mix):
        if w.size < 2 or w.sum() <= 0:
            continue
        mean = float((w * h).sum() / w.sum())
        spread = float((w * np.abs(h - mean)).sum() / w.sum()) / max(mean, 1e-12)
        if spread > best and h.min() <= mean < h.max():
            best, task, cut = spread, i, mean
    if task < 0 or best <= threshold:
        return []
    m = node.barred.shape[0]
    above = np.full(m, -math.inf) if node.above is None else node.above
    upto = np.full(m, math.inf) if node.upto is None else node.upto
    low_up, high_above = upto.copy(), above.copy()
    low_up[task] = cut
    high_above[task] = cut
    return [Node(node.fixed.copy(), node.barred.copy(), node.mu.copy(), node.lam,
                 node.depth + 1, above.copy(), low_up),
            Node(node.fixed.copy(), node.barred.copy(), node.mu.copy(), node.lam,
                 node.depth + 1, high_above, upto.copy())]


def _free(node: Node, coef: Coefficients) -> np.ndarray:
    """The learners a node has not fixed and that some task may still take."""
    return (node.fixed < 0) & (~node.barred & coef.allowed).any(axis=0)


def _learner_split(node: Node, j: int, likely: np.ndarray, coef: Coefficients,
                   must_work: bool) -> list[Node]:
    """Learner j fixed to a task (the first of ``likely`` still open, else its fastest open
    task), then barred from it."""
    open_tasks = ~node.barred[:, j] & coef.allowed[:, j]
    likely = likely[open_tasks[likely]]
    options = likely if likely.size else np.nonzero(open_tasks)[0]
    if options.size == 0:
        return []
    i = int(options[np.argmin(coef.C[options, j])])
    fixed = node.fixed.copy()
    fixed[j] = i
    barred = node.barred.copy()
    barred[:, j] = True
    barred[i, j] = False
    fix_child = Node(fixed, barred, node.mu.copy(), node.lam, node.depth + 1, node.above,
                     node.upto)
    barred2 = node.barred.copy()
    barred2[i, j] = True
    kids = [fix_child]
    if not must_work or (~barred2[:, j] & coef.allowed[:, j]).any():
        kids.append(Node(node.fixed.copy(), barred2, node.mu.copy(), node.lam, node.depth + 1,
                         node.above, node.upto))
    return kids


@dataclass
class _Incumbent:
    value: float
    assign: np.ndarray | None
    listener: Callable[[float, np.ndarray], None] | None = None  # told of each improvement

    def offer(self, value: float, assign: np.ndarray) -> bool:
        """Keep the allocation if it is better; True if it was."""
        if not better(value, self.value):
            return False
        self.value, self.assign = value, assign.copy()
        if self.listener is not None:
            self.listener(value, self.assign)
        return True


def _floor_levels(inst: MedInstance, coef: Coefficients) -> np.ndarray:
    """Per task, the least level any subset of the learners reaches within the deadline [s]."""
    return np.array([split.best_case_level(coef.A[i], coef.C[i], coef.L, int(inst.shards[i]),
                                           float(inst.deadline[i]) * (1 + TOL))
                     for i in range(inst.n_tasks)])


class _Search:
    """One run of the branch and bound: the incumbent, the bound and the time shares."""

    def __init__(self, inst: MedInstance, coef: Coefficients, time_limit: float | None
                 ) -> None:
        self.start = time.perf_counter()
        self.time_limit = time_limit
        self.deadline = self.start + (time_limit if time_limit is not None else math.inf)
        self.inst, self.coef = inst, coef
        self.ev = Evaluator(inst, coef, budget_can_bind(inst))
        self.m, self.n = inst.n_tasks, inst.n_learners
        self.stats: dict[str, Any] = {"method": "lagrangian branch and bound", "nodes": 0}
        self.best = _Incumbent(math.inf, None)
        self.columns = bundle.Columns()
        self.child_columns = self.columns
        self.sent = math.inf  # the best value the companion has been sent or sent us
        self.box: companion.Companion | None = None  # the companion, while it runs

    def _share_end(self, share: float) -> float:
        """The end of a phase that may use ``share`` of the time limit (deadline if none)."""
        return self.deadline if self.time_limit is None else self.start + share * self.time_limit

    def proven(self, bound: float) -> bool:
        return bound >= self.best.value - REL_GAP * max(1.0, abs(self.best.value))

    def improve_from(self, cover: np.ndarray) -> None:
        """Turn a subproblem cover into an assignment and polish it."""
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
        self.polish(cand)

    def polish(self, cand: np.ndarray) -> None:
        got, val = local_search(self.ev, cand,
                                min(self.deadline, time.perf_counter() + COVER_SEARCH_CAP))
        self.best.offer(val, got)

    def iterate(self, fallback: np.ndarray, root_bound: float) -> None:
        """The iterated local search before branching: a good incumbent is what prunes."""
        start_assign = self.best.assign if self.best.assign is not None else fallback
        got, val, kicks = iterated_local_search(
            self.ev, start_assign, self.best.value,
            min(self.deadline, self._share_end(ILS_SHARE)),
            patience=ILS_PATIENCE if self.time_limit is None else ILS_PATIENCE_TIMED,
            target=root_bound + REL_GAP * max(1.0, abs(root_bound)))
        self.stats["ils_kicks"] = kicks
        self.best.offer(val, got)

    def branch(self, lag: Lagrangian, root: Node, root_bound: float, cover: np.ndarray
               ) -> tuple[bool, list[float]]:
        """Best bound first (ties: deeper first): the global bound at a time limit is the least
        open bound, so expanding that node is what raises it. With a companion (``self.box``),
        allocations are exchanged with it before each node.

        Returns whether the time limit stopped it and the bounds of the nodes still open.
        """
        heap: list[HeapEntry] = []
        counter = itertools.count()
        if not self.proven(root_bound):
            heapq.heappush(heap, (root_bound, 0, next(counter), root, cover))
        box = self.box
        while heap:
            if time.perf_counter() > self.deadline:
                return True, [b for b, *_ in heap]
            if box is not None:
                self.sync(box)
            bound, _, _, node, cover = heapq.heappop(heap)
            self.stats["nodes"] += 1
            if self.proven(bound):
                continue
            got = self.node_master(lag, node)
            if box is not None and got is not None:  # its rounding, for the companion
                box.suggest(bundle.round_scores(lag, got.score))
            kids = [(c, *self.child_bound(lag, c))
                    for c in _level_split(node, got, _free(node, self.coef))]
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
                if (self.stats["nodes"] % POLISH_EVERY == 1
                        and time.perf_counter() < self.deadline):
                    self.polish_master(lag)
                if not self.proven(b):
                    heapq.heappush(heap, (b, -child.depth, next(counter), child, cov))
        return False, []

    def learner_split(self, lag: Lagrangian, node: Node, cover: np.ndarray,
                      got: bundle.Master | None) -> list[tuple[Node, float, np.ndarray]]:
        """The children of the ``_branch_learner`` split with their bounds and covers; [] at
        a leaf."""
        free = _free(node, self.coef)
        if not free.any():
            return []
        j, likely = _branch_learner(cover, None if got is None else got.score, self.coef, free)
        kids = _learner_split(node, j, likely, self.coef, self.inst.min_shards > 0)
        return [(c, *self.child_bound(lag, c)) for c in kids]

    def child_bound(self, lag: Lagrangian, child: Node) -> tuple[float, np.ndarray]:
        """A child's bound: the box-step bundle method from its parent's multipliers, its
        model of the dual function warm from the columns seen so far that the child's
        subproblems can still answer (a few subgradient steps from the parent's multipliers
        raised no child's bound on the benchmark instances); its new columns join the pool."""
        cols = self.columns.consistent(child)
        got = bundle.ascend(lag, child, self.best.value, CHILD_ITERS, self.deadline, cols)
        self.columns.merge(cols)
        self.child_columns = cols
        return got

    def node_master(self, lag: Lagrangian, node: Node) -> bundle.Master | None:
        """The restricted master LP over every column seen so far that the node allows
        (what the branching reads)."""
        return bundle.master(lag, self.columns.consistent(node),
                             max(0.0, self.deadline - time.perf_counter()))

    def polish_master(self, lag: Lagrangian) -> None:
        """The restricted master LP over the last child's columns, rounded and polished: its
        fixings make the master more integral than the root's, and on the benchmark instances
        these roundings found better allocations than the iterated local search's kicks."""
        cand = bundle.rounded_assignment(lag, self.child_columns,
                                         max(0.0, self.deadline - time.perf_counter()))
        if cand is None:
            return
        if self.box is not None:  # the companion polishes it; this process branches on
            self.box.suggest(cand)
        else:
            self.polish(cand)

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
                bound_kind: str = "a Lagrangian bound") -> Outcome:
        stats = self.stats
        final_bound = min([self.best.value, *open_bounds]) if timed_out else self.best.value
        if self.best.assign is None:
            if timed_out:
                return Outcome(TC.TIME_LIMIT, bound=root_bound, stats=stats,
                               message="time limit without a feasible allocation")
            return Outcome(TC.INFEASIBLE, bound=math.inf, stats=stats,
                           message="no feasible allocation (search exhausted)")
        assignment = self.best.assign
        val, d = self.allocation(assignment)
        stats["bound"] = final_bound
        if timed_out:
            return Outcome(TC.TIME_LIMIT, assignment, d, val, final_bound, stats=stats,
                           message=f"time limit: best allocation found and {bound_kind}")
        return Outcome(TC.CONVERGED, assignment, d, val, val, stats=stats,
                       message="proven optimal (Lagrangian branch and bound)")

    def root(self, lag: Lagrangian, root: Node, upper: float) -> tuple[float, np.ndarray]:
        """The root bound: a short subgradient warm start, then the box-step bundle method
        (``bundle``) until its certificate, the root's share of the time or ``ROOT_ITERS``."""
        end = min(self.deadline, self._share_end(ROOT_SHARE))
        warm, cover = lag.optimise(root, upper, ROOT_WARM_ITERS, end)
        if not math.isfinite(warm):
            return warm, cover
        got, got_cover = bundle.ascend(lag, root, upper, ROOT_ITERS, end, self.columns,
                                       self.stats)
        return (got, got_cover) if got >= warm else (warm, cover)

    def primal_from_master(self, lag: Lagrangian) -> None:
        """Round the restricted master LP over the root's columns and polish it."""
        cand = bundle.rounded_assignment(lag, self.columns,
                                         max(0.0, self.deadline - time.perf_counter()))
        if cand is None:
            return
        got, val = local_search(self.ev, cand,
                                min(self.deadline, time.perf_counter() + FIRST_SEARCH_CAP))
        self.stats["incumbent_from_master"] = val
        self.best.offer(val, got)

    def run(self) -> Outcome:
        inst, coef, stats = self.inst, self.coef, self.stats
        start_assign = greedy(self.ev)
        excess, value, _ = self.ev.value(parts_of(start_assign, self.m))
        if excess == 0:
            self.best.offer(value, start_assign)
        floor_levels = _floor_levels(inst, coef)
        if not np.all(np.isfinite(floor_levels)):
            return Outcome(TC.INFEASIBLE, message="a task cannot meet its deadline "
                           "even with every learner", stats=stats)
        try:
            lag = Lagrangian(inst, coef, self.ev.binds, floor_levels, self.best.value,
                             self.deadline)
            root = Node(np.full(self.n, -1, dtype=np.int64),
                        np.zeros((self.m, self.n), dtype=bool), np.zeros(self.n), 0.0)
            root_bound, cover = self.root(lag, root, self.best.value)
        except OutOfTime:  # many learners: the level tables took the time the bound needed
            assign, value = local_search(self.ev, start_assign,
                                         min(self.deadline, self.start + FIRST_SEARCH_CAP))
            self.best.offer(value, assign)
            floor = float(floor_levels.sum())
            stats["root_bound"] = floor
            return self.outcome(True, [floor], floor, bound_kind="the tasks' least levels")
        stats["root_bound"] = root_bound
        box = None
        if not self.proven(root_bound) and companion.available():
            box = self.box = companion.Companion(self.n)
            box.start(lambda b: self.companion_work(b, lag, cover, start_assign, root_bound))
            stats["companion"] = "primal heuristics in a second process beside the branching"
        else:
            lag_or_none = self.primal_first(lag, cover, start_assign, root_bound, floor_levels)
            if lag_or_none is None:
                return self.outcome(True, [root_bound], root_bound)
            lag = lag_or_none
        try:
            timed_out, open_bounds = self.branch(lag, root, root_bound, cover)
        finally:
            if box is not None:
                box.stop()
                self.sync(box)  # what it published last survives in the mailbox
                self.box = None
        return self.outcome(timed_out, open_bounds, root_bound)

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
            assign, value = local_search(self.ev, start_assign,
                                         min(self.deadline, time.perf_counter()
                                             + FIRST_SEARCH_CAP))
            self.best.offer(value, assign)
        stats["incumbent_after_local_search"] = self.best.value
        if not self.proven(root_bound):
            self.iterate(start_assign, root_bound)
        stats["incumbent_before_branching"] = self.best.value
        if math.isfinite(self.best.value):  # tables for the incumbent: fewer levels
            try:
                return Lagrangian(self.inst, self.coef, self.ev.binds, floor_levels,
                                  self.best.value, self.deadline)
            except OutOfTime:
                return None
        return lag

    def companion_work(self, box: companion.Companion, lag: Lagrangian, cover: np.ndarray,
                       start_assign: np.ndarray, root_bound: float) -> None:
        """In the companion process (a copy of this search): the primal heuristics of
        ``primal_first``, then rounds of iterated local search, each from the best allocation
        either process knows, until the deadline or the root bound; every improvement is
        published to the parent."""
        self.best.listener = box.publish
        self.primal_from_master(lag)
        self.improve_from(cover)
        assign, value = local_search(self.ev, start_assign,
                                     min(self.deadline, time.perf_counter() + FIRST_SEARCH_CAP))
        self.best.offer(value, assign)
        target = root_bound + REL_GAP * max(1.0, abs(root_bound))

        def between(best: np.ndarray, value: float) -> tuple[np.ndarray, float] | None:
            self.best.offer(value, best)  # published at once, not at the round's end
            self.take(box.incoming())
            start = box.suggestion()
            if start is not None:
                self.polish(start)
            if self.best.assign is None or not better(self.best.value, value):
                return None
            return self.best.assign, self.best.value

        for seed in itertools.count():
            if time.perf_counter() >= self.deadline or self.best.value <= target:
                break
            begin = self.best.assign if self.best.assign is not None else start_assign
            got, val, _ = iterated_local_search(
                self.ev, begin, self.best.value, self.deadline, patience=ILS_PATIENCE_TIMED,
                target=target, seed=seed, between=between)
            self.best.offer(val, got)

    def take(self, got: tuple[float, np.ndarray] | None) -> bool:
        """Keep an allocation the other process sent if, valued here, it is feasible and
        better (not passed back: the sender knows it). True if it was kept."""
        if got is None or not better(got[0], self.best.value):
            return False
        assign = got[1]
        if assign.shape != (self.n,) or assign.min() < -1 or assign.max() >= self.m:
            return False
        excess, value, _ = self.ev.value(parts_of(assign, self.m))
        listener, self.best.listener = self.best.listener, None
        try:
            return excess == 0 and self.best.offer(value, assign)
        finally:
            self.best.listener = listener

    def sync(self, box: companion.Companion) -> None:
        """The parent's exchange with the companion: take its latest allocation, send ours
        when it is better than what the companion has heard of."""
        if self.take(box.received()):
            self.stats["companion_allocations"] = self.stats.get("companion_allocations", 0) + 1
            self.sent = self.best.value
        if self.best.assign is not None and better(self.best.value, self.sent):
            box.offer(self.best.value, self.best.assign)
            self.sent = self.best.value

# The search running in this context, for snapshot() (read by the guard timer's keeper).
_RUNNING: ContextVar[_Search | None] = ContextVar("melopt_med_search", default=None)


def solve(inst: MedInstance, coef: Coefficients, *, time_limit: float | None = None
          ) -> Outcome:
    """Lagrangian branch and bound (module docstring) within ``time_limit`` seconds (None: to
    the end, a proof)."""
    search = _Search(inst, coef, time_limit)
    token = _RUNNING.set(search)
    try:
        return search.run()
    finally:
        _RUNNING.reset(token)


def snapshot() -> Outcome | None:
    """The running search's incumbent as a time-limit outcome, bounded by its root bound (or
    the tasks' least levels before the root is done); None without a running search or an
    incumbent. What a stop by the guard timer keeps (:func:`mel_opt.deadline.keep_incumbent`)."""
    search = _RUNNING.get()
    if search is None or search.best.assign is None:
        return None
    floor = search.stats.get("root_bound")
    if floor is None:
        floor = float(_floor_levels(search.inst, search.coef).sum())
    return search.outcome(True, [float(floor)], float(floor),
                          bound_kind="its root bound (stopped by the guard timer)")
