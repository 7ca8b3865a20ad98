"""Pyomo formulations of feel (formulations never solve).

- :func:`build_p1_model`: P1 (17) in full (P6 (30) for GPU devices): the batches, both slot vectors
  and the global batch, maximising xi sqrt(B) / (L + D). Non-convex (a ratio); IPOPT finds
  local optima, hence the multi-start of the ``ipopt`` method.
- :func:`build_p4_model`: P4 (21) for a fixed global batch, convex (Lemma 1), together with P5 (25)
  for the downlink, which is separate: minimising L + D for a fixed B minimises each.

The max in (15) is written with epigraph variables: t_k^L + t_k^U <= L and
t_k^D + t_k^M <= D. The GPU training function (27) is piecewise; it is written exactly with an
epigraph variable tc_k >= t_k^l, tc_k >= t_k^l + c_k (B_k - B_k^th) (the latency only wants tc
small), on the paper's whole range 1 <= B_k <= B^max, so these models do not rely on Lemma 2.

Scaling (times span 1e-4 to 10 s and batches 1 to 1e4 in the paper's set-up): batches are
divided by B^max, slots by the frame, latencies by a reference latency ``L_ref``; IPOPT then sees
numbers of order one. :func:`unscale` maps a solution back to SI units.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mel_opt.lazy import lazy_module
from mel_opt.problems.feel.instance import MIN_BATCH, FeelInstance

if TYPE_CHECKING:
    import pyomo.environ as pyo
else:  # Pyomo loads when a model is built, not when the package is imported
    pyo = lazy_module("pyomo.environ")

SLOT_FLOOR = 1e-9  # least slot as a fraction of the frame (keeps 1/x evaluable)


@dataclass(frozen=True)
class Scale:
    """Units of the scaled model: B = B_ref beta, tau = T_f x, latency = L_ref ell."""

    B_ref: float
    L_ref: float


def _raw(inst: FeelInstance) -> dict[str, np.ndarray]:
    """Per-device numbers straight from the instance (SI units)."""
    s = inst.gradient_bits
    out = {
        "a": s * inst.frame_up / np.asarray(inst.uplink_bps, dtype=float),  # t^U tau^U, (10)
        "b": s * inst.frame_down / np.asarray(inst.downlink_bps, dtype=float),  # (11)
    }
    if inst.is_gpu:
        assert inst.t_low is not None and inst.slope is not None
        assert inst.batch_threshold is not None and inst.update_s is not None
        out["t_low"] = np.asarray(inst.t_low, dtype=float)
        out["slope"] = np.asarray(inst.slope, dtype=float)
        out["threshold"] = np.asarray(inst.batch_threshold, dtype=float)
        out["update"] = np.asarray(inst.update_s, dtype=float)
    else:
        assert inst.cpu_hz is not None and inst.cycles_per_sample is not None
        assert inst.update_cycles is not None
        f = np.asarray(inst.cpu_hz, dtype=float)
        out["slope"] = inst.cycles_per_sample / f  # (9)
        out["update"] = inst.update_cycles / f  # (12)
    return out


def scale_of(inst: FeelInstance) -> Scale:
    """A reference batch (B^max) and latency (an equal-slot upload plus half a full batch)."""
    r = _raw(inst)
    K = inst.K
    L_ref = float(np.max(K * r["a"] / inst.frame_up) + np.max(r["slope"]) * inst.max_batch / 2)
    return Scale(B_ref=float(inst.max_batch), L_ref=L_ref)


def _base_model(inst: FeelInstance, name: str, batch0: np.ndarray, up0: np.ndarray,
                dn0: np.ndarray) -> tuple[pyo.ConcreteModel, Scale]:
    K = inst.K
    sc = scale_of(inst)
    r = _raw(inst)
    Tu, Td = inst.frame_up, inst.frame_down
    qa = r["a"] / (Tu * sc.L_ref)  # scaled upload numerators: t^U / L_ref = qa / x
    qb = r["b"] / (Td * sc.L_ref)
    upd = r["update"] / sc.L_ref
    m = pyo.ConcreteModel(name=name)
    m.K = pyo.RangeSet(0, K - 1)
    beta0 = np.clip(np.asarray(batch0, dtype=float), MIN_BATCH, inst.max_batch) / sc.B_ref
    x0 = np.clip(np.asarray(up0, dtype=float) / Tu, SLOT_FLOOR, 1.0)
    y0 = np.clip(np.asarray(dn0, dtype=float) / Td, SLOT_FLOOR, 1.0)
    m.beta = pyo.Var(m.K, bounds=(MIN_BATCH / sc.B_ref, inst.max_batch / sc.B_ref),
                     initialize=lambda _, k: float(beta0[k]))  # (17e)
    m.x = pyo.Var(m.K, bounds=(SLOT_FLOOR, 1.0), initialize=lambda _, k: float(x0[k]))
    m.y = pyo.Var(m.K, bounds=(SLOT_FLOOR, 1.0), initialize=lambda _, k: float(y0[k]))
    slope = r["slope"] * sc.B_ref / sc.L_ref
    if inst.is_gpu:
        tl = r["t_low"] / sc.L_ref
        th = r["threshold"] / sc.B_ref
        tc0 = tl + slope * np.maximum(beta0 - th, 0.0)
        m.tc = pyo.Var(m.K, bounds=(0, None), initialize=lambda _, k: float(tc0[k]))
        m.flat = pyo.Constraint(m.K, rule=lambda m, k: m.tc[k] >= float(tl[k]))  # (27)
        m.ramp = pyo.Constraint(m.K, rule=lambda m, k: m.tc[k] >= float(tl[k])
                                + float(slope[k]) * (m.beta[k] - float(th[k])))  # (27)

        def comp(m: pyo.ConcreteModel, k: int) -> pyo.Expression:
            return m.tc[k]
    else:
        tc0 = slope * beta0

        def comp(m: pyo.ConcreteModel, k: int) -> pyo.Expression:
            return float(slope[k]) * m.beta[k]  # (9)
    ell0 = float(np.max(tc0 + qa / x0))
    d0 = float(np.max(upd + qb / y0))
    m.ell = pyo.Var(bounds=(0, None), initialize=ell0)
    m.d = pyo.Var(bounds=(0, None), initialize=d0)
    m.uplink = pyo.Constraint(m.K, rule=lambda m, k: comp(m, k) + float(qa[k]) / m.x[k]
                              <= m.ell)  # (21b)
    m.downlink = pyo.Constraint(m.K, rule=lambda m, k: float(upd[k]) + float(qb[k]) / m.y[k]
                                <= m.d)  # (25b)
    m.up_budget = pyo.Constraint(expr=sum(m.x[k] for k in m.K) <= 1.0)  # (17b)
    m.down_budget = pyo.Constraint(expr=sum(m.y[k] for k in m.K) <= 1.0)  # (17c)
    return m, sc


def build_p4_model(inst: FeelInstance, B: float, batch0: np.ndarray | None = None,
             up0: np.ndarray | None = None, dn0: np.ndarray | None = None) -> pyo.ConcreteModel:
    """P4 (21) + P5 (25) for the fixed global batch B: min (L + D) / L_ref, convex.

    Starts (default) from the equal split B/K with equal slots.
    """
    K = inst.K
    batch0 = np.full(K, B / K) if batch0 is None else batch0
    up0 = np.full(K, inst.frame_up / K) if up0 is None else up0
    dn0 = np.full(K, inst.frame_down / K) if dn0 is None else dn0
    m, sc = _base_model(inst, f"feel P4+P5, B = {B:g}", batch0, up0, dn0)
    m.total = pyo.Constraint(expr=sum(m.beta[k] for k in m.K) == float(B) / sc.B_ref)  # (17d)
    m.obj = pyo.Objective(expr=m.ell + m.d, sense=pyo.minimize)
    return m


def build_p1_model(inst: FeelInstance, batch0: np.ndarray | None = None,
             up0: np.ndarray | None = None, dn0: np.ndarray | None = None) -> pyo.ConcreteModel:
    """P1 (17) / P6 (30): min (L + D) / (L_ref sqrt(B / B^max)), i.e. max efficiency.

    The efficiency is xi sqrt(B^max) / L_ref divided by the objective value.
    """
    K = inst.K
    batch0 = np.full(K, inst.max_batch / 2.0) if batch0 is None else batch0
    up0 = np.full(K, inst.frame_up / K) if up0 is None else up0
    dn0 = np.full(K, inst.frame_down / K) if dn0 is None else dn0
    m, sc = _base_model(inst, "feel P1", batch0, up0, dn0)
    bs0 = float(sum(pyo.value(m.beta[k]) for k in m.K))
    m.bsum = pyo.Var(bounds=(K * MIN_BATCH / sc.B_ref, K * inst.max_batch / sc.B_ref),
                     initialize=bs0)
    m.total = pyo.Constraint(expr=sum(m.beta[k] for k in m.K) == m.bsum)  # (17d)
    m.obj = pyo.Objective(expr=(m.ell + m.d) / pyo.sqrt(m.bsum), sense=pyo.minimize)  # (17a)
    return m


def build_model(inst: FeelInstance, method: str) -> pyo.ConcreteModel:
    """The model behind ``method`` for export: P4 + P5 when B is fixed, P1 otherwise."""
    if inst.global_batch is not None:
        return build_p4_model(inst, float(inst.global_batch))
    return build_p1_model(inst)


def unscale(inst: FeelInstance, m: pyo.ConcreteModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batches [samples], uplink and downlink slots [s] of a (solved) model."""
    sc = scale_of(inst)
    K = inst.K
    batch = np.array([pyo.value(m.beta[k]) for k in range(K)]) * sc.B_ref
    up = np.array([pyo.value(m.x[k]) for k in range(K)]) * inst.frame_up
    dn = np.array([pyo.value(m.y[k]) for k in range(K)]) * inst.frame_down
    return batch, up, dn
