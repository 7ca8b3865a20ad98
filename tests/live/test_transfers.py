"""``--transfers measured``: the plans take the transfers' times from what the replies measured
(mel-async's C0_k from each learner's messaging, dab's b_k from the rate its shipped shards
crossed at), learned as the speeds are. Every number here is worked by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mel_opt.errors import UsageError
from mel_opt.examples import problem_example
from mel_opt.io.json_io import parse_json_text
from mel_opt.live import claims
from mel_opt.live import learner as L
from mel_opt.live.estimates import Transfers
from mel_opt.live.rounds import Answer, LiveRun, LiveSettings
from mel_opt.problems.messages import ProbeReport, TrainOrder, TrainReport
from mel_opt.training import load_dataset

SUBSET = {"max_train": 400, "max_test": 200}


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", **SUBSET)


def test_the_messaging_and_the_rate_are_learned_as_the_speeds_are() -> None:
    t = Transfers.unknown(2, alpha=0.5)
    t.update(0, 2.0, None, 1000)  # no samples shipped: its seconds only
    assert t.seconds[0] == 2.0 and np.isnan(t.rate_Bps[0])
    t.update(0, 1.0, 98_000, 1000)  # 98,000 + 2 x 1,000 bytes in 1 s
    assert t.seconds[0] == pytest.approx(1.5) and t.rate_Bps[0] == pytest.approx(100_000)
    t.update(0, 0.5, 98_000, 1000)  # 200,000 B/s, halfway: 150,000
    assert t.rate_Bps[0] == pytest.approx(150_000) and t.seconds[0] == pytest.approx(1.0)
    for nothing in (None, 0.0, -1.0, float("nan")):  # nothing measured: nothing changes
        t.update(1, nothing, 5000, 1000)
    assert np.isnan(t.seconds[1]) and np.isnan(t.rate_Bps[1])


def mel_async_doc() -> dict[str, Any]:
    learners = [{"name": f"n{k}", "c2": 1e-3, "c1": 1e-3, "c0": 0.1} for k in range(3)]
    return {"problem": "mel-async", "schema_version": 1, "name": "live3", "cycle_time_s": 4.0,
            "total_samples": 300, "min_samples": 10, "max_samples": 300, "learners": learners}


@pytest.mark.parametrize("transfers, c0", [("file", [0.1, 0.1, 0.1]),
                                           ("measured", [0.7, 0.1, 1.5])])
def test_mel_async_plans_c0_from_each_learners_messaging(digits: Any, transfers: str,
                                                          c0: list[float]) -> None:
    run = LiveRun(LiveSettings(instance=mel_async_doc(), method="exact", seed=1,
                               model="softmax", transfers=transfers, **SUBSET), digits)
    for k in range(3):
        run.accept_probe(100 + k, ProbeReport(k, 100, 1e-5 * 1000, 1000.0).encode())
    plan = run.plan(1)
    assert np.asarray(run.planned.c0).tolist() == [0.1, 0.1, 0.1]  # nothing measured yet
    # learner 0's reply took 0.7 s beyond its compute, learner 2's 1.5 s; learner 1 is
    # in-process-like (no round trip: nothing measured)
    answers = []
    for k, order in plan.orders.items():
        work = order.samples * order.passes
        report = TrainReport(k, 1e-5 * work, work, order.samples, order.passes,
                             [a.copy() for a in run.model])
        trip = {0: 1e-5 * work + 0.7, 1: None, 2: 1e-5 * work + 1.5}[k]
        answers.append(Answer(k, report.encode(), trip))
    run.close(plan, answers, 2.0)
    assert np.asarray(run.planned.c0) == pytest.approx(c0)
    nxt = run.plan(2)  # each learner's predicted transfers: C1 d_k + C0_k (Eq. (3)-(4))
    for p in nxt.cycle.learners:
        assert p.comm_s == pytest.approx(1e-3 * p.columns["d"] + c0[p.learner])


def test_dab_briefs_each_learner_the_rate_its_shards_crossed_at(digits: Any) -> None:
    doc = parse_json_text((problem_example("dab").resource.parent /
                           "mnist_ffn_testbed.json").read_text())
    run = LiveRun(LiveSettings(instance=doc, seed=0, model="softmax", transfers="measured",
                               **SUBSET), digits)
    for k in range(run.K):
        run.accept_probe(10 + k, ProbeReport(k, 80).encode())
    plan = run.plan(1)
    file_b = [o.brief["bandwidth_Bps"] for _, o in sorted(plan.orders.items())]
    assert file_b == pytest.approx(np.asarray(run.inst.bandwidth))
    spec = run.settings.data_spec(run.K)
    memories = {k: L.Memory({L.SPEED: 1e-4}) for k in plan.orders}
    claimed = [Answer(k, L.answer_train(TrainOrder.decode(o.encode()), k,
                                        L.local_data(spec, k), memories[k]).encode())
               for k, o in claims.claim_orders(plan).items()]
    shipped = run.take_claims(plan, claimed)
    assert sorted(shipped.orders) == [0, 1, 2, 3, 4]
    # learner 1's shards and model crossed in 2 s beyond its compute; the others' replies
    # carry no round trip (nothing measured: their briefs keep the file's b_k)
    answers = []
    for k, order in shipped.orders.items():
        report = L.answer_train(TrainOrder.decode(order.encode()), k, L.local_data(spec, k),
                                memories[k])
        answers.append(Answer(k, report.encode(), report.compute_s + 2.0 if k == 1 else None))
    run.close(shipped, answers, 3.0)
    row = next(r for r in run.rows if r["learner"] == 1)
    model_bytes = sum(a.nbytes for a in run.model)
    rate = (row["shipped_bytes"] + 2 * model_bytes) / row["comm_measured_s"]
    assert row["comm_measured_s"] == pytest.approx(2.0, abs=1e-6)
    assert run.transfers.rate_Bps[1] == pytest.approx(rate)
    briefs = run.plan(2).orders
    assert briefs[1].brief["bandwidth_Bps"] == pytest.approx(rate)
    for k in (0, 2, 3, 4):
        assert briefs[k].brief["bandwidth_Bps"] == pytest.approx(file_b[k])
    assert run.summary()["estimates_rate_Bps"][1] == pytest.approx(rate)


def test_a_problem_without_a_rule_refuses_measured_transfers(digits: Any) -> None:
    feel = parse_json_text(problem_example("feel").resource.read_text())
    with pytest.raises(UsageError, match="--transfers measured is not defined for feel"):
        LiveRun(LiveSettings(instance=feel, seed=0, model="softmax", transfers="measured",
                             **SUBSET), digits)
