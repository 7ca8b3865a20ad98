"""Independent re-check of a feel solution and its metrics.

Written from the paper's definitions only (Eq. (8)-(17), (27)-(29)) and the raw instance fields;
it shares no code with the methods (not even their coefficient form), so a bug in a method
cannot hide itself here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.problems.base import Checked
from mel_opt.problems.feel.instance import FeelInstance
from mel_opt.result import Verification

TOL = 1e-9


def _bad(reason: str) -> Checked:
    v = Verification(False, float("inf"), {"shape": float("inf")}, (reason,))
    return Checked(v, {}, None)


def _vector(solution: Mapping[str, Any], key: str, K: int) -> np.ndarray | None:
    try:
        arr = np.asarray(solution[key], dtype=float).reshape(-1)
    except (KeyError, TypeError, ValueError):
        return None
    if arr.size != K or not np.all(np.isfinite(arr)):
        return None
    return arr


def _checks(inst: FeelInstance, batch: np.ndarray, up: np.ndarray, dn: np.ndarray,
            B: float) -> tuple[dict[str, float], list[str]]:
    """The scaled violations listed in :func:`verify`, and a note for a zero slot."""
    bmax = float(inst.max_batch)
    Tu, Td = inst.frame_up, inst.frame_down
    checks: dict[str, float] = {
        "whole batches": float(max(np.abs(batch - np.round(batch)).max(), abs(B - round(B)))),
        "batch bounds (17e)": float(max(0.0, (1.0 - batch).max(), (batch - bmax).max())) / bmax,
        "batch sum (17d)": abs(float(batch.sum()) - B) / B,
        "uplink budget (17b)": max(0.0, float(up.sum()) - Tu) / Tu,
        "downlink budget (17c)": max(0.0, float(dn.sum()) - Td) / Td,
        "slots positive (17f)": float(max(0.0, (-up).max() / Tu, (-dn).max() / Td)),
    }
    if inst.global_batch is not None:
        checks["fixed global batch"] = abs(B - inst.global_batch) / inst.global_batch
    notes: list[str] = []
    zero = bool(np.any(up <= 0) or np.any(dn <= 0))
    if zero:
        checks["slots positive (17f)"] = max(checks["slots positive (17f)"], float("inf"))
        notes.append("a zero slot: that device's gradient never arrives (infinite latency)")
    return checks, notes


def _device_times(inst: FeelInstance, batch: np.ndarray, up: np.ndarray,
                  dn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per device: compute (9)/(27), upload (10), download (11) and update (12)/(28) [s].

    A zero slot gives an infinite upload or download time.
    """
    s = inst.gradient_bits
    Tu, Td = inst.frame_up, inst.frame_down
    with np.errstate(divide="ignore"):
        upload = np.where(up > 0, s * Tu / (np.where(up > 0, up, 1.0) * inst.uplink_bps), np.inf)
        download = np.where(dn > 0, s * Td / (np.where(dn > 0, dn, 1.0) * inst.downlink_bps),
                            np.inf)  # Eq. (10), (11)
    if inst.is_gpu:
        assert inst.t_low is not None and inst.slope is not None
        assert inst.batch_threshold is not None and inst.update_s is not None
        compute = inst.t_low + inst.slope * np.maximum(batch - inst.batch_threshold, 0.0)  # (27)
        update = np.asarray(inst.update_s, dtype=float)  # (28)
    else:
        assert inst.cpu_hz is not None and inst.cycles_per_sample is not None
        assert inst.update_cycles is not None
        compute = batch * inst.cycles_per_sample / inst.cpu_hz  # (9)
        update = inst.update_cycles / inst.cpu_hz  # (12)
    return compute, upload, download, update


def verify(inst: FeelInstance, solution: Mapping[str, Any]) -> Checked:
    """Check (17b)-(17f), whole batches and the fixed global batch; compute the metrics.

    Checks (each a violation relative to its scale; feasible when all are <= 1e-9):
    ``whole batches`` (distance to the nearest integer), ``batch bounds (17e)`` (/ B^max),
    ``batch sum (17d)`` (|sum B_k - B| / B), ``fixed global batch``, ``uplink budget (17b)`` and
    ``downlink budget (17c)`` ((sum tau - T_f)^+ / T_f), ``slots positive (17f)`` (a zero slot
    means an upload that never ends).

    Metrics: ``learning_efficiency`` (16) [loss/s], ``round_latency_s`` (15)/(29),
    ``uplink_latency_s`` max_k (t^L + t^U), ``downlink_latency_s`` max_k (t^D + t^M),
    ``global_batch``, ``loss_decay`` (8), per device ``compute_s``, ``upload_s``,
    ``download_s``, ``update_s`` and ``idle_s`` (the round latency minus the device's own four
    latencies: time spent waiting for the slowest device in either phase), ``max_idle_s``,
    ``mean_idle_s``.
    """
    K = inst.K
    batch = _vector(solution, "batch", K)
    up = _vector(solution, "uplink_slots", K)
    dn = _vector(solution, "downlink_slots", K)
    if batch is None or up is None or dn is None:
        return _bad(f"solution must hold {K} finite batch, uplink_slots and downlink_slots values")
    try:
        B = float(solution["global_batch"])
    except (KeyError, TypeError, ValueError):
        return _bad("solution must hold a numeric global_batch")
    if not math.isfinite(B) or B <= 0:
        return _bad(f"global_batch must be a positive number, got {B}")

    checks, notes = _checks(inst, batch, up, dn, B)
    compute, upload, download, update = _device_times(inst, batch, up, dn)
    t_up = float(np.max(compute + upload))
    t_dn = float(np.max(download + update))
    T = t_up + t_dn  # (15), (29)
    loss_decay = inst.loss_decay_coeff * math.sqrt(max(B, 0.0))  # (8)
    eff = loss_decay / T if math.isfinite(T) else 0.0  # (16)
    with np.errstate(invalid="ignore"):  # inf - inf when a slot is zero
        idle = T - (compute + upload + download + update)

    worst = max(checks.values())
    feasible = bool(worst <= TOL and math.isfinite(T))
    if not feasible:
        bad = [k for k, val in checks.items() if val > TOL]
        if bad:
            notes.append("violated: " + ", ".join(bad))
    metrics: dict[str, Any] = {
        "learning_efficiency": eff,
        "round_latency_s": T,
        "uplink_latency_s": t_up,
        "downlink_latency_s": t_dn,
        "global_batch": B,
        "loss_decay": loss_decay,
        "max_idle_s": float(np.max(idle)),
        "mean_idle_s": float(np.mean(idle)),
        "compute_s": compute.tolist(),
        "upload_s": upload.tolist(),
        "download_s": download.tolist(),
        "update_s": np.broadcast_to(update, (K,)).tolist(),
        "idle_s": idle.tolist(),
    }
    v = Verification(feasible, float(worst), checks, tuple(notes))
    return Checked(v, metrics, eff if math.isfinite(T) else None)
