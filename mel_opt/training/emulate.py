"""One training run under one allocation: the global cycle of each problem, as the papers run it.

Every runner trains a real model on real data and advances a virtual clock by the problem's
own latency model (:mod:`mel_opt.training.latency`); it yields one :class:`CycleRecord` per
global cycle (communication round). The K learners of a cycle train at once
(:func:`mel_opt.training.local.local_sgd`).

- :func:`run_local_cycles` (mel-async, paper 000 Section II; dab, thesis Ch. 3): learner k
  gets its data (d_k samples, or a_k shards), runs its local passes (tau_k updates, or mu
  passes) of minibatch SGD from the current global model, and the orchestrator averages the
  local models weighted by the data sizes. mel-async: the cycle lasts T. dab: the cycle ends
  when the last update arrives, max_k eta_k (Eq. 3.4), each eta_k times a run-to-run noise
  factor when one is given; truancy is the time past the deadline in % of the deadline.
- :func:`run_feel` (paper 004): per round device k computes the gradient of its mean loss on
  B_k samples of its local data, the server averages them weighted by B_k (Eq. (1)) and takes
  one step (Eq. (2)), with the learning rate scaled as sqrt(B) (Section III-A). The round lasts
  the model's latency. The Table II schemes that are not allocations of the problem (individual
  learning, model-based FEEL) are :func:`run_feel_local`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from mel_opt.training.data import Dataset
from mel_opt.training.local import (
    average,
    broadcast,
    evaluate,
    local_sgd,
    make_schedule,
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
        Cross-entropy and accuracy of the global model on the validation set.
    truancy : float or None
        Time of this cycle past the deadline, in % of the deadline (dab only).
    """

    cycle: int
    time_s: float
    loss: float
    accuracy: float
    truancy: float | None = None


@dataclass(frozen=True)
class LocalPlan:
    """What every learner does in a cycle of :func:`run_local_cycles`.

    Attributes
    ----------
    samples : ndarray of int, shape (K,)
        Samples learner k trains on per cycle (0: the learner does not take part).
    passes : ndarray of int, shape (K,)
        Local passes (tau_k updates, or mu passes) per cycle.
    weights : ndarray, shape (K,)
        Aggregation weights (d_k or a_k).
    cycle_time : callable
        rng -> (duration of the cycle [s], truancy [%] or None).
    """

    samples: np.ndarray
    passes: np.ndarray
    weights: np.ndarray
    cycle_time: Callable[[np.random.Generator], tuple[float, float | None]]


@dataclass(frozen=True)
class Trainer:
    """Data, starting model and SGD settings shared by the runners.

    Attributes
    ----------
    data : Dataset
    init : list of ndarray
        Starting model (no learner axis).
    lr : float
        Learning rate.
    batch_size : int
        Local minibatch size of the passes of :func:`run_local_cycles`.
    """

    data: Dataset
    init: Params
    lr: float
    batch_size: int

    def record(self, cycle: int, t: float, model: Params,
               truancy: float | None = None) -> CycleRecord:
        loss, acc = evaluate(model, self.data.x_test, self.data.y_test)
        return CycleRecord(cycle, t, loss, acc, truancy)


def run_local_cycles(tr: Trainer, plan: LocalPlan, pools: list[np.ndarray], cycles: int,
                     rng: np.random.Generator) -> Iterator[CycleRecord]:
    """Local passes and weighted averaging, ``cycles`` times (mel-async and dab)."""
    x, y = tr.data.x_train, tr.data.y_train
    used = np.flatnonzero(plan.samples > 0)
    model = [a.copy() for a in tr.init]
    t = 0.0
    yield tr.record(0, t, model)
    for c in range(1, cycles + 1):
        samples = [draw(pools[k], int(plan.samples[k]), rng) for k in used]
        sched = make_schedule(samples, plan.passes[used], tr.batch_size, rng,
                              tr.data.x_train.dtype)
        local = local_sgd(broadcast(model, used.size), x, y, sched, tr.lr)
        model = average(local, plan.weights[used])
        dt, truancy = plan.cycle_time(rng)
        t += dt
        yield tr.record(c, t, model, truancy)


def global_step(model: Params, x: np.ndarray, y: np.ndarray, rows: np.ndarray,
                lr: float) -> Params:
    """One server step with the B_k-weighted average of the devices' gradients (Eq. (1)-(2)).

    (1/B) sum_k B_k g_k, with g_k the gradient of device k's mean loss over its B_k samples, is
    the gradient of the mean loss over all B samples of the round, computed here in one pass.
    """
    w = np.full((1, rows.size), 1.0 / rows.size, dtype=x.dtype)
    g = stacked_gradients([a[None] for a in model], x[rows][None], y[rows][None], w)
    return [a - lr * ga[0] for a, ga in zip(model, g, strict=True)]


def run_feel(tr: Trainer, rounds: Callable[[int], tuple[np.ndarray, float]],
             pools: list[np.ndarray], cycles: int, rng: np.random.Generator,
             lr_batch: float) -> Iterator[CycleRecord]:
    """Gradient-averaging FEEL rounds (paper 004, Steps 1-5 of Section II-A).

    Parameters
    ----------
    rounds : callable
        round number -> (batches B_k, round latency [s]).
    lr_batch : float
        The global batch at which the learning rate is ``tr.lr``; a round with global batch B
        steps with lr sqrt(B / lr_batch) (the scaling law eta = O(sqrt(B)) of Section III-A).
    """
    x, y = tr.data.x_train, tr.data.y_train
    model = [a.copy() for a in tr.init]
    t = 0.0
    yield tr.record(0, t, model)
    for c in range(1, cycles + 1):
        batch, latency = rounds(c)
        rows = np.concatenate([draw(p, int(b), rng) for p, b in zip(pools, batch, strict=True)])
        model = global_step(model, x, y, rows, tr.lr * float(np.sqrt(rows.size / lr_batch)))
        t += latency
        yield tr.record(c, t, model)


def run_feel_local(tr: Trainer, pools: list[np.ndarray], cycles: int,
                   rng: np.random.Generator, latency: Callable[[int], float],
                   average_every_round: bool) -> Iterator[CycleRecord]:
    """Model-based FEEL and individual learning (paper 004, Section VI-C).

    Every round each device runs one local epoch over its whole local data set (minibatches of
    ``tr.batch_size``). Model-based FEEL (``average_every_round``) then averages the models
    (weighted by data size) and sends the average back: the next round starts from it.
    Individual learning never does: each device keeps training its own model; the record of
    round r is the average of the local models after r epochs (the one aggregation the scheme
    makes, had it stopped there).

    Parameters
    ----------
    latency : callable
        round number -> virtual time since the start at the end of that round [s].
    """
    x, y = tr.data.x_train, tr.data.y_train
    K = len(pools)
    sizes = np.array([p.size for p in pools], dtype=float)
    local = broadcast(tr.init, K)
    yield tr.record(0, 0.0, [a.copy() for a in tr.init])
    for c in range(1, cycles + 1):
        sched = make_schedule(pools, np.ones(K, dtype=np.int64), tr.batch_size, rng,
                              x.dtype)
        local = local_sgd(local, x, y, sched, tr.lr)
        model = average(local, sizes)
        if average_every_round:
            local = broadcast(model, K)
        yield tr.record(c, latency(c), model)
