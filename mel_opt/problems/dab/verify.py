"""Independent re-check of a dab solution (DAB or CSA) and its metrics.

Written from the thesis' definitions only (Eq. 3.4, the truancy of Section 3.4, the staleness
metrics of paper 000 Eq. 6 and 13); it shares no code with the methods.

A solution is ``{"shards": [a_k]}`` (DAB: every learner with a_k > 0 trains mu passes) or
``{"shards": [d_k], "tau": [tau_k]}`` (a centralised allocation such as CSA: it must place
exactly ``total_shards``, give each learner it uses between ``min_shards`` and ``max_shards``
shards and at least one pass). Learners with 0 shards take no part.

A centralised allocation made by a rule that aims at the deadline and the total without
guaranteeing them (the thesis author's CSA, whose deadline misses the thesis measures as
truancy) declares ``"soft_targets": true``: those two are then reported (``deadline_met``,
``truancy_pct``, ``shards_off_total`` and a note) instead of counted as violations. Every other
check still applies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.problems.base import Checked
from mel_opt.problems.dab.instance import DabInstance
from mel_opt.result import Verification

TOL = 1e-9


def _bad(note: str) -> Checked:
    return Checked(Verification(False, float("inf"), {"shape": float("inf")}, (note,)), {}, None)


def _mean_pairwise_gap(x: np.ndarray) -> float:
    """(1/N) sum over the N = n(n-1)/2 pairs of |x_k - x_l| (paper 000 Eq. 13).

    With x sorted ascending, x_j is the larger of its pair with each of the j values before it
    and the smaller with each of the n - 1 - j after it, so the sum is sum_j x_j (2j - n + 1).
    """
    n = x.size
    if n < 2:
        return 0.0
    xs = np.sort(x)
    total = float(np.dot(xs, 2.0 * np.arange(n) - (n - 1)))
    return total / (n * (n - 1) / 2)


def _checks(inst: DabInstance, a: np.ndarray, tau: np.ndarray, eta_k: np.ndarray,
            has_tau: bool, soft: bool = False) -> dict[str, float]:
    """The violations listed in :func:`verify` (0 when satisfied) for shards ``a``, passes
    ``tau`` and times ``eta_k`` [s]; the centralised ones only when ``has_tau``; without the
    deadline and the total when ``soft``."""
    used = a > 0
    D = inst.deadline
    total_shards = inst.total_shards
    checks: dict[str, float] = {
        "integrality": float(max(np.abs(a - np.round(a)).max(),
                                 np.abs(tau - np.round(tau)).max())),
        "nonnegativity": float(max(0.0, (-a).max(), (-tau).max())),
    }
    if not soft:
        checks["deadline eta_k <= D (3.4)"] = float(max(0.0, ((eta_k - D) / D).max()))
    if has_tau and total_shards is not None:
        total = float(total_shards)
        du = float(inst.max_shards if inst.max_shards is not None else total_shards)
        lo_gap = np.where(used, inst.min_shards - a, 0.0)
        hi_gap = np.where(used, a - du, 0.0)
        if not soft:
            checks["total_shards"] = abs(float(a.sum()) - total) / total
        checks["shard_bounds"] = float(max(0.0, lo_gap.max(), hi_gap.max())) / du
        checks["at_least_one_pass"] = float(max(0.0, np.where(used, 1.0 - tau, 0.0).max()))
    return checks


def verify(inst: DabInstance, solution: Mapping[str, Any]) -> Checked:
    """Check a dab solution and recompute its metrics.

    Checks (each a violation, 0 when satisfied): ``integrality``, ``nonnegativity``,
    ``deadline eta_k <= D (3.4)`` as (eta_k - D)^+ / D over the learners used; for a solution
    with ``tau`` also ``total_shards`` (|sum - total| / total), ``shard_bounds`` and
    ``at_least_one_pass``. The DAB method itself guarantees the strict eta_k < D of Eq. (3.5);
    the verifier accepts eta_k <= D (1 + 1e-9).

    With ``"soft_targets": true`` (only with ``tau``) the deadline and ``total_shards`` checks
    are left out and reported instead (module docstring).

    Metrics: ``eta_s`` (per learner, 0 for learners not used), ``max_eta_s``, ``truancy``
    ((max eta_k - D) / D, thesis Section 3.4; negative means the cycle ends early),
    ``truancy_pct`` (the same in % of D, thesis Fig. 3.7), ``deadline_met`` (max eta_k <= D),
    ``shards_off_total`` (shards placed - ``total_shards``, for allocations with ``tau``),
    ``soft_targets``,
    ``shards_per_cycle`` (also the objective, to maximise), ``shard_passes_per_cycle``
    (sum a_k tau_k), ``learners_used``, ``excluded`` (names with 0 shards), ``max_staleness``
    and ``avg_staleness`` of the passes over the learners used (0 for DAB: every learner does
    mu passes).
    """
    K = inst.K
    try:
        a = np.asarray(solution["shards"], dtype=float).reshape(-1)
        has_tau = "tau" in solution
        tau = (np.asarray(solution["tau"], dtype=float).reshape(-1) if has_tau
               else np.full(K, float(inst.iterations)))
    except (KeyError, TypeError, ValueError) as exc:
        return _bad(f"bad solution: {exc}")
    if a.size != K or tau.size != K:
        return _bad(f"solution must hold {K} shard counts (and {K} tau values if given)")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(tau))):
        return _bad("solution values must be finite")
    soft = bool(solution.get("soft_targets", False))
    if soft and not has_tau:
        return _bad("soft_targets applies to centralised allocations (a solution with tau)")
    total_shards = inst.total_shards
    if has_tau and total_shards is None:
        return _bad("a solution with tau is a centralised allocation, but the instance has "
                    "no total_shards")

    used = a > 0
    D = inst.deadline
    om, od = inst.model_bytes, inst.shard_bytes
    b, c = inst.bandwidth, inst.train_rate
    # Eq. (3.4): download (3.1) + training (3.2) + upload (3.3), only for learners taking part
    download = (om + od * a) / b
    train = tau * a / c
    upload = om / b
    eta_k = np.where(used, download + train + upload, 0.0)

    checks = _checks(inst, a, tau, eta_k, has_tau, soft)
    worst = max(checks.values())
    feasible = worst <= TOL
    notes: list[str] = []
    if not feasible:
        notes.append("violated: " + ", ".join(k for k, val in checks.items() if val > TOL))
    if not used.any():
        notes.append("no learner takes part")

    passes = tau[used]
    max_eta = float(eta_k.max()) if used.any() else 0.0
    met = max_eta <= D * (1 + TOL)
    off = int(round(float(a.sum()))) - total_shards if has_tau and total_shards else None
    if soft:
        notes.append("soft targets declared by the solution: deadline "
                     + ("met" if met else f"missed by {100 * (max_eta - D) / D:.3g}% of D "
                        f"({max_eta:.4g} s > {D:.4g} s)")
                     + ("" if off is None else f"; shards placed - total_shards = {off}"))
    metrics: dict[str, Any] = {
        "shards_per_cycle": int(round(float(a[used].sum()))),
        "shard_passes_per_cycle": int(round(float((a * tau)[used].sum()))),
        "learners_used": int(used.sum()),
        "max_eta_s": max_eta,
        "deadline_s": D,
        "truancy": (max_eta - D) / D,
        "truancy_pct": 100 * (max_eta - D) / D,
        "deadline_met": met,
        "shards_off_total": off,
        "soft_targets": soft,
        "max_staleness": float(passes.max() - passes.min()) if passes.size else 0.0,
        "avg_staleness": _mean_pairwise_gap(passes),
        "eta_s": eta_k.tolist(),
        "excluded": [n for n, u in zip(inst.learner_names, used, strict=True) if not u],
    }
    return Checked(Verification(feasible, worst, checks, tuple(notes)), metrics,
                   float(metrics["shards_per_cycle"]))
