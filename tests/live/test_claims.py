"""Claims and shipped shards (mel_opt.live.claims): a dab learner claims its a_k, the server
sends it those shards with the model.

Every message goes through its encoding, and every learner answers through the learner's own
code (:func:`mel_opt.live.learner.answer_train`), as the Flower client does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mel_opt.examples import problem_example
from mel_opt.io.json_io import parse_json_text
from mel_opt.live import claims
from mel_opt.live import learner as L
from mel_opt.live.rounds import Answer, LiveRun, LiveSettings
from mel_opt.problems.messages import (
    MODEL,
    DataSpec,
    ProbeReport,
    Records,
    ReplyError,
    TrainOrder,
    TrainReport,
)
from mel_opt.training import load_dataset
from mel_opt.training.partition import draw

SUBSET = {"max_train": 400, "max_test": 200}


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", **SUBSET)


def dab_doc() -> dict[str, Any]:
    return parse_json_text((problem_example("dab").resource.parent /
                            "mnist_ffn_testbed.json").read_text())


def test_a_claim_carries_no_model_and_shipped_samples_cross_as_sent() -> None:
    spec = DataSpec("digits", "iid", 2, 0)
    claim = TrainOrder("dab", 1, 0, 0.5, 0.1, 32, spec, [], brief={"deadline_s": 2.0},
                       claim=True)
    records = claim.encode()
    assert MODEL not in records.arrays and records.config["claim"] is True
    back = TrainOrder.decode(records)
    assert back.claim and back.model == [] and back.brief == {"deadline_s": 2.0}
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    y = np.array([0, 1, 2], dtype=np.uint8)
    order = TrainOrder("dab", 1, 0, 0.5, 0.1, 32, spec, [np.zeros(2, np.float32)], samples=3,
                       passes=1, shipped=[x, y])
    back = TrainOrder.decode(order.encode())
    assert not back.claim
    np.testing.assert_array_equal(back.shipped[0], x)
    np.testing.assert_array_equal(back.shipped[1], y)
    # an order that is no claim still needs its model
    with pytest.raises(ReplyError, match="the order carries no model"):
        TrainOrder.decode(Records(dict(records.config, claim=False), {}))
    for bad in ([x, y[:2]], [x, y.astype(np.float32)], [x.ravel(), y], [x]):
        with pytest.raises(ReplyError, match="shipped must be features"):
            TrainOrder.decode(Records(order.encode().config,
                                      {MODEL: [np.zeros(2)], "shipped": bad}))


def test_the_server_ships_the_rows_the_learner_would_draw_itself() -> None:
    local = L.local_data(DataSpec("digits", "iid", 3, 0, **SUBSET), 1)
    x, y = L.ship(local, 50, seed=7, classes=10)
    rows = draw(local.rows, 50, np.random.default_rng(7))
    assert x.dtype == np.float32 and y.dtype == np.uint8
    np.testing.assert_array_equal(x, local.data.x_train[rows])
    np.testing.assert_array_equal(y, local.data.y_train[rows])
    assert x.nbytes == 50 * 64 * 4  # 8 x 8 pixels of float32, as a thesis shard counts them
    more = L.ship(local, local.rows.size + 5, seed=7, classes=10)[1]  # repeats past its part
    assert more.size == local.rows.size + 5


def test_a_learner_trains_on_the_samples_shipped_not_on_its_own() -> None:
    spec = DataSpec("digits", "iid", 2, 0, **SUBSET)
    local = L.local_data(spec, 0)
    x = local.data.x_train[local.rows[:40]]
    nines = [x, np.full(40, 9, dtype=np.uint8)]  # every label 9: only these teach that
    model = [np.zeros((64, 10), np.float32), np.zeros(10, np.float32)]
    order = TrainOrder("mel-async", 1, 0, 0.5, 1.0, 8, spec, model, samples=40, passes=5,
                       shipped=nines)
    report = L.answer_train(TrainOrder.decode(order.encode()), 0, local, L.Memory())
    assert report.samples == 40 and report.passes == 5
    logits = local.data.x_train[local.rows] @ report.model[0] + report.model[1]
    assert (logits.argmax(axis=1) == 9).all()


def test_a_round_of_claims_ships_each_learner_its_a_k_shards(digits: Any) -> None:
    run = LiveRun(LiveSettings(instance=dab_doc(), seed=0, model="softmax", **SUBSET), digits)
    for k in range(run.K):
        run.accept_probe(10 + k, ProbeReport(k, 80).encode())
    plan = run.plan(1)
    assert claims.wanted(run.cycle, run.settings.shards, True, plan)
    spec = run.settings.data_spec(run.K)
    # learner 0 is too slow for a shard (it halts), 1 sends a claim without a plan, 2 never
    # answers, 3 and 4 claim what their speeds allow
    seconds = {0: 10.0, 1: 1e-4, 3: 1e-4, 4: 2e-4}
    memories = {k: L.Memory({L.SPEED: s}) for k, s in seconds.items()}
    answers = []
    for k, order in claims.claim_orders(plan).items():
        assert order.claim and MODEL not in order.encode().arrays
        if k == 2:
            continue
        report = L.answer_train(TrainOrder.decode(order.encode()), k, L.local_data(spec, k),
                                memories[k])
        assert report.model == [] and report.compute_s == 0.0 and report.plan is not None
        if k == 1:
            report = TrainReport(1, 0.0, 0.0, 0, 0, [])
        answers.append(Answer(k, report.encode()))
    shipped = run.take_claims(plan, answers)
    assert shipped.claimed_by == (0, 1, 2, 3, 4)
    assert sorted(shipped.orders) == [3, 4] and run.missing == {2}
    assert shipped.claims[0].samples == 0
    assert shipped.claim_refused == {1: "its claim carries no plan"}
    per_shard = plan.orders[3].brief["per_shard"]
    for k in (3, 4):
        order, p = shipped.orders[k], shipped.claims[k]
        assert p.columns["shards"] >= 1 and p.samples == p.columns["shards"] * per_shard
        assert order.brief == {} and (order.samples, order.passes) == (p.samples, p.passes)
        assert order.shipped[0].shape == (p.samples, 64)
        assert order.shipped[0].nbytes == p.columns["shards"] * per_shard * 64 * 4
    # learner 3 at 1e-4 s per sample-pass: Eq. (3.5)'s a_k by hand, the largest a with
    # eta(a) < D, where c = 1 / (1e-4 x per_shard) shards/s
    inst, c = run.inst, 1.0 / (1e-4 * per_shard)
    a = 0
    while ((inst.model_bytes + inst.shard_bytes * (a + 1)) / inst.bandwidth[3]
           + inst.iterations * (a + 1) / c + inst.model_bytes / inst.bandwidth[3]
           ) < inst.deadline:
        a += 1
    assert shipped.claims[3].columns["shards"] == a
    trained = [Answer(k, L.answer_train(TrainOrder.decode(order.encode()), k,
                                        L.local_data(spec, k), memories[k]).encode())
               for k, order in shipped.orders.items()]
    run.close(shipped, trained, 1.0)
    rows = {r["learner"]: r for r in run.rows}
    assert [rows[k]["status"] for k in range(5)] == ["ok", "ignored", "missing", "ok", "ok"]
    assert rows[0]["shards"] == 0 and rows[0]["compute_measured_s"] == 0.0
    assert rows[1]["reason"] == "its claim carries no plan"
    assert rows[3]["shipped_bytes"] == shipped.orders[3].shipped[0].nbytes + \
        shipped.orders[3].shipped[1].nbytes
    assert run.rounds[-1]["learners"] == 2 and run.missing == {2}


def test_a_claim_of_more_samples_than_a_message_carries_is_refused(digits: Any) -> None:
    run = LiveRun(LiveSettings(instance=dab_doc(), seed=0, model="softmax", **SUBSET), digits)
    for k in range(run.K):
        run.accept_probe(10 + k, ProbeReport(k, 80).encode())
    plan = run.plan(1)
    greedy = TrainReport(0, 0.0, 0.0, 0, 0, [], plan=dataclass_plan(10**9))
    shipped = run.take_claims(plan, [Answer(0, greedy.encode())])
    assert shipped.claim_refused[0] == "it claims 1000000000 samples (2.56e+11 bytes), " \
        "more than an order ships (268435456 bytes)"
    assert shipped.orders == {}


def dataclass_plan(samples: int) -> Any:
    from mel_opt.problems.learning import LearnerPlan

    return LearnerPlan(0, samples, 2, 1.0, 1.0, 0.5, columns={"shards": 1, "tau": 2})


def test_held_shards_or_a_problem_that_does_not_claim_skip_the_claims(digits: Any) -> None:
    held = LiveRun(LiveSettings(instance=dab_doc(), seed=0, model="softmax", shards="held",
                                **SUBSET), digits)
    for k in range(held.K):
        held.accept_probe(10 + k, ProbeReport(k, 80).encode())
    assert not claims.wanted(held.cycle, held.settings.shards, True, held.plan(1))
    doc = parse_json_text(problem_example("mel-async").resource.read_text())
    run = LiveRun(LiveSettings(instance=doc, seed=0, model="softmax", **SUBSET), digits)
    for k in range(run.K):
        run.accept_probe(10 + k, ProbeReport(k, 80, 1e-4 * 1000, 1000.0).encode())
    assert not claims.wanted(run.cycle, run.settings.shards, True, run.plan(1))
