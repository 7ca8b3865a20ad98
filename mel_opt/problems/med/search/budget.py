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

import numpy as np

REL_TOL = 1e-9


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
    relaxed = _relaxation(frontiers, limit)
    if relaxed is None:
        return None
    mu, upper, choice = relaxed
    if mu == 0.0:  # every task's least level fits the budget: nothing is lower
        return (upper, choice) if upper < cutoff else None
    # G_i of the module docstring, with a margin for round-off in the bound
    mins = np.array([float(np.min(lv + mu * c)) for lv, c in frontiers])
    later = np.concatenate([np.cumsum(mins[::-1])[::-1][1:], [0.0]])
    bar = min(upper, cutoff)
    slack = 1e-9 * (abs(upper) + mu * limit + float(np.abs(mins).sum())) + 1e-12
    floor_cost = np.array([float(c.min()) for _, c in frontiers])
    floor_level = np.array([float(lv.min()) for lv, _ in frontiers])
    rest_cost = np.concatenate([np.cumsum(floor_cost[::-1])[::-1][1:], [0.0]])
    rest_level = np.concatenate([np.cumsum(floor_level[::-1])[::-1][1:], [0.0]])
    sum_h = np.zeros(1)
    sum_c = np.zeros(1)
    parents: list[tuple[np.ndarray, np.ndarray]] = []
    for i, (lev, cost) in enumerate(frontiers):
        h = (sum_h[:, None] + lev[None, :]).ravel()
        c = (sum_c[:, None] + cost[None, :]).ravel()
        src = np.repeat(np.arange(sum_h.size), lev.size)
        pick = np.tile(np.arange(lev.size), sum_h.size)
        ok = ((c + rest_cost[i] <= limit) & (h + rest_level[i] < cutoff)
              & (h + mu * c + (later[i] - mu * budget) < bar + slack))
        if not ok.any():  # nothing beats the relaxation's answer (or the cutoff)
            return (upper, choice) if upper < cutoff else None
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
    if upper <= float(sum_h[0]):
        return (upper, choice) if upper < cutoff else None
    return float(sum_h[0]), chosen


def _minimisers(frontiers: list[tuple[np.ndarray, np.ndarray]], mu: float) -> list[int]:
    """Per task, the step minimising H + mu C; among ties the cheapest (the last one)."""
    out = []
    for lev, cost in frontiers:
        val = (lev + mu * cost)[::-1]
        out.append(lev.size - 1 - int(np.argmin(val)))
    return out


def _relaxation(frontiers: list[tuple[np.ndarray, np.ndarray]], limit: float
                ) -> tuple[float, float, list[int]] | None:
    """(mu, U, choice): the budget's critical Lagrange multiplier and the minimisers of
    H + mu C at it, a choice within ``limit`` of value U. None if even the cheapest steps
    exceed ``limit``."""
    def cost_of(pick: list[int]) -> float:
        return sum(float(c[k]) for (_, c), k in zip(frontiers, pick, strict=True))

    def level_of(pick: list[int]) -> float:
        return sum(float(lv[k]) for (lv, _), k in zip(frontiers, pick, strict=True))

    cheapest = [lv.size - 1 for lv, _ in frontiers]
    if cost_of(cheapest) > limit:
        return None
    least = [0] * len(frontiers)
    if cost_of(least) <= limit:
        return 0.0, level_of(least), least
    lo, hi = 0.0, 1.0
    while cost_of(_minimisers(frontiers, hi)) > limit:
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:  # the cheapest steps fit, so a large enough mu picks them
            return 1e300, level_of(cheapest), cheapest
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if cost_of(_minimisers(frontiers, mid)) > limit:
            lo = mid
        else:
            hi = mid
    pick = _minimisers(frontiers, hi)
    pick = _spend_leftover(frontiers, pick, limit - cost_of(pick))
    return hi, level_of(pick), pick


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
