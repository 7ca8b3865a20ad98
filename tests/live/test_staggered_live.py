"""Staggered live, on the in-process clock: the allocation's data in every order, each start's
work sized to its group's slot from the measured speeds, a lost learner given up as FedBuff's
loop gives it up (the same server side as on Flower)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from mel_opt import api
from mel_opt.live.fedbuff import equal_work
from mel_opt.live.inprocess import Clock, run_in_process
from mel_opt.live.rounds import LiveRun, LiveSettings
from mel_opt.problems import get_problem
from mel_opt.problems.mel_async.generate import generate
from mel_opt.training import load_dataset

SLOW = 1e-4  # seconds per sample-pass: the probe's and the clock's, so the plan is exact


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def test_staggered_in_process_plans_each_start_to_its_slot_and_gives_up_a_lost_learner(
        digits: Any) -> None:
    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    run = LiveRun(LiveSettings(instance=json.loads(json.dumps(doc)), scheme="staggered",
                               rounds=6, groups=2, period=1.0, model="softmax"), digits)
    clock = Clock(compute_s=lambda r, k, work: SLOW * work, overhead_s=lambda r: 0.0,
                  probe_s_per_sample=SLOW, answers=lambda r, k: k != 3)
    run_in_process(run, np.array_split(np.arange(digits.y_train.size), 4), clock)
    assert run.stopped is None and [r["round"] for r in run.rounds] == list(range(7))

    # the data is the allocation's at the measured speeds: exact's d_k on the instance whose
    # compute is the probe's SLOW seconds per sample-pass for all four (not the file's
    # speeds), in FedBuff's units (an equal share is FedBuff's samples)
    inst = run.inst
    cycle = get_problem("mel-async").learning
    assert cycle is not None
    work = equal_work(cycle, inst, run.N)
    measured = cycle.live_instance(inst, np.arange(4), np.full(4, SLOW), run.N)
    d = np.asarray(api.solve(measured, "exact", seed=0).solution["d"], dtype=float)
    samples = np.rint(d / d.sum() * work.samples * 4).astype(int)
    on_file = np.asarray(api.solve(inst, "exact", seed=0).solution["d"], dtype=float)
    assert not np.array_equal(np.rint(on_file / on_file.sum() * work.samples * 4), samples)
    rows = run.rows
    for r in rows:
        assert r["samples"] == samples[r["learner"]]
    # groups dealt by data, largest first, in turn: G = 2
    order = np.argsort(-samples, kind="stable")
    group = np.empty(4, dtype=int)
    group[order] = np.arange(4) % 2
    # each learner's first start at 0 s aims at its group's first slot, P (g + 1) / G with
    # P = T = 15 s: whole passes of SLOW x samples that fit after the file's transfers
    first = {}
    for r in rows:
        first.setdefault(r["learner"], r)
    for k, r in first.items():
        slot = 15.0 * (group[k] + 1) / 2
        assert r["passes"] == math.floor((slot - work.comm_s[k]) / (SLOW * samples[k]))
    # the lost learner: given up once, the run goes on with the others
    assert [r["status"] for r in rows if r["learner"] == 3] == ["missing"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert {r["learner"] for r in ok} == {0, 1, 2}
    # every start's compute is what the clock took for its work, and every update is on
    # plan: at most G = 2 steps old
    assert all(r["compute_measured_s"] == pytest.approx(SLOW * r["samples"] * r["passes"])
               and r["passes"] >= 1 and 0 <= r["staleness"] <= 2 for r in ok)
    assert all(r["method"] == "exact" and r["learners"] == 2 for r in run.rounds[1:])
    assert run.rounds[-1]["accuracy"] > run.rounds[0]["accuracy"] + 0.3


def _staggered(digits: Any, **kw: Any) -> LiveRun:
    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    run = LiveRun(LiveSettings(instance=json.loads(json.dumps(doc)), scheme="staggered",
                               rounds=8, groups=2, period=1.0, model="softmax", **kw), digits)
    clock = Clock(compute_s=lambda r, k, work: SLOW * work, overhead_s=lambda r: 0.0,
                  probe_s_per_sample=SLOW)
    return run_in_process(run, np.array_split(np.arange(digits.y_train.size), 4), clock)


def test_staggered_live_a_liar_is_clipped_by_the_default_rule_and_ruins_the_mean(
        digits: Any) -> None:
    """A poisoned learner, as FedBuff's loop meets it: learner 1 sends its model scaled by
    1,000 from its second update on; its own code does it, the server sees a well-formed
    reply."""
    lie = {"attack": "scale:1000", "liar_ids": (1,), "attack_from": 2}
    honest = _staggered(digits)
    norm = _staggered(digits, **lie)
    mean = _staggered(digits, aggregation="mean", **lie)
    acc = {name: [r["accuracy"] for r in run.rounds] for name, run in
           (("honest", honest), ("norm", norm), ("mean", mean))}
    clipped = [r for r in norm.rounds if r.get("clipped")]
    assert clipped and all(set(r["clipped"]) == {"1"} for r in clipped)
    assert honest.summary()["clipped"] == 0
    assert acc["norm"][-1] >= acc["honest"][-1] - 0.02
    # the mean: the liar's first scaled update dominates the model from then on (every later
    # honest update is a thousandth of it), so its accuracy stays where that step left it
    # (the step of its first lie: where the norm run clipped it first; the runs are the same
    # until then)
    first = min(r["round"] for r in clipped)
    assert acc["mean"][:first] == acc["norm"][:first]
    assert len(set(acc["mean"][first:])) == 1 and acc["mean"][-1] < acc["honest"][-1]
