"""The window structure of mel-async, and the exact algorithms built on it.

Paper 000 solves the relaxation (8) locally (IPOPT) or heuristically (KKT bounds + SAI). Here we
use a structure the paper does not: with t_k = T (relaxed) or tau_k the largest whole number of
updates that fits in T (integer), each learner's tau_k is a non-increasing function of d_k alone.
So for a staleness window [lo, hi] every learner k has an interval of admissible allocations

    d_k in [a_k(hi), b_k(lo)],
    a_k(hi) = min d with tau_k(d) <= hi,  b_k(lo) = max d with tau_k(d) >= lo,

and the window is feasible iff every interval is non-empty and sum_k a_k <= d <= sum_k b_k.
Both sums are monotone, which turns the min-max staleness problem into a few bisections and one
vectorised scan. Every function here is vectorised over learners with numpy.

Numerical contract: a pair (tau, d) "fits" when C2 tau d + C1 d + C0 <= T (1 + FIT_RTOL). The
independent verifier accepts t_k <= T (1 + 1e-9), strictly looser, so every answer built here
passes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mel_opt import deadline
from mel_opt.problems.mel_async.instance import MelAsyncInstance

FIT_RTOL = 1e-12
_CHUNK_ELEMENTS = 4_000_000  # lo-values x learners evaluated per vectorised block


# --------------------------------------------------------------------------------------------
# Integer time model: tau_k(d) = largest whole number of updates that fits in T.
# --------------------------------------------------------------------------------------------
def _fits(inst: MelAsyncInstance, tau: np.ndarray, d: np.ndarray) -> np.ndarray:
    return inst.c2 * tau * d + inst.c1 * d + inst.c0 <= inst.cycle_time * (1.0 + FIT_RTOL)


def max_updates(inst: MelAsyncInstance, d: np.ndarray) -> np.ndarray:
    """Largest integer tau_k with t_k(tau_k, d_k) <= T, per learner (-1 if even 0 does not fit).

    ``d`` has shape (K,) or (n, K) (broadcast against the learners).
    """
    d = np.asarray(d, dtype=float)
    c2, c1, c0, T = inst.c2, inst.c1, inst.c0, inst.cycle_time
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = np.floor((T - c0 - c1 * d) / (c2 * d))
    tau = np.where(np.isfinite(raw), raw, 0.0)
    tau = np.maximum(tau, -1.0)
    # floating point may put the floor one off either way: correct with the exact test
    up = _fits(inst, tau + 1, d)
    tau = np.where(up, tau + 1, tau)
    down = (tau >= 0) & ~_fits(inst, tau, d)
    tau = np.where(down, tau - 1, tau)
    return tau


def max_samples_for(inst: MelAsyncInstance, tau: np.ndarray) -> np.ndarray:
    """Largest integer d (unclipped) with t_k(tau, d) <= T, per learner; tau >= 0.

    ``tau`` has shape (K,) or (n, 1)/(n, K); returns floats holding whole numbers (or +inf when
    C2 tau + C1 = 0, i.e. tau = 0 with a free upload).
    """
    tau = np.asarray(tau, dtype=float)
    c2, c1, c0, T = inst.c2, inst.c1, inst.c0, inst.cycle_time
    slope = c2 * tau + c1
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = np.floor((T - c0) / slope)
    finite = np.isfinite(raw)
    d = np.where(finite, raw, 0.0)
    up = finite & _fits(inst, tau, d + 1)
    d = np.where(up, d + 1, d)
    down = finite & ~_fits(inst, tau, d)
    d = np.where(down, d - 1, d)
    return np.where(finite, d, np.inf)


def lower_d(inst: MelAsyncInstance, hi: np.ndarray) -> np.ndarray:
    """a_k(hi): smallest d >= d_l with tau_k(d) <= hi (may exceed d_u: then none exists)."""
    return np.maximum(float(inst.min_samples), max_samples_for(inst, np.asarray(hi) + 1.0) + 1.0)


def upper_d(inst: MelAsyncInstance, lo: np.ndarray) -> np.ndarray:
    """b_k(lo): largest d <= d_u with tau_k(d) >= lo (may fall below d_l: then none exists)."""
    return np.minimum(float(inst.max_samples), max_samples_for(inst, lo))


def fill(lo: np.ndarray, hi: np.ndarray, total: int) -> np.ndarray:
    """Integers x with lo <= x <= hi and sum x = total (requires sum lo <= total <= sum hi).

    The surplus over ``lo`` is shared in proportion to each interval's width, with the
    largest-remainder rule for the last units, so the result is deterministic and balanced.
    """
    lo_i = np.asarray(lo, dtype=np.int64)
    cap = np.asarray(hi, dtype=np.int64) - lo_i
    extra = int(total) - int(lo_i.sum())
    width = int(cap.sum())
    if extra < 0 or extra > width or np.any(cap < 0):
        raise ValueError("fill: the intervals cannot add up to the total")
    if extra == 0 or width == 0:
        return lo_i.copy()
    share = cap.astype(float) * (extra / width)
    x = np.minimum(np.floor(share).astype(np.int64), cap)
    rest = extra - int(x.sum())
    if rest > 0:
        order = np.argsort(-(share - x), kind="stable")
        room = order[(cap - x)[order] > 0]
        x[room[:rest]] += 1
    return lo_i + x


@dataclass(frozen=True)
class IntegerWindow:
    """The exact integer optimum: window [lo, hi] and the allocation built from it."""

    lo: int
    hi: int
    d: np.ndarray
    tau: np.ndarray
    lo_candidates: int  # how many lo values the scan looked at (for the record)
    optimal_los: tuple[int, ...] = ()  # every lo whose window [lo, lo + s*] is optimal, descending


def _last_at_least(f: Callable[[int], float], target: float, lo: int, hi: int) -> int:
    """Largest integer x in [lo, hi] with f(x) >= target, for f non-increasing; lo - 1 if none.

    Safeguarded interpolation (regula falsi on the integers, on 1/f): each step evaluates f
    where the chord of 1/f between the bracket's ends meets 1/target (the midpoint when f is
    not positive and finite at both ends); when the same end has moved n >= 2 times in a row
    the step reaches 2^(n-1) times as far, so a stalled end costs O(log) steps. The sums
    searched here, sum_k (T - C0_k)/(C2_k x + C1_k) rounded and clipped, are close to
    A / (x + c), on which the chord of 1/f is exact, so a handful of evaluations replace the
    log2(hi - lo) of bisection (each is a pass over all learners).
    """
    f_good = f(lo)
    if f_good < target:
        return lo - 1
    f_bad = f(hi)
    if f_bad >= target:
        return hi
    good, bad = lo, hi
    moved, stalls = 0, 0  # which end moved last (+1 good, -1 bad), and how often in a row
    while bad - good > 1:
        width = bad - good
        if 0 < f_bad < f_good < np.inf:  # chord of 1/f: exact for f = A / (x + c)
            x = good + int(np.floor((1 / target - 1 / f_good) / (1 / f_bad - 1 / f_good)
                                    * width))
        else:
            x = (good + bad) // 2
        if stalls >= 2:  # one end keeps moving: reach past the estimate, further each time
            reach = 2 ** (stalls - 1)
            x = (good + reach * max(1, x - good) if moved > 0
                 else bad - reach * max(1, bad - x))
        x = min(max(x, good + 1), bad - 1)
        fx = f(x)
        side = 1 if fx >= target else -1
        if side > 0:
            good, f_good = x, fx
        else:
            bad, f_bad = x, fx
        stalls = stalls + 1 if side == moved else 1
        moved = side
    return good


def integer_feasible(inst: MelAsyncInstance) -> tuple[bool, str]:
    """Whether some integer allocation lets every learner do at least one update."""
    b1 = upper_d(inst, np.ones(inst.K))
    if np.any(b1 < inst.min_samples):
        k = int(np.argmin(b1 - inst.min_samples))
        return False, f"learner {inst.learner_names[k]} cannot finish one update on d_l samples"
    cap = float(b1.sum())
    if cap < inst.total_samples:
        return False, (
            f"with one update each the learners can take at most {int(cap)} samples in "
            f"T = {inst.cycle_time:g} s, fewer than total_samples = {inst.total_samples}"
        )
    return True, ""


def _piece_count(sub: MelAsyncInstance, lo_min: int, lo_max: int) -> int:
    """How many (learner, d) pairs :func:`_envelope` would enumerate for [lo_min, lo_max]."""
    b_top = upper_d(sub, np.full(sub.K, float(lo_max)))
    b_bot = upper_d(sub, np.full(sub.K, float(lo_min)))
    return int((b_bot - b_top + 1).sum())


def _envelope(sub: MelAsyncInstance, lo_min: int, lo_max: int) -> np.ndarray:
    """M(lo) = max_k m_k(lo) of ``sub`` for lo = lo_min..lo_max (ascending), exactly.

    Learner k reaches, for lo in the range, only the levels tau_k(d) of the sample counts
    d in [b_k(lo_max), b_k(lo_min)]. With r = tau_k(d), m_k(lo) = r exactly for
    tau_k(d + 1) < lo <= r (the last d: for every lo down to lo_min). Each such piece starts
    at p = tau_k(d + 1) + 1; since every m_k(lo) >= lo, M(lo) is the running maximum over
    p <= lo of the largest r starting at p (a piece that ended below lo has r < lo <= M(lo),
    so counting it does no harm). Cost: one pass over the pairs, few when tau is large (one
    more sample changes tau by many updates).
    """
    K = sub.K
    R = lo_max - lo_min + 1
    if K == 0:
        return np.full(R, -np.inf)
    b_top = upper_d(sub, np.full(K, float(lo_max)))
    b_bot = upper_d(sub, np.full(K, float(lo_min)))
    n = (b_bot - b_top + 1).astype(np.int64)
    k = np.repeat(np.arange(K), n)
    d = b_top[k] + (np.arange(k.size) - np.repeat(np.cumsum(n) - n, n))
    per = dataclasses.replace(sub, c2=sub.c2[k], c1=sub.c1[k], c0=sub.c0[k])
    r = max_updates(per, d)
    last = np.cumsum(n) - 1  # each learner's last pair (d = b_k(lo_min))
    start = np.empty_like(r)
    start[:-1] = r[1:] + 1  # tau_k(d + 1) + 1 within a learner's run of consecutive d
    start[last] = lo_min
    start = np.clip(start, lo_min, lo_max).astype(np.int64) - lo_min
    top = np.full(R, -np.inf)
    np.maximum.at(top, start, r)
    return np.maximum.accumulate(top)


def exact_integer(inst: MelAsyncInstance, *, checked: bool = False) -> IntegerWindow | None:
    """Minimum maximum staleness over integer allocations, ties broken by the largest min tau.

    Each learner does tau_k(d_k) updates, the largest whole number that fits in T (the integer
    meaning of "busy for the whole cycle", (7b)), and at least one. Returns None if infeasible
    (``checked``: the caller has already established :func:`integer_feasible`).

    Method: for a window [lo, hi] let M(lo) = max_k m_k(lo), where m_k(lo) = tau_k(b_k(lo)) is
    the smallest tau >= lo learner k can reach. The window is feasible iff lo <= L (largest lo
    with sum_k b_k(lo) >= d), hi >= H (smallest hi with sum_k a_k(hi) <= d) and hi >= M(lo).
    Hence the optimum is min over 1 <= lo <= L of s(lo) = max(M(lo), H) - lo, and since
    s(lo) >= H - lo only lo in [H - s(L), L] can improve on s(L). L and H are found by
    safeguarded interpolation on the monotone sums (:func:`_last_at_least`); H starts from
    P = max_k tau_k(d_u), below which some a_k(hi) exceeds d_u.

    The scan over that range needs M(lo), which is non-decreasing in lo (so is every m_k). With
    lo_min the bottom of the range, every m_k(lo) there lies in [m_k(lo_min), m_k(L)] and
    M(lo) >= G = M(lo_min); a learner with m_k(L) <= G can never raise M above G in the range,
    so M(lo) = max(G, max over the other learners of m_k(lo)) and the scan (from L downwards,
    vectorised in blocks) only walks those others: two passes over all learners, then a
    subset (on the 1,000,000-learner instances with tau in the thousands, a few percent).
    It keeps the first (largest) lo of the best value and lists every optimal lo in
    ``optimal_los`` (the second, average-staleness stage of ``exact`` in :mod:`lexicographic`
    chooses among them).
    """
    if not checked:
        ok, _ = integer_feasible(inst)
        if not ok:
            return None
    K, d_tot = inst.K, inst.total_samples
    dl, du = inst.min_samples, inst.max_samples
    tau_at_dl = max_updates(inst, np.full(K, float(dl)))
    q = int(tau_at_dl.min())  # no window can start above the slowest learner's best
    top = int(tau_at_dl.max())

    def sum_b(lo: int) -> float:
        return float(upper_d(inst, np.full(K, float(lo))).sum())

    def sum_a(hi: int) -> float:
        return float(lower_d(inst, np.full(K, float(hi))).sum())

    L = _last_at_least(sum_b, d_tot, 1, q)
    # a_k(hi) <= d_u iff tau_k(d_u) <= hi; from P on only the sum can fail, and it holds at top
    # (a_k(top) = d_l for all k, and K d_l <= d since sum_k b_k(1) >= d)
    P = max(0, int(max_updates(inst, np.full(K, float(du))).max()))
    H = _last_at_least(sum_a, d_tot + 1, P, top) + 1

    def m_each(sub: MelAsyncInstance, los: np.ndarray) -> np.ndarray:
        """m_k(lo) per (lo, learner) of ``sub``; every lo <= q, so each b_k(lo) >= d_l."""
        return max_updates(sub, upper_d(sub, los[:, None] * np.ones((1, sub.K))))

    m_L = m_each(inst, np.array([float(L)]))[0]
    best_s = float(max(m_L.max(), H) - L)
    best_lo = L
    scanned = 1
    ties: list[tuple[np.ndarray, np.ndarray]] = [(np.array([L]), np.array([best_s]))]
    floor_lo = max(1, int(H - best_s))
    if floor_lo < L:
        g = float(m_each(inst, np.array([float(floor_lo)]))[0].max())
        keep = m_L > g
        sub = dataclasses.replace(inst, c2=inst.c2[keep], c1=inst.c1[keep], c0=inst.c0[keep])
        pieces = _piece_count(sub, floor_lo, L - 1)
        if pieces <= (L - floor_lo) * sub.K:
            # few sample counts per learner in the range (large tau): the envelope at once
            los = np.arange(L - 1, floor_lo - 1, -1, dtype=float)
            s = np.maximum(np.maximum(_envelope(sub, floor_lo, L - 1)[::-1], g), H) - los
            scanned += los.size
            i = int(np.argmin(s))
            if s[i] < best_s:
                best_s, best_lo = float(s[i]), int(los[i])
            ties.append((los, s))
        else:
            block = max(1, _CHUNK_ELEMENTS // max(1, sub.K))
            upper = L - 1
            while True:
                deadline.check("the exact window scan")
                floor_lo = max(1, int(H - best_s))
                if upper < floor_lo:
                    break
                start = max(floor_lo, upper - block + 1)
                los = np.arange(upper, start - 1, -1, dtype=float)  # descending
                m = np.full(los.size, g)
                if sub.K:
                    m = np.maximum(m, m_each(sub, los).max(axis=1))
                s = np.maximum(m, H) - los
                scanned += los.size
                i = int(np.argmin(s))  # first minimum = largest lo in this block
                if s[i] < best_s:
                    best_s, best_lo = float(s[i]), int(los[i])
                tie = s <= best_s
                if tie.any():
                    ties.append((los[tie], s[tie]))
                upper = start - 1
    # every optimal lo was scanned (lo < H - s* has s(lo) >= H - lo > s*), in descending order
    optimal_los = tuple(int(x) for los_b, s_b in ties for x in los_b[s_b == best_s])
    lo = best_lo
    hi = int(best_s) + lo
    a = lower_d(inst, np.full(K, float(hi)))
    b = upper_d(inst, np.full(K, float(lo)))
    d = fill(a, b, d_tot)
    tau = max_updates(inst, d.astype(float)).astype(np.int64)
    return IntegerWindow(lo=lo, hi=hi, d=d, tau=tau, lo_candidates=scanned,
                          optimal_los=optimal_los)


# --------------------------------------------------------------------------------------------
# The relaxation (8): continuous tau_k >= 0 and d_l <= d_k <= d_u with t_k = T exactly.
# --------------------------------------------------------------------------------------------
def relaxed_tau(inst: MelAsyncInstance, d: np.ndarray) -> np.ndarray:
    """tau_k solving (8c) for given d_k: (T - C0 - C1 d) / (C2 d)."""
    d = np.asarray(d, dtype=float)
    return (inst.cycle_time - inst.c0 - inst.c1 * d) / (inst.c2 * d)


def relaxed_d(inst: MelAsyncInstance, tau: np.ndarray) -> np.ndarray:
    """d_k solving (8c) for given tau_k: (T - C0) / (C2 tau + C1) (inf if the slope is 0)."""
    with np.errstate(divide="ignore", over="ignore"):
        return (inst.cycle_time - inst.c0) / (inst.c2 * np.asarray(tau, dtype=float) + inst.c1)


@dataclass(frozen=True)
class RelaxedWindow:
    """Certified global optimum of (8): z* = max(P, H*) - min(Q, L*) (or 0), and a point."""

    z: float
    lo: float
    hi: float
    d: np.ndarray
    tau: np.ndarray


def _bisect_decreasing(
    f: Callable[[float], float], target: float, lo: float, hi: float
) -> float:
    """x in [lo, hi] with f(x) = target for f continuous and non-increasing (to ~1 ulp).

    The bracket [lo, hi] keeps f(lo) >= target > f(hi) (as bisection would) until its ends
    are adjacent floats; each step evaluates f where the chord of 1/f between the ends meets
    1/target (regula falsi on 1/f: exact for f = A / (x + c); f is positive here), except
    that after two steps in a row that moved the same end it bisects (the usual safeguard:
    the stuck end then moves too). On the sums searched here this takes 12-16 evaluations
    instead of bisection's 50-60, each a pass over all learners.
    """
    f_lo, f_hi = f(lo), f(hi)
    moved, stalls = 0, 0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        x = mid
        span = 1 / f_hi - 1 / f_lo if f_lo >= target > f_hi > 0 else 0.0
        if stalls < 2 and 0 < span < np.inf:
            # chord of 1/f: exact for f = A / (x + c), the shape of sum_k D_k(x)
            x = lo + (1 / target - 1 / f_lo) / span * (hi - lo)
            if not lo < x < hi:
                x = mid
        fx = f(x)
        side = 1 if fx >= target else -1
        if side > 0:
            lo, f_lo = x, fx
        else:
            hi, f_hi = x, fx
        stalls = 0 if x == mid else (stalls + 1 if side == moved else 1)
        moved = side
    return 0.5 * (lo + hi)


def relaxed_optimum(inst: MelAsyncInstance) -> RelaxedWindow | None:
    """Global optimum of the relaxation (8), certified by the window argument.

    With t_k = T, tau_k(d) = (T - C0 - C1 d)/(C2 d) is strictly decreasing, so learner k can
    reach exactly the taus in [tau_k(d_u'), tau_k(d_l)] with d_u' = min(d_u, (T - C0)/C1)
    (8e: tau_k >= 0). A window [lo, hi] is feasible iff lo <= Q = min_k tau_k(d_l),
    hi >= P = max_k tau_k(d_u'), lo <= L* (sum_k min(d_u, D_k(lo)) >= d) and
    hi >= H* (sum_k max(d_l, D_k(hi)) <= d), where D_k(t) = (T - C0)/(C2 t + C1). Every
    feasible point of (8) lies in such a window and every such window holds a feasible point,
    so z* = max(0, max(P, H*) - min(Q, L*)) is the global optimum, not a local one.
    Returns None when (8) is infeasible.
    """
    K, d_tot = inst.K, float(inst.total_samples)
    dl, du = float(inst.min_samples), float(inst.max_samples)
    T = inst.cycle_time
    with np.errstate(divide="ignore", over="ignore"):
        d_zero = np.where(inst.c1 > 0, (T - inst.c0) / inst.c1, np.inf)  # tau_k = 0 here
    du_eff = np.minimum(du, d_zero)
    if np.any(du_eff < dl):
        return None

    def sum_b(lo: float) -> float:
        return float(np.minimum(du, relaxed_d(inst, np.full(K, lo))).sum())

    def sum_a(hi: float) -> float:
        return float(np.maximum(dl, relaxed_d(inst, np.full(K, hi))).sum())

    if sum_b(0.0) < d_tot * (1 - 1e-15):
        return None
    Q = float(relaxed_tau(inst, np.full(K, dl)).min())
    P = float(max(0.0, relaxed_tau(inst, du_eff).max()))
    L = Q if sum_b(Q) >= d_tot else _bisect_decreasing(sum_b, d_tot, 0.0, Q)
    top = float(relaxed_tau(inst, np.full(K, dl)).max())
    H = P if sum_a(P) <= d_tot else _bisect_decreasing(sum_a, d_tot + 0.0, P, top)
    lo_w, hi_w = min(Q, L), max(P, H)
    if hi_w <= lo_w:
        # zero staleness: one common tau on which the clipped allocations add up to d
        def clipped(t: float) -> float:
            return float(np.clip(relaxed_d(inst, np.full(K, t)), dl, du).sum())

        t0 = _bisect_decreasing(clipped, d_tot, hi_w, lo_w)
        lo_w = hi_w = t0
    a = np.maximum(dl, relaxed_d(inst, np.full(K, hi_w)))
    b = np.minimum(du, relaxed_d(inst, np.full(K, lo_w)))
    a = np.minimum(a, b)
    span = float((b - a).sum())
    theta = 0.0 if span <= 0 else min(1.0, max(0.0, (d_tot - a.sum()) / span))
    d = a + theta * (b - a)
    tau = np.maximum(relaxed_tau(inst, d), 0.0)
    return RelaxedWindow(z=max(0.0, hi_w - lo_w), lo=lo_w, hi=hi_w, d=d, tau=tau)
