"""The second stage of ``exact`` for s* >= 2 in reduction form: a knapsack DP bound, fixing by
it, a branch and bound on threshold counts, and the small MILP left over.

Used by :mod:`lexicographic` (which owns the limits and the order of the windows); the
notation (windows [lo, hi], a_k, b_k, the pair sum as sum_theta m_theta (K - m_theta)) is
that module's.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

import numpy as np

from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.instance import MelAsyncInstance
from mel_opt.solvers.base import SolverResult

MAX_BRANCH_WORK = 750_000_000  # DP cells per window in the branch and bound (12,500 per
# learner for the loop)
BRANCH_SPREAD = 8  # branch only if the root gap is at most 8 times its largest chord loss


@dataclass(frozen=True)
class LexResult:
    """Best (13) found among the max-staleness optima; ``proven`` if every MILP was optimal."""

    d: np.ndarray
    tau: np.ndarray
    pair_sum: int  # sum_{k<l} |tau_k - tau_l| (N times the average staleness (13))
    proven: bool
    windows: int
    note: str = ""
    # a lower bound on pair_sum over every optimal window (pair_sum itself when proven; None
    # when no bound is known)
    bound: int | None = None

    @property
    def lower(self) -> int | None:
        """The least pair sum any allocation of the windows can have, as far as is known."""
        return self.pair_sum if self.proven else self.bound


def pair_sum(tau: np.ndarray) -> int:
    """sum_{k<l} |tau_k - tau_l| (N times (13)) in O(K log K): sum_i (2i - K + 1) tau_(i)."""
    t = np.sort(np.asarray(tau, dtype=np.int64))
    K = t.size
    return int(((2 * np.arange(K) - K + 1) * t).sum())


_NEG = np.iinfo(np.int64).min // 4  # "unreachable" in the max-plus DP (sums stay finite)


@dataclass(frozen=True)
class WindowDP:
    """One window [lo, lo + s] in reduction form, with its DP bound and incumbent.

    Every allocation of the window has d_k in [A_k, B_k] (A_k = a_k(hi), B_k = b_k(lo)) and
    sum d = d_tot. Written from one end, d_k = base_k - step r_k (from B: step +1, the levels
    rise with r; from A: step -1, they fall) with r_k in [0, R_k] and sum r = S (S = sum B -
    d_tot or d_tot - sum A, whichever is smaller): a single equality knapsack in small
    integers. ``tau[k, r]`` is learner k's level at r (constant past R_k). See
    :func:`window_dp` for the bound.
    """

    lo: int
    hi: int
    base: np.ndarray
    step: int
    S: int
    R: np.ndarray
    tau: np.ndarray
    movers: np.ndarray  # learners whose level changes for some r <= R_k
    still: np.ndarray  # the others
    base_sum: int  # pair sum with every r_k = 0
    slope: np.ndarray  # per threshold: the decrease per learner moved across it, less u^2
    L: np.ndarray  # per threshold: the fewest and the most learners any allocation moves
    U: np.ndarray  # across it
    value: np.ndarray  # value[k, r]: learner k's share of the root bound's decrease
    forward: np.ndarray  # forward[i, c]: the root DP over the movers before i (and the rest)
    bound: int  # lower bound on the window's pair sum (root)
    incumbent: LexResult  # the root DP's allocation, scored exactly


def _maxplus(dp: np.ndarray, val: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One knapsack item: out[c] = max_{r <= c} dp[c - r] + val[r], and the r chosen."""
    c = np.arange(dp.size)[:, None]
    src = c - np.arange(val.size)[None, :]
    cand = np.where(src >= 0, dp[np.maximum(src, 0)] + val[None, :], _NEG)
    best = cand.argmax(axis=1)
    return np.maximum(cand[np.arange(dp.size), best], _NEG), best


def _values(w: WindowDP, lo_u: np.ndarray, hi_u: np.ndarray) -> tuple[np.ndarray, int]:
    """Per learner and r, the chord bound's decrease for u_theta in [lo_u, hi_u]; and the
    constant sum_theta lo_u hi_u it carries."""
    cw = np.concatenate([[0], np.cumsum(w.slope + lo_u + hi_u)]).astype(np.int64)
    f = w.tau[:, 0]
    value = w.step * (cw[w.tau - w.lo] - cw[f - w.lo][:, None])
    r = np.arange(w.tau.shape[1])
    return np.where(r[None, :] <= w.R[:, None], value, _NEG), int((lo_u * hi_u).sum())


def _knapsack(w: WindowDP, value: np.ndarray, keep: bool = False
              ) -> tuple[int, np.ndarray, np.ndarray | None]:
    """max sum_k value[k, r_k] over sum r = S (exact DP in S + 1 states): the maximum (or
    _NEG if none), a maximising r, and (``keep``) the forward table."""
    K, S = w.tau.shape[0], w.S
    dp = np.full(S + 1, _NEG, dtype=np.int64)
    dp[:min(S, int(w.R[w.still].sum())) + 1] = 0  # learners that keep their level absorb r
    forward = np.empty((w.movers.size + 1, S + 1), dtype=np.int64) if keep else None
    choice = np.empty((w.movers.size, S + 1), dtype=np.int64)
    for i, k in enumerate(w.movers):
        if forward is not None:
            forward[i] = dp
        dp, choice[i] = _maxplus(dp, value[k, :w.R[k] + 1])
    if forward is not None:
        forward[-1] = dp
    rk = np.zeros(K, dtype=np.int64)
    if dp[S] <= _NEG:
        return int(_NEG), rk, forward
    c = S
    for i in range(w.movers.size - 1, -1, -1):
        rk[w.movers[i]] = choice[i, c]
        c -= int(choice[i, c])
    for k in w.still:  # the rest of S goes to learners whose level it does not change
        take = min(c, int(w.R[k]))
        rk[k], c = take, c - take
    return int(dp[S]), rk, forward


def _score(inst: MelAsyncInstance, w: WindowDP, rk: np.ndarray) -> LexResult:
    """The allocation d = base - step r, scored exactly."""
    d = (w.base - w.step * rk).astype(np.int64)
    tau = W.max_updates(inst, d.astype(float)).astype(np.int64)
    return LexResult(d, tau, pair_sum(tau), True, 1)


def window_dp(inst: MelAsyncInstance, lo: int, hi: int, m_min: np.ndarray,
              m_max: np.ndarray, max_work: int) -> WindowDP | None:
    """The reduction form of the window [lo, hi], a lower bound and an allocation; None if
    the window holds none or the DP would cost more than ``max_work`` (cells of the level
    table, or of the DP).

    The pair sum is sum_theta g(m_theta), g(m) = m (K - m). Let m0 be the counts with every
    r_k = 0 and u_theta = |m_theta - m0_theta| the learners a solution moves across theta
    (all in one direction: from B the levels only rise). Then g(m_theta) = g(m0_theta) -
    u (K - 2 m0_theta) - u^2 from B (+ u (K - 2 m0_theta) - u^2 from A), and u_theta lies
    in [L_theta, U_theta], the fewest and the most learners that can cross theta (from the
    counts of :func:`threshold_bounds`), so u^2 <= (L + U) u - L U (the chord of u^2 over
    [L, U]). The decrease from the base pair sum is therefore at most a constant plus, per
    learner, the weights of the thresholds it crosses: separable. Its maximum over sum r = S
    is a multiple-choice knapsack in S + 1 states, solved exactly by DP; the base pair sum
    minus it bounds the window below, and the DP's own allocation, scored exactly, is an
    incumbent.
    """
    K, d_tot = inst.K, int(inst.total_samples)
    B = W.upper_d(inst, np.full(K, float(lo)))
    A = W.lower_d(inst, np.full(K, float(hi)))
    if np.any(A > B) or A.sum() > d_tot or B.sum() < d_tot:
        return None
    down, up = int(B.sum()) - d_tot, d_tot - int(A.sum())
    step = 1 if down <= up else -1
    S = min(down, up)
    base = B if step == 1 else A
    R = np.minimum(S, B - A).astype(np.int64)
    width = int(R.max()) + 1  # tau[k, r] stays at tau[k, R_k] past R_k
    r = np.arange(width)
    movable = np.flatnonzero(R > 0)
    if K * width > max_work or (S + 1) * int((R[movable] + 1).sum()) > max_work:
        return None
    tau = np.repeat(W.max_updates(inst, base.astype(float)).astype(np.int64)[:, None],
                    width, axis=1)
    if movable.size:
        sub = dataclasses.replace(inst, c2=inst.c2[movable], c1=inst.c1[movable],
                                  c0=inst.c0[movable])
        d = base[movable][None, :] - step * np.minimum(r[:, None], R[movable][None, :])
        tau[movable] = W.max_updates(sub, d.astype(float)).T.astype(np.int64)
    f = tau[:, 0]
    m0 = np.searchsorted(np.sort(f), np.arange(lo, hi), side="right")
    if step == 1:  # u = m0 - m in [m0 - m_max, m0 - m_min]
        L, U = np.maximum(0, m0 - m_max), np.maximum(0, m0 - m_min)
    else:  # u = m - m0 in [m_min - m0, m_max - m0]
        L, U = np.maximum(0, m_min - m0), np.maximum(0, m_max - m0)
    movers = np.flatnonzero(tau[np.arange(K), R] != f)
    still = np.setdiff1d(np.arange(K), movers)
    w = WindowDP(lo, hi, base, step, S, R, tau, movers, still, pair_sum(f),
                  step * (K - 2 * m0), L, U, np.empty(0), np.empty(0), 0,
                  LexResult(base, f, 0, False, 1))
    value, const = _values(w, L, U)
    best, rk, forward = _knapsack(w, value, keep=True)
    if best <= _NEG:
        return None
    assert forward is not None
    return dataclasses.replace(w, value=value, forward=forward,
                               bound=w.base_sum + const - best, incumbent=_score(inst, w, rk))


def refine(inst: MelAsyncInstance, w: WindowDP, target: int, max_nodes: int
            ) -> tuple[bool, LexResult]:
    """Branch and bound on the counts u_theta, with the DP as the bound: whether every
    allocation of the window with pair sum below ``target`` was ruled out or found, and the
    best allocation met.

    A node is a box [lo_u, hi_u] of counts; the chord of u^2 over the box bounds every
    allocation inside it (and undervalues those outside, so the DP's maximum over all of them
    is still a bound for the box). The DP's own allocation is scored; if its counts make the
    chord exact the node closes, else the threshold where the chord overestimates most is
    split at the allocation's count. Best-first, up to ``max_nodes`` DPs.
    """
    best = w.incumbent
    f = w.tau[:, 0]
    thetas = np.arange(w.lo, w.hi)

    def chord_loss(rk: np.ndarray, lo_u: np.ndarray, hi_u: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Per threshold, the allocation's count u and how much the chord overvalues it."""
        t = w.tau[np.arange(f.size), rk]  # each learner's level at its r (the DP's table)
        a, b = (f, t) if w.step == 1 else (t, f)
        u = ((a[None, :] <= thetas[:, None]) & (b[None, :] > thetas[:, None])).sum(axis=1)
        return u, (hi_u - u) * (u - lo_u)

    root_rk = np.rint((w.base - w.incumbent.d) * w.step).astype(np.int64)
    if best.pair_sum - w.bound > BRANCH_SPREAD * int(chord_loss(root_rk, w.L, w.U)[1].max()):
        return False, best  # the gap is spread over many thresholds: splitting one at a
        # time would not close it within the budget
    per_dp = 12_500 * w.movers.size + (w.S + 1) * int((w.R[w.movers] + 1).sum())
    max_nodes = min(max_nodes, MAX_BRANCH_WORK // max(1, per_dp))
    heap: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = [
        (w.bound, 0, w.L, w.U, np.empty(0))]
    nodes, tick = 0, 1
    while heap:
        bound, _, lo_u, hi_u, rk = heapq.heappop(heap)
        if bound >= min(target, best.pair_sum):
            return True, best
        if nodes >= max_nodes:
            return False, best
        u, loss = chord_loss(root_rk if rk.size == 0 else rk, lo_u, hi_u)
        th = int(np.argmax(loss))
        if loss[th] <= 0:
            continue  # the chord is exact at the DP's allocation: scored already
        for part in ((lo_u[th], u[th]), (u[th] + 1, hi_u[th])):
            c_lo, c_hi = lo_u.copy(), hi_u.copy()
            c_lo[th], c_hi[th] = part
            value, const = _values(w, c_lo, c_hi)
            gain, c_rk, _ = _knapsack(w, value)
            nodes += 1
            if gain <= _NEG:
                continue
            found = _score(inst, w, c_rk)
            if found.pair_sum < best.pair_sum:
                best = found
            c_bound = w.base_sum + const - gain
            if c_bound < min(target, best.pair_sum):
                heapq.heappush(heap, (c_bound, tick, c_lo, c_hi, c_rk))
                tick += 1
    return True, best


def surviving_levels(w: WindowDP, target: int) -> tuple[np.ndarray, np.ndarray]:
    """Per learner, the range of levels an allocation with pair sum below ``target`` can
    use: a mover's r is kept only if the DP bound with r fixed (the best of the movers
    before it, from ``forward``, and after it, from a backward pass) is below ``target``.
    Learners that cannot move keep their one level."""
    f = w.tau[:, 0]
    first, last = f.copy(), f.copy()
    S = w.S
    top = w.bound + int(w.forward[-1][S])  # the base pair sum plus the chord constant
    back = np.full(S + 1, _NEG, dtype=np.int64)
    back[0] = 0
    rows = np.arange(S + 1)[None, :]
    for i in range(w.movers.size - 1, -1, -1):
        k = w.movers[i]
        val = w.value[k, :w.R[k] + 1]
        rr = np.arange(val.size)[:, None]
        # best[r] = max_c forward[i][c] + back[S - r - c]
        idx = S - rr - rows
        both = np.where(idx >= 0, w.forward[i][None, :] + back[np.maximum(idx, 0)], _NEG)
        ub = val + both.max(axis=1)
        keep = top - ub < target
        if keep.any():
            levels = w.tau[k, :val.size][keep]
            first[k], last[k] = levels.min(), levels.max()
        else:
            first[k], last[k] = 1, 0  # no level can beat the target
        back, _ = _maxplus(back, val)
    return first, last


def free_options(w: WindowDP, first: np.ndarray, last: np.ndarray) -> int:
    """How many (learner, level) choices beyond one per learner the ranges leave."""
    t = w.tau
    inside = (np.arange(1, t.shape[1])[None, :] <= w.R[:, None]) & (t[:, 1:] >= first[:, None]) \
        & (t[:, 1:] <= last[:, None]) & (t[:, :-1] >= first[:, None]) & (t[:, :-1] <= last[:, None])
    return int(((t[:, 1:] != t[:, :-1]) & inside).sum())


def _choices(w: WindowDP, free: np.ndarray, first: np.ndarray, last: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The free learners' choices: learner, level in [first, last], and the range of r that
    gives it (contiguous: the level is monotone in r)."""
    opt_k, opt_t, opt_lo, opt_hi = [], [], [], []
    for k in free:
        levels = w.tau[k, :w.R[k] + 1]
        for t in np.unique(levels[(levels >= first[k]) & (levels <= last[k])]):
            where = np.flatnonzero(levels == t)
            opt_k.append(k)
            opt_t.append(int(t))
            opt_lo.append(int(where[0]))
            opt_hi.append(int(where[-1]))
    return (np.array(opt_k, dtype=np.int64), np.array(opt_t, dtype=np.int64),
            np.array(opt_lo, dtype=np.int64), np.array(opt_hi, dtype=np.int64))


def reduced_window(inst: MelAsyncInstance, w: WindowDP, first: np.ndarray,
                   last: np.ndarray, m_min: np.ndarray, m_max: np.ndarray,
                   time_limit: float | None, max_binaries: int
                   ) -> tuple[SolverResult | None, LexResult | None, int]:
    """Least pair sum in the window with learner k's level in [first_k, last_k] (from
    :func:`surviving_levels`): the result of HiGHS (None when no MILP was needed), the
    allocation (None: none exists) and the MILP's number of columns.

    Only the learners left free get binaries x[k, t] (one per level they can take, with the
    range of r that gives it); the others contribute their fixed level and their r-range.
    The count at or below theta is the fixed learners' (a constant per theta) plus the free
    ones'; that changes only at the free learners' levels, so one count binary y[i, j] per
    run i between two consecutive such levels and j free learners at or below it, costing
    sum over the run's thresholds of g(fixed_theta + j), gives the exact pair sum.
    """
    K, S, lo, hi = inst.K, w.S, w.lo, w.hi
    width = w.tau.shape[1]
    inside = np.arange(width)[None, :] <= w.R[:, None]
    free = np.flatnonzero(first < last)
    # each fixed learner's r-range at its level (contiguous: the level is monotone in r)
    at = inside & (w.tau == first[:, None])
    if not np.all(at.any(axis=1)):
        return None, None, 0
    r_lo = np.argmax(at, axis=1)
    r_hi = width - 1 - np.argmax(at[:, ::-1], axis=1)
    fixed = np.ones(K, dtype=bool)
    fixed[free] = False
    thetas = np.arange(lo, hi)
    fixed_le = np.searchsorted(np.sort(first[fixed]), thetas, side="right")
    base_lo, base_hi = int(r_lo[fixed].sum()), int(r_hi[fixed].sum())
    k_o, t_o, lo_o, hi_o = _choices(w, free, first, last)
    g = np.arange(K + 1) * (K - np.arange(K + 1))
    u = np.unique(t_o)
    n_free = free.size
    # thresholds below every free level count no free learner, those at or above the last
    # count all of them
    const = int(g[fixed_le[thetas < (u[0] if u.size else hi)]].sum())
    if u.size:
        const += int(g[fixed_le[thetas >= u[-1]] + n_free].sum())
    runs = u[:-1]
    R_ = runs.size
    j_lo = np.searchsorted(np.sort(last[free]), runs, side="right") if R_ else runs
    j_hi = np.searchsorted(np.sort(first[free]), runs, side="right") if R_ else runs
    span = [np.arange(runs[i] - lo, u[i + 1] - lo) for i in range(R_)]
    for i in range(R_):  # the per-threshold bounds minus the fixed learners' share
        j_lo[i] = max(j_lo[i], int((m_min[span[i]] - fixed_le[span[i]]).max()))
        j_hi[i] = min(j_hi[i], int((m_max[span[i]] - fixed_le[span[i]]).min()))
    if np.any(j_lo > j_hi):
        return None, None, 0
    width = j_hi - j_lo + 1
    nx = k_o.size
    n = nx + int(width.sum())
    if n > max_binaries:
        return None, None, n
    r_of = np.repeat(np.arange(R_), width)
    j = j_lo[r_of] + (np.arange(r_of.size) - np.repeat(np.cumsum(width) - width, width))
    y_cost = np.array([int(g[fixed_le[span[i]] + jj].sum()) for i, jj in zip(r_of, j, strict=True)],
                      dtype=float)
    col = {int(k): c for c, k in enumerate(free)}
    pick = np.array([col[int(k)] for k in k_o], dtype=np.int64)
    below_r, below_x = np.nonzero(t_o[None, :] <= runs[:, None])
    ycol = nx + np.arange(r_of.size)
    # rows: 0..F-1 one level per free learner; F the r-sum (S between its two ends);
    # F+1 the other end; F+2.. pick one count per run; F+2+R.. count = the free learners below
    F = n_free
    rows = np.concatenate([pick, np.full(nx, F), np.full(nx, F + 1), F + 2 + r_of,
                           F + 2 + R_ + below_r, F + 2 + R_ + r_of])
    cols = np.concatenate([np.arange(nx), np.arange(nx), np.arange(nx), ycol, below_x, ycol])
    values = np.concatenate([np.ones(nx), lo_o, hi_o, np.ones(r_of.size),
                             np.ones(below_r.size), -j]).astype(float)
    row_lo = np.concatenate([np.ones(F), [-np.inf, S - base_hi], np.ones(R_), np.zeros(R_)])
    row_hi = np.concatenate([np.ones(F), [S - base_lo, np.inf], np.ones(R_), np.zeros(R_)])
    cost = np.concatenate([np.zeros(nx), y_cost])
    if n == 0:  # nothing left free: the fixed levels are the only candidate
        if not base_lo <= S <= base_hi:
            return None, None, 0
        res = None
        lo_r, hi_r = r_lo, r_hi
    else:
        from mel_opt.solvers import highs

        res = highs.solve_arrays(cost, rows, cols, values, (row_lo, row_hi),
                                 (np.zeros(n), np.ones(n)), np.ones(n, dtype=bool),
                                 time_limit=time_limit, mip_gap=0.0)
        if not res.has_solution:
            return res, None, n
        chosen = res.x[:nx] > 0.5
        lo_r, hi_r = r_lo.copy(), r_hi.copy()
        lo_r[k_o[chosen]], hi_r[k_o[chosen]] = lo_o[chosen], hi_o[chosen]
    rk = W.fill(lo_r, hi_r, S)
    d = (w.base - w.step * rk).astype(np.int64)
    tau = W.max_updates(inst, d.astype(float)).astype(np.int64)
    return res, LexResult(d, tau, pair_sum(tau), True, 1), n
