"""MNIST-shaped training data, generated (no data set is downloaded).

A shard is 500 samples of 784 float32 features in [0, 1] (the thesis' 500-sample MNIST shards,
500 x 784 x 4 = 1,568,000 bytes) with labels 0..9. Each class has a random prototype image and
a sample is 0.6 prototype + 0.4 uniform noise, so the classes are learnable and training
behaves like training (the loss falls), while the arithmetic per sample is exactly MNIST's.
"""

from __future__ import annotations

import numpy as np

SAMPLES_PER_SHARD = 500
FEATURES = 784
CLASSES = 10
SHARD_BYTES = SAMPLES_PER_SHARD * FEATURES * 4  # features only, as the thesis counts a shard


def make_shards(n: int, *, seed: int = 0, samples: int = SAMPLES_PER_SHARD,
                features: int = FEATURES, classes: int = CLASSES) -> tuple[np.ndarray, np.ndarray]:
    """``n`` shards: features of shape (n, samples, features) float32, labels (n, samples)."""
    if n < 1:
        raise ValueError(f"need at least one shard, got {n}")
    rng = np.random.default_rng(seed)
    prototypes = rng.random((classes, features), dtype=np.float32)
    y = rng.integers(0, classes, size=(n, samples))
    x = rng.random((n, samples, features), dtype=np.float32)
    x *= np.float32(0.4)
    x += np.float32(0.6) * prototypes[y]
    return x, y.astype(np.int64)


def encode_shard(x: np.ndarray, y: np.ndarray) -> bytes:
    """One shard as bytes: little-endian float32 features, then uint8 labels."""
    return np.ascontiguousarray(x, dtype="<f4").tobytes() + np.asarray(y, np.uint8).tobytes()


def decode_shard(data: bytes, *, samples: int = SAMPLES_PER_SHARD,
                 features: int = FEATURES) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`encode_shard`."""
    nx = samples * features * 4
    if len(data) != nx + samples:
        raise ValueError(f"a shard of {samples} x {features} has {nx + samples} bytes, "
                         f"got {len(data)}")
    x = np.frombuffer(data[:nx], dtype="<f4").reshape(samples, features)
    y = np.frombuffer(data[nx:], dtype=np.uint8).astype(np.int64)
    return x, y
