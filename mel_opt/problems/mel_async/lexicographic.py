"""Second stage of ``exact``: least average staleness (13) among the max-staleness optima.

Paper 000 minimises the maximum staleness (6) and reports the average staleness (13) beside it.
Many allocations share the optimal maximum s*, with different averages, so ``exact`` optimises
lexicographically: first (6) (the window algorithm of :mod:`windows`, which also lists every
optimal window [lo, lo + s*]), then (13) over all of them, here.

Inside a window each learner k takes one of the values t in [lo, hi] it can reach: tau_k = t
exactly for d_k in [a_k(t), b_k(t)] (a, b as in :mod:`windows`), and a choice of values is
feasible iff sum_k a_k(t_k) <= d <= sum_k b_k(t_k) (the intervals can then be filled). For
integer taus the pairwise sum in (13) counts, for each threshold theta in [lo, hi - 1], the
pairs split by it:

    sum_{k<l} |t_k - t_l| = sum_theta m_theta (K - m_theta),   m_theta = #{k : t_k <= theta}.

So each window is an exact MILP: binaries x[k, t] (learner k takes t), one per learner,
m_theta = sum_{k, t <= theta} x[k, t], and binaries y[theta, j] = [m_theta = j] that turn the
concave objective into the linear sum_j j (K - j) y[theta, j]. Thresholds between two
consecutive levels that some learner can reach share m_theta, so one y-row per such run, its
cost weighted by the run's length, does the work of all of them. HiGHS solves it; every window
proven optimal makes the average level proven. Its size is the number of reachable (learner,
level) pairs plus (K + 1) per run, small in the paper's regime (s* of a few updates).

With s* = 1 (two levels: the random preset at every K we tried up to 10,000) only the number
m of learners at the lower level matters, the objective m (K - m) is concave in m, and the
feasible m form a subset of an interval whose ends are the fewest and the most learners
that can take the lower level; those two counts come from sorting (a greedy set that meets
the bound proves itself) or, when both sample constraints bind, from a MILP with one binary per
learner and two rows. That is exact at any K, in milliseconds (see :func:`_two_level_window`).
For s* >= 2 each threshold theta on its own is such a two-level problem
(at or below theta, or above it), which gives the fewest and the most learners m_theta can
count (:func:`threshold_bounds`). That alone bounds (13) weakly, because it drops the
coupling of the thresholds through each learner's one sample count. The reduction form keeps
it (:func:`window_dp`): every allocation of the window is d_k = B_k - r_k (or A_k + r_k)
with sum r_k = S, S = sum B - d (or d - sum A, the smaller), a small integer on the presets
(2-220 samples on mohammad2020 from K = 100 to 10,000: the optimal window is tight). Moving
u_theta learners across theta changes g(m_theta) = m_theta (K - m_theta) by a linear term and
u_theta^2; bounding u^2 by its chord over the counts the thresholds allow makes the change
separable by learner, and its best value over sum r = S is a knapsack in S + 1 states,
solved exactly by DP. That gives a lower bound and an allocation (scored exactly). Where
they differ, either the DP fixes every learner whose other levels cannot beat the best
found (forward and backward passes) and HiGHS solves the MILP over the few learners left
(:func:`reduced_window`), or a branch and bound splits the count range of the threshold
whose chord is loosest, with the DP as the bound (:func:`refine`). Measured on
mohammad2020, K = 60 to 10,000, seeds 0-2, T = 7.5 and 15 s (48 instances, maximum
staleness 5 to 1,346): every second stage proven, in at most about 0.5 s (0.2-0.5 s at
K = 10,000); the per-threshold bound and cut MILP alone were proven only to K = 250. Where
the DP would be too large (``MAX_DP_WORK``) the per-threshold bound and the window MILP cut
to it are used as before; past ``MAX_BINARIES`` binaries the result is the best found,
reported not proven, with its bound in the message (the ``large-tau`` preset at
K = 10,000: S in the hundreds, each learner reaching only 1-3 levels, the gap stays about
0.3 %).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.instance import MelAsyncInstance
from mel_opt.problems.mel_async.reduction import (
    LexResult,
    free_options,
    pair_sum,
    reduced_window,
    refine,
    surviving_levels,
    window_dp,
)
from mel_opt.solvers.base import SolverResult

MAX_BINARIES = 10_000  # per window MILP (s* >= 2); beyond it the window is not proven
# (the linearised concave objective has a weak LP bound; with the counts cut by
# threshold_bounds HiGHS still needs 6-22 s at 11,000-19,000 binaries, K = 500-10,000)
MAX_DP_WORK = 50_000_000  # per window: the learners' level table, and the DP's cells
# (S + 1 states x the r-range of each learner that can move)
MAX_DP_NODES = 200  # DPs per window in the branch and bound on threshold counts
SMALL_REDUCED = 300  # free (learner, level) pairs left by the DP's fixing that go straight
# to the reduced MILP; with more, the branch and bound runs first
MAX_THRESHOLD_WORK = 20_000_000  # learners x thresholds x windows for threshold_bounds
# (about 0.05 s per million; past it, e.g. 1,000,000 learners with s* = 249, it is skipped)


@dataclass(frozen=True)
class _WindowMILP:
    """The MILP of one window as arrays for :func:`mel_opt.solvers.highs.solve_arrays`.

    Columns: x[p] for every reachable pair p = (learner k, level t) with its d-interval
    [a_p, b_p], then y[r, j] for each run r of thresholds between two consecutive reachable
    levels and j = 0..K (exactly j learners at or below the run). Rows: each learner picks one
    level; sum a <= d <= sum b; each run picks one count j, equal to the number of x at or
    below it. The objective sum_r len_r sum_j j (K - j) y[r, j] is sum_{k<l} |tau_k - tau_l|.
    """

    k: np.ndarray  # learner of each pair
    t: np.ndarray  # level of each pair
    a: np.ndarray  # d-interval of each pair
    b: np.ndarray
    cost: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray


def _span(inst: MelAsyncInstance) -> tuple[np.ndarray, np.ndarray]:
    """Per learner, the fewest and the most updates its d in [d_l, d_u] can give:
    tau(d_u), tau(d_l) (tau_k falls as d_k grows)."""
    K = inst.K
    return (W.max_updates(inst, np.full(K, float(inst.max_samples))),
            W.max_updates(inst, np.full(K, float(inst.min_samples))))


def _levels(inst: MelAsyncInstance, lo: int, hi: int,
            span: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per learner, the range of levels in [lo, hi] its d in [d_l, d_u] can give (may be
    empty: first > last): [tau(d_u), tau(d_l)] clipped to the window (``span``: those two
    arrays, :func:`_span`, if already computed)."""
    first, last = _span(inst) if span is None else span
    return np.maximum(first, lo).astype(np.int64), np.minimum(last, hi).astype(np.int64)


def _window_model(inst: MelAsyncInstance, first: np.ndarray, last: np.ndarray,
                  lo: int | None = None, m_min: np.ndarray | None = None,
                  m_max: np.ndarray | None = None) -> _WindowMILP | None:
    """The MILP of one window from each learner's level range (None: a learner has none).

    ``m_min``, ``m_max`` (indexed by threshold - ``lo``): bounds every feasible allocation
    satisfies on the count at or below each threshold (:func:`threshold_bounds`); the count
    binaries of a run then cover only the counts its thresholds' bounds allow.
    """
    K = inst.K
    counts = np.maximum(0, last - first + 1)
    k = np.repeat(np.arange(K), counts)
    t = first[k] + (np.arange(k.size) - np.repeat(np.cumsum(counts) - counts, counts))
    # one pseudo-learner per pair: the window functions broadcast over the learner axis
    per_pair = dataclasses.replace(inst, c2=inst.c2[k], c1=inst.c1[k], c0=inst.c0[k])
    a = W.lower_d(per_pair, t.astype(float))
    b = W.upper_d(per_pair, t.astype(float))
    keep = a <= b  # a level inside the range may still be skipped (granular taus)
    k, t, a, b = k[keep], t[keep], a[keep], b[keep]
    if np.any(np.bincount(k, minlength=K) == 0):
        return None
    nx = k.size
    u = np.unique(t)  # reachable levels; thresholds between u[r] and u[r+1] - 1 share m
    runs, length = u[:-1], np.diff(u).astype(float)
    R = runs.size
    j_lo = np.zeros(R, dtype=np.int64)
    j_hi = np.full(R, K, dtype=np.int64)
    if m_min is not None and m_max is not None and lo is not None:
        for r in range(R):  # every threshold of the run has the run's count
            j_lo[r] = int(m_min[runs[r] - lo:u[r + 1] - lo].max())
            j_hi[r] = int(m_max[runs[r] - lo:u[r + 1] - lo].min())
    if np.any(j_lo > j_hi):
        return None
    width = j_hi - j_lo + 1
    r_of = np.repeat(np.arange(R), width)
    j = j_lo[r_of] + (np.arange(r_of.size) - np.repeat(np.cumsum(width) - width, width))
    ycol = nx + np.arange(r_of.size)
    d_tot = float(inst.total_samples)
    below_r, below_x = np.nonzero(t[None, :] <= runs[:, None])  # x counted by run r
    # rows: 0..K-1 one level per learner; K low; K+1 high; K+2.. pick; K+2+R.. count
    rows = np.concatenate([k, np.full(nx, K), np.full(nx, K + 1), K + 2 + r_of,
                           K + 2 + R + below_r, K + 2 + R + r_of])
    cols = np.concatenate([np.arange(nx), np.arange(nx), np.arange(nx), ycol, below_x, ycol])
    values = np.concatenate([np.ones(nx), a, b, np.ones(r_of.size), np.ones(below_r.size),
                             -j.astype(float)])
    row_lo = np.concatenate([np.ones(K), [-np.inf, d_tot], np.ones(R), np.zeros(R)])
    row_hi = np.concatenate([np.ones(K), [d_tot, np.inf], np.ones(R), np.zeros(R)])
    cost = np.concatenate([np.zeros(nx), length[r_of] * (j * (K - j))])
    return _WindowMILP(k, t, a, b, cost, rows, cols, values.astype(float), row_lo, row_hi)


def threshold_bounds(inst: MelAsyncInstance, lo: int, hi: int,
                     time_limit: float | None = None) -> tuple[np.ndarray, np.ndarray, bool]:
    """For each threshold theta = lo..hi-1, the fewest and the most learners that can be at
    or below theta in an allocation with every tau_k in [lo, hi]; and whether all are proven.

    Each theta on its own is a two-level problem: learner k can sit at or below theta on the
    samples [a_k(theta), b_k(lo)] and above it on [a_k(hi), b_k(theta + 1)] (contiguous, as
    tau_k falls with d_k), so the extremes come from :func:`extreme_count` exactly as in
    :func:`_two_level_window`. Every allocation of the window has m_theta within them; the
    sum over theta of min(g(m_min), g(m_max)), g(m) = m (K - m), is therefore a lower bound
    on sum_{k<l} |tau_k - tau_l| (it ignores that one allocation must meet all thresholds).
    """
    K, d_tot = inst.K, float(inst.total_samples)
    dl, du = float(inst.min_samples), float(inst.max_samples)
    A = W.lower_d(inst, np.full(K, float(hi)))
    B = W.upper_d(inst, np.full(K, float(lo)))
    n = hi - lo
    m_min = np.zeros(n, dtype=np.int64)
    m_max = np.zeros(n, dtype=np.int64)
    proven = True
    chunk = max(1, 2_000_000 // max(1, K))
    for c0 in range(0, n, chunk):
        thetas = np.arange(lo + c0, min(hi, lo + c0 + chunk), dtype=float)
        cut = W.max_samples_for(inst, (thetas + 1.0)[:, None] * np.ones((1, K)))
        for i in range(thetas.size):
            a_le = np.maximum(dl, cut[i] + 1.0)  # a_k(theta)
            b_gt = np.minimum(du, cut[i])  # b_k(theta + 1)
            can_le, can_gt = a_le <= B, A <= b_gt
            flex = can_le & can_gt
            room = d_tot - np.where(can_gt, A, a_le).sum()
            need = d_tot - np.where(can_gt, b_gt, B).sum()
            alpha, beta = (a_le - A)[flex], (B - b_gt)[flex]
            forced = int((can_le & ~can_gt).sum())
            few, ok1 = extreme_count(alpha, beta, room, need, False, time_limit)
            many, ok2 = extreme_count(alpha, beta, room, need, True, time_limit)
            proven = proven and ok1 and ok2
            m_min[c0 + i] = forced + (0 if few is None else int(few.sum()))
            m_max[c0 + i] = forced + (int(flex.sum()) if many is None else int(many.sum()))
    return m_min, m_max, proven


# --------------------------------------------------------------------------------------------
# s* = 1: two levels, solved exactly without the general MILP.
# --------------------------------------------------------------------------------------------
def extreme_count(alpha: np.ndarray, beta: np.ndarray, room: float, need: float, most: bool,
                  time_limit: float | None = None) -> tuple[np.ndarray | None, bool]:
    """A subset S of the items, as small (``most`` False) or as large (True) as possible, with
    sum_S alpha <= room and sum_S beta >= need; returns (its mask or None if none exists,
    proven).

    The count alone bounds it: no S smaller than the fewest largest betas reaching ``need``,
    none larger than the most smallest alphas fitting in ``room``. The greedy set of that
    size (largest betas, resp. smallest alphas) usually meets the other constraint too, and
    is then optimal; otherwise (both sides bind: a subset-sum-like case) a MILP with one
    binary per item and two rows decides it (HiGHS, proven unless it hits the time limit).
    """
    n = alpha.size
    if most and alpha.sum() <= room and beta.sum() >= need:
        return np.ones(n, dtype=bool), True  # all of them
    if not most and need <= 0 <= room:
        return np.zeros(n, dtype=bool), True  # none of them
    if most:
        order = np.argsort(alpha, kind="stable")
        fits = np.cumsum(alpha[order]) <= room
        j = int(fits.sum())  # cumsum is increasing: the first j fit
    else:
        order = np.argsort(-beta, kind="stable")
        reach = np.cumsum(beta[order]) >= need
        j = 0 if need <= 0 else (int(np.argmax(reach)) + 1 if reach.any() else n + 1)
    if j <= n:  # the bound is attained if the greedy set of that size is feasible
        mask = np.zeros(n, dtype=bool)
        mask[order[:j]] = True
        if alpha[mask].sum() <= room and beta[mask].sum() >= need:
            return mask, True
    if n == 0:
        return None, True
    from mel_opt.solvers import highs

    idx = np.arange(n)
    res = highs.solve_arrays(np.full(n, -1.0 if most else 1.0),
                             np.concatenate([np.zeros(n, dtype=np.int64),
                                             np.ones(n, dtype=np.int64)]),
                             np.concatenate([idx, idx]),
                             np.concatenate([alpha, beta]).astype(float),
                             (np.array([-np.inf, need]), np.array([room, np.inf])),
                             (np.zeros(n), np.ones(n)), np.ones(n, dtype=bool),
                             time_limit=time_limit, mip_gap=0.0)
    if not res.has_solution:
        return None, res.is_optimal or res.termination.value == "infeasible"
    return res.x > 0.5, res.is_optimal


def _two_level_window(inst: MelAsyncInstance, lo: int, time_limit: float | None
                      ) -> tuple[LexResult | None, bool]:
    """Least (13) in the window [lo, lo + 1], exactly, and whether that is proven (None: no
    allocation found; proven: the window holds none).

    Only m = #{k : tau_k = lo} matters: sum_{k<l} |tau_k - tau_l| = m (K - m), concave in m.
    Learners reaching one level only are fixed; a flexible learner k moved from lo + 1 to lo
    raises the two ends of the samples' sum range [sum a, sum b] by alpha_k = a_k(lo) -
    a_k(lo + 1) and beta_k = b_k(lo) - b_k(lo + 1) (its two d-intervals are adjacent). A set S
    of them at lo is feasible iff sum_S alpha <= room = d - (sum a with S empty) and
    sum_S beta >= need = d - (sum b with S empty). Every feasible m lies between the fewest
    and the most learners that can be at lo (:func:`extreme_count`), and a concave function
    on an interval is least at an end: the better end is the optimum.
    """
    K, hi = inst.K, lo + 1
    a_lo, b_lo = W.lower_d(inst, np.full(K, float(lo))), W.upper_d(inst, np.full(K, float(lo)))
    a_hi, b_hi = W.lower_d(inst, np.full(K, float(hi))), W.upper_d(inst, np.full(K, float(hi)))
    at_lo, at_hi = a_lo <= b_lo, a_hi <= b_hi  # tau_k = t exactly on [a_k(t), b_k(t)]
    if np.any(~at_lo & ~at_hi):
        return None, True
    flex = at_lo & at_hi
    base_a = np.where(at_hi, a_hi, a_lo)
    base_b = np.where(at_hi, b_hi, b_lo)
    d_tot = float(inst.total_samples)
    room, need = d_tot - base_a.sum(), d_tot - base_b.sum()
    alpha, beta = (a_lo - a_hi)[flex], (b_lo - b_hi)[flex]
    forced = int((at_lo & ~at_hi).sum())
    proven = True
    best: tuple[int, np.ndarray] | None = None
    for most in (False, True):
        mask, ok = extreme_count(alpha, beta, room, need, most, time_limit)
        proven = proven and ok
        if mask is None:
            continue
        m = forced + int(mask.sum())
        if best is None or m * (K - m) < best[0] * (K - best[0]):
            best = (m, mask)
    if best is None:
        return None, proven
    m, mask = best
    low = at_lo & ~at_hi
    low[np.flatnonzero(flex)[mask]] = True
    d = W.fill(np.where(low, a_lo, a_hi), np.where(low, b_lo, b_hi), inst.total_samples)
    tau = W.max_updates(inst, d.astype(float)).astype(np.int64)
    return LexResult(d, tau, m * (K - m), proven, 1), proven


def least_average(inst: MelAsyncInstance, s_star: int, los: Sequence[int],
                  time_limit: float | None = None) -> LexResult | None:
    """Minimise (13) over the windows [lo, lo + s_star], lo in ``los`` (tried in that order;
    a later window replaces the incumbent only if strictly better).

    s_star = 1 (two levels per window) is solved exactly for any K without the general MILP
    (:func:`_two_level_window`); s_star >= 2 by bounds and, only where they do not settle a
    window, its MILP with the counts cut to the bounds (:func:`_bounded_stage`). Returns None
    when s_star = 0 (nothing to do: every optimum has (13) = 0) or the bounds would cost more
    than ``MAX_THRESHOLD_WORK``; a result is not ``proven`` when a window's MILP exceeds
    ``MAX_BINARIES`` binaries or the time limit.
    """
    s = int(s_star)
    if s == 0 or not los:
        return None
    if s == 1:
        return _two_levels(inst, los, time_limit)
    return _bounded_stage(inst, s, los, time_limit)


def _bounded_stage(inst: MelAsyncInstance, s: int, los: Sequence[int],
                   time_limit: float | None) -> LexResult | None:
    """:func:`least_average` for s* >= 2: bounds and a DP first, a (small) MILP only where
    they leave a gap.

    Per window: the per-threshold bound of :func:`threshold_bounds`, then the reduction DP of
    :func:`window_dp` (its bound and its allocation; where the DP would be too large, the
    window's balanced fill is the incumbent). The best incumbent (ties: the earlier window)
    is the target. A window is settled when its bound cannot beat the target (nor tie it from
    an earlier window) or its own incumbent meets its bound. Otherwise the DP fixes every
    learner whose other levels cannot beat the target (:func:`surviving_levels`), and the
    window MILP runs on what is left, its count binaries cut to the bounds; past
    ``MAX_BINARIES`` binaries the stage stops there and returns the best found, not proven.
    """
    K, d_tot = inst.K, inst.total_samples
    if K * s * len(los) > MAX_THRESHOLD_WORK:
        return None
    span = _span(inst)
    proven = True
    notes: list[str] = []
    windows = []
    open_bounds: list[int] = []  # bounds of the windows left unsettled
    bounded = True  # every window's bound holds (its threshold counts were proven)
    for lo in los:
        m_min, m_max, ok = threshold_bounds(inst, lo, lo + s, time_limit)
        proven = proven and ok
        bounded = bounded and ok
        bound = int(np.minimum(m_min * (K - m_min), m_max * (K - m_max)).sum())
        dp = window_dp(inst, lo, lo + s, m_min, m_max, MAX_DP_WORK) if ok else None
        if dp is not None:
            inc, bound = dp.incumbent, max(bound, dp.bound)
        else:
            d = W.fill(W.lower_d(inst, np.full(K, float(lo + s))),
                       W.upper_d(inst, np.full(K, float(lo))), d_tot)
            tau = W.max_updates(inst, d.astype(float)).astype(np.int64)
            inc = LexResult(d, tau, pair_sum(tau), True, 1)
        windows.append((lo, m_min, m_max, bound, dp, inc))
    best_i = min(range(len(windows)), key=lambda i: (windows[i][5].pair_sum, i))
    best = windows[best_i][5]
    for i, (lo, m_min, m_max, bound, dp, inc) in enumerate(windows):
        if inc.pair_sum == bound or bound > best.pair_sum or (
                bound == best.pair_sum and i >= best_i):
            continue  # settled: optimal in its window, or cannot beat (or tie earlier) the best
        if dp is not None:
            target = best.pair_sum + (1 if i < best_i else 0)
            first, last = surviving_levels(dp, target)
            if np.any(first > last):
                continue  # no allocation of this window beats (or ties earlier) the best
            if free_options(dp, first, last) > SMALL_REDUCED:  # many left: branch first
                closed, refined = refine(inst, dp, target, MAX_DP_NODES)
                if refined.pair_sum < target:
                    best, best_i = refined, i
                    target = best.pair_sum + (1 if i < best_i else 0)
                if closed:
                    continue
                first, last = surviving_levels(dp, target)
                if np.any(first > last):
                    continue
            n = free_options(dp, first, last)  # at most the MILP's columns, less its counts
            res, found = None, None
            if n <= MAX_BINARIES:
                res, found, n = reduced_window(inst, dp, first, last, m_min, m_max,
                                               time_limit, MAX_BINARIES)
        else:
            found = None
            model = _window_model(inst, *_levels(inst, lo, lo + s, span), lo, m_min, m_max)
            if model is None:
                continue
            n = model.cost.size
            res = None
            if n <= MAX_BINARIES:
                res, found = _solve_window(inst, model, time_limit)
        if n > MAX_BINARIES:  # unproven now: more bounds or MILPs cannot change that
            proven = False
            notes.append(f"window [{lo}, {lo + s}]: second stage too large for its MILP "
                         f"({n:,} binaries); best found {best.pair_sum}, bound {bound}"
                         + (f"; {len(los) - i - 1} more window(s) not tried"
                            if i + 1 < len(los) else ""))
            # this window and the ones not tried may hold better: their bounds stay open
            open_bounds += [w[3] for w in windows[i:]]
            break
        if res is not None and not res.is_optimal and res.termination.value != "infeasible":
            proven = False
            notes.append(f"window [{lo}, {lo + s}]: HiGHS {res.termination.value}")
            open_bounds.append(bound)
        if found is not None and (found.pair_sum < best.pair_sum or (
                found.pair_sum == best.pair_sum and i < best_i)):
            best, best_i = found, i
    # every other window was settled against an incumbent at least as good as the final one
    lower = min([best.pair_sum, *open_bounds]) if bounded else None
    return LexResult(best.d, best.tau, best.pair_sum, proven, len(los), "; ".join(notes),
                     lower)


def _solve_window(inst: MelAsyncInstance, model: _WindowMILP,
                  time_limit: float | None) -> tuple[SolverResult, LexResult | None]:
    """HiGHS on one window's MILP: its result, and the allocation it chose (each learner's
    d-interval filled to the sample budget; None without a point)."""
    from mel_opt.solvers import highs

    n = model.cost.size
    res = highs.solve_arrays(model.cost, model.rows, model.cols, model.values,
                             (model.row_lo, model.row_hi), (np.zeros(n), np.ones(n)),
                             np.ones(n, dtype=bool), time_limit=time_limit, mip_gap=0.0)
    if not res.has_solution:
        return res, None
    chosen = res.x[:model.k.size] > 0.5
    a = np.zeros(inst.K)
    b = np.zeros(inst.K)
    a[model.k[chosen]] = model.a[chosen]
    b[model.k[chosen]] = model.b[chosen]
    d = W.fill(a, b, inst.total_samples)
    tau = W.max_updates(inst, d.astype(float)).astype(np.int64)
    return res, LexResult(d, tau, pair_sum(tau), True, 1)


def milp_stage(inst: MelAsyncInstance, s: int, los: Sequence[int],
               time_limit: float | None = None) -> LexResult | None:
    """:func:`least_average` by one MILP per window (any s >= 1; None if too large)."""

    K = inst.K
    span = _span(inst)
    ranges = [_levels(inst, lo, lo + s, span) for lo in los]
    pairs = sum(int(np.maximum(0, last - first + 1).sum()) for first, last in ranges)
    if pairs + len(los) * (min(s, pairs) + 1) * (K + 1) > MAX_BINARIES:
        return None
    best: LexResult | None = None
    proven = True
    notes: list[str] = []
    for lo, (first, last) in zip(los, ranges, strict=True):
        hi = lo + s
        model = _window_model(inst, first, last)
        if model is None:
            continue
        res, found = _solve_window(inst, model, time_limit)
        if not res.is_optimal:
            proven = False
            notes.append(f"window [{lo}, {hi}]: HiGHS {res.termination.value}")
        if found is not None and (best is None or found.pair_sum < best.pair_sum):
            best = found
    if best is None:
        return None
    return LexResult(best.d, best.tau, best.pair_sum, proven, len(los), "; ".join(notes))


def _two_levels(inst: MelAsyncInstance, los: Sequence[int], time_limit: float | None
                ) -> LexResult | None:
    """:func:`least_average` for s* = 1: :func:`_two_level_window` on every window."""
    best: LexResult | None = None
    proven = True
    for lo in los:
        res, ok = _two_level_window(inst, lo, time_limit)
        proven = proven and ok
        if res is None:
            continue
        if best is None or res.pair_sum < best.pair_sum:
            best = res
    if best is None:
        return None
    note = "" if proven else "a subset MILP of the two-level stage hit the time limit"
    return LexResult(best.d, best.tau, best.pair_sum, proven, len(los), note)
