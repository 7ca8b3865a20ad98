"""What a live learner does with a message: its local data, the probe, one round of training.

Pure functions over numpy (no Flower): :func:`answer_probe` and :func:`answer_train` take a
typed order (:mod:`mel_opt.problems.messages`) and return the typed report. The Flower client app
(:mod:`mel_opt.live.client`) and the in-process learners (:mod:`mel_opt.live.inprocess`) both
call them, so a learner behaves the same under either. The learner trains the emulator's own
model code: the MLP of :mod:`mel_opt.training.mlp` with the batched SGD of
:mod:`mel_opt.training.local`, here with one learner on the learner axis, and one BLAS thread
(a learner is one core's work; scipy's BLAS is loaded first so the limit covers it too, which
matters where every message is a fresh process).

What a learner does beyond training as ordered is its problem's
(:class:`~mel_opt.problems.learning.LearnerSide`): a dab learner plans its own work from the
order's brief and its own speed; an adaptive-tau learner reports gradient statistics.

A learner holds one part of the training set, chosen by its partition id: the set is split
into ``num_partitions`` equal parts (IID, label shards or Dirichlet, as the partition says)
with a seed every learner shares, so the parts never overlap and every process computes the
same split. Each round it trains on the number of samples it is asked for, drawn from its
part (its whole part plus random repeats when asked for more, as the thesis duplicates data).
It keeps its own estimate of its seconds per sample-pass (the same exponentially weighted
average, with the run's weight ``alpha``, as the server's).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from mel_opt.blas import blas_threads
from mel_opt.live.estimates import StartCost, fold, start_cost
from mel_opt.problems import get_problem
from mel_opt.problems.learning import LearnerSide
from mel_opt.problems.messages import DataSpec, ProbeOrder, ProbeReport, TrainOrder, TrainReport
from mel_opt.training.data import Dataset, load_dataset
from mel_opt.training.local import local_sgd, make_schedule, one_step_schedule
from mel_opt.training.mlp import Params, init_params, layers_for
from mel_opt.training.partition import (
    draw,
    make_pools,
    parse_partition,
    proportional_sizes,
)

if TYPE_CHECKING:
    from mel_opt.schemes.period import LearnerConstants

__all__ = ["CONSTANTS_SAMPLES", "SPEED", "LocalData", "Memory", "Recording", "Trained",
           "answer_at_speed", "answer_probe", "answer_train", "dataset", "local_data",
           "probe_constants", "probe_report", "probe", "round_seed", "ship", "shipped_data",
           "train_cycle", "with_constants"]

R = TypeVar("R")

#: The memory key of the learner's own seconds per sample-pass.
SPEED = "seconds_per_sample"
#: The memory's key of the model a ``stale`` liar keeps sending.
STALE = "attack.stale_model"


@dataclass(frozen=True)
class LocalData:
    """One learner's part of the training set.

    Attributes
    ----------
    data : Dataset
        The whole data set (features and labels are read through ``rows``).
    rows : ndarray of int
        Training-set rows this learner holds.
    """

    data: Dataset
    rows: np.ndarray

    def loss_and_gradient(self, model: Params, max_samples: int) -> tuple[float, Params]:
        """Mean loss and its gradient at ``model`` over the first ``max_samples`` rows of
        this learner's part (the same rows every round); the loss is the model's own output
        loss, read from its arrays (the cross-entropy, or the hinge of ``svm``)."""
        from mel_opt.training.mlp import stacked_gradients, stacked_loss

        rows = self.rows[:max_samples]
        x, y = self.data.x_train[rows], self.data.y_train[rows]
        stacked = [np.asarray(a, dtype=x.dtype)[None] for a in model]
        weight = np.full((1, y.size), 1.0 / y.size, dtype=x.dtype)
        loss = float(stacked_loss(stacked, x[None], y[None])[0])
        grads = stacked_gradients(stacked, x[None], y[None], weight)
        return loss, [np.asarray(g[0]) for g in grads]


@dataclass
class Memory:
    """What a learner keeps between messages: numbers and arrays by key (the in-process
    learners' memory; the Flower client keeps the same in its node state)."""

    numbers: dict[str, float] = field(default_factory=dict)
    stored: dict[str, Params] = field(default_factory=dict)

    def number(self, key: str) -> float:
        return self.numbers.get(key, math.nan)

    def keep_number(self, key: str, value: float) -> None:
        self.numbers[key] = float(value)

    def arrays(self, key: str) -> Params | None:
        return self.stored.get(key)

    def keep_arrays(self, key: str, arrays: Params) -> None:
        self.stored[key] = [np.array(a, copy=True) for a in arrays]


class Recording(Memory):
    """A learner's memory seen from a child process: reads ``base`` (the child's copy of it),
    keeps what the learner writes in itself, so that the parent can write it into the real
    memory (:func:`answer_at_speed`)."""

    def __init__(self, base: Memory) -> None:
        super().__init__()
        self.base = base

    def number(self, key: str) -> float:
        return self.numbers[key] if key in self.numbers else self.base.number(key)

    def arrays(self, key: str) -> Params | None:
        return self.stored[key] if key in self.stored else self.base.arrays(key)


def answer_at_speed(answer: Callable[[Memory], R], memory: Memory, speed: float) -> R:
    """``answer(memory)`` by a learner at ``speed`` of a core (1: here, as fast as this core
    goes; below 1: in a child process held at that share by a duty cycle,
    :func:`mel_opt.live.throttle.run_at_speed`, so every time the learner measures is its own
    wall time at that speed). What the learner keeps in its memory there is written into
    ``memory`` here."""
    if speed >= 1.0:
        return answer(memory)
    from mel_opt.live.throttle import run_at_speed

    def work() -> tuple[R, dict[str, float], dict[str, Params]]:
        seen = Recording(memory)
        return answer(seen), seen.numbers, seen.stored

    out, numbers, stored = run_at_speed(work, speed)
    for key, value in numbers.items():
        memory.keep_number(key, value)
    for key, arrays in stored.items():
        memory.keep_arrays(key, arrays)
    return out


@cache
def dataset(name: str, max_train: int | None, max_test: int | None) -> Dataset:
    """The named data set in float32, loaded once per process."""
    return load_dataset(name, max_train=max_train, max_test=max_test).astype(np.dtype("float32"))


def local_data(spec: DataSpec, partition_id: int) -> LocalData:
    """The learner's part of the data set ``spec`` describes."""
    ds = dataset(spec.dataset, spec.max_train, spec.max_test)
    n = spec.num_partitions
    if not 0 <= partition_id < n:
        raise ValueError(f"partition id {partition_id} is outside 0..{n - 1}")
    return LocalData(ds, _parts(spec)[partition_id])


def shipped_data(local: LocalData, shipped: Params) -> LocalData:
    """The samples an order shipped (features, labels) as the learner's data for the round:
    all of them, in the order they came (the validation part stays the learner's own)."""
    x, y = shipped
    ds = local.data
    data = Dataset(ds.name, np.asarray(x, dtype=ds.x_train.dtype),
                   np.asarray(y, dtype=np.int64), ds.x_test, ds.y_test, ds.classes)
    return LocalData(data, np.arange(int(y.size)))


def ship(local: LocalData, samples: int, seed: int, classes: int) -> Params:
    """What the server ships a learner that claimed ``samples`` of its part ``local``: the
    rows it would draw itself with ``seed`` (:func:`train_cycle`'s draw), as float32 features
    (a thesis shard's bytes) and labels in the smallest whole type that holds them."""
    rows = draw(local.rows, int(samples), np.random.default_rng(seed))
    labels = np.uint8 if classes <= 256 else np.int32
    return [np.ascontiguousarray(local.data.x_train[rows], dtype=np.float32),
            local.data.y_train[rows].astype(labels)]


@lru_cache(maxsize=4)
def _parts(spec: DataSpec) -> tuple[np.ndarray, ...]:
    """Every learner's rows under ``spec``, split once per process (a simulation's worker
    answers for many learners in turn; read-only, as every learner draws from them)."""
    ds = dataset(spec.dataset, spec.max_train, spec.max_test)
    n = spec.num_partitions
    sizes = proportional_sizes(np.ones(n), ds.y_train.size)
    rng = np.random.default_rng([spec.seed, 11])
    pools = make_pools(ds.y_train, sizes, parse_partition(spec.partition), ds.classes, rng)
    for rows in pools:
        rows.flags.writeable = False
    return tuple(pools)


@dataclass(frozen=True)
class Trained:
    """One learner's cycle: its model and what it measured.

    Attributes
    ----------
    model : list of ndarray
    compute_s : float
        Wall time of the training alone [s] (drawing samples, building the minibatches and
        the SGD steps; not loading data or decoding messages).
    work : float
        Sample-passes trained (samples x passes; samples for one full-batch step).
    samples, passes : int
    """

    model: Params
    compute_s: float
    work: float
    samples: int
    passes: int


def train_cycle(model: Params, local: LocalData, samples: int, passes: int, batch: int,
                lr: float, seed: int) -> Trained:
    """Train ``model`` on ``samples`` of the learner's data for ``passes`` passes.

    ``batch`` is the minibatch size (0: one gradient step over all the samples, a FEEL
    device's round). ``seed`` draws the samples and the shuffles. Returns the new model
    (float arrays of the same shapes) and the measured compute time. The caller sets the BLAS
    threads (:func:`answer_train` runs one).
    """
    if samples <= 0 or passes <= 0:
        return Trained([a.copy() for a in model], 0.0, 0.0, 0, 0)
    rng = np.random.default_rng(seed)
    x, y = local.data.x_train, local.data.y_train
    start = time.perf_counter()
    rows = [draw(local.rows, int(samples), rng)]
    if batch == 0:
        sched = one_step_schedule(rows, x.dtype)
    else:
        sched = make_schedule(rows, np.array([passes]), int(batch), rng, x.dtype)
    stacked = [np.asarray(a, dtype=x.dtype)[None] for a in model]
    out = local_sgd(stacked, x, y, sched, lr)
    compute = time.perf_counter() - start
    work = float(samples) * (1 if batch == 0 else passes)
    return Trained([a[0] for a in out], compute, work, int(samples), 1 if batch == 0 else passes)


def probe(model: Params, local: LocalData, batch: int, seed: int, min_seconds: float
          ) -> tuple[Trained, StartCost | None]:
    """Subset benchmarking of this learner: time passes over (a part of) its own data.

    Trains a throw-away copy of ``model`` on up to 256 of its samples until ``min_seconds``
    have gone by: one pass, then twice as many passes in one go each time (2, 4, ...), as a
    round trains its passes in one go, so that drawing the samples and building the schedule
    weigh on the measurement as little as on a round of many passes (timed pass by pass, a
    learner with a few dozen samples measured itself five times slower than its rounds). The
    seconds per sample-pass are ``compute_s / work``. The thesis times a small copy of the
    model on a few shards in the same way (SB, Section 3.2).

    The steps' different work also splits a start's time into a fixed cost and a rate
    (:func:`~mel_opt.live.estimates.start_cost`; None where the steps cannot tell them apart),
    which a scheme of short starts plans with.
    """
    n = int(min(256, local.rows.size))
    total_s, work, passes, step_passes = 0.0, 0.0, 0, 1
    steps: list[tuple[float, float]] = []
    while total_s < min_seconds or passes == 0:
        step = train_cycle(model, local, n, step_passes, batch, 0.0, seed + passes)
        total_s += step.compute_s
        work += step.work
        passes += step.passes
        steps.append((step.compute_s, step.work))
        # twice as many, but not much past min_seconds at the rate so far (which the
        # shorter steps overstate, so the probe ends within about min_seconds)
        left = (min_seconds - total_s) / (total_s / passes) if total_s > 0 else math.inf
        step_passes = max(1, min(2 * step_passes, math.ceil(left)))
    return Trained(model, total_s, work, n, passes), start_cost(steps)


def round_seed(seed: int, round_: int, learner: int) -> int:
    """The seed of a learner's samples and shuffles in a round (distinct per learner and
    round, the same in every engine)."""
    return seed * 1_000_003 + round_ * 7919 + learner


def _remember(memory: Memory, seconds: float, alpha: float) -> None:
    """Fold a measurement into the learner's own estimate of its seconds per sample-pass."""
    memory.keep_number(SPEED, fold(memory.number(SPEED), seconds, alpha))


def learner_side(problem: str) -> LearnerSide:
    """What the learners of ``problem`` do beyond training (its cycle's learner side)."""
    cycle = get_problem(problem).learning
    return cycle.learner_side if cycle is not None else LearnerSide()


def answer_probe(order: ProbeOrder, learner: int, local: LocalData,
                 memory: Memory) -> ProbeReport:
    """Time ``learner`` on its own data ``local``; report its speed unless its problem's
    learners plan their own work (they keep it to themselves)."""
    layers = layers_for(order.model, local.data.features, local.data.classes)
    with blas_threads(1):
        done, start = probe(init_params(layers, order.seed, np.float32), local, order.batch,
                            order.seed * 7919 + learner, order.min_seconds)
    _remember(memory, done.compute_s / done.work, order.alpha)
    return with_constants(probe_report(order.problem, learner, int(local.rows.size),
                                       done.compute_s, done.work, start), order, local)


#: Samples of the learner's own data the bound's constants are measured on (at most; the
#: same cap as adaptive-tau's gradient statistics).
CONSTANTS_SAMPLES = 2048


def probe_constants(model: Params, local: LocalData, lr: float) -> LearnerConstants:
    """The bound's constants of this learner at ``model`` on the first
    :data:`CONSTANTS_SAMPLES` rows of its part, its model one full gradient step of ``lr``
    away (:func:`mel_opt.schemes.period.learner_constants`: the arena's own measurement, here
    in the learner's process)."""
    from mel_opt.schemes.period import learner_constants  # only where a run asks for them

    rows = local.rows[:CONSTANTS_SAMPLES]
    with blas_threads(1):
        return learner_constants(model, local.data.x_train[rows], local.data.y_train[rows],
                                 lr)


def with_constants(report: ProbeReport, order: ProbeOrder, local: LocalData) -> ProbeReport:
    """``report`` with the learner's constants of the period's bound at the run's starting
    model, where the probe ``order`` asks for them (``constants_lr``)."""
    if order.constants_lr is None:
        return report
    layers = layers_for(order.model, local.data.features, local.data.classes)
    start = time.perf_counter()
    c = probe_constants(init_params(layers, order.seed, np.float32), local, order.constants_lr)
    return dataclasses.replace(report, rho=c.rho, beta=c.beta, gradient=[c.gradient],
                               constants_s=time.perf_counter() - start)


def probe_report(problem: str, learner: int, samples_held: int, compute_s: float,
                 work: float, start: StartCost | None = None) -> ProbeReport:
    """A learner's probe report: with its timing (and its split into a start's fixed cost and
    a rate, where ``start`` has it), unless its problem's learners plan their own work (they
    keep their speed to themselves)."""
    if learner_side(problem).plans_own_work:
        return ProbeReport(learner, samples_held)
    if start is None:
        return ProbeReport(learner, samples_held, compute_s, work)
    return ProbeReport(learner, samples_held, compute_s, work, start_s=start.start_s,
                       rate_s=start.seconds)


def answer_train(order: TrainOrder, learner: int, local: LocalData, memory: Memory,
                 clock: Callable[[float], float] | None = None) -> TrainReport:
    """One round of ``learner`` on its data ``local``: its problem's work before training, the
    training (the order's plan, or its own), its problem's work after, and the report.

    ``clock`` gives the compute time of a number of sample-passes on a virtual clock (the
    in-process learners'); None: the measured wall time. The learner's own speed estimate and
    its report follow the same time."""
    side = learner_side(order.problem)
    if order.claim:  # only its plan: the server ships the data it claims (dab)
        if not (side.plans_own_work and order.brief):
            raise ValueError("a claim is asked of a learner that plans its own work, "
                             "with a brief")
        plan = side.own_plan(order, memory.number(SPEED), learner)
        return TrainReport(learner, 0.0, 0.0, 0, 0, [], plan)
    if order.shipped:  # the samples came with the order: train on those
        local = shipped_data(local, order.shipped)
    model = [np.asarray(a, dtype=np.float32) for a in order.model]
    # a learner that plans its own work does so from a brief; an order without one (FedBuff's
    # fixed work) is followed as given
    own = side.own_plan(order, memory.number(SPEED), learner) \
        if side.plans_own_work and order.brief else None
    samples, passes = (own.samples, own.passes) if own is not None else (order.samples,
                                                                           order.passes)
    start = [a.copy() for a in model] if order.attack else model  # what a liar's lie starts at
    with blas_threads(1):
        extras = side.before_training(order, local, memory)
        done = train_cycle(model, local, samples, passes, order.batch, order.lr,
                           round_seed(order.seed, order.round, learner))
    compute_s = done.compute_s if clock is None else clock(done.work)
    if done.work > 0:
        _remember(memory, compute_s / done.work, order.alpha)
    side.after_training(order, done.model, memory)
    sent = done.model if not order.attack else _lie(order, learner, done.model, start, memory)
    return TrainReport(learner, compute_s, done.work, done.samples, done.passes,
                       sent, own, dict(extras.metrics), dict(extras.arrays))


def _lie(order: TrainOrder, learner: int, trained: Params, start: Params,
         memory: Memory) -> Params:
    """What a lying learner sends instead of ``trained`` (a measured run's ``attack``, told
    in its order; :func:`mel_opt.problems.attacks.apply_lie`): this process computes it, so it
    crosses the wire as any reply does. A ``stale`` liar keeps the model of its first lying
    round in its memory."""
    from mel_opt.problems.attacks import apply_lie, parse_attack

    kind, value = parse_attack(order.attack)
    stale = memory.arrays(STALE)
    if kind == "stale" and stale is None:
        memory.keep_arrays(STALE, start)
        stale = memory.arrays(STALE)
    rng = np.random.default_rng([order.seed, learner, order.round, 51])
    return apply_lie(kind, value, trained, start, rng, stale)
