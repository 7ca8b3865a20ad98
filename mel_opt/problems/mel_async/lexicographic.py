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
concave objective into the linear sum_j j (K - j) y[theta, j]. HiGHS solves it; every window
proven optimal makes the average level proven. Its size is K (s* + 1) + s* (K + 1) binaries,
small in the paper's regime (s* of a few updates).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.instance import MelAsyncInstance
from mel_opt.solvers.base import Termination

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

    Columns: x[(k, i)] for every reachable pair (learner k does t = lo + i updates), then
    y[th, j] for th = 0..s-1, j = 0..K (exactly j learners at or below lo + th). Rows: each
    learner picks one level; sum a <= d <= sum b; each th picks one count j, equal to the
    number of x with i <= th. The objective sum_th sum_j j (K - j) y[th, j] is the sum over
    pairs of |tau_k - tau_l| (N times (13)).
    """

    reach_k: np.ndarray
    reach_i: np.ndarray
    cost: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray


def _window_model(inst: MelAsyncInstance, lo: int, hi: int,
                  a: np.ndarray, b: np.ndarray) -> _WindowMILP | None:
    """The MILP of one window; a[k, i], b[k, i] are the d-intervals of t = lo + i."""
    K, s = inst.K, hi - lo
    rk, ri = np.nonzero(a <= b)  # reachable (k, i), in k-major order
    if np.any(np.bincount(rk, minlength=K) == 0):
        return None
    nx = rk.size
    th, j = np.divmod(np.arange(s * (K + 1)), K + 1)
    ycol = nx + np.arange(s * (K + 1))
    d_tot = float(inst.total_samples)
    # rows: 0..K-1 one level per learner; K low; K+1 high; K+2.. pick; K+2+s.. count
    below = ri[None, :] <= np.arange(s)[:, None]  # (s, nx): x counts at threshold th
    cth, cx = np.nonzero(below)
    rows = np.concatenate([rk, np.full(nx, K), np.full(nx, K + 1), K + 2 + th,
                           K + 2 + s + cth, K + 2 + s + th])
    cols = np.concatenate([np.arange(nx), np.arange(nx), np.arange(nx), ycol, cx, ycol])
    values = np.concatenate([np.ones(nx), a[rk, ri], b[rk, ri], np.ones(th.size),
                             np.ones(cth.size), -j.astype(float)])
    row_lo = np.concatenate([np.ones(K), [-np.inf, d_tot], np.ones(s), np.zeros(s)])
    row_hi = np.concatenate([np.ones(K), [d_tot, np.inf], np.ones(s), np.zeros(s)])
    cost = np.concatenate([np.zeros(nx), (j * (K - j)).astype(float)])
    return _WindowMILP(rk, ri, cost, rows, cols, values.astype(float), row_lo, row_hi)


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
    if len(los) * (K * (s + 1) + s * (K + 1)) > MAX_BINARIES:
        return None
    best: LexResult | None = None
    proven = True
    notes: list[str] = []
    for lo in los:
        hi = lo + s
        ts = np.arange(lo, hi + 1, dtype=float)[:, None] * np.ones((1, K))
        a = W.lower_d(inst, ts).T  # (K, s + 1): tau_k = t exactly on [a, b]
        b = W.upper_d(inst, ts).T
        model = _window_model(inst, lo, hi, a, b)
        if model is None:
            continue
        n = model.cost.size
        res = highs.solve_arrays(model.cost, model.rows, model.cols, model.values,
                                 (model.row_lo, model.row_hi), (np.zeros(n), np.ones(n)),
                                 np.ones(n, dtype=bool), time_limit=time_limit, mip_gap=0.0)
        if res.outcome is not Termination.OPTIMAL:
            proven = False
            notes.append(f"window [{lo}, {hi}]: HiGHS {res.termination.value}")
            if not res.has_solution:
                continue
        chosen = res.x[:model.reach_k.size] > 0.5
        t_idx = np.zeros(K, dtype=np.int64)
        t_idx[model.reach_k[chosen]] = model.reach_i[chosen]
        rows = np.arange(K)
        d = W.fill(a[rows, t_idx], b[rows, t_idx], inst.total_samples)
        tau = W.max_updates(inst, d.astype(float)).astype(np.int64)
        ii, jj = np.triu_indices(K, 1)
        pair_sum = int(np.abs(tau[ii] - tau[jj]).sum())
        if best is None or pair_sum < best.pair_sum:
            best = LexResult(d, tau, pair_sum, True, 0)
    if best is None:
        return None
    return LexResult(best.d, best.tau, best.pair_sum, proven, len(los), "; ".join(notes))
