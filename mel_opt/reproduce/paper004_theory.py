"""Catalogue entry of paper 004's analysis: Theorem 1, Corollaries 1-2 and Remarks 2-3 checked
numerically on optima that IPOPT finds without them.

For a fixed global batch B, P4 is convex (Lemma 1); mel_opt's ``ipopt`` method solves it with
IPOPT on the Pyomo model of (17)-(21), which knows nothing of the closed form, and reports its
continuous point (batches B_k and uplink slots tau_k). On that point:

- Theorem 1 (22): every device whose batch is strictly inside its bounds satisfies
  B_k = (L - e_k) / c_k - g_k theta with ONE theta for all of them (L the uplink latency
  Delta L E^U, g_k = sqrt(a_k / c_k); for a CPU this is (22) term by term), and
  tau_k = a_k / (L - e_k - c_k B_k);
- Remark 3: the end-to-end uplink latencies t_k^L + t_k^U are equal ("the edge server can
  receive all local gradients simultaneously"), and among devices of one speed the slot
  shrinks as the uplink rate grows;
- Remark 2: among devices of one speed the batch grows with the uplink rate;
- Corollary 1 (23): L lies between the relaxation's bound and the equal-split bound;
- Corollary 2 (24): mu* = theta^2 / (Delta L sum_k V_k) lies between the paper's two bounds
  (where the lower bound fails, the numbers say so).

Instances: preset ren2021, CPU devices at K = 6 and 12 (Section VI-C), GPU devices with the
gradient compressed 300x at K = 6 (where the GPU optimum is interior), global batches of 4, 16
and 64 samples per device, 3 seeds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mel_opt.reproduce.catalogue import (
    Claim,
    Computed,
    Context,
    Entry,
    Row,
    fmt_num,
    register,
)
from mel_opt.reproduce.figures import Line, Panel, draw

SETTINGS = (("cpu", "ren2021", 6), ("cpu", "ren2021", 12), ("gpu", "ren2021-compressed", 6))
PER_DEVICE = (4, 16, 64)
EDGE = 1e-6  # a batch this close to a bound (relative) counts as at the bound
TOL = 1e-4  # relative agreement asked of IPOPT's point (its tolerance is 1e-10)


def _pairs_monotone(key: np.ndarray, value: np.ndarray, speed: np.ndarray,
                    increasing: bool) -> tuple[int, int]:
    """Among pairs of devices of the same speed with different ``key``: how many have
    ``value`` ordered as ``key`` (increasing) or against it, out of how many pairs."""
    good = total = 0
    K = key.size
    for i in range(K):
        for j in range(i + 1, K):
            if not np.isclose(speed[i], speed[j], rtol=1e-12) or key[i] == key[j]:
                continue
            total += 1
            d = (value[i] - value[j]) * (key[i] - key[j])
            good += int(d >= -TOL * max(abs(value[i]), abs(value[j]), 1e-12)
                        if increasing else d <= TOL * max(abs(value[i]), abs(value[j]), 1e-12))
    return good, total


def check_point(inst: Any, batch: np.ndarray, up: np.ndarray) -> Row:
    """Every check of the module docstring on one continuous point of P4 (fixed B)."""
    from mel_opt.problems.feel.closed_form import corollary1, corollary2, paper_mu
    from mel_opt.problems.feel.latency import coefficients

    co = coefficients(inst)
    B = float(batch.sum())
    lat = co.compute_time(batch) + co.a / up
    L = float(lat.max())
    interior = (batch > co.lo * (1 + EDGE)) & (batch < co.hi * (1 - EDGE))
    theta_k = ((L - co.e) / co.c - batch) / co.g
    theta = float(np.median(theta_k[interior])) if interior.any() else float("nan")
    spread = float(np.ptp(theta_k[interior]) / abs(theta)) if interior.sum() > 1 else 0.0
    slots_22 = co.a / (L - co.e - co.c * batch)  # (22), for the interior devices
    lo, hi = corollary1(co, B)
    mu_l, mu_h = corollary2(co, L, B)
    mu = paper_mu(co, theta, B) if interior.any() else float("nan")
    b_good, b_total = _pairs_monotone(-co.a, batch, co.c, increasing=True)
    s_good, s_total = _pairs_monotone(-co.a, up, co.c, increasing=False)
    return {"B": B, "L_s": L, "interior": int(interior.sum()), "theta_spread": spread,
            "latency_spread": float(np.ptp(lat) / L),
            "slot_error": float(np.max(np.abs(slots_22 - up)[interior] / up[interior]))
            if interior.any() else None,
            "cor1_lower": lo, "cor1_upper": hi, "mu": mu, "cor2_lower": mu_l,
            "cor2_upper": mu_h, "batch_pairs": f"{b_good}/{b_total}",
            "slot_pairs": f"{s_good}/{s_total}"}


def compute(ctx: Context) -> Computed:
    from mel_opt.api import parse_instance, solve
    from mel_opt.problems.feel.generate import generate

    seeds = ctx.trials(full=3, quick=1)
    rows: list[Row] = []
    for proc, preset, K in SETTINGS:
        for per in PER_DEVICE[1:2] if ctx.quick else PER_DEVICE:
            for s in range(ctx.seed, ctx.seed + seeds):
                inst = parse_instance(generate(preset, learners=K, seed=s, params={
                    "processor": proc, "global_batch": str(per * K)}))
                res = solve(inst, "ipopt")
                row: Row = {"setting": f"{proc} {preset} K={K}", "per_device": per,
                            "seed": s, "status": res.status.value}
                if "continuous_batch" in res.metrics:
                    row.update(check_point(inst, np.asarray(res.metrics["continuous_batch"]),
                                           np.asarray(res.metrics["continuous_uplink_slots"])))
                rows.append(row)
    return rows, [f"{seeds} seed(s) per point; IPOPT (tolerance 1e-10) on P4 with the global "
                  "batch fixed; its continuous point is checked, not the whole batches it "
                  "rounds to; a batch within 1e-6 of a bound counts as at the bound"]


def _ratio(text: Any) -> tuple[int, int]:
    a, b = str(text).split("/")
    return int(a), int(b)


def judge(rows: Sequence[Row]) -> list[Claim]:
    pts = [r for r in rows if r.get("L_s") is not None]
    n = len(pts)

    def count(pred: Any) -> int:
        return sum(1 for r in pts if pred(r))

    theta = max((r["theta_spread"] for r in pts), default=None)
    slot = max((r["slot_error"] for r in pts if r.get("slot_error") is not None), default=None)
    # Corollary 2 assumes a device strictly between its bounds; without one it says nothing
    premise = [r for r in pts if r["interior"] > 0 and np.isfinite(r["mu"])]
    m = len(premise)
    lat = max((r["latency_spread"] for r in pts), default=None)
    cor1 = count(lambda r: r["cor1_lower"] * (1 - TOL) <= r["L_s"] <= r["cor1_upper"]
                 * (1 + TOL))
    upper2 = sum(1 for r in premise if r["mu"] <= r["cor2_upper"] * (1 + TOL))
    lower2 = [r for r in premise if r["mu"] < r["cor2_lower"] * (1 - TOL)]
    crossed = sum(1 for r in premise if r["cor2_lower"] > r["cor2_upper"])
    bp = [_ratio(r["batch_pairs"]) for r in pts]
    sp = [_ratio(r["slot_pairs"]) for r in pts]
    worst_lower = max(lower2, key=lambda r: r["cor2_lower"] / r["mu"], default=None)
    return [
        Claim("Theorem 1: the interior batches share one theta, and the slots follow (22)",
              "B_k* and tau_k* of (22) with common mu*, E^U* (Theorem 1)",
              f"largest relative spread of theta {fmt_num(theta)}, of the slots from (22) "
              f"{fmt_num(slot)} over {n} optima",
              n > 0 and theta is not None and theta <= TOL and slot is not None and slot <= TOL,
              f"every optimum: spreads <= {TOL:g}"),
        Claim("Remark 3: every device's gradient arrives at the same time",
              "the end-to-end latency of each device is equalized (Remark 3)",
              f"largest relative spread of t_k^L + t_k^U {fmt_num(lat)}",
              n > 0 and lat is not None and lat <= TOL, f"every optimum: spread <= {TOL:g}"),
        Claim("Remarks 2-3: among devices of one speed, a better channel gets a larger batch "
              "and a shorter slot", "batch increases, slot decreases with the uplink rate",
              f"batch ordered in {sum(g for g, _ in bp)} of {sum(t for _, t in bp)} pairs, "
              f"slot in {sum(g for g, _ in sp)} of {sum(t for _, t in sp)}",
              sum(t for _, t in bp) > 0 and all(g == t for g, t in bp + sp),
              "every pair of equal-speed devices"),
        Claim("Corollary 1: E^U* lies within (23)", "lower and upper bounds (23)",
              f"{cor1} of {n} optima inside", n > 0 and cor1 == n, "every optimum"),
        Claim("Corollary 2: mu* lies within (24)", "lower and upper bounds (24)",
              f"of {m} optima with a device between its bounds (the corollary's premise): "
              f"upper bound holds at {upper2}; lower bound fails at {len(lower2)}"
              + (f" (worst: mu* = {worst_lower['mu']:.3g} below the bound "
                 f"{worst_lower['cor2_lower']:.3g}, {worst_lower['setting']}, "
                 f"B = {worst_lower['B']:g})" if worst_lower else "")
              + f"; the lower bound exceeds the upper at {crossed}",
              m > 0 and upper2 == m and not lower2, "every optimum meeting the premise, both "
              "bounds", "" if m else "no optimum has a device strictly between its bounds"),
    ]


def plot(rows: Sequence[Row], path: Path) -> None:
    pts = [r for r in rows if r.get("L_s") is not None]
    settings = sorted({r["setting"] for r in pts})
    panels = []
    for key, title in (("cor1", "L* within Corollary 1 (L / bound)"),
                       ("cor2", "mu* against Corollary 2 (mu / bound)")):
        panel = Panel(title, "global batch per device", "ratio")
        for st in settings:
            mine = sorted((r for r in pts if r["setting"] == st), key=lambda r: r["per_device"])
            by: dict[int, list[Row]] = {}
            for r in mine:
                by.setdefault(r["per_device"], []).append(r)
            xs = sorted(by)
            if key == "cor1":
                lo = [statistics.mean(r["L_s"] / r["cor1_lower"] for r in by[x]) for x in xs]
                hi = [statistics.mean(r["L_s"] / r["cor1_upper"] for r in by[x]) for x in xs]
                panel.lines.append(Line(f"{st}: L / lower", xs, lo))
                panel.lines.append(Line(f"{st}: L / upper", xs, hi))
            else:
                lo = [statistics.mean(r["mu"] / r["cor2_lower"] for r in by[x]) for x in xs]
                hi = [statistics.mean(r["mu"] / r["cor2_upper"] for r in by[x]) for x in xs]
                panel.lines.append(Line(f"{st}: mu / lower", xs, lo))
                panel.lines.append(Line(f"{st}: mu / upper", xs, hi))
        panel.band = (1.0, 1.0)
        panels.append(panel)
    draw(panels, path, "Paper 004: Corollaries 1-2 at IPOPT's optima (1 = on the bound)",
         ncols=2)


register(Entry(
    id="004-theorem1", paper="004 Ren, Yu & Ding",
    title="Theorem 1, Corollaries 1-2, Remarks 2-3 checked on IPOPT's optima of P4",
    shows=("IPOPT solves P4 (global batch fixed: 4, 16, 64 per device) on preset ren2021, CPU "
           "K = 6 and 12, and on ren2021-compressed, GPU K = 6; its continuous point is "
           "checked against the structure of (22), the equalised latencies, the ordering of "
           "batches and slots by channel, and the bounds (23) and (24)."),
    columns=("setting", "per_device", "seed", "status", "B", "L_s", "interior",
             "theta_spread", "slot_error", "latency_spread", "cor1_lower", "cor1_upper", "mu",
             "cor2_lower", "cor2_upper", "batch_pairs", "slot_pairs"),
    compute=compute, judge=judge, plot=plot))
