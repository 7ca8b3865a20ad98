"""The typed messages of a live round: each one's encode and decode, and the one place a reply
of the wrong shape is refused."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np
import pytest

from mel_opt.problems.learning import LearnerPlan
from mel_opt.problems.messages import (
    DataSpec,
    ProbeOrder,
    ProbeReport,
    Records,
    ReplyError,
    TrainOrder,
    TrainReport,
    shapes_of,
)

DATA = DataSpec("digits", "dirichlet:0.5", 4, 7, max_train=300)
MODEL = [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(3, dtype=np.float32)]


def test_a_probe_order_crosses_as_it_is() -> None:
    order = ProbeOrder("mel-async", "twonn", 32, 5, 0.25, 0.5, DATA)
    records = order.encode()
    assert "data.max_test" not in records.config  # None: all the data, by its absence
    assert records.config["data.max_train"] == 300 and records.arrays == {}
    assert ProbeOrder.decode(records) == order


def test_a_probe_report_with_and_without_a_speed() -> None:
    timed = ProbeReport(3, 120, 0.5, 256.0)
    assert ProbeReport.decode(timed.encode()) == timed
    private = ProbeReport(3, 120)  # a learner that plans its own work keeps its speed
    assert set(private.encode().config) == {"learner", "samples_held"}
    assert ProbeReport.decode(private.encode()) == private


def test_a_probe_report_with_its_start_split_and_what_is_refused() -> None:
    split = ProbeReport(3, 120, 0.5, 2000.0, start_s=0.1, rate_s=2e-4)
    assert ProbeReport.decode(split.encode()) == split
    with_constants = dataclasses.replace(split, rho=0.5, beta=1.0, gradient=[np.ones(2)])
    back = ProbeReport.decode(with_constants.encode())
    assert (back.start_s, back.rate_s, back.rho) == (0.1, 2e-4, 0.5)
    config = split.encode().config
    with pytest.raises(ReplyError, match="start_s and rate_s come together"):
        ProbeReport.decode(Records({k: v for k, v in config.items() if k != "rate_s"}))
    for key, value in (("start_s", -0.1), ("rate_s", 0.0)):
        with pytest.raises(ReplyError, match="start_s must be at least 0 and rate_s"):
            ProbeReport.decode(Records({**config, key: value}))


def test_a_probe_asking_for_the_bounds_constants_and_the_answer() -> None:
    order = ProbeOrder("mel-async", "twonn", 32, 5, 0.25, 0.5, DATA, constants_lr=0.1)
    assert order.encode().config["constants_lr"] == 0.1
    assert ProbeOrder.decode(order.encode()) == order
    gradient = np.array([0.5, -1.0, 2.0])
    report = ProbeReport(3, 120, 0.5, 256.0, rho=0.75, beta=2.5, gradient=[gradient],
                         constants_s=0.125)
    records = report.encode()
    assert records.config["rho"] == 0.75 and records.config["beta"] == 2.5
    back = ProbeReport.decode(records)
    assert (back.rho, back.beta, back.constants_s) == (0.75, 2.5, 0.125)
    assert back.compute_s == 0.5
    assert back.gradient is not None and np.array_equal(back.gradient[0], gradient)
    # a reply's constants are checked as any reply's numbers
    bad = Records({**records.config, "rho": -1.0}, records.arrays)
    with pytest.raises(ReplyError, match="rho, beta and constants_s must be at least 0"):
        ProbeReport.decode(bad)
    with pytest.raises(ReplyError, match="gradient.0. has non-finite values"):
        ProbeReport.decode(Records(records.config, {"gradient": [np.array([np.nan])]}))
    with pytest.raises(ReplyError, match="beta is missing"):
        ProbeReport.decode(Records({k: v for k, v in records.config.items() if k != "beta"},
                                   records.arrays))


def test_a_train_order_carries_the_model_and_a_brief() -> None:
    order = TrainOrder("dab", 2, 9, 0.5, 0.05, 16, DATA, MODEL, task=1, brief={
        "deadline_s": 21.0, "iterations": 2, "per_shard": 25})
    records = order.encode()
    assert records.config["brief.per_shard"] == 25 and records.config["round"] == 2
    back = TrainOrder.decode(records)
    assert back.brief == {"deadline_s": 21.0, "iterations": 2, "per_shard": 25}
    assert back.task == 1 and back.data == DATA and back.lr == 0.05
    assert all(np.array_equal(a, b) for a, b in zip(back.model, MODEL, strict=True))


def test_a_train_report_with_its_own_plan_extras_and_arrays() -> None:
    plan = LearnerPlan(2, samples=75, passes=2, weight=3.0, predicted_s=4.5, comm_s=1.5,
                       columns={"shards": 3, "tau": 2})
    gradient = [np.full((2, 3), 0.5, np.float32), np.zeros(3, np.float32)]
    report = TrainReport(2, 1.25, 150.0, 75, 2, MODEL, plan, {"rho": 0.75},
                         {"gradient": gradient})
    back = TrainReport.decode(report.encode(), shapes_of(MODEL))
    assert (back.learner, back.compute_s, back.work, back.samples, back.passes) == (
        2, 1.25, 150.0, 75, 2)
    assert back.plan == plan and back.extras == {"rho": 0.75}
    assert np.array_equal(back.arrays["gradient"][0], gradient[0])


def good() -> Records:
    return TrainReport(1, 0.5, 100.0, 50, 2, MODEL).encode()


def changed(**config: Any) -> Records:
    r = good()
    return Records({**r.config, **config}, r.arrays)


@pytest.mark.parametrize("records, words", [
    (Records({}, {"model": MODEL}), "learner is missing"),
    (changed(compute_s="soon"), "compute_s must be a number, got 'soon'"),
    (changed(compute_s=math.nan), "compute_s must be a finite number"),
    (changed(work=math.inf), "work must be a finite number"),
    (changed(samples=2.5), "samples must be a whole number"),
    (changed(passes=True), "passes must be a whole number"),
    (changed(learner=-1), "learner must be at least 0"),
    (changed(**{"x.rho": math.nan}), "x.rho must be a finite number"),
    (changed(**{"x.note": "text"}), "x.note must be a number"),
    (Records(good().config, {}), "carries no model"),
    (Records(good().config, {"model": MODEL[:1]}), "shapes [(2, 3)], the global model"),
    (Records(good().config, {"model": [MODEL[0].T, MODEL[1]]}), "shapes [(3, 2), (3,)]"),
    (Records(good().config, {"model": [np.full((2, 3), np.nan), MODEL[1]]}),
     "model[0] has non-finite values"),
    (Records(good().config, {"model": MODEL, "gradient": [np.array([np.inf])]}),
     "gradient[0] has non-finite values"),
])
def test_a_reply_of_the_wrong_shape_is_refused_naming_the_field(records: Records,
                                                                words: str) -> None:
    with pytest.raises(ReplyError, match=re.escape(words)):
        TrainReport.decode(records, shapes_of(MODEL))


def test_a_report_may_not_hide_its_model_under_another_record() -> None:
    with pytest.raises(ValueError, match="the report's own records"):
        TrainReport(0, 1.0, 1.0, 1, 1, MODEL, arrays={"model": MODEL}).encode()


def test_whole_floats_are_read_as_whole_numbers() -> None:
    # a learner that sends 50.0 samples (JSON, a float-typed record) is not refused
    assert TrainReport.decode(changed(samples=50.0)).samples == 50
