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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.instance import MelAsyncInstance

MAX_BINARIES = 10_000  # over all optimal windows; beyond it the second stage is not attempted
# (the linearised concave objective has a weak LP bound: HiGHS needs seconds at K = 2,000)


@dataclass(frozen=True)
class LexResult:
    """Best (13) found among the max-staleness optima; ``proven`` if every MILP was optimal."""

    d: np.ndarray
    tau: np.ndarray
    pair_sum: int  # sum_{k<l} |tau_k - tau_l| (N times the average staleness (13))
    proven: bool
    windows: int
    note: str = ""


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


def _levels(inst: MelAsyncInstance, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Per learner, the range of levels in [lo, hi] its d in [d_l, d_u] can give (may be
    empty: first > last). tau_k falls as d_k grows, so the range is [tau(d_u), tau(d_l)]."""
    K = inst.K
    first = W.max_updates(inst, np.full(K, float(inst.max_samples)))
    last = W.max_updates(inst, np.full(K, float(inst.min_samples)))
    return np.maximum(first, lo).astype(np.int64), np.minimum(last, hi).astype(np.int64)


def _window_model(inst: MelAsyncInstance, first: np.ndarray, last: np.ndarray
                  ) -> _WindowMILP | None:
    """The MILP of one window from each learner's level range (None: a learner has none)."""
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
    r_of, j = np.divmod(np.arange(R * (K + 1)), K + 1)
    ycol = nx + np.arange(R * (K + 1))
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


def least_average(inst: MelAsyncInstance, s_star: int, los: Sequence[int],
                  time_limit: float | None = None) -> LexResult | None:
    """Minimise (13) over the windows [lo, lo + s_star], lo in ``los`` (tried in that order;
    a later window replaces the incumbent only if strictly better).

    Returns None when s_star = 0 (nothing to do: every optimum has (13) = 0) or the problem is
    too large (more than ``MAX_BINARIES`` binaries over all windows).
    """
    from mel_opt.solvers import highs

    K, s = inst.K, int(s_star)
    if s == 0 or not los:
        return None
    ranges = [_levels(inst, lo, lo + s) for lo in los]
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
        n = model.cost.size
        res = highs.solve_arrays(model.cost, model.rows, model.cols, model.values,
                                 (model.row_lo, model.row_hi), (np.zeros(n), np.ones(n)),
                                 np.ones(n, dtype=bool), time_limit=time_limit, mip_gap=0.0)
        if not res.is_optimal:
            proven = False
            notes.append(f"window [{lo}, {hi}]: HiGHS {res.termination.value}")
            if not res.has_solution:
                continue
        chosen = res.x[:model.k.size] > 0.5
        a = np.zeros(K)
        b = np.zeros(K)
        a[model.k[chosen]] = model.a[chosen]
        b[model.k[chosen]] = model.b[chosen]
        d = W.fill(a, b, inst.total_samples)
        tau = W.max_updates(inst, d.astype(float)).astype(np.int64)
        ii, jj = np.triu_indices(K, 1)
        pair_sum = int(np.abs(tau[ii] - tau[jj]).sum())
        if best is None or pair_sum < best.pair_sum:
            best = LexResult(d, tau, pair_sum, True, 0)
    if best is None:
        return None
    return LexResult(best.d, best.tau, best.pair_sum, proven, len(los), "; ".join(notes))
