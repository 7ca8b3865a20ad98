"""The one cycle loop of the emulator: every problem trained through its learning cycle.

:func:`run_cycles` drives any problem that declares a
:class:`~mel_opt.problems.learning.LearningCycle`: each global cycle it asks the problem for the
cycle's plan (``configure_cycle``: which learner trains how many passes over how many samples),
trains every learner of the plan at once on a real model and real data
(:func:`mel_opt.training.local.local_sgd`), emulates each learner's busy time from the plan's
prediction (times a run-to-run noise factor where the plan gives a spread), and hands the
trained models to the problem's ``aggregate``, which returns the new global model and how long
the cycle lasted on the problem's clock. It yields one :class:`CycleRecord` per cycle. The
clock is virtual: nothing here measures wall time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.problems.learning import CyclePlan, LearningCycle, Reply, RunContext
from mel_opt.stats import lognormal_factors
from mel_opt.training.data import Dataset
from mel_opt.training.device import CPU, Device
from mel_opt.training.local import (
    broadcast,
    evaluate,
    local_sgd,
    make_schedule,
    one_step_schedule,
)
from mel_opt.training.mlp import Params, stacked_gradients
from mel_opt.training.partition import draw


@dataclass(frozen=True)
class CycleRecord:
    """The state after one global cycle.

    Attributes
    ----------
    cycle : int
        1, 2, ... (0 is the untrained model).
    time_s : float
        Virtual time since the start [s].
    loss, accuracy : float
        The model's own loss (cross-entropy, or the hinge of ``svm``) and the accuracy of
        the global model on the validation set.
    truancy : float or None
        Time of this cycle past the deadline, in % of the deadline (problems with one).
    val_accuracy : float or None
        The accuracy on a validation split held out of the training set, where the run has
        one (the arena's tuning picks by it).
    clipped : int
        Updates of this cycle that did not enter as sent (clipped or left out by the
        aggregation rule).
    kept : str or None
        Why this cycle kept the previous model (its aggregate was not finite); None: it did
        not.
    """

    cycle: int
    time_s: float
    loss: float
    accuracy: float
    truancy: float | None = None
    val_accuracy: float | None = None
    clipped: int = 0
    kept: str | None = None


@dataclass(frozen=True)
class Trainer:
    """Data, starting model and SGD settings of a run.

    Attributes
    ----------
    data : Dataset
    init : list of ndarray
        Starting model (no learner axis).
    lr : float
        Learning rate (times the plan's ``lr_scale``).
    batch_size : int
        Local minibatch size, unless the plan sets its own.
    threads : int
        Threads that train the learners of a cycle
        (:func:`~mel_opt.training.local.local_sgd`'s ``workers``).
    validation : (features, labels) or None
        A validation split held out of the training set, also evaluated at every record.
    device : Device
        Where the learners train and the model is evaluated
        (:mod:`mel_opt.training.device`); the model between cycles stays on the host.
    """

    data: Dataset
    init: Params
    lr: float
    batch_size: int
    threads: int = 1
    validation: tuple[np.ndarray, np.ndarray] | None = None
    device: Device = CPU

    def record(self, cycle: int, t: float, model: Params,
               truancy: float | None = None, clipped: int = 0,
               kept: str | None = None) -> CycleRecord:
        loss, acc = evaluate(model, self.data.x_test, self.data.y_test, device=self.device)
        val = None if self.validation is None else evaluate(model, *self.validation,
                                                            device=self.device)[1]
        return CycleRecord(cycle, t, loss, acc, truancy, val, clipped, kept)


def emulated_seconds(plan: CyclePlan, rng: np.random.Generator) -> np.ndarray:
    """Each learner's busy time: the plan's prediction, times a lognormal factor with mean 1
    and the learner's ``time_cv`` where the plan gives one
    (:func:`mel_opt.stats.lognormal_factors`) [s]."""
    predicted = plan.column("predicted_s").astype(float)
    cvs = [p.time_cv for p in plan.learners]
    if all(cv is None for cv in cvs):
        return predicted
    cv = np.array([0.0 if c is None else c for c in cvs])
    return predicted * lognormal_factors(cv, rng.standard_normal(predicted.size))


def averaged_step(model: Params, x: np.ndarray, y: np.ndarray, samples: list[np.ndarray],
                  weights: np.ndarray, lr: float, device: Device = CPU) -> Params:
    """K learners' one full-batch step each from ``model``, averaged with ``weights``: computed
    as one step.

    sum_k (w_k / W) (P - lr g_k) = P - lr sum_k (w_k / W) g_k, and with g_k the gradient of
    learner k's mean loss over its n_k samples the sum is one gradient over all samples, each
    weighted (w_k / W) / n_k (paper 004, Eq. (1)-(2), with w_k = B_k). Exact, and one pass
    instead of K. On another ``device`` the gradient is computed there (the samples'
    rows and weights go up, the gradient comes back; the step itself is the host's).
    """
    w = np.asarray(weights, dtype=float)
    counts = np.array([s.size for s in samples])
    keep = counts > 0
    per_sample = np.repeat(np.where(keep, w / w[keep].sum() / np.maximum(counts, 1), 0.0),
                           counts)
    rows = np.concatenate(samples)
    if not device.host:
        at = device.put(rows)
        g = stacked_gradients([device.put(a[None]) for a in model],
                              device.resident(x)[at][None], device.resident(y)[at][None],
                              device.put(per_sample.astype(x.dtype)[None]))
        g = [device.get(ga) for ga in g]
    else:
        g = stacked_gradients([a[None] for a in model], x[rows][None], y[rows][None],
                              per_sample.astype(x.dtype)[None])
    return [a - lr * ga[0] for a, ga in zip(model, g, strict=True)]


def _averages(cycle: LearningCycle) -> bool:
    """True when the cycle aggregates by the default federated averaging."""
    return type(cycle).aggregate is LearningCycle.aggregate


#: ``observe(plan, seconds, duration_s)``: a cycle's plan, each of its learners' emulated busy
#: time [s] and the cycle's length on the clock [s], after the cycle is aggregated.
Observer = Callable[[CyclePlan, np.ndarray, float], None]
#: ``(start time, the plan's learner ids, their seconds) -> bool per learner``: whose update
#: reaches the server (:func:`run_cycles`).
Arrives = Callable[[float, np.ndarray, np.ndarray], np.ndarray]


def run_cycles(tr: Trainer, cycle: LearningCycle, inst: Any, ctx: RunContext,
               pools: list[np.ndarray], cycles: int | None,
               rng: np.random.Generator,
               observe: Observer | None = None,
               arrives: Arrives | None = None) -> Iterator[CycleRecord]:
    """Train ``cycles`` global cycles of ``inst``'s problem under ``ctx``'s allocation (None:
    until the caller stops asking: the arena runs to a horizon of virtual time).

    Parameters
    ----------
    tr : Trainer
    cycle : LearningCycle
        The problem's learning cycle.
    inst : instance
    ctx : RunContext
        The scheme, its solution, the seed and the local data set sizes.
    pools : list of K int arrays
        Training-set rows of each learner's local data.
    cycles : int or None
    rng : numpy Generator
        Draws the samples of each cycle, the minibatch shuffles and the time noise.
    observe : callable, optional
        Called once per cycle before its record is yielded (:data:`Observer`): what the arena
        counts beside the curve (bytes moved, idle learner-seconds).
    arrives : callable, optional
        ``arrives(t, learners, seconds)``: whose update reaches the server of a cycle that
        starts at ``t`` (:data:`Arrives`; the arena's availability). The others' updates are
        left out of the average; the cycle lasts as long as with them (the server gives up
        on them when they would have answered). Minibatch cycles only.
    """
    x, y = tr.data.x_train, tr.data.y_train
    model = [a.copy() for a in tr.init]
    own: Params | None = None  # every learner's own model, where learners keep theirs
    t = 0.0
    yield tr.record(0, t, model)
    for c in (range(1, cycles + 1) if cycles is not None else itertools.count(1)):
        plan = cycle.configure_cycle(inst, ctx, c)
        if ctx.time_cv:  # the run's spread for learners whose plan gives none
            plan = plan.with_spread(ctx.time_cv)
        ids = plan.learner_ids
        samples = [draw(pools[k], int(n), rng) for k, n in zip(ids, plan.column("samples"),
                                                                  strict=True)]
        batch = tr.batch_size if plan.batch is None else plan.batch
        if batch == 0 and plan.restart and _averages(cycle) and ctx.aggregation == "mean" \
                and ctx.attack is None:
            # one full-batch step per learner, then FedAvg: the same as one weighted step
            model = averaged_step(model, x, y, samples, plan.column("weight"),
                                  tr.lr * plan.lr_scale, tr.device)
            seconds = emulated_seconds(plan, rng)
            clock, truancy, _ = cycle.close(plan, [Reply(int(k), float(s)) for k, s in
                                                   zip(ids, seconds, strict=True)])
            if observe is not None:
                observe(plan, seconds, clock)
            t += clock
            yield tr.record(c, t, model, truancy)
            continue
        if batch == 0:
            sched = one_step_schedule(samples, x.dtype)
        else:
            sched = make_schedule(samples, plan.column("passes"), batch, rng, x.dtype)
        if plan.restart or own is None:
            start = broadcast(model, ids.size, tr.device)
        else:
            start = [a[ids] for a in own]
        trained = local_sgd(start, x, y, sched, tr.lr * plan.lr_scale, tr.threads, tr.device)
        if ctx.attack is not None:  # liars send something else (mel_opt.problems.attacks)
            trained = ctx.attack.lie(ids, trained, model, c)
        if not plan.restart:
            if own is None:
                own = broadcast(model, len(pools))
            for a, b in zip(own, trained, strict=True):
                a[ids] = b
        seconds = emulated_seconds(plan, rng)
        replies = [Reply(int(k), float(s)) for k, s in zip(ids, seconds, strict=True)]
        came = None if arrives is None else arrives(t, ids, seconds)
        if came is not None and not came.all():
            duration, truancy, _ = cycle.close(plan, replies)
            if came.any():
                model = cycle.aggregate(plan, [r for r, a in zip(replies, came, strict=True)
                                               if a], [m[came] for m in trained], model,
                                        ctx.aggregation).model
            if observe is not None:
                observe(plan, seconds, duration)
            t += duration
            yield tr.record(c, t, model, truancy)
            continue
        agg = cycle.aggregate(plan, replies, trained, model, ctx.aggregation)
        if observe is not None:
            observe(plan, seconds, agg.duration_s)
        model = agg.model
        t += agg.duration_s
        yield tr.record(c, t, model, agg.truancy, len(agg.notes), agg.kept)
