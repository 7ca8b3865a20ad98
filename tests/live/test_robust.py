"""A learner that lies in a live run: its reply is well formed, only the aggregation stops it.

The issue's reproduction on the in-process engine's clock (tests/live/test_faults.py's): mel-async,
four learners, learner 1 sending its model times a factor from round 2 on. The accuracies of
the plain mean are the issue's (0.075, 0.24, 0.415, 0.55, 0.635 honest; stuck at 0.415 with a
factor of 1,000); the global model must stay finite whatever the factor, and the default rule
must bring the run back near the honest one. The attack option (the learner's own code lies,
told in its order) must send exactly what the node's fault hook sends.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest

from mel_opt.live.inprocess import Clock, run_in_process
from mel_opt.live.rounds import LiveRun, LiveSettings
from mel_opt.problems.mel_async.generate import generate
from mel_opt.problems.messages import Records, TrainOrder
from mel_opt.training import load_dataset

SLOW = 0.05
HONEST = [0.075, 0.24, 0.415, 0.55, 0.635]  # the issue's, factor 1


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def doc() -> dict[str, Any]:
    return json.loads(json.dumps(generate("mohammad2020", learners=4, seed=5,
                                          params={"cycle_time_s": "15"})))


def scaled(factor: float) -> Any:
    """Learner 1's node multiplies the model it sends by ``factor`` from round 2 on."""
    def sends(r: int, k: int, rec: Records) -> Records:
        if k != 1 or r < 2:
            return rec
        model = [a * np.float32(factor) for a in rec.arrays["model"]]
        return Records(rec.config, {**rec.arrays, "model": model})
    return sends


def run(data: Any, rounds: int = 4, sends: Any = None, **kw: Any) -> tuple[LiveRun, list[Any]]:
    clock = Clock(compute_s=lambda r, k, work: SLOW * work, overhead_s=lambda r: 0.0,
                  probe_s_per_sample=SLOW,
                  **({"sends": sends} if sends is not None else {}))
    live = LiveRun(LiveSettings(instance=doc(), rounds=rounds, seed=0, model="softmax", **kw),
                   data)
    models: list[Any] = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the float32 overflow was a RuntimeWarning
        run_in_process(live, np.array_split(np.arange(data.y_train.size), live.K), clock,
                       on_round=lambda r: models.append([a.copy() for a in r.model]))
    return live, models


def accuracies(live: LiveRun) -> list[float]:
    return [round(r["accuracy"], 3) for r in live.rounds]


@pytest.mark.parametrize("factor", [1e3, 1e30])
def test_the_plain_mean_is_ruined_but_never_non_finite(digits: Any, factor: float) -> None:
    live, models = run(digits, sends=scaled(factor), aggregation="mean")
    assert all(np.isfinite(a).all() for m in models for a in m)
    acc = accuracies(live)
    # round 2's model is the liar's own, magnified (its accuracy); stuck there after
    assert acc[:2] == HONEST[:2] and max(acc[3:]) <= acc[2] + 0.01 and acc[-1] < HONEST[-1] - 0.2


def test_the_default_rule_clips_the_liar_and_its_reason_is_in_its_row(digits: Any) -> None:
    honest, _ = run(digits)
    assert LiveSettings(instance=doc()).aggregation == "norm"
    assert accuracies(honest) == HONEST  # no one lies: norm is the papers' mean here
    live, models = run(digits, sends=scaled(1e30))
    assert all(np.isfinite(a).all() for m in models for a in m)
    rows = {(r["round"], r["learner"]): r for r in live.rows}
    for r in (2, 3, 4):
        assert rows[(r, 1)]["status"] == "ok" and "clipped" in rows[(r, 1)]["reason"]
        assert "1" in live.rounds[r]["clipped"]
    assert all("reason" not in rows[(r, k)] for r in (1, 2, 3, 4) for k in (0, 2, 3))
    assert live.summary()["clipped"] == 3 and live.summary()["kept_previous"] == []
    # the liar's update enters at three times the median honest length, in its own direction:
    # the run is slowed, not ruined (the mean stays at 0.415)
    assert accuracies(live)[-1] >= HONEST[-1] - 0.06


def test_the_attack_option_lies_in_the_learners_code_as_the_fault_hook_does(
        digits: Any) -> None:
    hook, _ = run(digits, sends=scaled(1000.0), aggregation="mean")
    told, _ = run(digits, aggregation="mean", attack="scale:1000", liar_ids=(1,),
                  attack_from=2)
    assert accuracies(told) == accuracies(hook)
    assert told.attack is not None and told.attack.liars == frozenset({1})


def test_an_order_carries_its_lie_across_the_wire() -> None:
    order = TrainOrder("mel-async", 2, 0, 0.5, 0.1, 32, _spec(), [np.ones(2, np.float32)],
                       attack="sign")
    assert TrainOrder.decode(order.encode()).attack == "sign"
    honest = TrainOrder("mel-async", 2, 0, 0.5, 0.1, 32, _spec(), [np.ones(2, np.float32)])
    assert "attack" not in honest.encode().config
    assert TrainOrder.decode(honest.encode()).attack == ""


def _spec() -> Any:
    from mel_opt.problems.messages import DataSpec

    return DataSpec("digits", "iid", 4, 0, None, None)


def test_a_stale_liar_sends_the_model_of_its_first_lying_round(digits: Any) -> None:
    sent: dict[int, list[np.ndarray]] = {}

    def sends(r: int, k: int, rec: Records) -> Records:
        if k == 1:
            sent[r] = [a.copy() for a in rec.arrays["model"]]
        return rec

    live, models = run(digits, rounds=3, sends=sends, attack="stale", liar_ids=(1,),
                       attack_from=2)
    # models[i] is the global model after round i (0: the probe's, untrained)
    assert all(np.array_equal(a, b) for a, b in zip(sent[2], models[1], strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(sent[3], models[1], strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(sent[1], models[0], strict=True))


def test_fedbuff_live_a_liar_is_clipped_in_the_step_and_the_mean_is_ruined(
        digits: Any) -> None:
    lie = {"scheme": "fedbuff", "buffer": 2, "attack": "scale:1000", "liar_ids": (1,),
           "attack_from": 2}
    honest, _ = run(digits, rounds=8, scheme="fedbuff", buffer=2)
    mean, m_models = run(digits, rounds=8, aggregation="mean", **lie)
    norm, n_models = run(digits, rounds=8, **lie)
    assert all(np.isfinite(a).all() for m in m_models + n_models for a in m)
    assert honest.summary()["clipped"] == 0 and mean.summary()["clipped"] == 0
    clipped = [r for r in norm.rounds if r.get("clipped")]
    assert clipped and all(set(r["clipped"]) == {"1"} for r in clipped)
    assert norm.summary()["clipped"] == len(clipped)
    # the mean stays where the liar's first update left it; the norm run follows the honest
    assert len(set(accuracies(mean)[4:])) == 1 and accuracies(mean)[-1] < \
        accuracies(honest)[-1] - 0.03
    assert accuracies(norm)[-1] >= accuracies(honest)[-1] - 0.02
