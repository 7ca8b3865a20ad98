"""The simulation engine at scale: a bounded pool of learners, and a server that knows it.

The pool's arithmetic (how long the server waits for a queue of learners, what a message costs
beyond its learner's computation, how long each learner probes) is checked on a made-up run;
one real run of 40 learners checks that Flower's simulation keeps at most one Ray actor per
core and that every learner answers every round. No wall-clock time is asserted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mel_opt.live.fleet import MIN_PROBE_S, PROBE_WAVES
from mel_opt.live.rounds import LiveRun, LiveSettings
from mel_opt.problems.messages import ProbeReport
from mel_opt.processes import Sampler
from mel_opt.training import load_dataset

SIGMA = 1e-5  # seconds per sample-pass of every made-up learner


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def doc(K: int, T: float = 1.0) -> dict[str, Any]:
    learners = [{"name": f"n{k}", "c2": 1e-3, "c1": 1e-4, "c0": 0.01} for k in range(K)]
    return {"problem": "mel-async", "schema_version": 1, "name": f"scale{K}",
            "cycle_time_s": T, "total_samples": 10 * K, "min_samples": 1,
            "max_samples": 10 * K, "learners": learners}


def probed(K: int, data: Any, pool: int | None) -> LiveRun:
    run = LiveRun(LiveSettings(instance=doc(K), method="exact", model="softmax",
                               grace_s=1.0, pool=pool), data)
    for k in range(K):
        run.accept_probe(100 + k, ProbeReport(k, 10, SIGMA * 1000, 1000.0).encode())
    return run


def test_the_pool_is_one_learner_per_core_never_more_than_the_learners() -> None:
    from mel_opt.live.run import pool_size

    assert pool_size(1000, 2) == 2 and pool_size(50, 8) == 8
    assert pool_size(1, 2) == 1 and pool_size(3, 8) == 3 and pool_size(5, 0) == 1


def test_a_pooled_server_waits_for_its_queue_and_not_for_queueing_as_overhead(
        digits: Any) -> None:
    K = 12
    alone, pooled = probed(K, digits, None), probed(K, digits, 2)
    plan = pooled.plan(1)
    costs = [1.25 * plan.compute_s(k) for k in plan.orders]
    # every learner at once: the longest; through a pool of 2: the queue (Graham's bound)
    assert alone.wait_s(plan) == pytest.approx(max(costs) + 1.0)
    assert pooled.wait_s(plan) == pytest.approx(sum(costs) / 2 + max(costs) / 2 + 1.0)
    # replies of a pool of 2: each learner computed 0.1 s and took 0.05 s of messaging, so
    # the last of 12 came after 6 * 0.15 = 0.9 s; learner k's round trip holds its queueing
    for k in range(K):
        elapsed = 0.15 * (k // 2 + 1)
        alone.fleet.note_overhead(k, 0.1, elapsed)
        pooled.fleet.note_overhead(k, 0.1, elapsed)
    pooled.fleet.fold_pooled()
    assert pooled.fleet.overhead == pytest.approx(np.full(K, 0.05))  # the pool's, per message
    assert alone.fleet.overhead[-1] == pytest.approx(0.8)  # without a pool: all queueing
    assert not pooled.fleet._timed  # folded once


def test_a_pool_probes_many_learners_briefly_and_few_fully(digits: Any) -> None:
    few = probed(2 * PROBE_WAVES, digits, 2)
    assert few.probe_seconds(2 * PROBE_WAVES) == few.settings.probe_s
    many = probed(400, digits, 2)
    short = many.probe_seconds(400)
    assert short == pytest.approx(max(MIN_PROBE_S, 0.5 * PROBE_WAVES * 2 / 400))
    assert many.probe_order(400).min_seconds == short < many.settings.probe_s
    assert probed(400, digits, None).probe_seconds(400) == 0.5  # each on its own node
    # the probe's wait covers the queue of probes, however many
    assert many.probe_wait_s(400) > 400 * short / 2


class ActorCount(Sampler):
    """Samples the Ray actors (worker processes named ``ray::ClientAppActor``) this test
    started, in a thread; ``peak`` is the most seen at once."""

    every = 0.3

    def __init__(self, started: Any) -> None:
        super().__init__()
        self.actors = type(started)(("ray::ClientAppActor",))  # conftest's Started
        self.peak = 0

    def sample(self) -> None:
        self.peak = max(self.peak, len(self.actors.alive()))


@pytest.mark.slow
@pytest.mark.federation
@pytest.mark.timeout(300)
def test_forty_learners_share_a_pool_of_one_actor_per_core(tmp_path: Path, ray: Any,
                                                           mel_async_file: Any) -> None:
    pytest.importorskip("flwr")
    from mel_opt.live.report import rows_from_csv
    from mel_opt.live.run import LiveOptions, check, live, load_settings

    K = 40
    settings = load_settings(mel_async_file(K, 0.2), rounds=2, model="softmax", probe_s=0.2,
                             max_train=800, max_test=200, grace_s=30.0)
    with ActorCount(ray) as actors:
        summary = live(check(settings, LiveOptions(engine="simulation")), tmp_path / "out")
    rows = rows_from_csv(tmp_path / "out" / "rounds.csv")
    assert len(rows) == 2 * K
    bad = [r for r in rows if r["status"] not in ("ok", "late") or
           not r["compute_measured_s"] > 0]
    assert not bad, (bad, summary.get("warnings"))
    assert [r["learners"] for r in summary["rounds"][1:]] == [K, K]
    # the old engine made one actor per learner (40); the pool has one per core
    assert 1 <= actors.peak <= (os.cpu_count() or 1)
    assert ray.gone(20.0), ray.alive()


def test_a_thousand_awaited_replies_are_pulled_every_second_the_last_hundred_every_tenth() -> None:
    pytest.importorskip("flwr")
    from mel_opt.live.flower_exchange import poll_s

    assert [poll_s(n) for n in (1, 100, 250, 1000)] == pytest.approx([0.1, 0.1, 0.25, 1.0])
