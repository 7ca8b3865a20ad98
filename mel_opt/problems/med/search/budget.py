"""The budget subproblem of a fixed assignment: pick each task's level under one budget.

With the learners of every task fixed, task i's least cost is a falling step function C_i(H) of
its level H (``split.cost_frontier``). The best levels solve

    min sum_i H_i   s.t.   sum_i C_i(H_i) <= B,

a multiple-choice knapsack over the steps; with m <= a handful of tasks an exact dynamic
programme over Pareto-optimal (sum of levels, sum of costs) pairs is small.
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
        ok = (c + rest_cost[i] <= limit) & (h + rest_level[i] < cutoff)
        if not ok.any():
            return None
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
    return float(sum_h[0]), chosen
