"""Subset benchmarking on this machine (thesis Chapter 3): real measurements, not a model.

- :func:`subset_benchmark` trains a fresh numpy TwoNN [784, 50, 20, 10] (SGD, lr 0.1) on n
  generated MNIST-shaped 500-sample shards and times it: the training rate c_k [shards/s].
- :func:`flops_benchmark` times 100 products of two 512 x 512 matrices: the FLOPS baseline.
- :func:`time_download` times a real HTTP transfer: the bandwidth b_k [bytes/s].

The DAB bound a_k itself is :func:`mel_opt.problems.dab.shard_bound`; ``melopt dab-learner``
joins the two (this package does not import the problems).
"""

from __future__ import annotations

from mel_opt.blas import blas_control_available, blas_threads
from mel_opt.subset_benchmarking.data import SHARD_BYTES, decode_shard, encode_shard, make_shards
from mel_opt.subset_benchmarking.download import (
    BenchmarkError,
    DownloadBenchmark,
    expand_urls,
    time_download,
)
from mel_opt.subset_benchmarking.measure import (
    FlopsBenchmark,
    TrainBenchmark,
    flops_benchmark,
    model_for,
    subset_benchmark,
    time_training,
)
from mel_opt.subset_benchmarking.twonn import MLP, MODELS, TWONN_LAYERS, twonn

__all__ = [
    "MLP",
    "MODELS",
    "SHARD_BYTES",
    "TWONN_LAYERS",
    "BenchmarkError",
    "DownloadBenchmark",
    "FlopsBenchmark",
    "TrainBenchmark",
    "blas_control_available",
    "blas_threads",
    "decode_shard",
    "encode_shard",
    "expand_urls",
    "flops_benchmark",
    "make_shards",
    "model_for",
    "subset_benchmark",
    "time_download",
    "time_training",
    "twonn",
]
