"""The arena's virtual-clock runs: every scheme trained with real local SGD on real data.

Every (scheme, seed) run starts from the same model (``init_params(layers, seed)``), the same
data set and partition rule, learning rate and minibatch, and reads each learner's time from
the instance's own model (:mod:`mel_opt.arena.clock`). What differs is what the scheme does:

- a method of the problem (mel-async ``exact``, dab ``dab``...) is trained exactly as the
  emulator trains it (:func:`mel_opt.training.emulate.run_cycles`, the same random draws in
  the same order, so its curve is ``melopt train``'s): learners hold the data their
  allocation gives them and run its plan every cycle;
- the alternatives hold equal shares of the data (split by the same partition rule) and run
  synchronous rounds (:func:`sync_run`: deadline, oort, fedprox) or the asynchronous buffer
  (:func:`fedbuff_run`).

Each run runs until its clock passes the horizon (``cycles`` round budgets) and yields rows of
the cumulative state after every aggregation: virtual time, validation loss and accuracy,
model bytes moved (a download and an upload per learner that takes part; dropped updates
count: they were sent) and learner-seconds idle (a learner that has finished waits for the
end of its round; an asynchronous learner never waits).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.arena.clock import WorkClock
from mel_opt.arena.deadline import close_round, invited
from mel_opt.arena.fedbuff import FedBuffBuffer
from mel_opt.arena.fedprox import fitting_work, prox_sgd
from mel_opt.arena.oort import OortParams, OortSelector, statistical_utility
from mel_opt.arena.settings import ArenaSettings
from mel_opt.errors import UsageError
from mel_opt.problems.learning import LearningCycle, Reply, RunContext
from mel_opt.training.data import Dataset
from mel_opt.training.emulate import emulated_seconds
from mel_opt.training.local import broadcast, evaluate, local_sgd, make_schedule
from mel_opt.training.mlp import Params, output_loss, stacked_forward
from mel_opt.training.partition import draw

__all__ = ["Run", "allocation_run", "fedbuff_run", "model_bytes", "sync_run"]

#: A run stops after this many aggregations whatever its clock says (a guard against rounds
#: that take no time).
MAX_STEPS = 100_000


@dataclass
class Run:
    """What every scheme's run reads: data, start, pools, clock and settings."""

    data: Dataset
    init: Params
    pools: list[np.ndarray]
    clock: WorkClock
    settings: ArenaSettings
    rng: np.random.Generator
    horizon_s: float
    threads: int = 1

    def row(self, step: int, t: float, model: Params, moved: float,
            idle: float) -> dict[str, Any]:
        loss, acc = evaluate(model, self.data.x_test, self.data.y_test)
        return {"step": step, "time_s": t, "loss": loss, "accuracy": acc,
                "bytes": moved, "idle_s": idle}

    @property
    def m(self) -> int:
        """Learners a round aggregates (and fedbuff's concurrency)."""
        return max(1, min(self.clock.K, round(self.settings.participation * self.clock.K)))

    @property
    def passes(self) -> float:
        s = self.settings.passes
        return float(s) if s is not None else self.clock.passes


def model_bytes(model: Params) -> float:
    """Bytes of one copy of the model as sent (its arrays' bytes)."""
    return float(sum(a.nbytes for a in model))


def _work(run: Run, learners: np.ndarray,
          passes: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Samples and whole passes of each learner for ``passes`` (a fraction below one is one
    pass over that fraction of its samples; more than one rounds down)."""
    samples, whole = [], []
    for k, p in zip(learners, passes, strict=True):
        pool = run.pools[int(k)]
        if p >= 1:
            samples.append(pool)
            whole.append(int(math.floor(p + 1e-9)))
        else:
            samples.append(draw(pool, max(1, int(round(p * pool.size))), run.rng))
            whole.append(1)
    return samples, np.array(whole, dtype=np.int64)


def _train(run: Run, model: Params, learners: np.ndarray, passes: np.ndarray,
           mu: float = 0.0) -> tuple[Params, np.ndarray]:
    """The learners' local models from ``model`` (stacked) and their sample counts."""
    s = run.settings
    samples, whole = _work(run, learners, passes)
    sched = make_schedule(samples, whole, s.batch_size, run.rng, run.data.x_train.dtype)
    start = broadcast(model, len(samples))
    x, y = run.data.x_train, run.data.y_train
    if mu > 0:
        trained = prox_sgd(start, x, y, sched, s.lr, mu)
    else:
        trained = local_sgd(start, x, y, sched, s.lr, run.threads)
    return trained, np.array([a.size for a in samples], dtype=float)


def _average(models: Params, weights: np.ndarray) -> Params:
    w = np.asarray(weights, dtype=float) / float(np.sum(weights))
    return [np.tensordot(w, a, axes=(0, 0)).astype(a.dtype) for a in models]


def _utilities(run: Run, model: Params, learners: np.ndarray) -> np.ndarray:
    """Oort's statistical utility of each learner: its samples' losses at ``model``."""
    x, y = run.data.x_train, run.data.y_train
    stacked = [a[None] for a in model]
    out = []
    for k in learners:
        rows = run.pools[int(k)]
        scores = stacked_forward(stacked, x[rows][None])[-1]
        out.append(statistical_utility(output_loss(stacked).losses(scores, y[rows][None])[0]))
    return np.array(out)


def sync_run(run: Run, scheme: str) -> Iterator[dict[str, Any]]:
    """Synchronous rounds of ``deadline``, ``oort`` or ``fedprox`` until the horizon."""
    s, clock = run.settings, run.clock
    model = [a.copy() for a in run.init]
    mb = model_bytes(model)
    t = moved = idle = 0.0
    selector = None
    if scheme == "oort":
        selector = OortSelector(clock.seconds(np.arange(clock.K), run.passes),
                                OortParams(alpha=s.alpha), run.rng)
    yield run.row(0, t, model, moved, idle)
    r = 0
    while t < run.horizon_s and r < MAX_STEPS:
        r += 1
        exploited = np.empty(0, dtype=np.int64)
        if selector is not None:
            n = min(clock.K, math.ceil(s.overcommit * run.m - 1e-9))
            exploited, explored = selector.select(n, r)
            ids = np.union1d(exploited, explored)
        elif scheme == "deadline":
            ids = invited(run.rng, clock.K, run.m, s.overcommit)
        else:  # fedprox: m at random, each does what fits
            ids = invited(run.rng, clock.K, run.m)
        if scheme == "fedprox":
            passes = fitting_work(run.passes, clock.per_pass_s[ids], clock.fixed_s[ids],
                                  clock.budget_s)
        else:
            passes = np.full(ids.size, run.passes)
        times = clock.noisy(ids, clock.seconds(ids, passes), run.rng)
        if scheme == "fedprox":
            kept = passes > 0
            duration = float(times[kept].max()) if kept.any() else clock.budget_s
        else:
            close = close_round(times, clock.budget_s, run.m)
            kept, duration = close.kept, close.duration_s
        moved += 2 * mb * ids.size
        idle += float(np.clip(duration - times[kept], 0.0, None).sum())
        if kept.any():
            if selector is not None:
                selector.update(ids[kept], _utilities(run, model, ids[kept]), r, exploited)
            trained, n_k = _train(run, model, ids[kept], passes[kept],
                                  s.mu if scheme == "fedprox" else 0.0)
            model = _average(trained, n_k)
        t += duration
        yield run.row(r, t, model, moved, idle)


def fedbuff_run(run: Run) -> Iterator[dict[str, Any]]:
    """FedBuff until the horizon: ``m`` learners training at once, a server step after every
    ``buffer`` updates (:class:`~mel_opt.arena.fedbuff.FedBuffBuffer`).

    Learners started between two server steps all start from the same global model, so they
    are trained together, when the first of them finishes or before the next step.
    """
    s, clock = run.settings, run.clock
    model = [a.copy() for a in run.init]
    mb = model_bytes(model)
    buf = FedBuffBuffer(min(s.buffer, run.m), s.server_lr)
    version, t, moved, seq = 0, 0.0, 0.0, 0
    events: list[tuple[float, int, int, int]] = []  # (finish time, seq, learner, version)
    untrained: list[int] = []  # started from the current model, not trained yet
    deltas: dict[int, Params] = {}
    busy = np.zeros(clock.K, dtype=bool)

    def start(k: int, now: float) -> None:
        nonlocal seq, moved
        busy[k] = True
        dt = clock.noisy(np.array([k]), clock.seconds(np.array([k]), run.passes), run.rng)
        heapq.heappush(events, (now + float(dt[0]), seq, k, version))
        seq += 1
        moved += mb
        untrained.append(k)

    def train_started() -> None:
        if untrained:
            ids = np.array(untrained, dtype=np.int64)
            trained, _ = _train(run, model, ids, np.full(ids.size, run.passes))
            for i, k in enumerate(ids):
                deltas[int(k)] = [a[i] - b for a, b in zip(trained, model, strict=True)]
            untrained.clear()

    yield run.row(0, t, model, moved, 0.0)
    for k in run.rng.choice(clock.K, run.m, replace=False):
        start(int(k), 0.0)
    while events and t < run.horizon_s and version < MAX_STEPS:
        t, _, k, v = heapq.heappop(events)
        if k not in deltas:
            train_started()
        moved += mb
        busy[k] = False
        if buf.add(deltas.pop(k), version - v):
            train_started()  # they started from the model about to change
            model = [a.astype(run.init[i].dtype)
                     for i, a in enumerate(buf.flush(model))]
            version += 1
            yield run.row(version, t, model, moved, 0.0)
        start(int(run.rng.choice(np.flatnonzero(~busy))), t)


def allocation_run(run: Run, cycle: LearningCycle, inst: Any,
                   ctx: RunContext) -> Iterator[dict[str, Any]]:
    """The method's allocation trained as the emulator trains it
    (:func:`mel_opt.training.emulate.run_cycles`: the same draws in the same order), until
    the horizon, with the bytes moved and the idle learner-seconds of each cycle."""
    s = run.settings
    x, y = run.data.x_train, run.data.y_train
    model = [a.copy() for a in run.init]
    mb = model_bytes(model)
    t = moved = idle = 0.0
    yield run.row(0, t, model, moved, idle)
    c = 0
    while t < run.horizon_s and c < MAX_STEPS:
        c += 1
        plan = cycle.configure_cycle(inst, ctx, c)
        if plan.batch == 0 or not plan.restart:
            raise UsageError("the arena trains cycles whose learners take minibatch passes "
                             "from the global model (mel-async, dab)")
        ids = plan.learner_ids
        samples = [draw(run.pools[k], int(n), run.rng)
                   for k, n in zip(ids, plan.column("samples"), strict=True)]
        batch = s.batch_size if plan.batch is None else plan.batch
        sched = make_schedule(samples, plan.column("passes"), batch, run.rng, x.dtype)
        trained = local_sgd(broadcast(model, ids.size), x, y, sched, s.lr * plan.lr_scale,
                            run.threads)
        seconds = emulated_seconds(plan, run.rng)
        agg = cycle.aggregate(plan, [Reply(int(k), float(v))
                                     for k, v in zip(ids, seconds, strict=True)], trained)
        model = agg.model
        moved += 2 * mb * ids.size
        idle += float(np.clip(agg.duration_s - seconds, 0.0, None).sum())
        t += agg.duration_s
        yield run.row(c, t, model, moved, idle)
