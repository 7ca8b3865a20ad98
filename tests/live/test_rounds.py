"""The server's side of live runs without Flower: probe, allocation from estimates, replies.

The replies are made up here (models and measured times), so every number is known.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mel_opt import api
from mel_opt.examples import problem_example
from mel_opt.io.json_io import parse_json_text
from mel_opt.live.rounds import Answer, LiveRun, LiveSettings
from mel_opt.problems.messages import ProbeReport, Records, TrainOrder, TrainReport
from mel_opt.training import load_dataset

SIGMA = np.array([1e-5, 2e-5, 4e-5])  # seconds per sample-pass of the three learners


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def mel_async_doc(T: float = 2.0) -> dict[str, Any]:
    learners = [{"name": f"n{k}", "c2": 1e-3, "c1": 1e-3, "c0": 0.1} for k in range(3)]
    return {"problem": "mel-async", "schema_version": 1, "name": "live3", "cycle_time_s": T,
            "total_samples": 300, "min_samples": 10, "max_samples": 300, "learners": learners}


def probed(doc: dict[str, Any], data: Any) -> LiveRun:
    run = LiveRun(LiveSettings(instance=doc, method="exact", seed=1, model="softmax"), data)
    for k in range(3):
        run.accept_probe(100 + k, ProbeReport(k, 100, SIGMA[k] * 1000, 1000.0).encode())
    return run


def reply(run: LiveRun, k: int, order: TrainOrder, sigma: float, fill: float) -> Answer:
    """Learner k did its plan at ``sigma`` seconds per sample-pass; its model is all ``fill``."""
    model = [np.full_like(a, fill) for a in run.model]
    work = order.samples * order.passes
    return Answer(k, TrainReport(k, sigma * work, work, order.samples, order.passes,
                                 model).encode())


def test_probe_maps_nodes_to_learners_and_refuses_impostors(digits: Any) -> None:
    run = probed(mel_async_doc(), digits)
    assert run.nodes == {100: 0, 101: 1, 102: 2}
    assert run.estimates.seconds == pytest.approx(SIGMA)
    run.accept_probe(999, ProbeReport(1, 100, 1.0, 10.0).encode())
    run.accept_probe(998, ProbeReport(7, 100, 1.0, 10.0).encode())
    assert run.nodes == {100: 0, 101: 1, 102: 2} and len(run.warnings) == 2
    assert run.active.tolist() == [0, 1, 2]


def test_round_allocates_from_the_measured_speeds(digits: Any) -> None:
    run = probed(mel_async_doc(), digits)
    plan = run.plan(1)
    N, d_total = digits.y_train.size, 300
    # the solved instance is the file's with C2 = sigma N / d (C1, C0 kept: emulated)
    inst = run.cycle.live_instance(run.inst, run.active, run.estimates.seconds, N)
    assert np.asarray(inst.c2) == pytest.approx(SIGMA * N / d_total)
    check = api.solve(inst, "exact")
    assert plan.allocation == check.solution
    d, tau = np.array(plan.allocation["d"]), np.array(plan.allocation["tau"])
    for k, order in plan.orders.items():
        # predicted busy time: Eq. (5) on the live instance, at most the cycle clock T
        busy = SIGMA[k] * N / d_total * tau[k] * d[k] + 1e-3 * d[k] + 0.1
        assert order.predicted_s == pytest.approx(busy)
        assert order.predicted_s <= 2.0 * (1 + 1e-9)
        assert order.comm_s == pytest.approx(1e-3 * d[k] + 0.1)
        assert order.passes == tau[k] and order.samples >= 1
    # the slowest learner gets the least work
    work = {k: o.samples * o.passes for k, o in plan.orders.items()}
    assert work[0] > work[1] > work[2]
    longest = max(o.predicted_s - o.comm_s for o in plan.orders.values())
    assert run.wait_s(plan) == pytest.approx(1.25 * longest + 5.0)  # no overhead known yet
    # a learner whose messages take 3 s beyond its computation is waited for that long
    run.fleet.note_overhead(2, 0.5, 3.5)
    assert run.fleet.overhead[2] == pytest.approx(3.0)
    wait2 = 1.25 * (plan.orders[2].predicted_s - plan.orders[2].comm_s) + 3.0
    assert run.wait_s(plan) == pytest.approx(max(1.25 * longest, wait2) + 5.0)


def test_close_aggregates_judges_deadlines_and_learns(digits: Any) -> None:
    run = probed(mel_async_doc(), digits)
    plan = run.plan(1)
    # learner 2 is twice as slow as it looked; the others a little faster (each trains its
    # share of the data set, rounded to whole samples, so exactly sigma can overrun T by a
    # sample's time: the allocation keeps every learner busy for the whole cycle)
    true = SIGMA * np.array([0.9, 0.9, 2.0])
    replies = [reply(run, k, plan.orders[k], true[k], fill=float(k)) for k in range(3)]
    run.close(plan, replies, wall_s=2.5)
    rows = {r["learner"]: r for r in run.rows}
    assert [rows[k]["status"] for k in range(3)] == ["ok", "ok", "late"]
    assert rows[2]["deadline_met"] is False and rows[0]["deadline_met"] is True
    assert rows[2]["compute_measured_s"] == pytest.approx(2 * rows[2]["compute_predicted_s"],
                                                          rel=0.02)
    # federated averaging by d_k of models filled with 0, 1, 2
    d = np.array(plan.allocation["d"], dtype=float)
    assert run.model[0] == pytest.approx(np.full_like(run.model[0], (d * [0, 1, 2]).sum()
                                                       / d.sum()))
    # the estimate moved half-way to the measurement
    assert run.estimates.seconds[2] == pytest.approx(1.5 * SIGMA[2])
    before = plan.orders[2].samples * plan.orders[2].passes
    after = run.plan(2).orders[2]
    assert after.samples * after.passes < before  # less work for the slow learner
    assert run.rounds[-1]["round"] == 1 and run.rounds[-1]["learners"] == 3


def test_missing_learner_is_left_out_until_it_answers(digits: Any) -> None:
    run = probed(mel_async_doc(), digits)
    plan = run.plan(1)
    run.close(plan, [reply(run, k, plan.orders[k], SIGMA[k], 1.0) for k in (0, 2)], 2.0)
    assert run.missing == {1}
    assert [r["status"] for r in run.rows if r["learner"] == 1] == ["missing"]
    plan2 = run.plan(2)
    assert sorted(plan2.orders) == [0, 2] and len(plan2.allocation["d"]) == 2
    run.fleet.back([1])  # the round loop does this when a rejoin probe is answered
    assert sorted(run.plan(3).orders) == [0, 1, 2]


@pytest.mark.parametrize("metrics", [
    {"compute_s": float("nan"), "work": 100.0},
    {"compute_s": -3.0, "work": 100.0},
    {"compute_s": 1e9, "work": 1.0},
    {"compute_s": "soon", "work": 100.0},
    {},
])
def test_bad_metrics_are_ignored_never_a_crash_never_a_poisoned_estimate(
        digits: Any, metrics: dict[str, Any]) -> None:
    run = probed(mel_async_doc(), digits)
    plan = run.plan(1)
    replies = [reply(run, k, plan.orders[k], SIGMA[k], 1.0) for k in (0, 1)]
    good = reply(run, 2, plan.orders[2], SIGMA[2], 99.0).records
    # the numbers replaced in a well-formed report; {}: a reply with no numbers at all
    config = {**good.config, **metrics} if metrics else {}
    replies.append(Answer(2, Records(config, good.arrays)))
    run.close(plan, replies, 2.0)
    row = next(r for r in run.rows if r["learner"] == 2)
    assert row["status"] == "ignored" and row["measured_s"] is None
    assert run.estimates.seconds[2] == pytest.approx(SIGMA[2])
    assert float(np.max(run.model[0])) == pytest.approx(1.0)  # its model was left out
    assert any("learner 2's reply ignored" in w for w in run.warnings)


def test_decentralised_dab_never_tells_the_server_a_speed(digits: Any) -> None:
    doc = parse_json_text(problem_example("mel-async").resource.read_text())
    assert doc["problem"] == "mel-async"
    dab = parse_json_text((problem_example("dab").resource.parent /
                           "mnist_ffn_testbed.json").read_text())
    run = LiveRun(LiveSettings(instance=dab, seed=0, model="softmax"), digits)
    for k in range(run.K):
        run.accept_probe(10 + k, ProbeReport(k, 80).encode())
    assert np.isnan(run.estimates.seconds).all()
    plan = run.plan(1)
    assert plan.cycle.learners == () and sorted(plan.orders) == list(range(run.K))
    for order in plan.orders.values():
        assert {"deadline_s", "iterations", "model_bytes", "shard_bytes", "bandwidth_Bps",
                "per_shard"} <= set(order.brief)
        assert not {"train_rate", "c2", "seconds_per_sample"} & set(order.brief)
        assert order.samples == 0 and order.passes == 0  # no plan from the server
    # each learner decides with its own speed; the server sees a_k and the time it took
    replies = []
    for k, order in plan.orders.items():
        # through the wire, as a learner reads it
        mine = run.cycle.learner_side.own_plan(TrainOrder.decode(order.encode()),
                                               1e-4 * (k + 1), k)
        report = TrainReport(k, mine.compute_s, mine.samples * mine.passes, mine.samples,
                             mine.passes, [a.copy() for a in run.model], plan=mine)
        replies.append(Answer(k, report.encode()))
    run.close(plan, replies, 1.0)
    assert all(r["status"] == "ok" for r in run.rows)
    inst = run.inst
    for row in run.rows:  # Eq. (3.5) by hand: the largest a with eta(a) < D
        k = row["learner"]
        per_shard = plan.orders[k].brief["per_shard"]
        c = 1.0 / (1e-4 * (k + 1) * per_shard)  # its own shards per second
        b = inst.bandwidth[k]

        def eta(a: int, b: float = b, c: float = c) -> float:
            return ((inst.model_bytes + inst.shard_bytes * a) / b
                    + inst.iterations * a / c + inst.model_bytes / b)

        a = 0
        while eta(a + 1) < inst.deadline:
            a += 1
        assert row["shards"] == a and row["samples"] == a * per_shard
    assert np.isnan(run.estimates.seconds).all()


def test_a_probe_whose_compute_time_exceeds_its_round_trip_is_ignored(digits: Any) -> None:
    run = LiveRun(LiveSettings(instance=mel_async_doc(), method="exact", seed=1,
                               model="softmax"), digits)
    # 0.5 s of training cannot come back in 0.2 s; 0.25 s within 0.26 s can (timer slack)
    run.accept_probe(100, ProbeReport(0, 100, 0.5, 1000.0).encode(), elapsed_s=0.2)
    run.accept_probe(101, ProbeReport(1, 100, 0.25, 1000.0).encode(), elapsed_s=0.26)
    assert run.nodes == {101: 1}
    assert len(run.warnings) == 1 and "longer than the 0.2 s" in run.warnings[0]


def test_messaging_beyond_compute_is_measured_and_learned(digits: Any) -> None:
    # the probe took 0.1 s of compute in a 0.9 s round trip: 0.8 s of messaging expected;
    # round 1's reply of learner 0 comes 0.6 s after its compute: measured 0.6, the estimate
    # moves half way (alpha 0.5) to 0.7
    run = LiveRun(LiveSettings(instance=mel_async_doc(), method="exact", seed=1,
                               model="softmax"), digits)
    for k in range(3):
        run.accept_probe(100 + k, ProbeReport(k, 100, SIGMA[k] * 1000, 1000.0).encode(),
                         elapsed_s=SIGMA[k] * 1000 + 0.8)
    plan = run.plan(1)
    answers = []
    for k, order in plan.orders.items():
        a = reply(run, k, order, SIGMA[k], 0.0)
        compute = SIGMA[k] * order.samples * order.passes
        answers.append(Answer(k, a.records, elapsed_s=compute + (0.6 if k == 0 else 0.8)))
    run.close(plan, answers, 1.0)
    rows = {r["learner"]: r for r in run.rows}
    assert rows[0]["comm_predicted_s"] == pytest.approx(0.8)
    assert rows[0]["comm_measured_s"] == pytest.approx(0.6)
    assert rows[1]["comm_measured_s"] == pytest.approx(0.8)
    assert run.summary()["estimates_comm_s"] == pytest.approx([0.7, 0.8, 0.8])


def test_a_probes_start_split_is_kept_unless_it_claims_more_than_the_probe_took(
        digits: Any) -> None:
    """The fleet keeps each probe's start cost and rate; a split whose rate exceeds the
    probe's own seconds per sample-pass (or whose start cost exceeds its compute) is refused
    with a warning and the learner's speed stays the probe's."""
    run = LiveRun(LiveSettings(instance=mel_async_doc(), method="exact", seed=1,
                               model="softmax"), digits)
    # 0.5 s for 2,000 sample-passes: 2.5e-4 overall, split as 3 starts of 0.1 s + 1e-4
    run.accept_probe(100, ProbeReport(0, 100, 0.5, 2000.0, start_s=0.1, rate_s=1e-4).encode())
    run.accept_probe(101, ProbeReport(1, 100, 0.5, 2000.0, start_s=0.1, rate_s=3e-4).encode())
    run.accept_probe(102, ProbeReport(2, 100, 0.5, 2000.0, start_s=0.6, rate_s=1e-4).encode())
    assert run.fleet.start_s.tolist() == [0.1, 0.0, 0.0]
    assert run.fleet.rate_s[0] == 1e-4 and np.isnan(run.fleet.rate_s[1:]).all()
    assert run.fleet.seconds.tolist() == pytest.approx([2.5e-4] * 3)  # the probes' ratios
    assert len(run.warnings) == 2 and all("start cost ignored" in w for w in run.warnings)


def test_a_learners_probe_splits_its_doubling_starts_into_a_start_cost_and_a_rate(
        digits: Any) -> None:
    """A real probe (the learner's own code, timed on this machine): its steps of 1, 2, 4...
    passes give a split whose starts and rate add up to the probe's compute. It times for a
    second, so that even a learner descheduled for a while makes more than one start."""
    from mel_opt.live import learner as L
    from mel_opt.problems.messages import DataSpec, ProbeOrder

    local = L.LocalData(digits, np.arange(200))
    order = ProbeOrder("mel-async", "softmax", 16, 1, 0.5, 1.0,
                       DataSpec("digits", "iid", 1, 1))
    report = L.answer_probe(order, 0, local, L.Memory({}))
    assert report.compute_s is not None and report.work is not None
    assert report.work >= 3 * 200  # at least two starts: 1 pass, then 2
    assert report.start_s is not None and report.rate_s is not None
    assert 0.0 <= report.start_s and 0.0 < report.rate_s <= report.compute_s / report.work
    # the fit keeps the total: compute = starts x start_s + rate x work, starts >= 2
    if report.start_s > 0:
        starts = (report.compute_s - report.rate_s * report.work) / report.start_s
        assert starts == pytest.approx(round(starts), abs=1e-6) and round(starts) >= 2
