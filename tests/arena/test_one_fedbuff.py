"""The arena's FedBuff is the live FedBuff: the server loop of :func:`mel_opt.schemes.fedbuff.
run` on the virtual clock's learners gives, row for row, what a plain event queue of the
paper's Algorithm 1 gives (the arena's own loop before the two were made one, kept here as
the reference: learners started between two server steps trained together, the next learner
drawn at random among the idle)."""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pytest

from mel_opt.api import load_instance, parse_instance
from mel_opt.arena.run import work_clock
from mel_opt.arena.runner import (
    MAX_STEPS,
    Run,
    Tally,
    buffered_run,
    model_bytes,
    train_from,
    work_for,
)
from mel_opt.arena.settings import ArenaSettings
from mel_opt.schemes import SCHEMES
from mel_opt.schemes.fedbuff import FedBuffBuffer
from mel_opt.training import load_dataset
from mel_opt.training.mlp import init_params, layers_for
from mel_opt.training.partition import make_pools, parse_partition, proportional_sizes

MEL_ASYNC = {"problem": "mel-async", "schema_version": 1, "name": "ten", "cycle_time_s": 10.0,
             "total_samples": 500, "min_samples": 10, "max_samples": 500,
             "learners": [{"name": f"n{i}", "c2": 0.01 * (1 + i % 3), "c1": 0.001,
                           "c0": 0.5} for i in range(10)]}


def reference(run: Run) -> list[dict[str, Any]]:
    """FedBuff as one event queue (the arena's loop of the previous release)."""
    s, clock = run.settings, run.clock
    model = [a.copy() for a in run.init]
    tally = Tally(model_bytes(model))
    m = max(1, min(clock.K, round(s.concurrency * clock.K)))
    buf = FedBuffBuffer(min(s.buffer, m), s.server_lr)
    version, t, seq = 0, 0.0, 0
    events: list[tuple[float, int, int, int, float]] = []
    untrained: list[int] = []
    deltas: dict[int, Any] = {}
    busy = np.zeros(clock.K, dtype=bool)

    def start(k: int, now: float) -> None:
        nonlocal seq
        busy[k] = True
        work = work_for(run, np.array([k]), run.passes)
        dt = clock.noisy(np.array([k]), clock.seconds(np.array([k]), work.passes), run.rng)
        heapq.heappush(events, (now + float(dt[0]), seq, k, version, float(dt[0])))
        seq += 1
        tally.moved += tally.model_bytes
        untrained.append(k)

    def train_started() -> None:
        if untrained:
            ids = np.array(untrained, dtype=np.int64)
            trained = train_from(run, model, ids, work_for(run, ids, run.passes))
            for i, k in enumerate(ids):
                deltas[int(k)] = [a[i] - b for a, b in zip(trained, model, strict=True)]
            untrained.clear()

    rows = [run.row(0, t, model, tally)]
    for k in run.rng.choice(clock.K, m, replace=False):
        start(int(k), 0.0)
    while events and t < run.horizon_s and version < MAX_STEPS:
        t, _, k, v, dt = heapq.heappop(events)
        if k not in deltas:
            train_started()
        tally.moved += tally.model_bytes
        tally.busy_s += dt
        tally.updates += float(work_for(run, np.array([k]), run.passes).updates[0])
        busy[k] = False
        if buf.add(deltas.pop(k), version - v):
            train_started()
            model = [a.astype(run.init[i].dtype) for i, a in enumerate(buf.flush(model))]
            version += 1
            rows.append(run.row(version, t, model, tally))
        start(int(run.rng.choice(np.flatnonzero(~busy))), t)
    return rows


def make_run(doc: dict[str, Any], s: ArenaSettings, seed: int) -> Run:
    inst = parse_instance(doc)
    ds = load_dataset("digits", max_train=500, max_test=200).astype(np.dtype("float32"))
    rng = np.random.default_rng([seed, 7])
    pools = make_pools(ds.y_train, proportional_sizes(np.ones(inst.K), ds.y_train.size),
                       parse_partition(s.partition), ds.classes, rng)
    init = init_params(layers_for(s.model, ds.features, ds.classes), seed, np.float32)
    clock = work_clock(inst)
    return Run(ds, init, pools, clock, s, rng, s.cycles * clock.budget_s)


@pytest.mark.parametrize(("participation", "buffer", "seed"),
                         [(0.4, 2, 0), (0.5, 10, 1), (1.0, 3, 2), (0.1, 1, 3)])
def test_the_arenas_fedbuff_is_the_reference_event_queue(participation: float, buffer: int,
                                                         seed: int) -> None:
    s = ArenaSettings(cycles=3, model="softmax", concurrency=participation, buffer=buffer,
                      server_lr=0.8)
    got = buffered_run(make_run(MEL_ASYNC, s, seed), SCHEMES["fedbuff"])
    want = reference(make_run(MEL_ASYNC, s, seed))
    assert len(got) > 3
    assert got == want  # every row, exactly: the same draws in the same order


def test_with_run_to_run_noise_dab() -> None:
    """dab's clock with each learner's lognormal noise drawn at every push."""
    inst = load_instance("instances/dab/random_k8_tight_deadline.json")
    doc = {"problem": "dab", "schema_version": 1, "name": inst.name,
           "deadline_s": inst.deadline, "iterations": inst.iterations,
           "model_bytes": inst.model_bytes, "shard_bytes": inst.shard_bytes,
           "total_shards": inst.total_shards,
           "learners": [{"name": n, "train_rate": float(c), "bandwidth_Bps": float(b),
                         "time_cv": float(v)}
                        for n, c, b, v in zip(inst.learner_names, inst.train_rate,
                                              inst.bandwidth, inst.time_cv, strict=True)]}
    s = ArenaSettings(cycles=4, model="softmax", concurrency=0.5, buffer=2)
    got = buffered_run(make_run(doc, s, 0), SCHEMES["fedbuff"])
    assert got == reference(make_run(doc, s, 0))
