"""Catalogue entries of the learning experiments: a real model trained under each allocation.

The runs are :mod:`mel_opt.training.experiments` (digits data, the papers' models adapted to
8 x 8 inputs, virtual clocks from the instances' own latency models); the claims below test
the papers' statements on those rows. They need the ``training`` extra (scikit-learn for the
digits).

- ``000-fig3``: paper 000, Fig. 3: cycles to 95% / 97% accuracy, K = 10, 15, 20.
- ``004-table2``: paper 004, Table II: accuracy and speedup against individual learning.
- ``004-fig4-5-training``: paper 004, Figs. 4-5: the proposed batches on GPU devices.
- ``001-fig3.6-3.8-training``: thesis Ch. 3, Figs. 3.6-3.8: DAB against CSA over deadlines.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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

NEEDS = ("training", "plot")
SLACK = 0.005  # accuracy differences below half a point are read as "no worse"


def _run(name: str, ctx: Context, full: int, quick: int) -> Computed:
    from mel_opt.training import experiments as E

    seeds = ctx.trials(full=full, quick=quick)
    out = getattr(E, name)(None, seeds=seeds, quick=ctx.quick)
    return out.rows, [f"{seeds} seed(s) per scheme; digits data (scikit-learn, 8 x 8), "
                      f"experiment {out.wall_s:.1f} s wall"]


def _lt(a: float | None, b: float | None) -> bool:
    """a < b, where None (target never reached) is later than any number."""
    if a is None:
        return False
    return b is None or a < b


# ---- paper 000, Fig. 3 ----------------------------------------------------------------------
def judge_000(rows: Sequence[Row]) -> list[Claim]:
    """Section V-C: the optimised allocation reaches each target in fewer cycles than sync
    and ETA, for every K (paper: 4 vs 8 and never at K = 10, 95%; 3 vs 4 and 4 at K = 15 and
    20; 8 vs 10 / 10 and 7 vs 8 / 11 at 97%)."""
    claims = []
    for target in sorted({r["target"] for r in rows}):
        parts, ok = [], True
        for K in sorted({r["K"] for r in rows}):
            c = {r["scheme"]: r["cycles"] for r in rows if r["K"] == K and r["target"] == target}
            ok &= _lt(c.get("exact"), c.get("sync")) and _lt(c.get("exact"), c.get("eta"))
            parts.append(f"K={K}: exact {fmt_num(c.get('exact'))}, sync "
                         f"{fmt_num(c.get('sync'))}, eta {fmt_num(c.get('eta'))}")
        claims.append(Claim(
            f"optimised allocation reaches {target:.0%} in fewest cycles",
            "fewer cycles than sync and ETA for every K (Fig. 3, Sec. V-C)",
            "; ".join(parts) + " ('-': never within the cycles)", ok,
            "every K: mean cycles of exact < sync and < eta (never reached = infinitely many)"))
    return claims


def plot_000(rows: Sequence[Row], path: Path) -> None:
    panels = []
    for target in sorted({r["target"] for r in rows}):
        panel = Panel(f"cycles to {target:.0%}", "K (learners)", "global cycles")
        for s in ("exact", "kkt-sai", "eta", "sync"):
            pts = sorted((r["K"], r["cycles"]) for r in rows
                         if r["scheme"] == s and r["target"] == target)
            panel.lines.append(Line(s, [p[0] for p in pts], [p[1] for p in pts]))
        paper = sorted((r["K"], r["paper_cycles"]) for r in rows if r["scheme"] == "exact"
                       and r["target"] == target and isinstance(r["paper_cycles"], int))
        panel.lines.append(Line("paper, optimiser", [p[0] for p in paper],
                                [p[1] for p in paper], paper=True))
        panels.append(panel)
    draw(panels, path, "Paper 000 Fig. 3: cycles to target accuracy (digits)", ncols=2)


# ---- paper 004, Table II --------------------------------------------------------------------
def judge_table2(rows: Sequence[Row]) -> list[Claim]:
    """Table II: the closed form trains faster than individual learning (1.03-1.26x), the two
    FEEL baselines slower (0.29-0.69x), and its accuracy is at least individual learning's."""
    cases = sorted({(r["K"], r["partition"]) for r in rows})

    def get(K: int, part: str, s: str, key: str) -> Any:
        return next((r.get(key) for r in rows if (r["K"], r["partition"], r["scheme"])
                     == (K, part, s)), None)

    def label(K: int, part: str) -> str:
        return f"K={K} {part}"

    cf = [(c, get(*c, "closed-form", "speedup")) for c in cases]
    base = [(c, s, get(*c, s, "speedup")) for c in cases for s in ("model-based",
                                                                   "gradient-based")]
    acc = [(c, get(*c, "closed-form", "accuracy"), get(*c, "individual", "accuracy"))
           for c in cases]
    return [
        Claim("closed-form trains faster than individual learning", "speedup 1.03-1.26x",
              ", ".join(f"{label(*c)}: {fmt_num(v)}x" for c, v in cf),
              all(v is not None and v > 1.0 for _, v in cf),
              "every case: seconds-to-target speedup of closed-form > 1 (reached by all seeds)"),
        Claim("model- and gradient-based FEEL train slower than individual learning",
              "speedups 0.29-0.69x",
              ", ".join(f"{label(*c)} {s}: {fmt_num(v)}x" for c, s, v in base),
              all(v is not None and v < 1.0 for _, _, v in base),
              "every case and baseline: speedup < 1 (reached by all seeds)"),
        Claim("closed-form is at least as accurate as individual learning",
              "0.9143-0.9234 vs 0.8916-0.9068",
              ", ".join(f"{label(*c)}: {fmt_num(a)} vs {fmt_num(b)}" for c, a, b in acc),
              all(a is not None and b is not None and a >= b - SLACK for _, a, b in acc),
              f"every case: final accuracy of closed-form >= individual's - {SLACK:g}"),
    ]


def plot_table2(rows: Sequence[Row], path: Path) -> None:
    cases = sorted({(r["K"], r["partition"]) for r in rows})
    xs = list(range(len(cases)))
    panels = []
    for key, title in (("speedup", "speedup vs individual"), ("accuracy", "final accuracy")):
        panel = Panel(f"{title} (cases: " + ", ".join(f"{i}={K} {p}" for i, (K, p)
                                                      in enumerate(cases)) + ")",
                      "case", key)
        for s in ("individual", "model-based", "gradient-based", "closed-form"):
            ys = [next((r.get(key) for r in rows if (r["K"], r["partition"]) == c
                        and r["scheme"] == s), None) for c in cases]
            pys = [next((r.get(f"paper_{key}") for r in rows if (r["K"], r["partition"]) == c
                         and r["scheme"] == s), None) for c in cases]
            panel.lines.append(Line(s, xs, ys))
            if s == "closed-form":
                panel.lines.append(Line("paper, closed-form", xs, pys, paper=True))
        panels.append(panel)
    draw(panels, path, "Paper 004 Table II (digits, CPU devices)", ncols=2)


# ---- paper 004, Figs. 4-5 -------------------------------------------------------------------
def judge_gpu(rows: Sequence[Row]) -> list[Claim]:
    """Figs. 4-5: the proposed batches converge fastest and most accurately."""
    claims = []
    for part in sorted({r["partition"] for r in rows}):
        mine = {r["scheme"]: r for r in rows if r["partition"] == part}
        secs = {s: r["seconds_to_target"] for s, r in mine.items()}
        cf = secs.get("closed-form")
        others = {s: v for s, v in secs.items() if s != "closed-form"}
        claims.append(Claim(
            f"{part}: closed-form reaches 90% first", "fastest convergence (Figs. 4-5)",
            ", ".join(f"{s} {fmt_num(v, 4)} s" for s, v in secs.items()),
            all(_lt(cf, v) for v in others.values()),
            "mean seconds to 90% of closed-form < every other scheme's (ties fail)"))
        acc = {s: r["accuracy_at_horizon"] for s, r in mine.items()}
        best = max(v for s, v in acc.items() if s != "closed-form")
        claims.append(Claim(
            f"{part}: closed-form is the most accurate at a common time",
            "highest accuracy (Figs. 4-5)",
            ", ".join(f"{s} {fmt_num(v)}" for s, v in acc.items()),
            acc.get("closed-form", -math.inf) >= best - SLACK,
            f"accuracy at the shortest run's end: closed-form >= best other - {SLACK:g}"))
    return claims


def plot_gpu(rows: Sequence[Row], path: Path) -> None:
    parts = sorted({r["partition"] for r in rows})
    xs = list(range(len(parts)))
    panels = []
    for key, title in (("seconds_to_target", "virtual seconds to 90%"),
                       ("accuracy_at_horizon", "accuracy at a common time")):
        panel = Panel(f"{title} (" + ", ".join(f"{i}={p}" for i, p in enumerate(parts)) + ")",
                      "partition", key)
        for s in ("closed-form", "online", "full-batch", "random-batch"):
            ys = [next((r[key] for r in rows if r["partition"] == p and r["scheme"] == s),
                       None) for p in parts]
            panel.lines.append(Line(s, xs, ys))
        panels.append(panel)
    draw(panels, path, "Paper 004 Figs. 4-5 (digits, GPU devices)", ncols=2)


# ---- thesis Ch. 3, Figs. 3.6-3.8 ------------------------------------------------------------
def judge_dab(rows: Sequence[Row]) -> list[Claim]:
    """Section 3.4.2: DAB follows the deadline (7% late at 105 s), the thesis' CSA overruns
    short deadlines (63%), and DAB gives up a little accuracy there (0.91 vs 0.95)."""
    def col(s: str, key: str) -> list[tuple[float, Any]]:
        return sorted((r["deadline_s"], r.get(key)) for r in rows
                      if r["scheme"] == s and r["status"] == "trained")

    dab, csa = col("dab", "truancy_pct"), col("csa-thesis", "truancy_pct")
    low = min((d for d, _ in dab), default=math.nan)
    d_low, c_low = dict(dab).get(low), dict(csa).get(low)
    a_dab, a_csa = dict(col("dab", "accuracy")).get(low), dict(col("csa-thesis",
                                                                   "accuracy")).get(low)
    worst = max((t for _, t in dab), default=None)
    return [
        Claim("DAB's cycle ends close to the deadline", "7% past D at 105 s (Fig. 3.7)",
              f"worst mean truancy {fmt_num(worst)}% over D = "
              + ", ".join(f"{d:g}" for d, _ in dab) + " s",
              worst is not None and worst <= 15.0, "every deadline: DAB mean truancy <= 15%"),
        Claim("the thesis' CSA overruns the shortest deadline", "63% past D at 105 s (Fig. 3.7)",
              f"D = {fmt_num(low)} s: CSA {fmt_num(c_low)}%, DAB {fmt_num(d_low)}%",
              c_low is not None and d_low is not None and c_low >= 30.0 and c_low > d_low,
              "shortest deadline: csa-thesis truancy >= 30% and > DAB's"),
        Claim("DAB is a little less accurate than CSA at the shortest deadline",
              "0.91 vs 0.95 at 105 s (Fig. 3.8a)",
              f"D = {fmt_num(low)} s: DAB {fmt_num(a_dab)}, CSA {fmt_num(a_csa)}",
              a_dab is not None and a_csa is not None and a_csa - 0.10 <= a_dab <= a_csa,
              "shortest deadline: CSA - 0.10 <= DAB accuracy <= CSA"),
    ]


def plot_dab(rows: Sequence[Row], path: Path) -> None:
    panels = []
    for key, title in (("cycle_time_s", "time of a cycle [s]"), ("truancy_pct", "truancy [%]"),
                       ("accuracy", "final accuracy")):
        panel = Panel(title, "deadline D [s]", key)
        for s in ("dab", "csa", "csa-thesis"):
            pts = sorted((r["deadline_s"], r.get(key)) for r in rows
                         if r["scheme"] == s and r["status"] == "trained")
            panel.lines.append(Line(s, [p[0] for p in pts], [p[1] for p in pts]))
        paper = [(r["deadline_s"], r.get(f"paper_{key}")) for r in rows
                 if r.get(f"paper_{key}") is not None]
        if paper:
            panel.lines.append(Line("thesis at its shortest D (105 s)", [p[0] for p in paper],
                                    [p[1] for p in paper], paper=True))
        panels.append(panel)
    draw(panels, path, "Thesis Figs. 3.6-3.8: DAB vs CSA over the deadline (digits)")


def _compute(name: str, full: int, quick: int) -> Callable[[Context], Computed]:
    return lambda ctx: _run(name, ctx, full, quick)


register(Entry(
    id="000-fig3", paper="000 Mohammad & Sorour",
    title="Fig. 3: cycles to 95% / 97% validation accuracy, K = 10, 15, 20, T = 15 s",
    shows=("Preset mohammad2020 (seed 2020) solved by exact, kkt-sai, eta and sync; the "
           "paper's [F, 300, 124, 60, 10] network trained for 20 cycles under each allocation "
           "(quick: K = 10, 3 cycles, softmax)."),
    columns=("K", "target", "scheme", "max_staleness", "cycles", "cycles_lo", "cycles_hi",
             "reached", "final_accuracy", "paper_cycles"),
    compute=_compute("paper000_fig3", 5, 1), judge=judge_000, plot=plot_000, needs=NEEDS))

register(Entry(
    id="004-table2", paper="004 Ren, Yu & Ding",
    title="Table II: accuracy and speedup vs individual learning, K = 6 and 12, CPU",
    shows=("Preset ren2021 (CPU, seed 1); TwoNN, 1,500 gradient rounds or 300 local epochs; "
           "speedup = seconds to 90% of individual learning over the scheme's (quick: K = 6 "
           "IID, softmax, 30 rounds / 5 epochs)."),
    columns=("K", "partition", "scheme", "accuracy", "paper_accuracy", "seconds_to_target",
             "reached", "speedup", "paper_speedup"),
    compute=_compute("paper004_table2", 3, 1), judge=judge_table2, plot=plot_table2,
    needs=NEEDS))

register(Entry(
    id="004-fig4-5-training", paper="004 Ren, Yu & Ding",
    title="Figs. 4-5: proposed batches vs online, full-batch, random on K = 6 GPU devices",
    shows=("Preset ren2021 (GPU, seed 1); TwoNN for 600 rounds, IID and non-IID; seconds to "
           "90% and accuracy at a common virtual time (quick: IID, 20 rounds, softmax)."),
    columns=("partition", "scheme", "batch", "seconds_to_target", "reached",
             "accuracy_at_horizon", "horizon_s"),
    compute=_compute("paper004_gpu", 3, 1), judge=judge_gpu, plot=plot_gpu, needs=NEEDS))

register(Entry(
    id="001-fig3.6-3.8-training", paper="001 Mays (thesis)",
    title="Figs. 3.6-3.8: cycle time, truancy, accuracy of DAB and CSA over the deadline",
    shows=("Four Jetson-Nano learners (run-to-run time_cv 0.06), one pass, 5 cycles of TwoNN; "
           "CSA splits the data DAB places at 55 s (csa-thesis: the thesis' rule; csa: the "
           "exact optimum, infeasible where the data cannot fit); D = 5-105 s (quick: 15 and "
           "105 s, 2 cycles, softmax)."),
    columns=("deadline_s", "scheme", "status", "shards", "cycle_time_s", "truancy_pct",
             "accuracy", "loss", "paper_time_s", "paper_truancy_pct", "paper_accuracy",
             "paper_loss"),
    compute=_compute("thesis_dab", 5, 1), judge=judge_dab, plot=plot_dab, needs=NEEDS))
