"""The budget subproblem of a fixed assignment: pick each task's level under one budget.

With the learners of every task fixed, task i's least cost is a falling step function C_i(H) of
its level H (``split.cost_frontier``). The best levels solve

    min sum_i H_i   s.t.   sum_i C_i(H_i) <= B,

a multiple-choice knapsack over the steps, solved exactly by a dynamic programme over the
Pareto-optimal (sum of levels, sum of costs) pairs of the first tasks.

With hundreds of steps per task and ten tasks that Pareto set grows into the millions, so the
programme prunes with the Lagrangian relaxation of the budget: for any mu >= 0, tasks j > i
given what is left of the budget need at least sum_j min_H (H + mu C_j(H)) - mu (B - c) in
levels, so a partial choice (h, c) over tasks <= i cannot end below

    h + mu c + G_i(mu) - mu B,     G_i(mu) = sum_{j > i} min_H (H + mu C_j(H)).

mu is the relaxation's critical multiplier (bisection on the total cost of each task's
minimiser of H + mu C), and the minimisers at the feasible end of the bracket are an answer
whose value U is the bar: a partial choice whose bound already reaches U (or the caller's
cutoff) is dropped. At N = 1,000 learners x 10 tasks (about 700 steps a task) this takes
the programme from seconds to milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

REL_TOL = 1e-9
# The programme runs unpruned until one step would form more than this many (state, step)
# pairs: on small fronts the relaxation costs more than it saves.
PRUNE_FROM = 20_000


def best_levels(frontiers: list[tuple[np.ndarray, np.ndarray]], budget: float,
                cutoff: float = np.inf) -> tuple[float, list[int]] | None:
    """Exact multiple-choice knapsack over the tasks' cost steps.

    Parameters
    ----------
    frontiers : list of (levels, costs)
        Per task, its levels (ascending) and least costs (descending).
    budget : float
        B of (4.4d).
    cutoff : float
        Only answers with a sum of levels below it are of interest (None otherwise).

    Returns
    -------
    (sum of levels, chosen step per task), or None when no choice fits the budget (or beats
    ``cutoff``).
    """
    limit = budget * (1 + REL_TOL) + REL_TOL
    prune = _Pruning(cutoff, np.zeros(len(frontiers) + 1))
    floor_cost = np.array([float(c.min()) for _, c in frontiers])
    floor_level = np.array([float(lv.min()) for lv, _ in frontiers])
    rest_cost = np.concatenate([np.cumsum(floor_cost[::-1])[::-1][1:], [0.0]])
    rest_level = np.concatenate([np.cumsum(floor_level[::-1])[::-1][1:], [0.0]])
    sum_h = np.zeros(1)
    sum_c = np.zeros(1)
    parents: list[tuple[np.ndarray, np.ndarray]] = []
    for i, (lev, cost) in enumerate(frontiers):
        alive = np.arange(sum_h.size)
        if not prune.active and sum_h.size * lev.size > PRUNE_FROM:
            if prune.start(frontiers, limit, budget):  # decided by the relaxation alone
                return prune.answer()
            alive = np.flatnonzero(prune.keeps(i - 1, sum_h, sum_c, budget))
        h = (sum_h[alive, None] + lev[None, :]).ravel()
        c = (sum_c[alive, None] + cost[None, :]).ravel()
        src = np.repeat(alive, lev.size)
        pick = np.tile(np.arange(lev.size), alive.size)
        ok = ((c + rest_cost[i] <= limit) & (h + rest_level[i] < cutoff)
              & prune.keeps(i, h, c, budget))
        if not ok.any():  # nothing beats the relaxation's answer (or the cutoff)
            return prune.answer()
        h, c, src, pick = h[ok], c[ok], src[ok], pick[ok]
        order = np.lexsort((c, h))
        h, c, src, pick = h[order], c[order], src[order], pick[order]
        keep = np.ones(h.size, dtype=bool)
        keep[1:] = c[1:] < np.minimum.accumulate(c)[:-1] - 1e-12  # Pareto: cheaper than all lower
        sum_h, sum_c = h[keep], c[keep]
        parents.append((src[keep], pick[keep]))
    k = 0  # sum_h ascending: the first Pareto point is the least sum of levels
    chosen = [0] * len(frontiers)
    for i in range(len(frontiers) - 1, -1, -1):
        src, pick = parents[i]
        chosen[i] = int(pick[k])
        k = int(src[k])
    if prune.upper <= float(sum_h[0]):
        return prune.answer()
    return float(sum_h[0]), chosen


def relaxed_bound(frontiers: list[tuple[np.ndarray, np.ndarray]], budget: float, mu: float
                  ) -> float:
    """The budget's Lagrangian bound at multiplier ``mu`` >= 0: sum_i min_H (H + mu C_i(H))
    - mu B', B' the budget with ``best_levels``'s round-off slack; no choice of steps within
    the budget has a smaller sum of levels (any mu; the critical one is the tightest)."""
    limit = budget * (1 + REL_TOL) + REL_TOL
    return sum(float(np.min(lv + mu * c)) for lv, c in frontiers) - mu * limit


def critical_multiplier(frontiers: list[tuple[np.ndarray, np.ndarray]], budget: float
                        ) -> float | None:
    """The budget's critical Lagrange multiplier for these frontiers (0 when the tasks' least
    levels fit; None when even the cheapest steps do not)."""
    relaxed = _relaxation(frontiers, budget * (1 + REL_TOL) + REL_TOL)
    return None if relaxed is None else relaxed[0]


@dataclass
class _Pruning:
    """The Lagrangian pruning of the module docstring, off until :meth:`start` (the programme
    switches it on when a step would form more than ``PRUNE_FROM`` pairs)."""

    cutoff: float
    later: np.ndarray  # G_i(mu) for each task i, then G_{-1} (read as later[-1])
    mu: float = 0.0
    upper: float = np.inf  # the relaxation's rounded answer, and its choice
    choice: list[int] = field(default_factory=list)
    bar: float = np.inf
    slack: float = 0.0
    active: bool = False

    def start(self, frontiers: list[tuple[np.ndarray, np.ndarray]], limit: float,
              budget: float) -> bool:
        """Solve the relaxation; True when it decides the answer (:meth:`answer`) alone."""
        relaxed = _relaxation(frontiers, limit)
        if relaxed is None:  # even the cheapest steps do not fit
            return True
        self.mu, self.upper, self.choice = relaxed
        if self.mu == 0.0:  # every task's least level fits the budget: nothing is lower
            return True
        mins = np.array([float(np.min(lv + self.mu * c)) for lv, c in frontiers])
        # later[i] = G_i; before any task (i = -1) every task is still to come
        self.later = np.concatenate([np.cumsum(mins[::-1])[::-1][1:], [0.0], [mins.sum()]])
        self.bar = min(self.upper, self.cutoff)
        # a margin for round-off in the bound (it only ever keeps more)
        self.slack = 1e-9 * (abs(self.upper) + self.mu * limit + float(np.abs(mins).sum()))
        self.slack += 1e-12
        self.active = True
        return False

    def keeps(self, i: int, h: np.ndarray, c: np.ndarray, budget: float) -> np.ndarray:
        """Which partial choices (h, c) over tasks <= i may still end below the bar."""
        if not self.active:
            return np.ones(h.shape, dtype=bool)
        return h + self.mu * c + (self.later[i] - self.mu * budget) < self.bar + self.slack

    def answer(self) -> tuple[float, list[int]] | None:
        """The relaxation's answer if it is below the cutoff (None otherwise)."""
        return (self.upper, self.choice) if self.upper < self.cutoff else None


def _minimisers(lev: np.ndarray, cost: np.ndarray, starts: np.ndarray, mu: float
                ) -> np.ndarray:
    """Per task (segments of the concatenated steps from ``starts``), the global index of the
    step minimising H + mu C; among ties the cheapest (the last one)."""
    val = lev + mu * cost
    seg_min = np.minimum.reduceat(val, starts)
    sizes = np.diff(np.append(starts, val.size))
    at_min = val <= np.repeat(seg_min, sizes)
    index = np.where(at_min, np.arange(val.size), -1)
    return np.maximum.reduceat(index, starts)


def _relaxation(frontiers: list[tuple[np.ndarray, np.ndarray]], limit: float
                ) -> tuple[float, float, list[int]] | None:
    """(mu, U, choice): the budget's critical Lagrange multiplier and the minimisers of
    H + mu C at it, a choice within ``limit`` of value U. None if even the cheapest steps
    exceed ``limit``."""
    sizes = np.array([lv.size for lv, _ in frontiers])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    lev = np.concatenate([lv for lv, _ in frontiers])
    cost = np.concatenate([c for _, c in frontiers])
    cheapest = starts + sizes - 1
    if float(cost[cheapest].sum()) > limit:
        return None

    def answer(mu: float, picks: np.ndarray) -> tuple[float, float, list[int]]:
        chosen = _spend_leftover(frontiers, (picks - starts).tolist(),
                                 limit - float(cost[picks].sum()))
        return mu, sum(float(lv[k]) for (lv, _), k in zip(frontiers, chosen, strict=True)), chosen

    if float(cost[starts].sum()) <= limit:
        return answer(0.0, starts)
    lo, hi = 0.0, 1.0
    while float(cost[_minimisers(lev, cost, starts, hi)].sum()) > limit:
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:  # the cheapest steps fit, so a large enough mu picks them
            return answer(1e300, cheapest)
    while hi - lo > 1e-9 * hi:  # the bound holds for any mu; this is close enough to mu*
        mid = 0.5 * (lo + hi)
        if float(cost[_minimisers(lev, cost, starts, mid)].sum()) > limit:
            lo = mid
        else:
            hi = mid
    return answer(hi, _minimisers(lev, cost, starts, hi))


def _spend_leftover(frontiers: list[tuple[np.ndarray, np.ndarray]], pick: list[int],
                    left: float) -> list[int]:
    """Lower one task's level at a time, the largest fall the unused budget ``left`` pays
    for, while any fits (the relaxation's answer leaves budget unused)."""
    pick = list(pick)
    while True:
        best, gain, spend = -1, 0.0, 0.0
        for i, (lev, cost) in enumerate(frontiers):
            k = pick[i]
            fits = np.flatnonzero(cost[:k] - cost[k] <= left)  # lower steps it can pay for
            if fits.size and lev[k] - lev[fits[0]] > gain:
                best, gain, spend = i, float(lev[k] - lev[fits[0]]), float(
                    cost[fits[0]] - cost[k])
                step = int(fits[0])
        if best < 0:
            return pick
        pick[best] = step
        left -= spend
