"""The arena's clock by hand, and its runs checked against the emulator and their own rules."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.api import load_instance, parse_instance
from mel_opt.arena.run import arena, work_clock
from mel_opt.arena.runner import Run, buffered_run, model_bytes, rounds_run
from mel_opt.arena.settings import ArenaSettings
from mel_opt.errors import SettingError, UsageError
from mel_opt.schemes import SCHEMES
from mel_opt.training import TrainSettings, load_dataset, train
from mel_opt.training.mlp import init_params, layers_for
from mel_opt.training.partition import make_pools, parse_partition, proportional_sizes

MEL_ASYNC = {"problem": "mel-async", "schema_version": 1, "name": "two", "cycle_time_s": 10.0,
             "total_samples": 100, "min_samples": 10, "max_samples": 100,
             "learners": [{"name": "a", "c2": 0.01, "c1": 0.001, "c0": 0.5},
                          {"name": "b", "c2": 0.02, "c1": 0.002, "c0": 1.0}]}
DAB = {"problem": "dab", "schema_version": 1, "name": "two", "deadline_s": 15.0,
       "iterations": 5, "model_bytes": 1000.0, "shard_bytes": 2000, "total_shards": 10,
       "learners": [{"name": "a", "train_rate": 5.0, "bandwidth_Bps": 1000.0},
                    {"name": "b", "train_rate": 10.0, "bandwidth_Bps": 2000.0}]}


def test_mel_async_clock_by_hand() -> None:
    c = work_clock(parse_instance(MEL_ASYNC))
    # equal share u = 100 / 2 = 50: per pass C2 u = 0.5, 1.0 s; transfers C1 u + C0 = 0.55,
    # 1.1 s; passes that fit T = 10: floor(9.45 / 0.5) = 18, floor(8.9 / 1) = 8; median 13
    np.testing.assert_allclose(c.per_pass_s, [0.5, 1.0])
    np.testing.assert_allclose(c.fixed_s, [0.55, 1.1])
    assert c.budget_s == 10.0 and c.passes == 13.0 and c.time_cv is None
    np.testing.assert_allclose(c.seconds(np.array([0, 1]), 2.0), [1.55, 3.1])


def test_dab_clock_by_hand() -> None:
    c = work_clock(parse_instance(DAB))
    # a = 10 / 2 = 5 shards: transfers (2 x 1000 + 2000 x 5) / b = 12, 6 s (Eq. 3.1 + 3.3);
    # one pass a / c = 1, 0.5 s (Eq. 3.2); mu = 5 passes: 17 and 8.5 s (Eq. 3.4)
    np.testing.assert_allclose(c.fixed_s, [12.0, 6.0])
    np.testing.assert_allclose(c.per_pass_s, [1.0, 0.5])
    np.testing.assert_allclose(c.seconds(np.array([0, 1]), c.passes), [17.0, 8.5])
    assert c.budget_s == 15.0 and c.time_cv is not None


def _run(s: ArenaSettings, inst_doc: dict, seed: int = 0) -> Run:
    inst = parse_instance(inst_doc)
    ds = load_dataset("digits").astype(np.dtype("float32"))
    rng = np.random.default_rng([seed, 7])
    pools = make_pools(ds.y_train, proportional_sizes(np.ones(inst.K), ds.y_train.size),
                       parse_partition("iid"), ds.classes, rng)
    init = init_params(layers_for("softmax", ds.features, ds.classes), seed, np.float32)
    clock = work_clock(inst)
    return Run(ds, init, pools, clock, s, rng, s.cycles * clock.budget_s)


def test_allocation_curve_is_the_emulators() -> None:
    """The method's run in the arena is ``melopt train``'s, draw for draw (on the model's
    exact times: the emulator adds no noise to an instance that gives none)."""
    inst = load_instance("instances/mel-async/k5_T15.json")
    got = arena(inst, ArenaSettings(schemes=("exact",), seeds=1, cycles=3, model="softmax",
                                    time_cv=0.0))
    want = train(inst, TrainSettings(schemes=("exact",), seeds=1, cycles=3, model="softmax",
                                     processes=1, threads=1))
    assert [r["time_s"] for r in got.rows] == pytest.approx([r["time_s"] for r in want.rows])
    assert [r["accuracy"] for r in got.rows] == [r["accuracy"] for r in want.rows]


def test_every_clock_is_noisy_and_the_allocation_has_stragglers() -> None:
    """mel-async's instance gives no spread: the arena draws every learner's time with the
    default 6 %, so the allocation, packed close to T, has learners past T; its cycle waits for
    the last one (each lasts max(T, slowest)), and the rows count them."""
    inst = load_instance("instances/mel-async/k5_T15.json")
    run = arena(inst, ArenaSettings(schemes=("exact", "deadline"), seeds=1, cycles=6,
                                    model="softmax"))
    exact = [r for r in run.rows if r["scheme"] == "exact"]
    gaps = np.diff([r["time_s"] for r in exact])
    assert np.all(gaps >= 15.0) and gaps.max() > 15.0
    assert exact[-1]["stragglers"] > 0 and exact[-1]["dropped"] == 0
    assert work_clock(inst).time_cv is None  # the instance's own clock stays exact
    quiet = arena(inst, ArenaSettings(schemes=("exact",), seeds=1, cycles=6, model="softmax",
                                      time_cv=0.0))
    assert np.all(np.diff([r["time_s"] for r in quiet.rows]) == 15.0)
    assert quiet.rows[-1]["stragglers"] == 0


def _ten() -> dict:
    """Five learners of each kind of MEL_ASYNC, with the same equal share (u = 500 / 10)."""
    learners = [{**MEL_ASYNC["learners"][i % 2], "name": f"n{i}"} for i in range(10)]
    return {**MEL_ASYNC, "total_samples": 500, "learners": learners}


def test_deadline_rounds_follow_their_rules() -> None:
    doc = _ten()
    s = ArenaSettings(cycles=3, model="softmax", participation=0.4)  # m = 4, invite 6
    run = _run(s, doc)
    rows = list(rounds_run(run, SCHEMES["deadline"].policy(run)))
    mb = model_bytes(run.init)
    for r in rows[1:]:
        assert r["bytes"] == pytest.approx(r["step"] * 2 * mb * 6)  # 6 invited a round
    gaps = np.diff([r["time_s"] for r in rows])
    # E = 13 passes: learner a's kind takes 0.55 + 6.5 = 7.05 s, b's 1.1 + 13 = 14.1 s (> T):
    # a round ends with the 4th a-kind finish (7.05 s) or, with fewer, at T = 10 s
    assert set(np.round(gaps, 6)) <= {7.05, 10.0}
    assert rows[-2]["time_s"] < run.horizon_s


def test_fedbuff_one_at_a_time() -> None:
    """Concurrency 1 and a buffer of 1: each server step is one learner's whole update,
    fresh (staleness 0); the clock moves by that learner's time, two model copies a step."""
    doc = _ten()
    s = ArenaSettings(cycles=2, model="softmax", concurrency=0.1, buffer=1)
    run = _run(s, doc)
    rows = buffered_run(run, SCHEMES["fedbuff"])
    mb = model_bytes(run.init)
    assert [r["bytes"] for r in rows] == [2 * mb * r["step"] for r in rows]
    assert set(np.round(np.diff([r["time_s"] for r in rows]), 6)) <= {7.05, 14.1}
    assert all(r["idle_s"] == 0.0 for r in rows)
    assert rows[-1]["accuracy"] > rows[0]["accuracy"]


def test_fedprox_fits_the_budget() -> None:
    doc = _ten()
    run = _run(ArenaSettings(cycles=2, model="softmax"), doc)
    rows = list(rounds_run(run, SCHEMES["fedprox"].policy(run)))
    gaps = np.diff([r["time_s"] for r in rows])
    # b's kind fits (10 - 1.1) / 1 = 8.9 passes (a's kind 18.9, capped at E = 13); its 143 or
    # 144 samples make passes of ceil(n / 32) = 5 minibatches, so 8.9 passes are
    # floor(44.5) = 44 steps: 8 passes and 4 minibatches of 32, 8 + 128 / n passes charged
    # (not 8.9: the fraction of a step is neither trained nor charged), 1.1 + 8 + 128 / n s
    n_b = run.sizes[1::2]
    assert set(n_b.tolist()) <= {143, 144}
    want = 1.1 + 8 + 128 / n_b.min()
    assert want < 10.0
    np.testing.assert_allclose(gaps, want, rtol=1e-12)
    assert [r["updates"] for r in rows[1:]] == [
        r * float(13 * run.sizes[0::2].sum() + (8 * n_b + 128).sum()) for r in (1, 2, 3)]


def test_refusals() -> None:
    inst = load_instance("instances/mel-async/k5_T15.json")
    with pytest.raises(SettingError, match="unknown scheme 'nope'"):
        arena(inst, ArenaSettings(schemes=("nope",), seeds=1, cycles=1))
    with pytest.raises(UsageError, match="feel' declares none"):
        work_clock(load_instance("instances/feel/" + _first("feel")))


def _first(problem: str) -> str:
    from pathlib import Path

    return sorted(p.name for p in Path("instances", problem).glob("*.json"))[0]


def test_deadline_with_fedscales_fixed_local_steps() -> None:
    """--local-steps 3: every learner takes 3 minibatches of 32 whatever its data (143 or 144
    samples), so a round charges 96 / n of a pass: a's kind 0.55 + 0.5 x 96 / n s, b's
    1.1 + 96 / n s; nobody is late, so the round lasts the slowest's time."""
    doc = _ten()
    run = _run(ArenaSettings(cycles=1, model="softmax", local_steps=3, time_cv=0.0), doc)
    assert run.clock.time_cv is None
    rows = list(rounds_run(run, SCHEMES["deadline"].policy(run)))
    n = run.sizes
    assert rows[1]["updates"] == 96 * 10 and rows[1]["dropped"] == 0
    slowest = max(1.1 + 96 / n[k] for k in range(1, 10, 2))
    assert rows[1]["time_s"] == pytest.approx(slowest)
    busy = sum(0.55 + 0.5 * 96 / n[k] for k in range(0, 10, 2)) + sum(
        1.1 + 96 / n[k] for k in range(1, 10, 2))
    assert rows[1]["busy_s"] == pytest.approx(busy)
    assert rows[1]["idle_s"] == pytest.approx(10 * slowest - busy)
