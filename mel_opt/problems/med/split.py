"""Exact integer shard splits of one task among a fixed set of learners.

For a fixed assignment, task i's part of (4.4) is: choose whole d_j >= L for the learners W_i,
sum_j d_j = D_i, to minimise the maximum expected delay H = max_j (A_j + C_j d_j). Learner j can
hold at most cap_j(H) = floor((H - A_j) / C_j) shards at level H, so H is feasible iff every
cap_j(H) >= L and sum_j cap_j(H) >= D. Beyond the L shards every learner holds, the k-th extra
shard of learner j finishes at A_j + C_j (L + k), an increasing sequence per learner; the least
feasible H is therefore max(max_j (A_j + C_j L), the E-th smallest of the merged sequences),
E = D - |W| L (the classical min-max water-filling argument). We find it exactly among the
few candidates between the continuous bound and that bound plus |W| / sum_j (1 / C_j).

With a budget (4.4d), each task also has a least cost at level H: every learner gets L shards,
the remaining ones go to the cheapest learners up to their caps (greedy is optimal for this
knapsack with unit weights). The cost falls in steps as H grows; ``cost_frontier`` lists them.
"""

from __future__ import annotations

import math

import numpy as np

from mel_opt.problems.med.latency import shards_within


def steps(A: np.ndarray, C: np.ndarray, k0: np.ndarray, k1: np.ndarray) -> np.ndarray:
    """The levels A_t + C_t k for k = k0_t .. k1_t of every t, concatenated (t-major, k
    ascending; an empty range adds nothing).

    One vectorised pass with the same arithmetic as ``A[t] + C[t] * np.arange(k0[t], k1[t] +
    1)`` per t, so the values are bit-for-bit those of the per-learner loop.
    """
    k0 = np.asarray(k0, dtype=np.int64)
    m = np.maximum(np.asarray(k1, dtype=np.int64) - k0 + 1, 0)
    total = int(m.sum())
    if total == 0:
        return np.zeros(0)
    t = np.repeat(np.arange(m.size), m)
    k = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(m) - m, m) + k0[t]
    return A[t] + C[t] * k


def min_max_level(A: np.ndarray, C: np.ndarray, count: np.ndarray, L: int, D: int) -> float:
    """Least maximum expected delay H* of a task split among groups of learners [s].

    Parameters
    ----------
    A, C : float arrays (g,)
        Coefficients of each group (learners of one type) for this task.
    count : int array (g,)
        Learners in each group (0 allowed: the group is absent).
    L : int
        Shards every learner holds at least.
    D : int
        Shards of the task.

    Returns
    -------
    float
        H*; ``inf`` when no learner is given or ``sum(count) * L > D``.
    """
    present = count > 0
    if not present.any():
        return math.inf
    A, C, n = A[present], C[present], count[present].astype(float)
    N = float(n.sum())
    if N * L > D:
        return math.inf
    base = float(np.max(A + C * L))
    E = D - N * L
    if E == 0:
        return base
    speed = float((n / C).sum())
    lo = (E + float((n * (L + A / C)).sum())) / speed  # continuous (fractional shard) bound
    hi = lo + N / speed  # floors lose < 1 shard per learner, so count(hi) >= E
    if base >= hi:
        return base
    lo = max(lo, base)
    while True:  # one pass in exact arithmetic; the loop only guards against round-off
        level = _first(A, C, n, L, E, lo, hi)
        if level is not None:
            return level
        hi += N / speed


def _first(A: np.ndarray, C: np.ndarray, n: np.ndarray, L: int, E: float, lo: float,
           hi: float) -> float | None:
    """Smallest level in [lo, hi] (lo or some A_t + C_t k) whose extra capacity reaches E."""
    k0 = np.ceil((lo - A) / C - 1e-9).astype(np.int64)
    k1 = np.floor((hi - A) / C + 1e-9).astype(np.int64)
    cand = np.unique(np.concatenate([[lo], steps(A, C, k0, k1)]))
    caps = shards_within(A[None, :], C[None, :], cand[:, None])
    extra = (n[None, :] * np.maximum(0, caps - L)).sum(axis=1)
    ok = np.nonzero(extra >= E)[0]
    return float(cand[ok[0]]) if ok.size else None


def fill(L: int, caps: np.ndarray, D: int, order: np.ndarray) -> np.ndarray | None:
    """Whole shards d with L <= d <= caps and sum D, filling in ``order`` (cheapest first).

    Returns None when ``sum(caps) < D`` or ``L * len(caps) > D``.
    """
    caps = np.asarray(caps, dtype=np.int64)
    if np.any(caps < L) or L * caps.size > D or int(caps.sum()) < D:
        return None
    d = np.full(caps.size, L, dtype=np.int64)
    left = D - L * caps.size
    for j in order:
        take = min(int(caps[j]) - L, left)
        d[j] += take
        left -= take
        if left == 0:
            break
    return d


def split_at(A: np.ndarray, C: np.ndarray, price: np.ndarray, L: int, D: int,
             H: float) -> np.ndarray | None:
    """Least-cost whole split of D shards with every delay A_j + C_j d_j <= H (or None)."""
    caps = shards_within(A, C, H)
    return fill(L, caps, D, np.argsort(price, kind="stable"))


def cost_frontier(A: np.ndarray, C: np.ndarray, price: np.ndarray, L: int, D: int,
                  h_min: float, h_max: float) -> tuple[np.ndarray, np.ndarray]:
    """The steps of a task's least cost as its level H rises from ``h_min`` to ``h_max``.

    Parameters
    ----------
    A, C, price : float arrays (w,)
        The learners serving the task.
    h_min : float
        Its least level H* (``min_max_level``).
    h_max : float
        Largest level of interest (the deadline, or less when an incumbent bounds it).

    Returns
    -------
    levels, costs : float arrays
        Levels where the least cost strictly falls (first entry ``h_min``), and those costs;
        between two levels the cost of the lower one holds.
    """
    w = A.size
    order = np.argsort(price, kind="stable")
    A, C, p = A[order], C[order], price[order]
    most = D - (w - 1) * L  # no learner can hold more
    k0 = shards_within(A, C, h_min) + 1
    k1 = np.minimum(shards_within(A, C, h_max), most)
    cand = np.unique(np.concatenate([[h_min], steps(A, C, k0, k1)]))
    caps = np.minimum(shards_within(A[None, :], C[None, :], cand[:, None]), most)
    extra = np.maximum(0, caps - L)
    need = D - w * L
    before = np.cumsum(extra, axis=1) - extra
    take = np.clip(need - before, 0, extra)
    cost = L * float(p.sum()) + (take * p[None, :]).sum(axis=1)
    keep = np.ones(cand.size, dtype=bool)
    keep[1:] = cost[1:] < np.minimum.accumulate(cost)[:-1] - 1e-12
    return cand[keep], cost[keep]


def min_max_levels(A: np.ndarray, C: np.ndarray, counts: np.ndarray, L: int, D: int
                   ) -> np.ndarray:
    """``min_max_level`` for many count vectors at once (rows of ``counts``, shape (S, g)).

    Vectorised bisection on H for the least level whose extra capacity reaches E, then the
    exact level: the largest candidate A_t + C_t k at or below the bisection's upper end (no
    other candidate lies between them once the bracket is narrower than round-off).
    """
    counts = np.asarray(counts, dtype=float)
    out = np.full(counts.shape[0], math.inf)
    N = counts.sum(axis=1)
    ok = (N >= 1) & (N * L <= D)
    if not ok.any():
        return out
    n = counts[ok]
    present = n > 0
    base = np.max(np.where(present, A[None, :] + C[None, :] * L, -math.inf), axis=1)
    E = D - n.sum(axis=1) * L
    speed = (n / C[None, :]).sum(axis=1)
    lo = (E + (n * (L + A[None, :] / C[None, :])).sum(axis=1)) / speed
    hi = lo + n.sum(axis=1) / speed
    lo = np.minimum(np.maximum(lo, base), hi)
    # invariant: extra(hi) >= E (hi >= base after the max below); find the least such level
    hi = np.maximum(hi, base)
    lo = np.minimum(lo, hi)
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        caps = shards_within(A[None, :], C[None, :], mid[:, None])
        extra = (n * np.maximum(0, caps - L)).sum(axis=1)
        good = (extra >= E) & (mid >= base)
        hi = np.where(good, mid, hi)
        lo = np.where(good, lo, mid)
        if np.all(hi - lo <= 1e-12 * np.maximum(1.0, hi)):
            break
    caps = shards_within(A[None, :], C[None, :], hi[:, None])
    at = np.where(present & (caps >= L), A[None, :] + C[None, :] * caps, -math.inf)
    level = np.maximum(base, at.max(axis=1))
    out[ok] = np.where(E == 0, base, level)
    return out


def best_case_level(A: np.ndarray, C: np.ndarray, L: int, D: int, h_max: float) -> float:
    """Least level any subset of the given learners can reach for one task [s].

    A subset W reaches H only if every member meets H with L shards and their caps cover D;
    choosing W freely, H is reachable iff the learners with cap(H) >= L hold D together (the
    limit |W| L <= D is dropped, so this is a lower bound on every assignment's level).
    ``inf`` if no level up to ``h_max`` works.
    """
    top = np.minimum(shards_within(A, C, h_max), D)
    levels = steps(A, C, np.full(A.size, L), top)
    if not levels.size:
        return math.inf
    cand = np.unique(levels)

    def covers(h: float) -> bool:
        caps = np.minimum(shards_within(A, C, h), D)
        return int(np.where(caps >= L, caps, 0).sum()) >= D

    # what the learners hold together only grows with H: bisect the sorted candidates
    if not covers(float(cand[-1])):
        return math.inf
    lo, hi = -1, cand.size - 1  # covers(cand[hi]); not covers(cand[lo]) (lo = -1: none)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if covers(float(cand[mid])):
            hi = mid
        else:
            lo = mid
    return float(cand[hi])
