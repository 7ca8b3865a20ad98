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
from typing import TYPE_CHECKING

import numpy as np

from mel_opt.lazy import lazy_module
from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.instance import MelAsyncInstance
from mel_opt.solvers.base import Termination

if TYPE_CHECKING:
    import pyomo.environ as pyo
else:  # Pyomo loads when the second stage builds its model, not when the package is imported
    pyo = lazy_module("pyomo.environ")

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


def _window_model(inst: MelAsyncInstance, lo: int, hi: int,
                  a: np.ndarray, b: np.ndarray) -> pyo.ConcreteModel | None:
    """The MILP of one window; a[k, i], b[k, i] are the d-intervals of t = lo + i."""
    K = inst.K
    reach = [(k, i) for k in range(K) for i in range(hi - lo + 1) if a[k, i] <= b[k, i]]
    per = np.bincount([k for k, _ in reach], minlength=K)
    if np.any(per == 0):
        return None
    m = pyo.ConcreteModel()
    m.R = pyo.Set(initialize=reach, dimen=2)
    m.x = pyo.Var(m.R, domain=pyo.Binary)
    m.TH = pyo.RangeSet(0, hi - lo - 1)
    m.J = pyo.RangeSet(0, K)
    m.y = pyo.Var(m.TH, m.J, domain=pyo.Binary)
    values: list[list[int]] = [[] for _ in range(K)]
    for k, i in reach:
        values[k].append(i)
    m.one = pyo.Constraint(range(K), rule=lambda m, k: sum(m.x[k, i] for i in values[k]) == 1)
    d_tot = inst.total_samples
    m.low = pyo.Constraint(expr=sum(float(a[k, i]) * m.x[k, i] for k, i in reach) <= d_tot)
    m.high = pyo.Constraint(expr=sum(float(b[k, i]) * m.x[k, i] for k, i in reach) >= d_tot)
    m.pick = pyo.Constraint(m.TH, rule=lambda m, th: sum(m.y[th, j] for j in m.J) == 1)
    m.count = pyo.Constraint(m.TH, rule=lambda m, th: sum(m.x[k, i] for k, i in reach
                                                          if i <= th)
                             == sum(j * m.y[th, j] for j in m.J))  # m_theta
    m.obj = pyo.Objective(expr=sum(j * (K - j) * m.y[th, j] for th in m.TH for j in m.J),
                          sense=pyo.minimize)
    m.reach = reach
    return m


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
        res = highs.solve_milp(model, time_limit=time_limit, mip_gap=0.0)
        if res.outcome is not Termination.OPTIMAL:
            proven = False
            notes.append(f"window [{lo}, {hi}]: HiGHS {res.termination.value}")
            if not res.has_solution:
                continue
        pick = [(k, i) for k, i in model.reach if pyo.value(model.x[k, i]) > 0.5]
        t_idx = np.zeros(K, dtype=np.int64)
        for k, i in pick:
            t_idx[k] = i
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
