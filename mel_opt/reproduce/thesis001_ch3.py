"""Catalogue entries of thesis 001, Chapter 3 (subset benchmarking and DAB).

- ``001-fig3.2``: SB and FLOPS training-time prediction error vs benchmark size, measured on
  this machine with a numpy TwoNN (the thesis measured a Jetson Nano);
- ``001-fig3.3``: SB download-time prediction error vs benchmark size over loopback HTTP;
- ``001-fig3.6``: DAB against CSA over the deadline (Figs. 3.6-3.7), in the time model of
  Eq. (3.4) with each learner's run-to-run noise: completion time and truancy of DAB and of
  the CSA rule of the thesis' code (the ``csa-thesis`` method, through
  :func:`mel_opt.api.solve` and the dab verifier).

The thesis text states the levels quoted in the claims; per-size values marked "read from
Fig. 3.x" are the figures' levels.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mel_opt.api import solve
from mel_opt.problems.dab.generate import generate as dab_generate
from mel_opt.problems.dab.instance import parse as parse_dab
from mel_opt.reproduce.catalogue import (
    Claim,
    Computed,
    Context,
    Entry,
    Row,
    fmt_num,
    register,
    within,
)
from mel_opt.reproduce.figures import Line, Panel, draw
from mel_opt.stats import lognormal_factors
from mel_opt.subset_benchmarking.error import (
    ErrorTrials,
    download_error_experiment,
    sb_error_experiment,
)

SIZES = (2, 4, 6, 8, 10)
# Fig. 3.2 (read from the figure): SB error per benchmark size and the FLOPS error [%].
PAPER_SB = {2: 6.8, 4: 4.7, 6: 4.5, 8: 4.6, 10: 4.1}
PAPER_FLOPS = 51.0
PAPER_SB_REDUCTION = 83.0  # text: "a significant reduction in benchmarking error, up to 83%"
# Fig. 3.3: Ethernet per size (read from the figure; the text gives 16% at 2 and 10% at 10),
# WiFi 32% at 2 and 8% at 10 shards (text).
PAPER_ETHERNET = {2: 15.9, 4: 13.6, 6: 12.9, 8: 11.7, 10: 10.4}
PAPER_WIFI = {2: 32.0, 10: 8.0}


#: Trials per size the thesis ran: Fig. 3.2 "repeated 30 times" (Sec. 3.4), Fig. 3.3 "averaged
#: over 45 trials". The claims are judged on medians over the trials (a timing on a shared
#: machine has outliers a mean follows), with the spread (quartiles) reported beside.
THESIS_TRIALS = {"sb": 30, "download": 45}


def _error_rows(res: ErrorTrials) -> list[Row]:
    rows = []
    for n, errs in res.sb.items():
        q25, q75 = (float(v) for v in np.percentile(errs, [25, 75]))
        rows.append({"shards": n, "sb_error_pct": statistics.mean(errs),
                     "sb_sd": statistics.stdev(errs) if len(errs) > 1 else 0.0,
                     "sb_median": statistics.median(errs), "sb_p25": q25, "sb_p75": q75,
                     "trials": len(errs)})
    return rows


def _trial_note(trials: int, kind: str) -> list[str]:
    want = THESIS_TRIALS[kind]
    return [] if trials >= want else [
        f"{trials} trials per size, fewer than the thesis's {want}: the verdict is indicative"]


def compute_sb(ctx: Context) -> Computed:
    trials = ctx.trials(full=30, quick=3)
    res = sb_error_experiment(trials, SIZES, seed=ctx.seed)
    flops = statistics.mean(res.flops)
    rows = _error_rows(res)
    flops_median = statistics.median(res.flops)
    for r in rows:
        r.update(flops_error_pct=flops, flops_median=flops_median,
                 sb_lower_by_pct=(1 - r["sb_median"] / flops_median) * 100,
                 paper_sb_pct=PAPER_SB.get(r["shards"]), paper_flops_pct=PAPER_FLOPS)
    return rows, [f"TwoNN trained with numpy on this machine (1 BLAS thread), {trials} trials; "
                  f"real run {statistics.mean(res.real_s):.3f} s, FLOPS baseline "
                  f"{statistics.mean(res.gflops):.0f} GFLOP/s; claims on medians over the "
                  "trials (sb_p25 / sb_p75: the spread)", *_trial_note(trials, "sb")]


def _at(rows: Sequence[Row], n: int, key: str) -> float | None:
    for r in rows:
        if r["shards"] == n and r.get(key) is not None:
            return float(r[key])
    return None


def _falls(rows: Sequence[Row], key: str, paper: str) -> Claim:
    lo, hi = min(r["shards"] for r in rows), max(r["shards"] for r in rows)
    a, b = _at(rows, lo, key), _at(rows, hi, key)
    return Claim("the error falls as the benchmark grows", paper,
                 f"median {fmt_num(a)}% at {lo} -> {fmt_num(b)}% at {hi} shards",
                 a is not None and b is not None and b < a,
                 f"median error at {hi} shards < at {lo} shards")


def judge_sb(rows: Sequence[Row]) -> list[Claim]:
    flops = rows[0].get("flops_median", rows[0]["flops_error_pct"])
    below = [r for r in rows if r["sb_median"] < flops]
    best = max((r["sb_lower_by_pct"] for r in rows), default=None)
    last = max(r["shards"] for r in rows)
    return [
        Claim("SB predicts better than FLOPS at every size",
              f"SB 4.1-6.8% vs FLOPS {PAPER_FLOPS:g}% (read from Fig. 3.2)",
              f"SB below FLOPS at {len(below)} of {len(rows)} sizes "
              f"(FLOPS median {fmt_num(flops)}%)",
              len(below) == len(rows), "every size: median SB error < median FLOPS error"),
        Claim("SB error is up to 83% lower than FLOPS", f"up to {PAPER_SB_REDUCTION:g}% (text)",
              f"up to {fmt_num(best)}%", within(best, 70.0, 100.0),
              "largest reduction (1 - SB / FLOPS, medians) in [70, 100]%"),
        _falls(rows, "sb_median", "falls with size; no gain above 8 shards (text)"),
        Claim(f"SB error at {last} shards is a few percent",
              f"{PAPER_SB.get(last, '-')}% (read from Fig. 3.2)",
              f"median {fmt_num(_at(rows, last, 'sb_median'))}%",
              within(_at(rows, last, "sb_median"), 0.0, 10.0), "median SB error in [0, 10]%"),
    ]


def _plot_errors(rows: Sequence[Row], path: Path, ours: dict[str, str],
                 paper: dict[str, dict[int, float]], title: str) -> None:
    panel = Panel(title, "benchmark size (shards)", "prediction error (%)")
    xs = [r["shards"] for r in rows]
    for key, label in ours.items():
        panel.lines.append(Line(label, xs, [r[key] for r in rows]))
    for label, values in paper.items():
        pts = sorted(values.items())
        panel.lines.append(Line(label, [p[0] for p in pts], [p[1] for p in pts], paper=True))
    draw([panel], path)


def plot_sb(rows: Sequence[Row], path: Path) -> None:
    _plot_errors(rows, path, {"sb_error_pct": "SB (this machine)",
                              "flops_error_pct": "FLOPS (this machine)"},
                 {"thesis SB": PAPER_SB, "thesis FLOPS": {2: PAPER_FLOPS, 10: PAPER_FLOPS}},
                 "Thesis Fig. 3.2: training-time prediction error")


def compute_download(ctx: Context) -> Computed:
    trials = ctx.trials(full=45, quick=3)
    res = download_error_experiment(trials, SIZES, seed=ctx.seed)
    rows = _error_rows(res)
    for r in rows:
        r.update(paper_ethernet_pct=PAPER_ETHERNET.get(r["shards"]),
                 paper_wifi_pct=PAPER_WIFI.get(r["shards"]))
    return rows, [f"loopback HTTP on this machine, {trials} trials: it exercises the "
                  "measurement, it is not an Ethernet or WiFi link; claims on medians over the "
                  "trials (sb_p25 / sb_p75: the spread)", _level_note(rows),
                  *_trial_note(trials, "download")]


def judge_download(rows: Sequence[Row]) -> list[Claim]:
    """The trend only: the thesis's levels (16 % -> 10 % on Ethernet, 32 % -> 8 % on WiFi) are
    properties of its links, which a loopback transfer does not have (see the notes)."""
    return [_falls(rows, "sb_median", "Ethernet 16% -> 10%, WiFi 32% -> 8% (text)")]


def _level_note(rows: Sequence[Row]) -> str:
    lo, hi = min(r["shards"] for r in rows), max(r["shards"] for r in rows)
    return (f"not judged: the thesis's error levels (16% at {lo} and 10% at {hi} shards on "
            f"Ethernet, 32% and 8% on WiFi) belong to its links; loopback here gives medians "
            f"{fmt_num(_at(rows, lo, 'sb_median'))}% and {fmt_num(_at(rows, hi, 'sb_median'))}%")


def plot_download(rows: Sequence[Row], path: Path) -> None:
    _plot_errors(rows, path, {"sb_error_pct": "SB, loopback (this machine)"},
                 {"thesis Ethernet": PAPER_ETHERNET, "thesis WiFi": PAPER_WIFI},
                 "Thesis Fig. 3.3: download-time prediction error")


# ---- Figs. 3.6-3.7: DAB vs CSA over the deadline ---------------------------------------------
BASE_DEADLINE = 15.0  # the Chapter 3 set-up (random preset); CSA's data is sized for it
CYCLES = 5  # the thesis runs five global update cycles per deadline (Sec. 3.4)
#: The thesis's deadlines for the whole task (5 cycles: 21-30 s per cycle) and CSA's time at
#: the lowest: "CSA took 172 seconds on average" at 105 s. CSA fixes its data (and trains one
#: pass), so its time does not move with the deadline: the thesis's sweep is 105/172 .. 150/172
#: of CSA's time, and that ratio (not the absolute seconds of another testbed) maps it onto
#: ours: deadline = ratio x CSA's own time per cycle, per seed.
THESIS_DEADLINES = (105.0, 120.0, 135.0, 150.0)
THESIS_CSA_TIME = 172.0
THESIS_FACTORS = tuple(d / THESIS_CSA_TIME for d in THESIS_DEADLINES)
CONTEXT_FACTORS = (1.0, 1.5)  # CSA's own time and beyond: context, for the figure only
PAPER_LOW = {"dab": 7.0, "csa": 63.0}  # truancy at the lowest deadline, 105 s (text)
PAPER_GAP = 56.0  # "56% further past the deadline" (text)
PAPER_LONGER = 53.0  # "CSA takes at most 53% longer than DAB" (text)
TOLERANCE = 1.0 / 3.0  # a stated number holds within a third of it


def realised_time(eta_s: Sequence[float], time_cv: np.ndarray, z: np.ndarray) -> float:
    """The task's time over the cycles: each cycle lasts until its slowest learner's update,
    each learner's Eq. (3.4) time eta_k times its run-to-run factor (``z``: standard normal
    draws, one row per cycle)."""
    eta = np.asarray(eta_s, dtype=float)
    used = eta > 0
    times = eta[used] * lognormal_factors(np.asarray(time_cv)[used], z[:, used])
    return float(times.max(axis=1).sum())


def compute_deadline(ctx: Context) -> Computed:
    seeds = ctx.trials(full=10, quick=2)
    factors = ((THESIS_FACTORS[0], THESIS_FACTORS[-1], 1.5) if ctx.quick
               else THESIS_FACTORS + CONTEXT_FACTORS)
    acc: dict[float, dict[str, list[float]]] = {f: {} for f in factors}
    for s in range(ctx.seed, ctx.seed + seeds):
        # Sec. 3.4's deadline experiment: "one pass over their local datasets" per cycle
        base = parse_dab(dab_generate("random", learners=4, seed=s,
                                      params={"iterations": "1"}))
        csa_cycle = float(solve(base, "csa-thesis").metrics["max_eta_s"])  # its time per cycle
        for i, f in enumerate(factors):
            inst = dataclasses.replace(base, deadline=csa_cycle * f)
            z = np.random.default_rng([s, i]).standard_normal((CYCLES, inst.K))  # paired
            task = CYCLES * inst.deadline
            cell = acc[f]
            for name, method in (("dab", "dab"), ("csa", "csa-thesis")):
                res = solve(inst, method)
                if not res.ok:  # verified; CSA's deadline is a target it may miss
                    continue
                t = realised_time(res.metrics["eta_s"], inst.time_cv, z)
                cell.setdefault(f"{name}_time_s", []).append(t)
                cell.setdefault(f"{name}_truancy_pct", []).append(100 * (t - task) / task)
                cell.setdefault(f"{name}_model_truancy_pct", []).append(
                    res.metrics["truancy_pct"])
                cell.setdefault(f"{name}_shards", []).append(res.metrics["shards_per_cycle"])
            cell.setdefault("deadline_s", []).append(inst.deadline)
    rows = []
    for f in factors:
        thesis = f in THESIS_FACTORS
        row: Row = {"deadline_ratio": round(f, 4), "seeds": seeds, "thesis_range": thesis,
                    "thesis_deadline_s": round(f * THESIS_CSA_TIME, 3) if thesis else None}
        row.update({k: statistics.mean(v) for k, v in acc[f].items() if v})
        low = f == factors[0]
        row["paper_dab_truancy_pct"] = PAPER_LOW["dab"] if low else None
        row["paper_csa_truancy_pct"] = PAPER_LOW["csa"] if low else None
        rows.append(row)
    return rows, ["Chapter 3 set-up (preset random, 4 learners, time_cv 0.06) with one pass "
                  "per cycle (mu = 1) as in the thesis's deadline experiment; CSA (method "
                  "csa-thesis: the thesis code's rounded rule) splits the data DAB places at "
                  f"{BASE_DEADLINE:g} s per cycle whatever the deadline",
                  f"times are realised over {CYCLES} cycles with each learner's run-to-run "
                  "noise (time_cv) on its Eq. (3.4) time, the same draws for DAB and CSA; "
                  "*_model_truancy_pct is the noise-free time model (DAB's is <= 0 by "
                  "construction)",
                  "the thesis's deadlines 105-150 s are 0.61-0.87 of CSA's time (172 s); "
                  "our deadlines are the same fractions (deadline_ratio) of CSA's own time per "
                  "cycle on each seed (deadline_s: their mean; thesis_deadline_s names them); "
                  "ratios 1 and 1.5 are context. CSA's 63 % at the lowest follows from that "
                  "mapping when its time stays fixed, so the claims judge what can differ: "
                  "whether CSA's time stays fixed, whether DAB follows the deadline, and DAB's "
                  "truancy under noise"]


def _within(value: float | None, paper: float) -> bool:
    return within(value, paper * (1 - TOLERANCE), paper * (1 + TOLERANCE))


def judge_deadline(rows: Sequence[Row]) -> list[Claim]:
    thesis = [r for r in rows if r.get("thesis_range")] or list(rows)
    dab = [r.get("dab_truancy_pct") for r in thesis]
    worst = max((v for v in dab if v is not None), default=None)
    first, last = thesis[0], thesis[-1]
    c0, d0 = first.get("csa_truancy_pct"), first.get("dab_truancy_pct")
    gap = None if c0 is None or d0 is None else c0 - d0
    longer = [100 * (r["csa_time_s"] / r["dab_time_s"] - 1) for r in thesis
              if r.get("csa_time_s") and r.get("dab_time_s")]
    span = float(last["deadline_ratio"]) / float(first["deadline_ratio"])
    dab_t = [r.get("dab_time_s") for r in (first, last)]
    csa_t = [r.get("csa_time_s") for r in thesis]
    dab_ratio = dab_t[1] / dab_t[0] if None not in dab_t else None  # type: ignore[operator]
    csa_known = [v for v in csa_t if v is not None]
    csa_moves = (max(csa_known) / min(csa_known) - 1) * 100 if csa_known else None
    lo = f"{first['deadline_s']:.3g} s"
    return [
        Claim("DAB's completion time follows the deadline", "at most 7% past it (text)",
              f"largest mean truancy {fmt_num(worst)}% (run-to-run noise on the times)",
              None not in dab and worst is not None and worst <= PAPER_LOW["dab"],
              "every deadline of the thesis's range: mean DAB truancy <= 7%"),
        Claim("DAB's time grows with the deadline", "closely follows the deadline (Fig. 3.6)",
              f"x{fmt_num(dab_ratio)} from the lowest to the highest deadline (x{span:.3g})",
              dab_ratio is not None and abs(dab_ratio / span - 1) <= 0.1,
              "DAB's time ratio over the range within 10 % of the deadlines' ratio"),
        Claim("CSA fails to adapt to the deadline", "CSA fixes the amount of data (text)",
              f"CSA's time moves by {fmt_num(csa_moves)}% over the range",
              csa_moves is not None and len(csa_known) == len(thesis) and csa_moves <= 10.0,
              "CSA's time varies by at most 10 % while the deadline moves by "
              f"{100 * (span - 1):.0f} %"),
        Claim("CSA fails to meet low deadlines", "63% past vs DAB 7%: 56 points further "
              "past at the lowest (text)",
              f"CSA {fmt_num(c0)}% vs DAB {fmt_num(d0)}% at {lo}: {fmt_num(gap)} points",
              _within(gap, PAPER_GAP),
              f"lowest deadline (105/172 of CSA's time): CSA - DAB truancy within a third of "
              f"{PAPER_GAP:g} points"),
        Claim("CSA takes at most 53% longer than DAB", "at most 53% longer (text)",
              f"at most {fmt_num(max(longer) if longer else None)}% longer",
              bool(longer) and _within(max(longer), PAPER_LONGER),
              f"largest CSA / DAB - 1 over the thesis's range within a third of "
              f"{PAPER_LONGER:g}%"),
    ]


def plot_deadline(rows: Sequence[Row], path: Path) -> None:
    xs = [r["deadline_s"] for r in rows]
    trunc = Panel("Thesis Fig. 3.7: truancy (noise on the times)", "deadline per cycle (s)",
                  "truancy (% of D)")
    trunc.lines += [Line("DAB", xs, [r.get("dab_truancy_pct") for r in rows]),
                    Line("CSA (csa-thesis)", xs, [r.get("csa_truancy_pct") for r in rows]),
                    Line("DAB, time model without noise", xs,
                         [r.get("dab_model_truancy_pct") for r in rows], dashed=True),
                    Line("thesis, lowest deadline (DAB, CSA)", [xs[0], xs[0]],
                         [PAPER_LOW["dab"], PAPER_LOW["csa"]], paper=True)]
    times = Panel("Thesis Fig. 3.6: time for 5 cycles", "deadline per cycle (s)", "seconds")
    times.lines += [Line("DAB", xs, [r.get("dab_time_s") for r in rows]),
                    Line("CSA", xs, [r.get("csa_time_s") for r in rows]),
                    Line("deadline x 5", xs, [CYCLES * x for x in xs], dashed=True)]
    shards = Panel("data placed per cycle", "deadline per cycle (s)", "shards")
    shards.lines += [Line("DAB", xs, [r.get("dab_shards") for r in rows]),
                     Line("CSA", xs, [r.get("csa_shards") for r in rows])]
    draw([trunc, times, shards], path, "DAB vs CSA over the deadline", ncols=3)


register(Entry(
    id="001-fig3.2", paper="001 Mays (thesis)",
    title="Fig. 3.2: SB vs FLOPS training-time prediction error vs benchmark size",
    shows=("SB times fresh TwoNN copies on 2-10 shards and extrapolates to a 60-shard run; "
           "FLOPS predicts it from 100 products of 512 x 512 matrices; error against the "
           "measured run, per trial, on this machine."),
    columns=("shards", "sb_error_pct", "sb_sd", "sb_median", "sb_p25", "sb_p75",
             "flops_error_pct", "flops_median", "sb_lower_by_pct", "trials", "paper_sb_pct",
             "paper_flops_pct"),
    compute=compute_sb, judge=judge_sb, plot=plot_sb))

register(Entry(
    id="001-fig3.3", paper="001 Mays (thesis)",
    title="Fig. 3.3: SB download-time prediction error vs benchmark size",
    shows=("SB times the download of 2-10 shards from a local HTTP server and extrapolates "
           "to 60 shards; error against the measured 60-shard download."),
    columns=("shards", "sb_error_pct", "sb_sd", "sb_median", "sb_p25", "sb_p75", "trials",
             "paper_ethernet_pct", "paper_wifi_pct"),
    compute=compute_download, judge=judge_download, plot=plot_download))

register(Entry(
    id="001-fig3.6", paper="001 Mays (thesis)",
    title="Figs. 3.6-3.7: DAB vs CSA completion time and truancy over the deadline",
    shows=("Completion times over 5 cycles of DAB's allocation and of CSA's fixed data (method "
           "csa-thesis, the thesis code's rounded CSA rule, solved and verified): Eq. (3.4) "
           "times with each learner's run-to-run noise, over the thesis's deadline range as "
           "fractions of CSA's time; truancy = (time - deadline) / deadline."),
    columns=("deadline_ratio", "deadline_s", "thesis_deadline_s", "thesis_range",
             "dab_truancy_pct",
             "csa_truancy_pct", "dab_time_s", "csa_time_s", "dab_model_truancy_pct",
             "csa_model_truancy_pct", "dab_shards", "csa_shards", "seeds",
             "paper_dab_truancy_pct", "paper_csa_truancy_pct"),
    compute=compute_deadline, judge=judge_deadline, plot=plot_deadline))
