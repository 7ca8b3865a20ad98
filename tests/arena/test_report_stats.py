"""The arena's statistics on hand-written rows: Kaplan-Meier medians with censored seeds,
paired differences against the allocation, the winner rule, the accuracy grid and the
resources, each checked against numbers worked on paper (the arithmetic is in comments)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mel_opt.arena.report import (
    csv_text,
    curve_csv_text,
    paired,
    reference_of,
    summarise,
    write_outputs,
)
from mel_opt.arena.run import ArenaRun
from mel_opt.arena.settings import ArenaSettings
from mel_opt.cli.arena import arena_table
from mel_opt.training.report import interval

HORIZON = 100.0


def seed_rows(scheme: str, seed: int, reach: float | None,
              **extra: float | None) -> list[dict[str, Any]]:
    """A run: the start (t = 0, accuracy 0.1), aggregations at 5 s (0.5), at ``reach`` (0.85:
    the target 0.8 reached) and at the horizon; bytes 1000 and idle 1 s per aggregation;
    ``extra`` columns (busy_s, ...) grow by their value per aggregation."""
    times = sorted({5.0, HORIZON} | ({reach} if reach is not None else set()))
    rows = [{"scheme": scheme, "seed": seed, "step": 0, "time_s": 0.0, "loss": 2.3,
             "accuracy": 0.1, "bytes": 0.0, "idle_s": 0.0,
             **{k: (None if v is None else 0.0) for k, v in extra.items()}}]
    for step, t in enumerate(times, start=1):
        acc = 0.85 if reach is not None and t >= reach else 0.5
        rows.append({"scheme": scheme, "seed": seed, "step": step, "time_s": t, "loss": 1.0,
                     "accuracy": acc, "bytes": 1000.0 * step, "idle_s": 1.0 * step,
                     **{k: (None if v is None else v * step) for k, v in extra.items()}})
    return rows


def make_run(reach: dict[str, list[float | None]], targets: tuple[float, ...] = (0.8,),
             **extra: float | None) -> ArenaRun:
    schemes = tuple(reach)
    seeds = len(next(iter(reach.values())))
    settings = ArenaSettings(schemes=schemes, seeds=seeds, cycles=4, targets=targets)
    rows = [r for s, times in reach.items() for seed, t in enumerate(times)
            for r in seed_rows(s, seed, t, **extra)]
    return ArenaRun("hand", "mel-async", settings, schemes, HORIZON, rows)


# Times to 0.8 per seed (None: never, censored at the horizon 100):
#   exact     20 25 30 35 40 45    every seed: S = 5/6, 4/6, 3/6 at 30 -> median 30
#   deadline  30 40 50 60 70 --    S = 5/6, 4/6, 3/6 at 50 -> median 50
#   fedbuff   25 35 40 50 -- --    S = 5/6, 4/6, then 4/6 x 3/4 = 1/2 at 40 -> median 40
WINNER = {"exact": [20.0, 25.0, 30.0, 35.0, 40.0, 45.0],
          "deadline": [30.0, 40.0, 50.0, 60.0, 70.0, None],
          "fedbuff": [25.0, 35.0, 40.0, 50.0, None, None]}


def test_km_medians_with_censored_seeds() -> None:
    s = summarise(make_run(WINNER))
    ex, dl, fb = (s["schemes"][k]["targets"]["0.8"] for k in ("exact", "deadline", "fedbuff"))
    assert (ex["reached"], dl["reached"], fb["reached"]) == ("6/6", "5/6", "4/6")
    assert ex["km"]["survival"] == pytest.approx([5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0.0])
    assert ex["km"]["at_risk"] == [6, 5, 4, 3, 2, 1]
    # fedbuff: the two censored seeds stay at risk to the end: 6, 5, 4, 3 at risk
    assert fb["km"]["time_s"] == [25.0, 35.0, 40.0, 50.0]
    assert fb["km"]["at_risk"] == [6, 5, 4, 3]
    assert fb["km"]["survival"] == pytest.approx([5 / 6, 4 / 6, 1 / 2, 1 / 3])
    # medians: 30, 50, 40. Low end: at the first event S = 5/6, Greenwood 1/30: theta =
    # exp(1.96 x 0.1826 / ln(5/6)) = 0.1405, low = (5/6)^7.12 = 0.273 <= 1/2: the first
    # event time. High end: at S = 1/6 (Greenwood 1/30 + 1/20 + 1/12 + 1/6 + 1/2 = 5/6),
    # theta = 0.3684, high = (1/6)^0.3684 = 0.517 > 1/2; it never gets to 1/2: not bounded.
    assert ex["median"] == {"seconds": 30.0, "lo": 20.0, "hi": None}
    assert dl["median"] == {"seconds": 50.0, "lo": 30.0, "hi": None}
    assert fb["median"] == {"seconds": 40.0, "lo": 25.0, "hi": None}
    # the mean over the seeds that reached it is kept, and ignores the censored ones
    assert dl["seconds"]["mean"] == pytest.approx(50.0) and dl["seconds"]["n"] == 5
    assert fb["seconds"]["mean"] == pytest.approx(37.5) and fb["seconds"]["n"] == 4


def test_paired_differences_against_the_allocation() -> None:
    s = summarise(make_run(WINNER))
    assert s["reference"] == "exact"
    assert s["schemes"]["exact"]["targets"]["0.8"]["paired"] is None
    # deadline - exact: 10 15 20 25 30, and 100 - 45 = 55 (deadline censored at the horizon):
    # median (20 + 25)/2 = 22.5; 6 pairs: [min, max] = [10, 55], coverage 1 - 2/64
    dl = s["schemes"]["deadline"]["targets"]["0.8"]["paired"]
    assert dl == {"against": "exact", "n": 6, "median": 22.5, "lo": 10.0, "hi": 55.0,
                  "coverage": 0.96875, "one_censored": 1, "both_censored": 0}
    # fedbuff - exact: 5 10 10 15, 100 - 40 = 60, 100 - 45 = 55: median 12.5, [5, 60]
    fb = s["schemes"]["fedbuff"]["targets"]["0.8"]["paired"]
    assert (fb["n"], fb["median"], fb["lo"], fb["hi"], fb["one_censored"]) == (
        6, 12.5, 5.0, 60.0, 2)


def test_every_pair_is_compared_in_the_runs_order() -> None:
    s = summarise(make_run(WINNER))
    pairs = {(p["scheme"], p["against"]): p for p in s["pairs"]["0.8"]}
    assert list(pairs) == [("exact", "deadline"), ("exact", "fedbuff"), ("deadline", "fedbuff")]
    # exact - deadline: -10 -15 -20 -25 -30 and 45 - 100 = -55: median -22.5, [-55, -10]
    ed = pairs["exact", "deadline"]
    assert (ed["n"], ed["median"], ed["lo"], ed["hi"], ed["one_censored"]) == (
        6, -22.5, -55.0, -10.0, 1)
    # the reference's own entry says the same, with the sign turned
    fb = s["schemes"]["fedbuff"]["targets"]["0.8"]["paired"]
    ef = pairs["exact", "fedbuff"]
    assert (ef["median"], ef["lo"], ef["hi"]) == (-fb["median"], -fb["hi"], -fb["lo"])
    # deadline - fedbuff: 5 5 10 10, 70 - 100 = -30; seed 5 never reached by either: left
    # out, so 5 pairs (median 5), too few for a 95 % interval
    df = pairs["deadline", "fedbuff"]
    assert (df["n"], df["median"], df["lo"], df["hi"]) == (5, 5.0, None, None)
    assert (df["one_censored"], df["both_censored"]) == (1, 1)


def test_winner_excludes_zero_against_every_scheme() -> None:
    s = summarise(make_run(WINNER))
    # exact has the least median (30); exact - deadline: -10 -15 -20 -25 -30 -55, all below 0:
    # [-55, -10]; exact - fedbuff: -5 -10 -10 -15 -60 -55: [-60, -5]. Both exclude 0.
    assert s["winners"] == {"0.8": "exact"}
    v = s["verdicts"]["0.8"]
    assert v.startswith("exact wins") and "deadline -22.5 s [-55, -10] over 6 seeds" in v
    assert "fedbuff -12.5 s [-60, -5] over 6 seeds" in v


def test_no_clear_winner_when_an_interval_includes_zero() -> None:
    # fedbuff 15 30 25 40 35 50 (sorted 15 25 30 ...: S = 5/6, 4/6, 1/2 at 30): median 30,
    # as exact's, and the same mean 32.5: the candidate is exact (first in the order).
    # exact - fedbuff = +5 -5 +5 -5 +5 -5: median 0, [-5, +5] includes 0.
    reach = {**WINNER, "fedbuff": [15.0, 30.0, 25.0, 40.0, 35.0, 50.0]}
    s = summarise(make_run(reach))
    assert s["schemes"]["fedbuff"]["targets"]["0.8"]["median"]["seconds"] == 30.0
    assert s["winners"]["0.8"] is None
    v = s["verdicts"]["0.8"]
    assert v.startswith("no clear winner: exact has the least median (30 s)")
    assert "fedbuff (+0 s [-5, +5] over 6 seeds includes 0)" in v
    assert "deadline" not in v  # that one it does beat


def test_five_seeds_are_too_few_for_a_winner() -> None:
    # the same order as WINNER on 5 seeds: every difference has one sign, but five pairs
    # give at most 1 - 2/32 = 0.9375 < 0.95: the interval is unbounded
    s = summarise(make_run({k: v[:5] for k, v in WINNER.items()}))
    p = s["schemes"]["deadline"]["targets"]["0.8"]["paired"]
    assert (p["n"], p["median"], p["lo"], p["hi"], p["coverage"]) == (5, 20.0, None, None, None)
    assert s["winners"]["0.8"] is None
    assert "5 paired seeds are too few for a 95% sign interval" in s["verdicts"]["0.8"]


def test_a_censored_seed_counts() -> None:
    # "fast" reaches 0.8 at 10 s on 2 seeds of 6 and never on the others: its mean over
    # the seeds that reached it (10 s) is the least, but S = 4/6 > 1/2 at the end: no median.
    # Against exact, fast - exact per seed: 10-20, 10-25, then 100-30 ... 100-45 (fast
    # censored at the horizon): -10 -15 +70 +65 +60 +55; sorted -15 -10 55 60 65 70: median
    # 57.5, [-15, 70]. The candidate is exact (median 30), and exact - fast straddles 0
    # ([-70, +15]): no clear winner, though fast is slower on 4 seeds of 6.
    reach = {"exact": WINNER["exact"], "fast": [10.0, 10.0, None, None, None, None]}
    run = make_run(reach)
    run.schemes = ("exact", "fedbuff")
    run.rows = [{**r, "scheme": "fedbuff"} if r["scheme"] == "fast" else r for r in run.rows]
    s = summarise(run)
    fb = s["schemes"]["fedbuff"]["targets"]["0.8"]
    assert fb["seconds"]["mean"] == pytest.approx(10.0) and fb["reached"] == "2/6"
    assert fb["median"]["seconds"] is None
    assert fb["paired"]["median"] == pytest.approx(57.5)
    assert (fb["paired"]["lo"], fb["paired"]["hi"], fb["paired"]["one_censored"]) == (
        -15.0, 70.0, 4)
    assert s["winners"]["0.8"] is None
    assert "fedbuff (-57.5 s [-70, +15] over 6 seeds includes 0)" in s["verdicts"]["0.8"]


def test_both_censored_pairs_are_left_out_and_nobody_reaching_it() -> None:
    a = {0: (3.0, True), 1: (100.0, False), 2: (100.0, False)}
    b = {0: (4.0, True), 1: (9.0, True), 2: (100.0, False)}
    p = paired(a, b)
    # seed 0: -1; seed 1: 100 - 9 = 91 (a censored); seed 2 both censored: no information
    assert (p["n"], p["median"], p["one_censored"], p["both_censored"]) == (2, 45.0, 1, 1)
    s = summarise(make_run(WINNER, targets=(0.8, 0.9)))
    assert s["winners"]["0.9"] is None
    assert s["verdicts"]["0.9"] == "no scheme reaches it within the horizon (100 s)"
    assert s["schemes"]["deadline"]["targets"]["0.9"]["paired"]["n"] == 0


def test_reference_is_the_first_method_run() -> None:
    run = make_run({"deadline": WINNER["deadline"], "exact": WINNER["exact"],
                    "ipopt": WINNER["exact"]})
    assert reference_of(run) == "exact"
    s = summarise(run)
    assert s["schemes"]["ipopt"]["targets"]["0.8"]["paired"]["median"] == 0.0
    assert s["schemes"]["exact"]["targets"]["0.8"]["paired"] is None
    run.infeasible = {"exact": "infeasible"}
    assert reference_of(run) == "ipopt"
    assert reference_of(make_run({"deadline": WINNER["deadline"]})) is None


def test_accuracy_on_the_time_grid() -> None:
    # the grid: horizon 100 in 4 cycles: 25, 50, 75, 100. A seed reaching 0.8 at 20 holds 0.85
    # from 20 on; one reaching it at 50 holds 0.5 (from 5 s) until 50, where it counts.
    s = summarise(make_run({"exact": [20.0, 50.0], "deadline": [None, 75.0]}))
    ex = s["schemes"]["exact"]["curve"]
    assert ex["time_s"] == [25.0, 50.0, 75.0, 100.0]
    assert [a["mean"] for a in ex["accuracy"]] == pytest.approx([0.675, 0.85, 0.85, 0.85])
    assert ex["accuracy"][0] == interval([0.85, 0.5])
    dl = s["schemes"]["deadline"]
    assert [a["mean"] for a in dl["curve"]["accuracy"]] == pytest.approx([0.5, 0.5, 0.675, 0.675])
    assert dl["horizon_accuracy"] == dl["curve"]["accuracy"][-1]
    assert dl["final_accuracy"]["mean"] == pytest.approx(0.675)
    text = curve_csv_text(s)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["scheme", "time_s", "accuracy_mean", "accuracy_lo", "accuracy_hi",
                             "seeds"]
    assert len(rows) == 8 and rows[0]["scheme"] == "exact" and rows[0]["seeds"] == "2"
    assert float(rows[4]["accuracy_mean"]) == pytest.approx(0.5)


def test_aggregation_a_hair_after_a_grid_time_counts_there() -> None:
    run = make_run({"exact": [50.0 + 1e-12]})
    assert summarise(run)["schemes"]["exact"]["curve"]["accuracy"][1]["mean"] == 0.85


def test_resources_reported_where_present_and_skipped_where_not() -> None:
    plain = summarise(make_run(WINNER))["schemes"]["exact"]
    assert {"bytes", "idle_s"} <= set(plain)
    assert not {"busy_s", "updates", "stragglers", "dropped", "final_val_accuracy"} & set(plain)
    # every exact run ends at step 3 (aggregations at 5 s, at its time, at the horizon), and
    # the cumulative columns grow by their value per aggregation
    run = make_run(WINNER, busy_s=10.0, updates=1e6, stragglers=1.0, dropped=2.0,
                   val_accuracy=None)
    s = summarise(run)["schemes"]["exact"]
    assert s["busy_s"]["mean"] == pytest.approx(30.0) and s["busy_s"]["n"] == 6
    assert s["updates"]["mean"] == pytest.approx(3e6)
    assert s["stragglers"]["mean"] == pytest.approx(3.0) and s["dropped"]["mean"] == 6.0
    assert s["bytes"]["mean"] == pytest.approx(3000.0) and s["idle_s"]["mean"] == 3.0
    assert "final_val_accuracy" not in s  # None in every row: skipped
    header = csv_text(run).splitlines()[0].split(",")
    assert header[-4:] == ["busy_s", "updates", "stragglers", "dropped"]
    run = make_run(WINNER, val_accuracy=0.1)
    assert summarise(run)["schemes"]["exact"]["final_val_accuracy"]["mean"] == pytest.approx(0.3)
    assert csv_text(run).splitlines()[0].endswith(",val_accuracy")
    assert csv_text(make_run(WINNER)).splitlines()[0] == (
        "scheme,seed,step,time_s,loss,accuracy,bytes,idle_s")


def test_write_outputs_keeps_the_old_keys_and_the_table_fits(tmp_path: Path) -> None:
    run = make_run(WINNER, targets=(0.8, 0.9), busy_s=10.0, updates=1e6, stragglers=1.0,
                   dropped=2.0)
    summary = write_outputs(run, tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == summary
    for key in ("instance", "problem", "horizon_s", "settings", "infeasible", "schemes",
                "winners", "figure", "verdicts", "reference"):
        assert key in on_disk
    for e in on_disk["schemes"].values():
        for key in ("final_accuracy", "bytes", "idle_s", "final_time_s", "aggregations",
                    "horizon_accuracy", "curve"):
            assert key in e
        assert {"reached", "seconds", "median", "paired", "km"} <= set(e["targets"]["0.8"])
    assert (tmp_path / "curve.csv").read_text() == curve_csv_text(summary)
    assert (tmp_path / "arena.csv").exists()
    console = Console(width=120, record=True)
    console.print(arena_table(summary))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 120
    flat = " ".join(text.split())
    # exact: median 30 [20, inf] on 6/6; deadline - exact: +22.5 [+10, +55] over 6 pairs
    assert "30 [20, inf] (6/6)" in flat and "+22.5 [+10, +55] (6)" in flat
    assert "reference" in flat and "> 100 (0/6)" in flat
    for title in ("acc @ horizon", "MB moved", "M sample-upd", "busy learner-s",
                  "idle learner-s", "stragglers", "dropped"):
        assert title in flat
    assert "val acc" not in flat  # no scheme's rows carry it
