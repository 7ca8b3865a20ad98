"""The owners of a live run's state: the fleet, the models, the log. Others read their views
and change them through their methods only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mel_opt.live.estimates import Measurement
from mel_opt.live.fleet import SLOWER, Fleet
from mel_opt.live.log import LearnerRow, RoundRecord, RunLog
from mel_opt.live.models import GlobalModels
from mel_opt.training import load_dataset


def test_the_fleet_maps_nodes_and_refuses_impostors() -> None:
    fleet = Fleet(3, alpha=0.5)
    assert fleet.join(100, 0) == "" and fleet.join(101, 2) == ""
    assert "not a learner of the instance (0..2)" in fleet.join(102, 7)
    assert "which another node holds" in fleet.join(103, 0)
    assert dict(fleet.nodes) == {100: 0, 101: 2} and fleet.learners == [0, 2]
    assert fleet.node_of(2) == 101 and fleet.learner_at(100) == 0
    with pytest.raises(TypeError):
        fleet.nodes[104] = 1  # type: ignore[index]  # a view, not the fleet's own map


def test_missing_learners_leave_and_come_back_through_the_fleet() -> None:
    fleet = Fleet(3, alpha=0.5)
    for n in range(3):
        fleet.join(10 + n, n)
    fleet.lose([1, 2])
    assert fleet.missing == {1, 2}
    assert fleet.active({0, 1, 2}).tolist() == [0]
    fleet.back([2])
    assert fleet.missing == {1} and fleet.active({0, 2}).tolist() == [0, 2]
    with pytest.raises(AttributeError):
        fleet.missing.add(0)  # type: ignore[attr-defined]  # a frozenset


def test_the_estimates_are_read_only_outside_the_fleet() -> None:
    fleet = Fleet(2, alpha=0.5)
    assert fleet.measure(Measurement(0, 2.0, 1000.0), 1) == ""  # 2 ms per sample-pass
    assert fleet.measure(Measurement(0, 4.0, 1000.0), 2) == ""  # halfway to 4 ms: 3 ms
    assert fleet.measure("compute_s must be positive", 3) == "compute_s must be positive"
    assert fleet.seconds[0] == pytest.approx(3e-3) and np.isnan(fleet.seconds[1])
    with pytest.raises(ValueError, match="read-only"):
        fleet.seconds[1] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        fleet.overhead[0] = 1.0


def test_one_wait_rule_for_every_reply() -> None:
    fleet = Fleet(2, alpha=1.0)
    assert fleet.reply_wait_s(0, 4.0) == pytest.approx(SLOWER * 4.0)  # no messaging known
    fleet.note_overhead(0, 1.0, 3.5)  # 2.5 s beyond its computation
    assert fleet.overhead_known(0) == pytest.approx(2.5) and fleet.overhead_known(1) is None
    assert fleet.reply_wait_s(0, 4.0) == pytest.approx(1.25 * 4.0 + 2.5)
    pooled = Fleet(4, alpha=1.0, pool=2)
    # four jobs of 1, 1, 1, 3 s through two workers: at most 6 / 2 + 3 / 2 = 4.5 s
    assert pooled.queue_s([1.0, 1.0, 1.0, 3.0]) == pytest.approx(4.5)
    assert fleet.queue_s([1.0, 1.0, 1.0, 3.0]) == 3.0  # each on its own node


def test_rows_keep_their_columns_and_refuse_an_unknown_status() -> None:
    row = LearnerRow(2, 1, "b", 11, "ok", predicted_s=1.5, measured_s=1.4, samples=30,
                     passes=2, columns={"d": 30, "tau": 2, "samples": 999})
    d = row.as_dict()
    assert d["d"] == 30 and d["tau"] == 2
    assert d["samples"] == 30  # a column named as a field leaves the field's value
    assert "reason" not in d and d["comm_measured_s"] is None
    assert LearnerRow(1, 0, "a", None, "ignored", reason="why").as_dict()["reason"] == "why"
    with pytest.raises(ValueError, match="status must be one of ok, late, missing, ignored"):
        LearnerRow(1, 0, "a", None, "lost")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.status = "late"  # type: ignore[misc]


def test_the_log_writes_rounds_as_the_summary_holds_them() -> None:
    log = RunLog()
    log.add_round(RoundRecord(0, {"loss": 2.3, "accuracy": 0.1}, 0.0, 0.0, 0))
    log.add_round(RoundRecord(1, {"loss": 1.0, "accuracy": 0.6}, 3.0, 15.0, 2,
                              round_wall_s=2.9, missing=(3,), method="exact",
                              allocation={"d": [1, 2]}, control={"tau": 4}))
    first, second = log.round_dicts()
    assert list(first) == ["round", "loss", "accuracy", "wall_s", "clock_s", "learners"]
    assert list(second) == ["round", "loss", "accuracy", "wall_s", "round_wall_s", "clock_s",
                            "learners", "missing", "method", "solve_s", "allocation", "last",
                            "control"]
    log.stop(2, "round 2: no learner is left")
    assert log.stopped == {"round": 2, "reason": "round 2: no learner is left"}
    assert log.warnings == ("round 2: no learner is left",)
    assert isinstance(log.rows, tuple) and isinstance(log.rounds, tuple)


def test_each_task_keeps_its_own_model_in_float32() -> None:
    data = load_dataset("digits", max_train=100, max_test=50)
    models = GlobalModels("softmax", data, seed=3, tasks=2)
    assert len(models) == 2 and not np.array_equal(models[0][0], models[1][0])
    models.replace(1, [a.astype(np.float64) * 0 for a in models[1]])
    assert all(a.dtype == np.float32 and not a.any() for a in models.of(1))
    assert set(models.evaluation()) == {"loss", "accuracy", "tasks"}
