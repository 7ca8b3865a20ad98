"""Liars in the arena: every loop (the allocation's cycles, synchronous rounds, FedBuff) lies
the same way and aggregates by the run's rule; the rows count what the rule did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt import api
from mel_opt.arena.run import arena
from mel_opt.arena.settings import ArenaSettings
from mel_opt.cli.app import cli
from mel_opt.training import load_dataset

INSTANCE = "instances/mel-async/k5_T15.json"


@pytest.fixture(scope="module")
def data() -> Any:
    return load_dataset("digits", max_train=500, max_test=200)


def final(inst: Any, data: Any, scheme: str, **kw: Any) -> dict[str, Any]:
    out = arena(inst, ArenaSettings(schemes=(scheme,), seeds=1, cycles=4, model="softmax",
                                    **kw), data=data)
    assert all(np.isfinite(r["accuracy"]) and np.isfinite(r["loss"]) for r in out.rows)
    return dict(out.rows[-1])


@pytest.mark.parametrize("scheme", ["exact", "fedprox", "fedbuff"])
def test_a_scaling_liar_ruins_the_mean_and_the_default_clips_it(data: Any,
                                                                 scheme: str) -> None:
    inst = api.load_instance(INSTANCE)
    lie = {"attack": "scale:1e30", "liar_ids": (1,), "attack_from": 2}
    honest = final(inst, data, scheme, aggregation="mean")
    assert honest["clipped"] == 0 and honest["kept"] == 0
    ruined = final(inst, data, scheme, aggregation="mean", **lie)
    clipped = final(inst, data, scheme, **lie)  # the default: norm
    assert clipped["clipped"] >= 2  # the liar's updates, one per round it lied in
    assert ruined["accuracy"] < honest["accuracy"] - 0.1
    assert clipped["accuracy"] > ruined["accuracy"] + 0.1


def test_no_liar_before_its_round_and_a_sign_flip_reaches_the_rows(data: Any) -> None:
    inst = api.load_instance(INSTANCE)
    base = final(inst, data, "fedprox", aggregation="median")
    late = final(inst, data, "fedprox", aggregation="median", attack="sign",
                 liar_ids=(0,), attack_from=99)
    assert late == base  # the attack never started: the same run, draw for draw
    flipped = final(inst, data, "fedprox", aggregation="median", attack="sign",
                    liar_ids=(0, 2))
    assert flipped["accuracy"] != base["accuracy"]


@pytest.mark.parametrize(("args", "flag"), [
    (["--attack", "scale:inf"], "--attack"),
    (["--attack", "scale:nan"], "--attack"),
    (["--attack", "sign", "--liars", "1"], "--liars"),
    (["--attack", "sign", "--liar-ids", "0,5"], "--liar-ids"),
    (["--aggregation", "trimmed:0.5"], "--aggregation"),
])
def test_bad_attack_values_one_line_exit_2(tmp_path: Path, args: list[str], flag: str) -> None:
    res = CliRunner().invoke(cli, ["arena", INSTANCE, "-o", str(tmp_path), "--seeds", "1",
                                   "--cycles", "1", "--max-train", "200", "--schemes",
                                   "fedprox", *args])
    assert res.exit_code == 2, res.output
    lines = res.output.splitlines()  # one line, and no progress bar's blank line before it
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in res.output


def test_train_refuses_a_liar_out_of_range_in_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["train", INSTANCE, "-o", str(tmp_path), "--seeds", "1",
                                   "--schemes", "exact", "--cycles", "1", "--max-train", "200",
                                   "--attack", "sign", "--liar-ids", "0,5"])
    assert res.exit_code == 2, res.output
    assert res.output.splitlines() == [
        "error: --liar-ids: learner 5 is out of range (the run has learners 0..4)"]


def test_train_without_schemes_says_they_are_required(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["train", INSTANCE, "-o", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert res.output.splitlines() == [
        "error: --schemes is required: comma-separated values, each a text"]


def test_train_takes_the_same_settings_and_its_summary_counts_the_clipped(data: Any) -> None:
    from mel_opt.training import TrainSettings, train
    from mel_opt.training.report import csv_text, summarise

    inst = api.load_instance(INSTANCE)
    lie = {"attack": "scale:1e30", "liar_ids": (1,), "attack_from": 2}
    common = {"schemes": ("exact",), "cycles": 4, "seeds": 1, "model": "softmax",
              "processes": 1}
    mean = train(inst, TrainSettings(aggregation="mean", **common, **lie), data=data)
    norm = train(inst, TrainSettings(**common, **lie), data=data)
    assert all(np.isfinite(r["accuracy"]) for r in mean.rows + norm.rows)
    assert norm.rows[-1]["accuracy"] > mean.rows[-1]["accuracy"] + 0.1
    # the liar's update of cycles 2, 3 and 4 clipped, each said in its cycle's row
    assert [r["clipped"] for r in norm.rows] == [0, 0, 1, 1, 1]
    assert summarise(norm)["schemes"]["exact"]["clipped_updates"] == 3
    assert csv_text(norm).splitlines()[0].endswith(",clipped,kept")
