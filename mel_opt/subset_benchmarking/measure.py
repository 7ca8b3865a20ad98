"""Subset benchmarking (SB, thesis Section 3.2) and the FLOPS baseline, measured on this machine.

SB times a real training run of a fresh copy of the model on n shards (Algorithm 10, lines
13-16: c_k = n / T_t shards/s for one pass) and extrapolates linearly. The FLOPS baseline of
Section 3.4.1 times 100 multiplications of two 512 x 512 matrices, turns that into a FLOP rate,
and predicts a training time as (FLOPs of the training run) / (FLOP rate). The thesis scaled a
reference device's runtime by the FLOPS ratio; on a single machine there is no reference
device, so the FLOP count of the run (:meth:`MLP.train_flops_per_sample`) takes its place.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mel_opt.blas import blas_threads
from mel_opt.subset_benchmarking.data import SAMPLES_PER_SHARD, make_shards
from mel_opt.subset_benchmarking.twonn import MLP, MODELS


@dataclass(frozen=True)
class TrainBenchmark:
    """A timed training run.

    Attributes
    ----------
    model : str
    shards : int
        Shards trained on (n).
    passes : int
        Passes over them.
    seconds : float
        Wall time of the training (data already in memory) [s].
    samples_per_shard : int
    """

    model: str
    shards: int
    passes: int
    seconds: float
    samples_per_shard: int = SAMPLES_PER_SHARD

    @property
    def rate(self) -> float:
        """c_k: shards trained per second for one pass [shards/s]."""
        return self.shards * self.passes / self.seconds

    def predict_seconds(self, shards: float, passes: int = 1) -> float:
        """SB prediction of the time to train ``shards`` for ``passes`` passes [s]."""
        return shards * passes / self.rate


@dataclass(frozen=True)
class FlopsBenchmark:
    """The FLOPS baseline: ``repeats`` products of two ``size`` x ``size`` float32 matrices."""

    size: int
    repeats: int
    seconds: float

    @property
    def flops(self) -> float:
        """Measured FLOP rate [FLOP/s] (2 n^3 operations per product)."""
        return self.repeats * 2.0 * self.size**3 / self.seconds

    def predict_seconds(self, model: MLP, shards: float, passes: int = 1,
                        samples_per_shard: int = SAMPLES_PER_SHARD) -> float:
        """FLOPS prediction of the time to train ``shards`` for ``passes`` passes [s]."""
        return model.train_flops_per_sample() * samples_per_shard * shards * passes / self.flops


def model_for(name: str, seed: int = 0) -> MLP:
    """A fresh float32 copy of a named benchmark model (``twonn``)."""
    try:
        layers = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
    return MLP(layers, seed=seed)


def time_training(model: MLP, x: np.ndarray, y: np.ndarray, *, passes: int = 1,
                  lr: float = 0.1, batch_size: int = 32) -> float:
    """Wall time [s] of ``passes`` SGD passes of ``model`` over shards ``x``, ``y``.

    ``x`` has shape (shards, samples, features); the shards are trained as one local data set.
    """
    xs = x.reshape(-1, x.shape[-1])
    ys = y.reshape(-1)
    start = time.perf_counter()
    for _ in range(passes):
        model.sgd_pass(xs, ys, lr=lr, batch_size=batch_size)
    return time.perf_counter() - start


def subset_benchmark(
    shards: int,
    *,
    model: str = "twonn",
    passes: int = 1,
    lr: float = 0.1,
    batch_size: int = 32,
    seed: int = 0,
    data: tuple[np.ndarray, np.ndarray] | None = None,
    threads: int | None = 1,
) -> TrainBenchmark:
    """SB: train a fresh copy of ``model`` on ``shards`` shards and time it.

    Parameters
    ----------
    shards : int
        Benchmark size n (the thesis used 2-10; the author's code 8).
    model : str
        ``twonn``.
    passes : int
        Passes over the shards (1 in Algorithm 10).
    lr, batch_size : float, int
        SGD settings (thesis: lr 0.1; batch 32, the author's setting for the MED tasks).
    seed : int
        Seed of the weights and of the generated data.
    data : (x, y), optional
        Shards to train on (default: :func:`make_shards` ``(shards, seed=seed)``); only the
        first ``shards`` are used.
    threads : int or None
        BLAS threads during the run (default 1, see :mod:`~mel_opt.blas`;
        None or 0 leaves the library's setting).
    """
    if shards < 1 or passes < 1:
        raise ValueError("shards and passes must be at least 1")
    x, y = make_shards(shards, seed=seed) if data is None else (data[0][:shards],
                                                                data[1][:shards])
    net = model_for(model, seed=seed)
    with blas_threads(threads):
        seconds = time_training(net, x, y, passes=passes, lr=lr, batch_size=batch_size)
    return TrainBenchmark(model, int(x.shape[0]), passes, seconds, int(x.shape[1]))


def flops_benchmark(size: int = 512, repeats: int = 100, seed: int = 0,
                    threads: int | None = 1) -> FlopsBenchmark:
    """Time ``repeats`` products of two random ``size`` x ``size`` float32 matrices
    (with ``threads`` BLAS threads, as :func:`subset_benchmark`)."""
    rng = np.random.default_rng(seed)
    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    out = np.empty((size, size), dtype=np.float32)
    with blas_threads(threads):
        start = time.perf_counter()
        for _ in range(repeats):
            np.matmul(a, b, out=out)
        seconds = time.perf_counter() - start
    return FlopsBenchmark(size, repeats, seconds)
