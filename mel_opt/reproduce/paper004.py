"""Catalogue entry of paper 004 (Ren, Yu & Ding, training acceleration in FEEL).

Figs. 4-5 compare the proposed joint batch/slot policy with online (B_k = 1), full-batch
(B_k = B^max) and random-batch learning on K = 6 GPU devices (Section VI-D) and report that the
proposed scheme converges fastest. Convergence per second is what the learning efficiency (16)
measures per round (Remark 1), so without training this entry compares the per-round
efficiency of the schemes on the Table I set-up (preset ren2021), GPU K = 6 as in Section VI-D
and CPU K = 6 and 12 as in Section VI-C, and checks Lemma 2 (GPU batches in the compute-bound
region). The loss and accuracy curves themselves need the training extra.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from mel_opt.api import solve
from mel_opt.problems.feel.generate import generate
from mel_opt.problems.feel.instance import parse
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

SETTINGS = (("gpu", 6), ("cpu", 6), ("cpu", 12))
SCHEMES = {"closed-form": "proposed", "online": "online", "full-batch": "full batch",
           "random-batch": "random batch"}
STRICT_MARGIN = 0.01  # "fastest": a baseline at least 1% below the proposed efficiency


def compute(ctx: Context) -> Computed:
    seeds = ctx.trials(full=5, quick=1)
    rows: list[Row] = []
    for proc, K in SETTINGS:
        acc: dict[str, dict[str, list[float]]] = {m: {} for m in SCHEMES}
        for s in range(ctx.seed, ctx.seed + seeds):
            inst = parse(generate("ren2021", learners=K, seed=s,
                                           params={"processor": proc}))
            ref = solve(inst, "closed-form")
            if not ref.ok or ref.objective is None:
                continue
            for m in SCHEMES:
                r = ref if m == "closed-form" else solve(inst, m, seed=s)
                if not r.ok or r.objective is None:
                    continue
                cell = acc[m]
                cell.setdefault("efficiency", []).append(r.objective)
                cell.setdefault("relative", []).append(r.objective / ref.objective)
                cell.setdefault("round_s", []).append(r.metrics["round_latency_s"])
                cell.setdefault("global_batch", []).append(r.solution["global_batch"])
                if proc == "gpu" and inst.batch_threshold is not None:
                    slack = min(b - th for b, th in zip(r.solution["batch"],
                                                        inst.batch_threshold, strict=True))
                    cell.setdefault("slack", []).append(float(slack))
        for m, cell in acc.items():
            row: Row = {"processor": proc, "K": K, "scheme": m, "answered": len(
                cell.get("efficiency", []))}
            row.update({
                "efficiency": _mean(cell, "efficiency"), "vs_proposed": _mean(cell, "relative"),
                "worst_vs_proposed": max(cell["relative"]) if cell.get("relative") else None,
                "round_latency_s": _mean(cell, "round_s"),
                "global_batch": _mean(cell, "global_batch"),
                "min_batch_over_threshold": min(cell["slack"]) if cell.get("slack") else None,
                "paper": "fastest (Figs. 4-5)" if m == "closed-form" else "slower (Figs. 4-5)"})
            rows.append(row)
    return rows, [f"per-round learning efficiency (16) on preset ren2021, {seeds} seeds per "
                  "setting; the figures' loss and accuracy curves need training"]


def _mean(cell: dict[str, list[float]], key: str) -> float | None:
    return statistics.mean(cell[key]) if cell.get(key) else None


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * ratio:.2f}%"


def judge(rows: Sequence[Row]) -> list[Claim]:
    base = [r for r in rows if r["scheme"] != "closed-form"]
    worst = max((r["worst_vs_proposed"] for r in base if r["worst_vs_proposed"] is not None),
                default=None)
    claims = [Claim(
        "the proposed scheme is at least as efficient as every baseline",
        "fastest convergence of all schemes (Figs. 4-5)",
        f"best baseline reaches {_pct(worst)} of the proposed efficiency",
        worst is not None and all(r["answered"] for r in rows) and worst <= 1.0 + 1e-9,
        "every instance: baseline efficiency / proposed <= 1")]
    for r in base:
        if r["processor"] != "gpu":
            continue
        ratio = r["worst_vs_proposed"]
        claims.append(Claim(
            f"GPU K = {r['K']}: proposed strictly faster than {SCHEMES[r['scheme']]}",
            "a distinct, slower curve (Figs. 4-5)",
            f"{SCHEMES[r['scheme']]} reaches {_pct(ratio)} of the proposed efficiency",
            ratio is not None and ratio <= 1.0 - STRICT_MARGIN,
            f"every seed: baseline / proposed <= {1 - STRICT_MARGIN:g}"))
    slack = [r["min_batch_over_threshold"] for r in rows
             if r["processor"] == "gpu" and r["scheme"] == "closed-form"]
    claims.append(Claim(
        "GPU optimum lies in the compute-bound region", "B_k* >= B_k^th (Lemma 2)",
        f"smallest B_k - B_k^th {fmt_num(min(slack)) if slack and None not in slack else '-'}",
        bool(slack) and None not in slack and min(slack) >= 0, "every device: B_k >= B_k^th"))
    return claims


def plot(rows: Sequence[Row], path: Path) -> None:
    panels = []
    for proc, K in SETTINGS:
        sel = [r for r in rows if r["processor"] == proc and r["K"] == K]
        panel = Panel(f"{proc.upper()}, K = {K}", "scheme (0 proposed, 1 online, 2 full, "
                      "3 random)", "efficiency / proposed")
        panel.lines.append(Line("per-round learning efficiency", list(range(len(sel))),
                                [r["vs_proposed"] for r in sel]))
        panels.append(panel)
    draw(panels, path, "Paper 004 Figs. 4-5 (model): learning efficiency by scheme")


register(Entry(
    id="004-fig4-5", paper="004 Ren, Yu & Ding",
    title="Figs. 4-5 (per-round model): learning efficiency of the proposed scheme vs "
          "online, full and random batches",
    shows=("Learning efficiency (16) of each scheme with optimal slots, relative to the "
           "closed-form optimum, on the Table I set-up: GPU K = 6 (Section VI-D), CPU K = 6 "
           "and 12 (Section VI-C); Lemma 2 checked on the GPU optimum."),
    columns=("processor", "K", "scheme", "efficiency", "vs_proposed", "worst_vs_proposed",
             "round_latency_s", "global_batch", "min_batch_over_threshold", "answered",
             "paper"),
    compute=compute, judge=judge, plot=plot))
