"""Primal heuristics of the branch and bound: greedy start, local search, iterated local search.

A greedy assignment (fastest learners first, each to the task whose level falls most) is
repaired and improved by local search: move one learner to another task, or swap two learners of
different tasks, while the exact value of the assignment (``evaluate.Evaluator``) falls. The
iterated local search kicks a few random learners to random tasks, polishes with swaps that
involve them and keeps what is better. On random instances with many learners and a binding
budget this search, not branching, is what closes most of the gap (the measurements on the
med page of the docs).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from mel_opt import deadline as time_budget
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.types import TOL, better, parts_of

# iterated_local_search's hook: (best, value) -> a better (allocation, value) or None
Between = Callable[[np.ndarray, float], "tuple[np.ndarray, float] | None"]
# local_search's hook: (current value) -> whether to stop here
Poll = Callable[[float], bool]


def greedy(ev: Evaluator) -> np.ndarray:
    """Fastest learners first, each to the task whose level (deadline ignored) falls most
    (empty tasks first); local search then repairs deadlines and the budget.

    Checks the solve's time limit between learners (it has no incumbent to return yet)."""
    inst, coef = ev.inst, ev.coef
    m, n = inst.n_tasks, inst.n_learners
    speed = (1.0 / coef.C).sum(axis=0)
    assign = np.full(n, -1, dtype=np.int64)
    members: list[list[int]] = [[] for _ in range(m)]
    level = [ev.raw_level(i, ()) for i in range(m)]  # each task's level, updated as it grows
    for j in np.argsort(-speed, kind="stable"):
        time_budget.check("the greedy start of the med search")
        best, best_gain = -1, -math.inf
        for i in range(m):
            if not coef.allowed[i, j] or (len(members[i]) + 1) * coef.L > inst.shards[i]:
                continue
            before = level[i]
            after = ev.raw_level(i, tuple(sorted([*members[i], int(j)])))
            if not math.isfinite(after):
                continue
            gain = math.inf if not math.isfinite(before) else before - after
            if gain > best_gain:
                best, best_gain = i, gain
        if best < 0:  # fits nowhere on its own: put it where it is allowed, repair later
            allowed = np.nonzero(coef.allowed[:, j])[0]
            best = int(allowed[0]) if allowed.size else 0
        assign[j] = best
        members[best].append(int(j))
        level[best] = ev.raw_level(best, tuple(sorted(members[best])))
    return assign


def _moved(parts: list[tuple[int, ...]], changes: dict[int, tuple[tuple[int, ...],
                                                                    tuple[int, ...]]]
           ) -> list[tuple[int, ...]]:
    """``parts`` (the learners of each task, ascending) with, per changed task, learners
    leaving and joining (task -1, "unused", holds no part): what ``parts_of`` gives for the
    changed assignment, built from the two tasks that change rather than from all of it."""
    out = list(parts)
    for i, (leave, join) in changes.items():
        if i >= 0:
            out[i] = tuple(sorted({*parts[i], *join} - set(leave)))
    return out


def local_search(ev: Evaluator, assign: np.ndarray, deadline: float,
                 focus: np.ndarray | None = None, poll: Poll | None = None
                 ) -> tuple[np.ndarray, float]:
    """Moves (also to and from "unused" when D_l = 0) and swaps while the (excess, value) pair
    falls lexicographically.

    ``focus`` (boolean per learner) limits the swaps to pairs with a focused learner (the
    learners an iterated local search just kicked); learners that move join the focus.
    ``poll(value)``, called before each learner's moves and swaps with the current value (inf
    while infeasible), may end the search there by returning True (the companion hears of
    the root's hand-over so, without cutting the descent into slices that each start the
    moves again from the first learner).
    """
    m, n = ev.inst.n_tasks, ev.inst.n_learners
    assign = assign.copy()
    focus = np.ones(n, dtype=bool) if focus is None else focus.copy()
    parts = parts_of(assign, m)  # kept in step with assign: a candidate changes two tasks
    cur = ev.value(parts)[:2]

    def cutoff() -> float:  # a candidate must beat the current value by more than TOL
        return cur[1] - TOL * abs(cur[1]) if cur[0] == 0 else math.inf

    def accept(cand: tuple[float, float]) -> bool:  # lexicographic, with that margin
        return cand < cur and (cand[0] < cur[0] or cand[1] < cutoff())

    def stop() -> bool:  # the deadline, or the caller's poll
        if time.perf_counter() > deadline:
            return True
        return poll is not None and poll(cur[1] if cur[0] == 0 else math.inf)

    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        targets = range(-1, m) if ev.inst.min_shards == 0 else range(m)
        for j in range(n):
            if stop():  # keep what the moves so far reached
                return assign, (cur[1] if cur[0] == 0 else math.inf)
            a = int(assign[j])
            for b in targets:
                if b == a or (b >= 0 and not ev.coef.allowed[b, j]):
                    continue
                assign[j] = b
                trial = _moved(parts, {a: ((j,), ()), b: ((), (j,))})
                cand = ev.value(trial, cutoff())[:2]
                if accept(cand):
                    cur, a, improved, parts = cand, b, True, trial
                    focus[j] = True
                else:
                    assign[j] = a
        for j in range(n):
            if poll is not None and stop():
                return assign, (cur[1] if cur[0] == 0 else math.inf)
            for k in range(j + 1, n):
                a, b = int(assign[j]), int(assign[k])
                if a == b or min(a, b) < 0 or not (focus[j] or focus[k]):
                    continue
                if not (ev.coef.allowed[b, j] and ev.coef.allowed[a, k]):
                    continue
                if time.perf_counter() > deadline:  # one evaluation can take milliseconds
                    break
                assign[j], assign[k] = b, a
                trial = _moved(parts, {a: ((j,), (k,)), b: ((k,), (j,))})
                cand = ev.value(trial, cutoff())[:2]
                if accept(cand):
                    cur, improved, parts = cand, True, trial
                    focus[j] = focus[k] = True
                else:
                    assign[j], assign[k] = a, b
            if time.perf_counter() > deadline:
                break
    return assign, (cur[1] if cur[0] == 0 else math.inf)


def iterated_local_search(ev: Evaluator, assign: np.ndarray, value: float, deadline: float,
                          *, patience: int, target: float = -math.inf, seed: int = 0,
                          focused: bool = True, between: Between | None = None
                          ) -> tuple[np.ndarray, float, int]:
    """Kick and polish: reassign a few random learners to random allowed tasks, run
    ``local_search`` and keep the result when its value is lower; stop after ``patience``
    kicks in a row without a gain, at ``deadline``, or once the value reaches ``target`` (a
    lower bound: nothing better exists). Seeded, so runs repeat. With ``focused`` the swaps
    after a kick involve a kicked (or since moved) learner: several times more kicks per
    second for about the same gain per kick. ``between(best, value)``, called before each
    kick, may return a better allocation found elsewhere to go on from (None: go on).

    Returns the best assignment, its value and the number of kicks tried.
    """
    n = ev.inst.n_learners
    rng = np.random.default_rng(seed)
    kick = int(min(n, max(2, round(n / 12))))
    allowed = [np.nonzero(ev.coef.allowed[:, j])[0] for j in range(n)]
    best, best_value = assign.copy(), value
    tries = stale = 0
    while stale < patience and time.perf_counter() < deadline and best_value > target:
        if between is not None:
            other = between(best, best_value)
            if other is not None and better(other[1], best_value):
                best, best_value, stale = other[0].copy(), other[1], 0
        tries += 1
        cand = best.copy()
        kicked = np.zeros(n, dtype=bool)
        for j in rng.choice(n, kick, replace=False):
            options = allowed[j]
            if ev.inst.min_shards == 0:
                options = np.append(options, -1)
            if options.size:
                cand[j] = int(rng.choice(options))
                kicked[j] = True
        cand, val = local_search(ev, cand, deadline, focus=kicked if focused else None)
        if better(val, best_value):
            best, best_value, stale = cand, val, 0
        else:
            stale += 1
    return best, best_value, tries
