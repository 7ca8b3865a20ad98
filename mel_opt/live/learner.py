"""What a live learner does with a message: its local data, the probe, one cycle of training.

Pure functions over numpy (no Flower), so the client app (:mod:`mel_opt.live.client`) is a thin
wrapper and the same code can be tested alone. The learner trains the emulator's own model
code: the MLP of :mod:`mel_opt.training.mlp` with the batched SGD of
:mod:`mel_opt.training.local`, here with one learner on the learner axis.

A learner holds one part of the training set, chosen by its partition id: the set is split
into ``num_partitions`` equal parts (IID, label shards or Dirichlet, as ``--partition`` says)
with a seed every learner shares, so the parts never overlap and every process computes the
same split. Each cycle it trains on the number of samples the server asks for, drawn from its
part (its whole part plus random repeats when asked for more, as the thesis duplicates data).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from mel_opt.training.data import Dataset, load_dataset
from mel_opt.training.local import local_sgd, make_schedule, one_step_schedule
from mel_opt.training.mlp import Params
from mel_opt.training.partition import (
    draw,
    make_pools,
    parse_partition,
    proportional_sizes,
)

__all__ = ["LocalData", "Statistics", "Trained", "gradient_statistics", "local_data", "probe",
           "train_cycle"]

#: Probe (subset benchmarking) length: at least this many seconds of training, so that a
#: learner throttled by a duty cycle is measured over many of its periods.
PROBE_MIN_S = 0.5


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


@cache
def _dataset(name: str, max_train: int | None, max_test: int | None) -> Dataset:
    return load_dataset(name, max_train=max_train, max_test=max_test).astype(np.dtype("float32"))


def local_data(config: Mapping[str, Any], partition_id: int) -> LocalData:
    """The learner's part of the data set named in ``config``.

    ``config`` holds ``dataset``, ``partition``, ``num_partitions``, ``data_seed`` and
    optionally ``max_train`` / ``max_test`` (0: all).
    """
    ds = _dataset(str(config["dataset"]), int(config.get("max_train", 0)) or None,
                  int(config.get("max_test", 0)) or None)
    n = int(config["num_partitions"])
    if not 0 <= partition_id < n:
        raise ValueError(f"partition id {partition_id} is outside 0..{n - 1}")
    sizes = proportional_sizes(np.ones(n), ds.y_train.size)
    rng = np.random.default_rng([int(config["data_seed"]), 11])
    pools = make_pools(ds.y_train, sizes, parse_partition(str(config["partition"])),
                       ds.classes, rng)
    return LocalData(ds, pools[partition_id])


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
    (float arrays of the same shapes) and the measured compute time.
    """
    if samples <= 0 or passes <= 0:
        return Trained([a.copy() for a in model], 0.0, 0.0, 0, 0)
    rng = np.random.default_rng(seed)
    x, y = local.data.x_train, local.data.y_train
    with threadpool_limits(limits=1, user_api="blas"):  # a learner is one core's work
        return _train(model, x, y, local, samples, passes, batch, lr, rng)


def _train(model: Params, x: np.ndarray, y: np.ndarray, local: LocalData, samples: int,
           passes: int, batch: int, lr: float, rng: np.random.Generator) -> Trained:
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


def probe(model: Params, local: LocalData, batch: int, seed: int,
          min_seconds: float = PROBE_MIN_S) -> Trained:
    """Subset benchmarking of this learner: time passes over (a part of) its own data.

    Trains a throw-away copy of ``model`` on up to 256 of its samples, pass after pass, until
    ``min_seconds`` have gone by (at least one pass); the seconds per sample-pass are
    ``compute_s / work``. The thesis times a small copy of the model on a few shards in the
    same way (SB, Section 3.2).
    """
    n = int(min(256, local.rows.size))
    total_s, work, passes = 0.0, 0.0, 0
    current = model
    while total_s < min_seconds or passes == 0:
        step = train_cycle(current, local, n, 1, batch, 0.0, seed + passes)
        total_s += step.compute_s
        work += step.work
        passes += 1
    return Trained(model, total_s, work, n, passes)


#: Samples of the learner's own data its gradient statistics are computed on (at most).
STATISTICS_SAMPLES = 2048


@dataclass(frozen=True)
class Statistics:
    """A learner's gradient statistics at the round's global model w (adaptive-tau).

    Attributes
    ----------
    loss : float
        F_i(w), its mean local loss at w.
    gradient : list of ndarray
        grad F_i(w).
    rho, beta : float or None
        |F_i(w_i) - F_i(w)| / ||w_i - w|| and ||grad F_i(w_i) - grad F_i(w)|| / ||w_i - w||
        with w_i its local model of the previous round (None without one, or when w_i = w).
    seconds : float
        Wall time of computing them [s].
    """

    loss: float
    gradient: Params
    rho: float | None
    beta: float | None
    seconds: float


def _loss_and_gradient(model: Params, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
    from mel_opt.training.mlp import stacked_gradients, stacked_loss

    stacked = [np.asarray(a, dtype=x.dtype)[None] for a in model]
    xs, ys = x[None], y[None]
    weight = np.full((1, y.size), 1.0 / y.size, dtype=x.dtype)
    loss = float(stacked_loss(stacked, xs, ys)[0])
    grads = stacked_gradients(stacked, xs, ys, weight)
    return loss, [np.asarray(g[0]) for g in grads]


def _norm(arrays: Params) -> float:
    return float(np.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays)))


def gradient_statistics(model: Params, previous: Params | None, local: LocalData,
                        max_samples: int = STATISTICS_SAMPLES) -> Statistics:
    """The loss and gradient of the learner's local loss at ``model`` (the global model) and,
    with its previous local model ``previous``, its Lipschitz (rho) and smoothness (beta)
    estimates between the two (Wang et al.'s estimates, which paper 003's control uses).

    The local loss is the mean cross-entropy over its data (at most ``max_samples`` of it: the
    first rows of its part, the same every round).
    """
    start = time.perf_counter()
    rows = local.rows[:max_samples]
    x, y = local.data.x_train[rows], local.data.y_train[rows]
    with threadpool_limits(limits=1, user_api="blas"):
        loss, grad = _loss_and_gradient(model, x, y)
        rho = beta = None
        if previous is not None and len(previous) == len(model) and all(
                np.shape(a) == np.shape(b) for a, b in zip(previous, model, strict=True)):
            dist = _norm([np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
                          for a, b in zip(previous, model, strict=True)])
            if dist > 0:
                loss_p, grad_p = _loss_and_gradient(previous, x, y)
                rho = abs(loss_p - loss) / dist
                beta = _norm([np.asarray(a, dtype=np.float64) - b
                              for a, b in zip(grad_p, grad, strict=True)]) / dist
    return Statistics(loss, grad, rho, beta, time.perf_counter() - start)
