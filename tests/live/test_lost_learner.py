"""A learner lost in a live run: each problem decides what the learners left do, the run goes
on, and a run that cannot go on ends early (the rounds done kept, exit code 1).

No Flower and no timers: the loss is injected through the in-process engine's clock (a learner
that does not answer) or by closing a round without its reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.errors import UsageError
from mel_opt.io.json_io import parse_json_text
from mel_opt.live.inprocess import Clock, run_in_process
from mel_opt.live.report import rows_from_csv, write_outputs
from mel_opt.live.rounds import Answer, LiveRun, LiveSettings
from mel_opt.live.run import ended_early
from mel_opt.problems.mel_async.generate import generate
from mel_opt.problems.messages import ProbeReport, TrainOrder, TrainReport
from mel_opt.training import load_dataset

ROOT = Path(__file__).resolve().parents[2]
SIGMA = 1e-5  # seconds per sample-pass of every learner (fast: time never binds here)
#: Slower learners for whole mel-async runs: a few updates each per round on the issue's file
#: (C2 = sigma N / d), not thousands, so the runs train little; d_u still binds, not T.
SLOW = 0.05


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def issue_doc() -> dict[str, Any]:
    """The issue's file: ``melopt generate mel-async --preset mohammad2020 --learners 4
    --seed 5 --param cycle_time_s=15`` (d = 60000, d_u = ceil(1.25 d / 4) = 18750)."""
    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    return json.loads(json.dumps(doc))


def shipped(path: str) -> dict[str, Any]:
    return parse_json_text((ROOT / "instances" / path).read_text())


def reply(run: LiveRun, k: int, order: TrainOrder) -> Answer:
    work = order.samples * order.passes
    return Answer(k, TrainReport(k, SIGMA * work, work, order.samples, order.passes,
                                 [a.copy() for a in run.model]).encode())


def in_process(doc: dict[str, Any], data: Any, lost: Callable[[int, int], bool],
               rounds: int = 3, sigma: float = SIGMA, **kw: Any) -> LiveRun:
    """A run of ``rounds`` whose learner k does not answer round r when ``lost(r, k)``."""
    run = LiveRun(LiveSettings(instance=doc, rounds=rounds, seed=0, model="softmax", **kw),
                  data)
    pools = np.array_split(np.arange(data.y_train.size), run.K)
    return run_in_process(run, pools, clock_of(lost, sigma))


def clock_of(lost: Callable[[int, int], bool], sigma: float) -> Clock:
    """Every learner at ``sigma`` seconds per sample-pass; k does not answer r if lost."""
    return Clock(compute_s=lambda r, k, work: sigma * work, overhead_s=lambda r: 0.0,
                 probe_s_per_sample=sigma, answers=lambda r, k: not lost(r, k))


def status(run: LiveRun) -> dict[tuple[int, int], str]:
    return {(r["round"], r["learner"]): r["status"] for r in run.rows}


# -- mel-async: the survivors take the data they can -------------------------------------------
def test_mel_async_survivors_take_the_data_they_can_and_the_round_says_so(
        digits: Any) -> None:
    run = LiveRun(LiveSettings(instance=issue_doc(), method="exact", seed=1, model="softmax"),
                  digits)
    for k in range(4):
        run.accept_probe(100 + k, ProbeReport(k, 100, SIGMA * 1000, 1000.0).encode())
    plan = run.plan(1)
    assert plan.adapted is None and sum(plan.allocation["d"]) == 60000
    run.close(plan, [reply(run, k, plan.orders[k]) for k in (0, 1, 2)], 1.0)  # 3 lost
    plan2 = run.plan(2)
    assert plan2.adapted is not None
    assert plan2.adapted.text == ("total_samples 60000 -> 56250: what the 3 learners can take "
                                  "in T = 15 s with one update each (at most d_u = 18750 each)")
    assert sorted(plan2.orders) == [0, 1, 2]
    # fast learners: d_u binds, not T; each then does as many updates as fit
    assert plan2.allocation["d"] == [18750] * 3 and min(plan2.allocation["tau"]) >= 1
    # they train that part of the data set: 56250 / 60000 of its 400 samples
    assert sum(o.samples for o in plan2.orders.values()) == 375
    assert all(o.predicted_s <= 15.0 * (1 + 1e-9) for o in plan2.orders.values())
    run.close(plan2, [reply(run, k, plan2.orders[k]) for k in (0, 1, 2)], 1.0)
    assert run.rounds[-1]["adapted"]["changes"] == {"total_samples": [60000, 56250]}
    assert {r["adapted"] for r in run.rows if r["round"] == 2} == {plan2.adapted.text}
    assert all("adapted" not in r for r in run.rows if r["round"] == 1)
    summary = run.summary()
    assert [a["round"] for a in summary["adapted"]] == [2]
    assert summary["adapted"][0]["text"] == plan2.adapted.text
    assert summary["stopped"] is None


@pytest.mark.parametrize(("adapt", "words"), [
    ("none", "at most 56250 samples in T = 15 s, fewer than total_samples = 60000)"),
    ("clock", "(no adaptation of mel-async helps: adapt = clock)"),  # K d_u < d: no clock
])
def test_mel_async_without_an_adaptation_the_round_cannot_be_planned(
        digits: Any, adapt: str, words: str) -> None:
    run = LiveRun(LiveSettings(instance=issue_doc(), method="exact", seed=1, model="softmax",
                               adapt=adapt), digits)
    for k in range(4):
        run.accept_probe(100 + k, ProbeReport(k, 100, SIGMA * 1000, 1000.0).encode())
    plan = run.plan(1)
    run.close(plan, [reply(run, k, plan.orders[k]) for k in (0, 1, 2)], 1.0)
    with pytest.raises(UsageError, match="round 2: exact gave no verified allocation") as exc:
        run.plan(2)
    assert str(exc.value).endswith(words)


def test_mel_async_run_goes_on_after_a_loss_and_takes_the_learner_back(digits: Any) -> None:
    # learner 3 is lost in rounds 1 and 2 and answers again from round 3
    run = in_process(issue_doc(), digits, lambda r, k: k == 3 and r <= 2, rounds=4,
                     sigma=SLOW)
    st = status(run)
    assert st[(1, 3)] == "missing" and (2, 3) not in st
    assert st[(3, 3)] == "ok" and st[(4, 3)] == "ok"  # probed again, back
    assert run.stopped is None and [r["round"] for r in run.rounds] == [0, 1, 2, 3, 4]
    assert [a["round"] for a in run.summary()["adapted"]] == [2]  # back to the file's job


def test_a_run_without_learners_stops_and_keeps_the_rounds_done(digits: Any) -> None:
    run = in_process(issue_doc(), digits, lambda r, k: r >= 2, rounds=4, sigma=SLOW)
    assert run.stopped == {"round": 3, "reason": "round 3: no learner is left to train "
                                                 "(all missing)"}
    assert [r["round"] for r in run.rounds] == [0, 1, 2]
    assert {s for (r, _), s in status(run).items() if r == 2} == {"missing"}
    error = ended_early(run.summary())
    assert error is not None and error.exit_code == 1
    assert str(error) == ("the run ended after 2 of 4 rounds (their outputs are kept): "
                          "round 3: no learner is left to train (all missing)")


# -- the other problems -------------------------------------------------------------------------
def test_med_reassigns_the_tasks_among_the_learners_left(digits: Any) -> None:
    # mays2023_n4_m2: 4 learners, 2 tasks; learner 1 is lost from round 1 on
    doc = shipped("med/mays2023_n4_m2.json")
    run = in_process(doc, digits, lambda r, k: k == 1)
    assert run.stopped is None and len(run.rounds) == 4
    shards = [t["shards"] for t in doc["tasks"]]
    for r in run.rounds[2:]:
        d = np.array(r["allocation"]["d"])
        assert d.shape == (2, 3)  # the ILP over the three learners left
        assert d.sum(axis=1).tolist() == shards  # (4.4c): every task's data still placed
        assert sorted(set(r["allocation"]["assignment"])) == [0, 1]  # both tasks trained
    assert all(k != 1 for (r, k) in status(run) if r >= 2)


def test_med_stops_when_the_learners_left_cannot_carry_every_task(digits: Any) -> None:
    doc = shipped("med/mays2023_n4_m2.json")
    run = in_process(doc, digits, lambda r, k: k != 0)  # one learner for two tasks (4.4f)
    assert run.stopped is not None and run.stopped["round"] == 2
    assert "exact gave no verified allocation" in run.stopped["reason"]
    assert len(run.rounds) == 2  # round 0 and the round done


def test_dab_learners_left_decide_alone_as_before(digits: Any) -> None:
    run = in_process(shipped("dab/mnist_ffn_testbed.json"), digits, lambda r, k: k == 4)
    st = status(run)
    assert st[(1, 4)] == "missing"
    assert sorted(k for (r, k) in st if r == 3) == [0, 1, 2, 3]
    assert run.stopped is None and run.rounds[-1]["learners"] >= 1


def test_feel_closed_form_allocates_the_devices_left(digits: Any) -> None:
    run = in_process(shipped("feel/ren2021_cpu_densenet121_k6.json"), digits,
                     lambda r, k: k == 2)
    assert run.stopped is None and len(run.rounds) == 4
    for r in run.rounds[2:]:
        assert len(r["allocation"]["batch"]) == 5
    assert sorted(k for (r, k) in status(run) if r == 3) == [0, 1, 3, 4, 5]


def test_adaptive_tau_goes_on_with_the_nodes_left(digits: Any) -> None:
    run = in_process(shipped("adaptive-tau/svm_defaults.json"), digits, lambda r, k: k == 0,
                     learners=3)
    assert run.stopped is None
    assert sorted(k for (r, k) in status(run) if r == 2) == [1, 2]
    assert run.rounds[-1]["learners"] == 2


# -- the command line ---------------------------------------------------------------------------
def fake_engine(lost: Callable[[int, int], bool]) -> Callable[..., None]:
    """The simulation engine replaced by in-process learners (no Ray), losing as told."""

    def engine(settings: LiveSettings, nodes: int, out: Path, say: Any, **kw: Any) -> None:
        data = load_dataset(settings.dataset, max_train=settings.max_train,
                            max_test=settings.max_test)
        run = LiveRun(settings, data)
        pools = np.array_split(np.arange(data.y_train.size), run.K)
        run_in_process(run, pools, clock_of(lost, SLOW),
                       on_round=lambda r: write_outputs(r, out))
        write_outputs(run, out, figure=True)

    return engine


def live_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             lost: Callable[[int, int], bool]) -> Any:
    from mel_opt.cli import cli

    pytest.importorskip("flwr")
    monkeypatch.setattr("mel_opt.live.run._simulation", fake_engine(lost))
    path = tmp_path / "issue.json"
    path.write_text(json.dumps(issue_doc()))
    return CliRunner().invoke(cli, ["live", str(path), "--rounds", "3", "--model", "softmax",
                                    "--max-train", "400", "-o", str(tmp_path / "out")])


def test_cli_a_run_that_ends_early_exits_1_and_keeps_its_rounds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = live_cli(tmp_path, monkeypatch, lambda r, k: r >= 2)
    assert res.exit_code == 1, res.output
    assert ("error: the run ended after 2 of 3 rounds (their outputs are kept): round 3: no "
            "learner is left to train (all missing)") in " ".join(res.output.split())
    rows = rows_from_csv(tmp_path / "out" / "rounds.csv")
    assert sorted({r["round"] for r in rows}) == [1, 2]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["stopped"]["round"] == 3 and len(summary["rounds"]) == 3


def test_cli_a_run_that_adapts_to_a_lost_learner_exits_0(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res = live_cli(tmp_path, monkeypatch, lambda r, k: k == 3)
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [a["round"] for a in summary["adapted"]] == [2, 3]
    assert summary["stopped"] is None and len(summary["rounds"]) == 4
    rows = rows_from_csv(tmp_path / "out" / "rounds.csv")
    assert {r["adapted"] for r in rows if r["round"] == 3} == {summary["adapted"][1]["text"]}
