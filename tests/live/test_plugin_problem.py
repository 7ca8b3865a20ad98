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


def test_the_arena_runs_every_scheme_of_the_registry_on_the_plugged_in_problem(
        plugged: Path) -> None:
    from mel_opt.arena.run import arena, work_clock
    from mel_opt.arena.settings import ArenaSettings

    inst = api.parse_instance(dict(DOC))
    clock = work_clock(inst)
    # the toy's work clock: an equal share of min(500, 166) = 166 samples, one pass of
    # 0.002 x 166 = 0.332 s and 0.006 x 166 = 0.996 s, no transfers, within T = 1 s
    assert clock.share == 166 and clock.passes == 1.0
    assert clock.per_pass_s.tolist() == pytest.approx([0.332, 0.996])
    data = load_dataset("digits", max_train=300, max_test=100)
    out = arena(inst, ArenaSettings(seeds=1, cycles=3, model="softmax", lr=0.5, time_cv=0.0,
                                    participation=0.5, concurrency=0.5,
                                    per_scheme=("staggered.period=1",)), data=data)
    times: dict[str, list[float]] = {}
    for r in out.rows:
        times.setdefault(r["scheme"], []).append(r["time_s"])
    assert set(times) == {"fit", "deadline", "oort", "fedbuff", "fedprox", "staggered",
                          "fill", "equal-data"}
    # staggered, one group of both (G = round(2 / 10) -> 1) due at every T = 1 s: a step a
    # second, at the later learner's arrival (whole minibatches: at most on the slot)
    steps = np.array(times["staggered"][1:])
    assert np.all((steps > np.arange(1, steps.size + 1) - 0.1) &
                  (steps <= np.arange(1, steps.size + 1) + 1e-9))
    # fill: 150 samples each; 1 / 0.332 = 3.01 and 1 / 0.996 = 1.004 passes fit, whole
    # minibatches of them: 3 and 1 passes (0.01 x 150 < 32), 0.996 s both: every round
    assert set(np.round(np.diff(times["fill"]), 9)) == {0.996}
    # fit: d = (500, 166), a cycle lasts until the last update, max(1.0, 0.996) = 1 s
    assert times["fit"] == pytest.approx([0.0, 1.0, 2.0, 3.0])
    # deadline: m = 1 of 2, both invited (ceil 1.3), the first finish (0.332 s) closes it
    assert set(np.round(np.diff(times["deadline"]), 9)) == {0.332}
    # fedbuff: one learner at a time, a step per update: 0.332 or 0.996 s each
    assert set(np.round(np.diff(times["fedbuff"]), 9)) <= {0.332, 0.996}


def test_the_plugged_in_problem_runs_live_in_process_with_its_own_column(
        plugged: Path, tmp_path: Path) -> None:
    from mel_opt.live.inprocess import Clock, run_in_process
    from mel_opt.live.report import rows_from_csv, write_outputs
    from mel_opt.live.rounds import LiveRun, LiveSettings

    data = load_dataset("digits", max_train=300, max_test=100)
    run = LiveRun(LiveSettings(instance=dict(DOC), rounds=2, model="softmax", lr=0.3), data)
    seconds = DOC["seconds_per_sample"]
    clock = Clock(compute_s=lambda r, k, work: seconds[k] * work, overhead_s=lambda r: 0.0,
                  probe_s_per_sample=0.004)
    run_in_process(run, np.array_split(np.arange(300), 2), clock)
    write_outputs(run, tmp_path)
    header = (tmp_path / "rounds.csv").read_text().splitlines()[0].split(",")
    assert "spare_s" in header and header.index("spare_s") == header.index("d") + 1
    rows = {(r["round"], r["learner"]): r for r in rows_from_csv(tmp_path / "rounds.csv")}
    # round 1 on the probe's 0.004 s per sample: d = floor(1 / 0.004) = 250 each, no spare;
    # round 2 on the estimates moved half way (alpha 0.5) to 0.002 and 0.006: 0.003 and
    # 0.005 s, d = 333 (spare 1 - 0.999 s) and 200 (none)
    assert [rows[(1, k)]["d"] for k in (0, 1)] == [250, 250]
    assert [rows[(2, k)]["d"] for k in (0, 1)] == [333, 200]
    assert rows[(2, 0)]["spare_s"] == pytest.approx(0.001, abs=1e-9)
    assert rows[(1, 0)]["spare_s"] == pytest.approx(0.0, abs=1e-9)
