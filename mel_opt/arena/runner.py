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

import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.arena.availability import Availability
from mel_opt.arena.settings import ArenaSettings
from mel_opt.errors import UsageError
from mel_opt.problems.aggregate import combine
from mel_opt.problems.attacks import Attack
from mel_opt.problems.learning import CyclePlan, LearningCycle, RunContext
from mel_opt.problems.work import WorkClock
from mel_opt.schemes.base import RoundPolicy, SchemeSpec
from mel_opt.schemes.fedprox import prox_sgd
from mel_opt.schemes.oort import statistical_utility
from mel_opt.schemes.period import Estimates, estimate
from mel_opt.training.data import Dataset
from mel_opt.training.device import CPU, Device, params_on_host
from mel_opt.training.emulate import Trainer, run_cycles
from mel_opt.training.local import Schedule, broadcast, evaluate, local_sgd, make_schedule
from mel_opt.training.mlp import Params, output_loss, stacked_forward

__all__ = ["MAX_STEPS", "Run", "Tally", "Work", "allocation_run", "buffered_run", "model_bytes",
           "rounds_run", "train_from", "work_for"]

#: A run stops after this many aggregations whatever its clock says (a guard against rounds
#: that take no time).
MAX_STEPS = 100_000


@dataclass
class Tally:
    """What a run has spent so far (cumulative), beside its curve.

    Attributes
    ----------
    model_bytes : float
        One copy of the model [bytes].
    moved : float
        Model bytes moved: a download and an upload per learner put to work (dropped updates
        count: they were sent).
    idle_s : float
        Learner-seconds idle: a kept learner that has finished waits for its round's end (an
        asynchronous learner never waits).
    busy_s : float
        Learner-seconds busy: each learner's time at work (a dropped learner until its round
        ended).
    updates : float
        Sample-updates that reached the model (samples x passes of every aggregated update).
    stragglers : int
        Learner-rounds whose busy time passed the round's budget (kept or not).
    dropped : int
        Updates trained (or started) and not aggregated.
    clipped : int
        Updates the aggregation rule clipped or left out (:mod:`mel_opt.problems.aggregate`).
    kept : int
        Aggregations whose result was not finite: the previous model was kept.
    """

    model_bytes: float
    moved: float = 0.0
    idle_s: float = 0.0
    busy_s: float = 0.0
    updates: float = 0.0
    stragglers: int = 0
    dropped: int = 0
    clipped: int = 0
    kept: int = 0

    def aggregated(self, notes: int, kept: str | None) -> None:
        """Add what one aggregation's rule did: ``notes`` updates clipped or left out, and
        whether it kept the previous model."""
        self.clipped += notes
        self.kept += kept is not None

    def round(self, invited: int, busy: np.ndarray, idle: np.ndarray, stragglers: int,
              dropped: int, updates: float) -> None:
        """Add one synchronous round: ``invited`` learners at work, their busy and the kept
        ones' idle seconds."""
        self.moved += 2 * self.model_bytes * invited
        self.busy_s += float(np.sum(busy))
        self.idle_s += float(np.clip(idle, 0.0, None).sum())
        self.stragglers += stragglers
        self.dropped += dropped
        self.updates += updates

    def columns(self) -> dict[str, float]:
        return {"bytes": self.moved, "idle_s": self.idle_s, "busy_s": self.busy_s,
                "updates": self.updates, "stragglers": self.stragglers,
                "dropped": self.dropped, "clipped": self.clipped, "kept": self.kept}


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
    validation: tuple[np.ndarray, np.ndarray] | None = None
    allocated: np.ndarray | None = None
    availability: Availability | None = None
    attack: Attack | None = None
    device: Device = CPU

    def row(self, step: int, t: float, model: Params, tally: Tally) -> dict[str, Any]:
        """The run's state after aggregation ``step`` at virtual time ``t``: the model's
        loss and accuracy on the test split (and, as ``val_accuracy``, on the validation
        split, where the run has one) and the resources spent so far."""
        loss, acc = evaluate(model, self.data.x_test, self.data.y_test, device=self.device)
        out = {"step": step, "time_s": t, "loss": loss, "accuracy": acc, **tally.columns()}
        if self.validation is not None:
            out["val_accuracy"] = evaluate(model, *self.validation, device=self.device)[1]
        return out

    @property
    def m(self) -> int:
        """Learners a round aggregates (and fedbuff's concurrency)."""
        return max(1, min(self.clock.K, round(self.settings.participation * self.clock.K)))

    @property
    def passes(self) -> float:
        s = self.settings.passes
        return float(s) if s is not None else self.clock.passes

    def fixed_work(self, learners: np.ndarray) -> np.ndarray:
        """The passes of the fixed local work of ``learners``: :attr:`passes` each, or, with
        the ``local_steps`` option, that many minibatch steps over each one's data (a pass is
        ``ceil(n / batch)`` steps)."""
        ids = np.asarray(learners, dtype=np.int64)
        steps = self.settings.local_steps
        if steps is None:
            return np.full(ids.size, self.passes)
        n = self.sizes[ids]
        B = self.settings.batch_size
        full, rest = np.divmod(steps, np.maximum(-(-n // B), 1))
        return full + rest * B / np.maximum(n, 1)

    @property
    def options(self) -> ArenaSettings:
        return self.settings

    @functools.cached_property
    def sizes(self) -> np.ndarray:
        """Samples each learner holds (its pool's size: computed once, the pools are the
        run's for good)."""
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

    def estimates(self, eta: float, model: Params | None = None) -> Estimates:
        """Wang et al.'s bound constants at ``model`` (None: the starting model) on the
        learners' pools (:func:`mel_opt.schemes.period.estimate`)."""
        model = params_on_host(self.device, list(self.init if model is None else model))
        return estimate(model, np.asarray(self.data.x_train), np.asarray(self.data.y_train),
                        self.pools, eta)


def model_bytes(model: Params) -> float:
    """Bytes of one copy of the model as sent (its arrays' bytes)."""
    return float(sum(a.nbytes for a in model))


@dataclass(frozen=True)
class Work:
    """What a fixed local work is for each learner of a round, in whole minibatch steps.

    ``p`` passes over a learner's ``n`` samples in minibatches of ``B`` are ``floor(p)`` whole
    passes (``ceil(n / B)`` steps each, the last minibatch of a pass short), then as many full
    minibatches of one more pass as fit in the rest, ``floor((p - floor(p)) n / B)``. Training
    runs exactly these steps, and the clock charges exactly their samples (:attr:`passes`, never
    more than ``p``), so a fraction of a step is neither trained nor charged.

    Attributes
    ----------
    steps : ndarray of int
        Minibatch steps of each learner.
    updates : ndarray of int
        Sample-updates of each learner (the samples of its steps).
    passes : ndarray
        ``updates / n``: the passes the clock charges.
    """

    steps: np.ndarray
    updates: np.ndarray
    passes: np.ndarray


def work_for(run: Run, learners: np.ndarray, passes: np.ndarray | float) -> Work:
    """The whole-step :class:`Work` of ``learners`` for ``passes`` each.

    Examples: 100 samples in minibatches of 32 make a pass of 4 steps (32, 32, 32, 4); 1.5
    passes are 4 steps and floor(50 / 32) = 1 more, 100 + 32 = 132 sample-updates, 1.32
    passes charged.
    """
    ids = np.asarray(learners, dtype=np.int64)
    n = run.sizes[ids]
    B = run.settings.batch_size
    per_epoch = -(-n // B)
    p = np.clip(np.broadcast_to(np.asarray(passes, dtype=float), ids.shape), 0.0, None)
    full = np.floor(p + 1e-9)
    part = np.floor(np.clip(p - full, 0.0, None) * n / B + 1e-9)
    steps = (full * per_epoch + part).astype(np.int64)
    updates = (full * n + part * B).astype(np.int64)
    return Work(steps, updates, updates / np.maximum(n, 1))


def train_from(run: Run, model: Params, learners: np.ndarray, work: Work,
               mu: float = 0.0) -> Params:
    """The learners' local models after ``work`` from ``model`` (stacked)."""
    s = run.settings
    ids = np.asarray(learners, dtype=np.int64)
    per_epoch = -(-run.sizes[ids] // s.batch_size)
    epochs = -(-work.steps // np.maximum(per_epoch, 1))
    sched = make_schedule([run.pools[int(k)] for k in ids], epochs, s.batch_size, run.rng,
                          run.data.x_train.dtype)
    sched = Schedule(sched.index, sched.weight, np.minimum(sched.steps, work.steps))
    start = broadcast(model, ids.size, run.device)
    x, y = run.data.x_train, run.data.y_train
    if mu > 0:
        return prox_sgd(start, x, y, sched, s.lr, mu, run.device)
    return local_sgd(start, x, y, sched, s.lr, run.threads, run.device)


def rounds_run(run: Run, policy: RoundPolicy) -> Iterator[dict[str, Any]]:
    """Synchronous rounds of ``policy``'s scheme until the horizon: each round the policy
    invites, sets the work (whole minibatch steps, :func:`work_for`), closes the round on the
    noisy times and learns from what it observed; the kept learners' models (a liar's as it
    lies, :attr:`Run.attack`) are combined by the run's ``aggregation`` with their data sizes
    as weights (FedAvg's n_k, whatever work each did; the rule's result kept only where it is
    finite)."""
    clock = run.clock
    model = [a.copy() for a in run.init]
    tally = Tally(model_bytes(model))
    yield run.row(0, 0.0, model, tally)
    t = 0.0
    r = 0
    avail = run.availability
    while t < run.horizon_s and r < MAX_STEPS:
        r += 1
        ids, exploited = policy.invite(r)
        if avail is not None:  # offline at the round's start: not invited
            ids = ids[avail.online(ids, t)]
            exploited = exploited[np.isin(exploited, ids)]
            if not ids.size:  # nobody online: the round's budget passes without work
                t += clock.budget_s
                yield run.row(r, t, model, tally)
                continue
        work = work_for(run, ids, policy.work(ids))
        times = clock.noisy(ids, clock.seconds(ids, work.passes), run.rng)
        close = policy.close(ids, times, work.passes)
        if close.work is not None:  # stopped at the round's end: what it completed
            work = work_for(run, ids, close.work)
        busy = np.minimum(times, close.duration_s)
        if avail is not None:  # offline before it finished: its update is lost
            left = avail.left(ids, t)
            gone = left < busy
            busy = np.minimum(busy, left)
            close = dataclasses.replace(close, kept=close.kept & ~gone)
            tally.moved -= tally.model_bytes * int(gone.sum())  # no upload
        kept = close.kept & (work.steps > 0)
        tally.round(ids.size, busy, close.duration_s - times[kept],
                    int((times > clock.budget_s * (1 + 1e-9)).sum()),
                    int(ids.size - kept.sum()), float(work.updates[kept].sum()))
        policy.learned(model, ids, times, close, r, exploited)
        if kept.any():
            chosen = ids[kept]
            part = Work(work.steps[kept], work.updates[kept], work.passes[kept])
            trained = train_from(run, model, chosen, part, policy.mu)
            if run.attack is not None:
                trained = run.attack.lie(chosen, trained, model, r)
            got = combine(trained, run.sizes[chosen].astype(float), model,
                          run.settings.aggregation)
            tally.aggregated(len(got.notes), got.kept)
            if got.model is not None:
                model = got.model
        t += close.duration_s
        yield run.row(r, t, model, tally)


def buffered_run(run: Run, spec: SchemeSpec) -> list[dict[str, Any]]:
    """An asynchronous scheme's server loop (``spec.serve``: FedBuff's) on the virtual
    clock's learners until the horizon, with the work, weights, buffer and concurrency of the
    scheme's work plan (``spec.plan``), a row per server step."""
    from mel_opt.arena.virtual import VirtualWorkers

    assert spec.serve is not None and spec.plan is not None
    plan = spec.plan(run)
    workers = VirtualWorkers(run, plan)
    rows = [{**run.row(0, 0.0, run.init, workers.tally), **plan.row()}]

    def on_step(step: Any, model: Params) -> None:
        workers.tally.aggregated(len(step.notes), step.kept)
        workers.stepped()
        rows.append({**run.row(step.version, workers.now, model, workers.tally), **plan.row()})
        plan.stepped(model, workers.now)

    spec.serve(workers, plan.nodes, [a.copy() for a in run.init],
               buffer=plan.buffer, concurrency=plan.concurrency, steps=MAX_STEPS,
               server_lr=run.settings.server_lr, aggregation=run.settings.aggregation,
               pick=workers.pick, until=lambda: workers.now >= run.horizon_s,
               on_step=on_step, weigh=plan.weight)
    return rows


def allocation_run(run: Run, cycle: LearningCycle, inst: Any,
                   ctx: RunContext) -> Iterator[dict[str, Any]]:
    """The method's allocation trained by the emulator's own cycle loop
    (:func:`mel_opt.training.emulate.run_cycles`: the same draws in the same order) until the
    horizon, observed for the resources of each cycle (:class:`Tally`; a straggler is a
    learner whose noisy time passed the budget: the cycle waited for it)."""
    s = run.settings
    tally = Tally(model_bytes(run.init))
    budget = run.clock.budget_s
    avail = run.availability
    start = [0.0]  # the cycle's start on the clock (availability)

    def observe(plan: CyclePlan, seconds: np.ndarray, duration_s: float) -> None:
        if plan.batch == 0 or not plan.restart:
            raise UsageError("the arena trains cycles whose learners take minibatch passes "
                             "from the global model")
        work = plan.column("samples") * plan.column("passes")
        if avail is None:
            tally.round(len(plan.learners), np.minimum(seconds, duration_s),
                        duration_s - seconds, int((seconds > budget * (1 + 1e-9)).sum()), 0,
                        float(work.sum()))
            return
        # offline at the start: not invited; gone before it finished: its update lost
        left = avail.left(plan.learner_ids, start[0])
        here, came = left > 0, left >= seconds
        start[0] += duration_s
        tally.round(int(here.sum()), np.minimum(np.minimum(seconds, duration_s), left)[here],
                    (duration_s - seconds)[came], int((seconds[here] > budget * (1 + 1e-9)).sum()),
                    int((here & ~came).sum()), float(work[came].sum()))
        tally.moved -= tally.model_bytes * int((here & ~came).sum())  # sent no update

    def arrives(t: float, ids: np.ndarray, seconds: np.ndarray) -> np.ndarray:
        assert avail is not None
        return ~avail.lost(ids, t, seconds)

    trainer = Trainer(run.data, run.init, s.lr, s.batch_size, run.threads, run.validation,
                      run.device)
    for rec in run_cycles(trainer, cycle, inst, ctx, run.pools, None, run.rng,
                          observe=observe, arrives=None if avail is None else arrives):
        tally.aggregated(rec.clipped, rec.kept)
        row = {"step": rec.cycle, "time_s": rec.time_s, "loss": rec.loss,
               "accuracy": rec.accuracy, **tally.columns()}
        if rec.val_accuracy is not None:
            row["val_accuracy"] = rec.val_accuracy
        yield row
        if rec.time_s >= run.horizon_s or rec.cycle >= MAX_STEPS:
            return
