"""Faulty learners in a live run: a reply with non-finite or misshapen weights, or an absurd
compute time, is ignored with its reason; a learner stopped for good is missing, then left out.
The global model stays finite, the speed estimates unpoisoned, and the run completes its rounds.

No Flower and no timers: the faults are injected through the in-process engine's clock (what a
learner's node sends, ``Clock.sends``; whether it answers, ``Clock.answers``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.io.json_io import parse_json_text
from mel_opt.live.inprocess import Clock, run_in_process
from mel_opt.live.report import rows_from_csv, write_outputs
from mel_opt.live.rounds import Answer, LiveRun, LiveSettings
from mel_opt.problems.mel_async.generate import generate
from mel_opt.problems.messages import ProbeReport, Records, TrainReport
from mel_opt.training import load_dataset

ROOT = Path(__file__).resolve().parents[2]
SLOW = 0.05  # seconds per sample-pass: a few updates per round on the issue's file

Fault = Callable[[Records], Records]


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def issue_doc() -> dict[str, Any]:
    """4 learners of mel-async (as tests/live/test_lost_learner.py)."""
    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    return json.loads(json.dumps(doc))


def shipped(path: str) -> dict[str, Any]:
    return parse_json_text((ROOT / "instances" / path).read_text())


# -- the faults, as a node would send them ------------------------------------------------------
def weights(value: float) -> Fault:
    def fault(rec: Records) -> Records:
        model = [a.copy() for a in rec.arrays["model"]]
        model[0].flat[0] = value
        return Records(rec.config, {**rec.arrays, "model": model})
    return fault


def wrong_shape(rec: Records) -> Records:
    model = [a.copy() for a in rec.arrays["model"]]
    model[0] = model[0][:-1]  # one row short
    return Records(rec.config, {**rec.arrays, "model": model})


def compute(seconds: float) -> Fault:
    def fault(rec: Records) -> Records:
        return Records({**rec.config, "compute_s": seconds}, rec.arrays)
    return fault


#: fault -> (the fault, words of the row's reason)
FAULTS: dict[str, tuple[Fault, str]] = {
    "nan-weights": (weights(float("nan")), "model[0] has non-finite values"),
    "inf-weights": (weights(float("inf")), "model[0] has non-finite values"),
    "wrong-shape": (wrong_shape, "model has arrays of shapes"),
    "compute-0": (compute(0.0), "compute_s must be a finite positive number, got 0.0"),
    "compute-1e9": (compute(1e9), "s per sample-pass is outside [1e-09, 60]"),
    "compute-negative": (compute(-1.0), "compute_s must be a finite positive number, got -1.0"),
    "compute-nan": (compute(float("nan")), "compute_s must be a finite number"),
}


def clock(faulty: Callable[[int, int], Fault | None],
          lost: Callable[[int, int], bool] = lambda r, k: False, sigma: float = SLOW) -> Clock:
    """Every learner at ``sigma`` s per sample-pass; k's node sends ``faulty(r, k)`` of its
    answer in round r (None: the answer), and nothing when ``lost(r, k)``."""

    def sends(r: int, k: int, rec: Records) -> Records:
        fault = faulty(r, k)
        return rec if fault is None else fault(rec)

    return Clock(compute_s=lambda r, k, work: sigma * work, overhead_s=lambda r: 0.0,
                 probe_s_per_sample=sigma, answers=lambda r, k: not lost(r, k), sends=sends)


class Watch:
    """What a test checks after every round: the global models finite, the estimates kept."""

    def __init__(self) -> None:
        self.estimates: list[np.ndarray] = []
        self.models: list[list[np.ndarray]] = []

    def __call__(self, run: LiveRun) -> None:
        if run.log.last.round == 0:  # after the probe: nothing trained yet
            return
        for model in run.models:
            assert all(np.isfinite(a).all() for a in model), f"round {len(self.models) + 1}"
        self.estimates.append(run.estimates.seconds.copy())
        self.models.append([a.copy() for a in run.model])


def run_with(doc: dict[str, Any], data: Any, ck: Clock, rounds: int = 3,
             **kw: Any) -> tuple[LiveRun, Watch]:
    run = LiveRun(LiveSettings(instance=doc, rounds=rounds, seed=0, model="softmax", **kw),
                  data)
    pools = np.array_split(np.arange(data.y_train.size), run.K)
    watch = Watch()
    run_in_process(run, pools, ck, on_round=watch)
    return run, watch


def rows(run: LiveRun) -> dict[tuple[int, int], dict[str, Any]]:
    return {(r["round"], r["learner"]): r for r in run.rows}


# -- mel-async: one learner faulty in round 2 ----------------------------------------------------
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_mel_async_a_faulty_reply_is_ignored_with_its_reason(digits: Any, name: str) -> None:
    fault, words = FAULTS[name]
    run, watch = run_with(issue_doc(), digits,
                          clock(lambda r, k: fault if (r, k) == (2, 1) else None))
    assert run.stopped is None and [r["round"] for r in run.rounds] == [0, 1, 2, 3]
    got = rows(run)
    assert got[(2, 1)]["status"] == "ignored" and words in got[(2, 1)]["reason"]
    assert got[(2, 1)]["measured_s"] is None
    assert any(w.startswith("round 2: learner 1's reply ignored: ") and words in w
               for w in run.warnings)
    # the others' replies make the round; the faulty learner answered: not missing, and back
    assert all(got[(2, k)]["status"] == "ok" for k in (0, 2, 3))
    assert run.rounds[2]["learners"] == 3 and run.rounds[2]["missing"] == []
    assert got[(3, 1)]["status"] == "ok"
    # its speed estimate is as round 1 left it (the others' moved with their measurements)
    assert watch.estimates[1][1] == watch.estimates[0][1]


def test_mel_async_every_reply_non_finite_leaves_the_model_as_it_was(digits: Any) -> None:
    run, watch = run_with(issue_doc(), digits,
                          clock(lambda r, k: weights(float("nan")) if r == 2 else None))
    assert {r["status"] for r in run.rows if r["round"] == 2} == {"ignored"}
    assert "round 2: no usable reply; the global model is unchanged" in run.warnings
    assert all(np.array_equal(a, b) for a, b in zip(watch.models[1], watch.models[0],
                                                         strict=True))
    assert run.rounds[2]["learners"] == 0 and run.stopped is None
    assert {r["status"] for r in run.rows if r["round"] == 3} == {"ok"}
    assert (watch.estimates[1] == watch.estimates[0]).all()


def test_mel_async_a_learner_stopped_for_good_is_missing_then_left_out(digits: Any) -> None:
    # a node stopped (SIGSTOP) from round 2 on: it never answers again, nor the probes
    run, _ = run_with(issue_doc(), digits, clock(lambda r, k: None, lost=lambda r, k:
                                                 k == 2 and r >= 2), rounds=4)
    got = rows(run)
    assert got[(1, 2)]["status"] == "ok" and got[(2, 2)]["status"] == "missing"
    assert (3, 2) not in got and (4, 2) not in got  # left out; the others re-planned
    assert [r["missing"] for r in run.rounds[1:]] == [[], [2], [2], [2]]
    assert [a["round"] for a in run.summary()["adapted"]] == [3, 4]
    assert run.stopped is None and len(run.rounds) == 5


def test_a_compute_time_longer_than_the_round_trip_is_not_believed(digits: Any) -> None:
    # on Flower the server times each reply: a learner cannot have trained longer than that,
    # even by less than the estimates' own limits (here 20 times its speed)
    run = LiveRun(LiveSettings(instance=issue_doc(), seed=1, model="softmax"), digits)
    for k in range(4):
        run.accept_probe(100 + k, ProbeReport(k, 100, SLOW * 1000, 1000.0).encode())
    before = run.estimates.seconds.copy()
    plan = run.plan(1)

    def answer(k: int, slower: float, elapsed_s: float | None) -> Answer:
        o = plan.orders[k]
        work = float(o.samples * o.passes)
        return Answer(k, TrainReport(k, slower * SLOW * work, work, o.samples, o.passes,
                                     [a.copy() for a in run.model]).encode(), elapsed_s)

    honest = SLOW * plan.orders[1].samples * plan.orders[1].passes
    run.close(plan, [answer(0, 1.0, 1e6), answer(1, 20.0, 2 * honest), answer(2, 1.0, None),
                     answer(3, 1.0, 1e6)], 1.0)
    got = rows(run)
    assert [got[(1, k)]["status"] for k in range(4)] == ["ok", "ignored", "ok", "ok"]
    assert f"longer than the {2 * honest:.3g} s its reply took" in got[(1, 1)]["reason"]
    assert run.estimates.seconds[1] == before[1]


# -- the other problems -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["nan-weights", "wrong-shape", "compute-0", "compute-1e9"])
def test_feel_a_faulty_device_is_ignored_and_its_estimate_kept(digits: Any, name: str) -> None:
    fault, words = FAULTS[name]
    run, watch = run_with(shipped("feel/ren2021_cpu_densenet121_k6.json"), digits,
                          clock(lambda r, k: fault if (r, k) == (2, 3) else None, sigma=1e-5))
    got = rows(run)
    assert got[(2, 3)]["status"] == "ignored" and words in got[(2, 3)]["reason"]
    assert watch.estimates[1][3] == watch.estimates[0][3]
    assert got[(3, 3)]["status"] == "ok" and run.stopped is None and len(run.rounds) == 4


@pytest.mark.parametrize(("name", "words"), [
    ("nan-weights", "model[0] has non-finite values"),
    ("wrong-shape", "model has arrays of shapes"),
    ("compute-0", "compute_s must lie in (0, 86400] s, got 0.0"),
    ("compute-1e9", "compute_s must lie in (0, 86400] s, got 1000000000.0"),
    ("compute-negative", "compute_s must lie in (0, 86400] s, got -1.0"),
])
def test_dab_a_faulty_learner_is_ignored(digits: Any, name: str, words: str) -> None:
    fault = FAULTS[name][0]
    run, _ = run_with(shipped("dab/mnist_ffn_testbed.json"), digits,
                      clock(lambda r, k: fault if (r, k) == (2, 0) else None, sigma=1e-5))
    got = rows(run)
    assert got[(2, 0)]["status"] == "ignored" and words in got[(2, 0)]["reason"]
    assert got[(3, 0)]["status"] in ("ok", "late") and run.stopped is None
    assert len(run.rounds) == 4


# -- the command line ---------------------------------------------------------------------------
def test_cli_a_run_with_a_faulty_learner_exits_0_and_its_rows_say_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mel_opt.cli import cli

    pytest.importorskip("flwr")
    nan = weights(float("nan"))

    def engine(settings: LiveSettings, nodes: int, out: Path, say: Any, **kw: Any) -> None:
        data = load_dataset(settings.dataset, max_train=settings.max_train,
                            max_test=settings.max_test)
        run = LiveRun(settings, data)
        pools = np.array_split(np.arange(data.y_train.size), run.K)

        def outputs(done: LiveRun) -> None:
            write_outputs(done, out)

        run_in_process(run, pools, clock(lambda r, k: nan if k == 0 and r >= 2 else None),
                       on_round=outputs)
        write_outputs(run, out, figure=True)

    monkeypatch.setattr("mel_opt.live.run._simulation", engine)
    path = tmp_path / "issue.json"
    path.write_text(json.dumps(issue_doc()))
    res = CliRunner().invoke(cli, ["live", str(path), "--rounds", "3", "--model", "softmax",
                                   "--max-train", "400", "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    got = {(r["round"], r["learner"]): r for r in rows_from_csv(tmp_path / "out" / "rounds.csv")}
    assert sorted({r for r, _ in got}) == [1, 2, 3]
    assert got[(1, 0)]["status"] == "ok"
    for r in (2, 3):
        assert got[(r, 0)]["status"] == "ignored"
        assert got[(r, 0)]["reason"] == "model[0] has non-finite values"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["stopped"] is None and len(summary["rounds"]) == 4
    assert all(np.isfinite(r["loss"]) for r in summary["rounds"])
