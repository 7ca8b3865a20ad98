"""The paper's rounding of a continuous point of (8): floor tau and d, then suggest-and-improve.

Paper 000 (Section IV-A) relaxes (7d)-(7e), solves (8) and floors "the obtained real results
back into integers"; where the floored point is infeasible it applies suggest-and-improve (SAI)
steps. Flooring tau_k and d_k independently keeps t_k <= T (both factors of (5) shrink) but
loses up to one sample per learner from (7c), and a learner may then have time for more updates
than its floored tau. The paper does not spell out SAI; our reading, used by the option
``rounding="paper"`` of ``ipopt`` and ``kkt-sai``:

1. floor: tau_k = floor(tau*_k) (at least 1), d_k = floor(d*_k) clipped to [d_l, d_u];
2. suggest: keep each floored tau_k and place the missing samples (or remove the surplus) on the
   learners with room at their tau_k (t_k <= T, d_l <= d_k <= d_u), in proportion to the room;
3. improve: give a learner one more update when it fits in T, stays inside the current window
   [min tau, max tau] (the maximum staleness (6) cannot grow) and does not raise the average
   staleness (13); repeat until no learner can take one.

Unlike our default repair (floor d, recompute every tau as the most whole updates that fit),
the taus stay the floored ones, so learners may be reported idle (``learners_not_busy``).
If step 2 cannot keep the floored taus, the caller falls back to our repair and says so.
"""

from __future__ import annotations

import numpy as np

from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.instance import MelAsyncInstance


def _avg_staleness(tau: np.ndarray) -> float:
    ii, jj = np.triu_indices(tau.size, 1)
    return float(np.abs(tau[ii] - tau[jj]).mean()) if ii.size else 0.0


def paper_round(inst: MelAsyncInstance, tau_c: np.ndarray,
                d_c: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Steps 1-3 above from the continuous (tau*, d*); None when step 2 cannot keep the taus.

    Returns integer arrays (tau, d) with sum d = d, d_l <= d_k <= d_u, tau_k >= 1 and t_k <= T.
    """
    K, total = inst.K, inst.total_samples
    tau = np.maximum(1, np.floor(np.asarray(tau_c, dtype=float) + 1e-9)).astype(np.int64)
    d = np.clip(np.floor(np.asarray(d_c, dtype=float) + 1e-9), inst.min_samples,
                inst.max_samples).astype(np.int64)
    # the most samples on which each learner still fits its floored tau
    cap = W.upper_d(inst, tau.astype(float))
    if np.any(cap < inst.min_samples):
        return None
    cap_i = cap.astype(np.int64)
    d = np.minimum(d, cap_i)
    s = int(d.sum())
    if s < total:
        if int(cap_i.sum()) < total:
            return None
        d = W.fill(d, cap_i, total)
    elif s > total:
        d = W.fill(np.full(K, inst.min_samples, dtype=np.int64), d, total)
    # improve: one more update where it fits, within the window, without raising (13)
    fits_more = W.max_updates(inst, d.astype(float)).astype(np.int64)
    changed = True
    while changed:
        changed = False
        top = int(tau.max())
        for k in np.argsort(tau, kind="stable"):
            if tau[k] + 1 > min(top, fits_more[k]):
                continue
            trial = tau.copy()
            trial[k] += 1
            if _avg_staleness(trial) <= _avg_staleness(tau) + 1e-12:
                tau, changed = trial, True
    return tau, d
