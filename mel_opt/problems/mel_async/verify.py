"""Independent re-check of a mel-async solution and its metrics.

Written from the paper's definitions only (Eq. 5, 6, 7c, 7f, 13); it shares no code with the
methods, so a bug in a solver cannot hide itself here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.problems.base import Checked
from mel_opt.problems.mel_async.instance import MelAsyncInstance
from mel_opt.result import Verification

TOL = 1e-9


def pairwise_mean_abs_difference(x: np.ndarray) -> float:
    """(1/N) sum_{k<l} |x_k - x_l| with N = K(K-1)/2 (Eq. 13), in O(K log K)."""
    x = np.sort(np.asarray(x, dtype=float))
    K = x.size
    if K < 2:
        return 0.0
    # sum_{i<j} (x_j - x_i) = sum_j x_j (2j - K + 1) for sorted x (j from 0)
    weights = 2.0 * np.arange(K) - K + 1
    return float((x * weights).sum() / (K * (K - 1) / 2))


def verify(inst: MelAsyncInstance, solution: Mapping[str, Any]) -> Checked:
    """Check integrality, (7c), (7f), t_k <= T and tau_k >= 1; compute the staleness metrics.

    ``max_violation`` is the largest of: |sum d - d| / d, bound excess / d_u, (t_k - T)^+ / T,
    (1 - tau_k)^+ and the distance to the nearest integer. Metrics: ``max_staleness`` (6),
    ``avg_staleness`` (13), ``min_tau``, ``max_tau``, per-learner ``idle_s`` (T - t_k) and
    ``learners_not_busy`` (learners that could have fitted one more update: 0 for every method
    that gives each learner the largest whole number of updates that fits).
    """
    K = inst.K
    notes: list[str] = []
    try:
        d = np.asarray(solution["d"], dtype=float).reshape(-1)
        tau = np.asarray(solution["tau"], dtype=float).reshape(-1)
    except (KeyError, TypeError, ValueError) as exc:
        v = Verification(False, float("inf"), {"shape": float("inf")}, (f"bad solution: {exc}",))
        return Checked(v, {}, None)
    if d.size != K or tau.size != K or not (np.all(np.isfinite(d)) and np.all(np.isfinite(tau))):
        v = Verification(False, float("inf"), {"shape": float("inf")},
                         (f"solution must hold {K} finite d and tau values",))
        return Checked(v, {}, None)
    T = inst.cycle_time
    t = inst.c2 * tau * d + inst.c1 * d + inst.c0
    checks = {
        "integrality": float(max(np.abs(d - np.round(d)).max(), np.abs(tau - np.round(tau)).max())),
        "total_samples (7c)": abs(float(d.sum()) - inst.total_samples) / inst.total_samples,
        "sample_bounds (7f)": float(
            max(0.0, (inst.min_samples - d).max(), (d - inst.max_samples).max())
        ) / inst.max_samples,
        "cycle_time t_k <= T (5)": float(max(0.0, ((t - T) / T).max())),
        "at_least_one_update": float(max(0.0, (1.0 - tau).max())),
    }
    worst = max(checks.values())
    feasible = worst <= TOL
    if not feasible:
        bad = [k for k, val in checks.items() if val > TOL]
        notes.append("violated: " + ", ".join(bad))
    idle = T - t
    one_more = inst.c2 * d  # time one extra update would take
    not_busy = int(np.count_nonzero(idle >= one_more * (1 + 1e-9)))
    max_st = float(tau.max() - tau.min())
    metrics: dict[str, Any] = {
        "max_staleness": max_st,
        "avg_staleness": pairwise_mean_abs_difference(tau),
        "min_tau": float(tau.min()),
        "max_tau": float(tau.max()),
        "mean_tau": float(tau.mean()),
        "max_idle_s": float(idle.max()),
        "mean_idle_s": float(idle.mean()),
        "learners_not_busy": not_busy,
        "idle_s": idle.tolist(),
    }
    return Checked(Verification(feasible, worst, checks, tuple(notes)), metrics, max_st)
