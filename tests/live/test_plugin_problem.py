"""A problem registered by this test alone (a package outside mel_opt, named by an entry point)
trains in the emulator and runs live on Flower's simulation runtime, with no edit to mel_opt.

The package is ``tests/live/toy_plugin/melopt_toy`` (its docstring says what it is); the test
writes a distribution's metadata declaring it under the ``mel_opt.problems`` entry-point group
into a temporary folder, puts both on the path of this process and, through ``PYTHONPATH``, of
the learner processes Ray starts, and takes them away again afterwards.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mel_opt import api
from mel_opt.problems import all_problems
from mel_opt.training import TrainSettings, load_dataset, train

PLUGIN_DIR = Path(__file__).resolve().parent / "toy_plugin"
DOC = {"problem": "toy-fit", "schema_version": 1, "name": "toy", "cycle_time_s": 1.0,
       "seconds_per_sample": [0.002, 0.006]}


@pytest.fixture
def plugged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    info = site / "melopt_toy-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: melopt-toy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[mel_opt.problems]\ntoy-fit = melopt_toy\n")
    paths = [str(PLUGIN_DIR), str(site)]
    for p in paths:
        monkeypatch.syspath_prepend(p)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [*paths, *filter(None, [os.environ.get("PYTHONPATH")])]))
    all_problems.cache_clear()
    try:
        yield site
    finally:
        all_problems.cache_clear()
        sys.modules.pop("melopt_toy", None)


def test_the_plugin_is_a_problem_only_while_it_is_installed(plugged: Path) -> None:
    assert "toy-fit" in all_problems()
    res = api.solve(api.parse_instance(dict(DOC)), "fit")
    # floor(T / s_k): 1 / 0.002 = 500, 1 / 0.006 = 166.7
    assert res.ok and res.solution == {"d": [500, 166]} and res.objective == 666
    assert api.solve(api.parse_instance(dict(DOC)), "equal").solution == {"d": [166, 166]}


def test_the_emulator_trains_the_plugged_in_problem(plugged: Path) -> None:
    inst = api.parse_instance(dict(DOC))
    data = load_dataset("digits", max_train=300, max_test=100)
    run = train(inst, TrainSettings(schemes=("fit", "equal"), cycles=2, seeds=1,
                                    model="softmax", lr=0.5), data=data)
    times = {(r["scheme"], r["cycle"]): r["time_s"] for r in run.rows}
    # a cycle lasts until the last learner's update: max_k s_k d_k on the problem's clock
    assert times[("fit", 2)] == pytest.approx(2 * max(0.002 * 500, 0.006 * 166))
    assert times[("equal", 2)] == pytest.approx(2 * max(0.002 * 166, 0.006 * 166))
    acc = {(r["scheme"], r["cycle"]): r["accuracy"] for r in run.rows}
    assert acc[("fit", 2)] > acc[("fit", 0)] + 0.3  # it learned


@pytest.mark.slow
@pytest.mark.federation
@pytest.mark.timeout(600)
def test_live_runs_the_plugged_in_problem_and_its_learner_side(
        plugged: Path, tmp_path: Path, ray: Any) -> None:
    pytest.importorskip("flwr")
    from mel_opt.live.report import rows_from_csv
    from mel_opt.live.run import LiveOptions, check, live, load_settings

    path = tmp_path / "toy.json"
    path.write_text(json.dumps({**DOC, "cycle_time_s": 0.3}))
    settings = load_settings(path, rounds=2, model="softmax", lr=0.3, grace_s=60.0)
    out = tmp_path / "out"
    summary = live(check(settings, LiveOptions(engine="simulation")), out)
    rows = rows_from_csv(out / "rounds.csv")
    assert [(r["round"], r["learner"]) for r in rows] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert all(r["status"] == "ok" and r["d"] >= 1 for r in rows)
    rounds = summary["rounds"]
    # each round's allocation was the method's on the measured speeds: d_k = floor(T / s_k)
    for r in rounds[1:]:
        assert r["method"] == "fit" and len(r["allocation"]["d"]) == 2
    # what the learner side computed reached the server's feedback through the wire
    for r in rounds[1:]:
        assert r["control"]["reported"] == 2
        assert math.isfinite(r["control"]["start_loss"]) and r["control"]["start_loss"] > 0
    # round 1's learners started from the untrained model (loss of ten classes at random:
    # about ln 10), round 2's from the trained one
    assert rounds[1]["control"]["start_loss"] == pytest.approx(math.log(10), rel=0.15)
    assert rounds[2]["control"]["start_loss"] < rounds[1]["control"]["start_loss"]
    assert summary["plotted"] == {"start_loss": "loss before training"}
    assert summary["figure"] == "live.png"
    assert np.isfinite(summary["estimates_s_per_sample"]).all()
    assert ray.gone(20.0), ray.alive()
