"""The arena's virtual-clock runs: every scheme trained with real local SGD on real data.

Every (scheme, seed) run starts from the same model (``init_params(layers, seed)``), the same
data set and partition rule, learning rate and minibatch, and reads each learner's time from
the instance's own model (the problem's work clock, :class:`~mel_opt.problems.work.WorkClock`).
What differs is the scheme (:mod:`mel_opt.schemes`), and each loop is written once:

- mel_opt's allocation (a method of the problem: mel-async ``exact``, dab ``dab``...) is the
  emulator's own cycle loop (:func:`mel_opt.training.emulate.run_cycles`, the same random
  draws in the same order, so its curve is ``melopt train``'s) with an observer that counts
  the bytes moved and the idle learner-seconds: learners hold the data their allocation gives
  them and run its plan every cycle (:func:`allocation_run`);
- the alternatives hold equal shares of the data (split by the same partition rule): a
  synchronous scheme's rounds ask its :class:`~mel_opt.schemes.base.RoundPolicy` who is
  invited, what each does and who is kept (:func:`rounds_run`); FedBuff is the server loop of
  :func:`mel_opt.schemes.fedbuff.run`, the same that serves live learners, here on the
  virtual clock's learners (:class:`~mel_opt.arena.virtual.VirtualWorkers`,
  :func:`buffered_run`).

Each run runs until its clock passes the horizon (``cycles`` round budgets) and yields rows of
the cumulative state after every aggregation: virtual time, validation loss and accuracy,
model bytes moved (a download and an upload per learner that takes part; dropped updates
count: they were sent) and learner-seconds idle (a learner that has finished waits for the
end of its round; an asynchronous learner never waits).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.arena.settings import ArenaSettings
from mel_opt.errors import UsageError
from mel_opt.problems.learning import CyclePlan, LearningCycle, RunContext, weighted_average
from mel_opt.problems.work import WorkClock
from mel_opt.schemes.base import RoundPolicy, SchemeSpec
from mel_opt.schemes.fedprox import prox_sgd
from mel_opt.schemes.oort import statistical_utility
from mel_opt.training.data import Dataset
from mel_opt.training.emulate import Trainer, run_cycles
from mel_opt.training.local import broadcast, evaluate, local_sgd, make_schedule
from mel_opt.training.mlp import Params, output_loss, stacked_forward
from mel_opt.training.partition import draw

__all__ = ["MAX_STEPS", "Run", "allocation_run", "buffered_run", "model_bytes", "rounds_run",
           "train_from"]

#: A run stops after this many aggregations whatever its clock says (a guard against rounds
#: that take no time).
MAX_STEPS = 100_000


@dataclass
class Run:
    """What every scheme's run reads: data, start, pools, clock and settings (the
    :class:`~mel_opt.schemes.base.RoundContext` of a synchronous scheme's policy)."""

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

    @property
    def options(self) -> ArenaSettings:
        return self.settings

    @property
    def sizes(self) -> np.ndarray:
        return np.array([p.size for p in self.pools], dtype=np.int64)

    def utilities(self, model: Params, learners: np.ndarray) -> np.ndarray:
        """Oort's statistical utility of each learner: its samples' losses at ``model``."""
        x, y = self.data.x_train, self.data.y_train
        stacked = [a[None] for a in model]
        out = []
        for k in learners:
            rows = self.pools[int(k)]
            scores = stacked_forward(stacked, x[rows][None])[-1]
            out.append(statistical_utility(
                output_loss(stacked).losses(scores, y[rows][None])[0]))
        return np.array(out)


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


def train_from(run: Run, model: Params, learners: np.ndarray, passes: np.ndarray,
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


def rounds_run(run: Run, policy: RoundPolicy) -> Iterator[dict[str, Any]]:
    """Synchronous rounds of ``policy``'s scheme until the horizon: each round the policy
    invites, sets the work, closes the round on the noisy times and learns from the kept
    learners; the kept learners' models are averaged by their samples."""
    clock = run.clock
    model = [a.copy() for a in run.init]
    mb = model_bytes(model)
    t = moved = idle = 0.0
    yield run.row(0, t, model, moved, idle)
    r = 0
    while t < run.horizon_s and r < MAX_STEPS:
        r += 1
        ids, exploited = policy.invite(r)
        passes = policy.work(ids)
        times = clock.noisy(ids, clock.seconds(ids, passes), run.rng)
        close = policy.close(times, passes)
        kept = close.kept
        moved += 2 * mb * ids.size
        idle += float(np.clip(close.duration_s - times[kept], 0.0, None).sum())
        policy.learned(model, ids, times, close, r, exploited)
        if kept.any():
            trained, n_k = train_from(run, model, ids[kept], passes[kept], policy.mu)
            model = weighted_average(trained, n_k)
        t += close.duration_s
        yield run.row(r, t, model, moved, idle)


def buffered_run(run: Run, spec: SchemeSpec) -> list[dict[str, Any]]:
    """An asynchronous scheme's server loop (``spec.serve``: FedBuff's) on the virtual
    clock's learners until the horizon: ``m`` learners training at once, a row per server
    step."""
    from mel_opt.arena.virtual import VirtualWorkers

    assert spec.serve is not None
    s = run.settings
    workers = VirtualWorkers(run)
    rows = [run.row(0, 0.0, run.init, 0.0, 0.0)]

    def on_step(step: Any, model: Params) -> None:
        workers.stepped()
        rows.append(run.row(step.version, workers.now, model, workers.moved, 0.0))

    spec.serve(workers, range(run.clock.K), [a.copy() for a in run.init],
               buffer=min(s.buffer, run.m), concurrency=run.m, steps=MAX_STEPS,
               server_lr=s.server_lr, pick=workers.pick,
               until=lambda: workers.now >= run.horizon_s, on_step=on_step)
    return rows


def allocation_run(run: Run, cycle: LearningCycle, inst: Any,
                   ctx: RunContext) -> Iterator[dict[str, Any]]:
    """The method's allocation trained by the emulator's own cycle loop
    (:func:`mel_opt.training.emulate.run_cycles`: the same draws in the same order) until the
    horizon, observed for the bytes moved and the idle learner-seconds of each cycle."""
    s = run.settings
    mb = model_bytes(run.init)
    tally = {"bytes": 0.0, "idle_s": 0.0}

    def observe(plan: CyclePlan, seconds: np.ndarray, duration_s: float) -> None:
        if plan.batch == 0 or not plan.restart:
            raise UsageError("the arena trains cycles whose learners take minibatch passes "
                             "from the global model")
        tally["bytes"] += 2 * mb * len(plan.learners)
        tally["idle_s"] += float(np.clip(duration_s - seconds, 0.0, None).sum())

    trainer = Trainer(run.data, run.init, s.lr, s.batch_size, run.threads)
    for rec in run_cycles(trainer, cycle, inst, ctx, run.pools, None, run.rng,
                          observe=observe):
        yield {"step": rec.cycle, "time_s": rec.time_s, "loss": rec.loss,
               "accuracy": rec.accuracy, **tally}
        if rec.time_s >= run.horizon_s or rec.cycle >= MAX_STEPS:
            return
