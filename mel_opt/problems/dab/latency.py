"""The DAB time model of thesis Chapter 3, Eq. (3.1)-(3.5) (conference paper 002, Eq. 1-5).

A learner k with training rate c_k [shards/s] (one pass over one shard takes 1/c_k s) and
bandwidth b_k [bytes/s] that downloads the model (Omega_m bytes) and a_k shards (Omega_d bytes
each), trains for mu passes and uploads the model is busy for

    alpha_k = (Omega_m + Omega_d a_k) / b_k          download, Eq. (3.1)
    beta_k  = mu a_k / c_k                           training, Eq. (3.2)
    gamma_k = Omega_m / b_k                          upload,   Eq. (3.3)
    eta_k   = alpha_k + beta_k + gamma_k             [s],      Eq. (3.4)

and must finish strictly before the deadline D (eta_k < D), which gives Eq. (3.5):

    a_k < (D - 2 Omega_m / b_k) / (mu / c_k + Omega_d / b_k).

:func:`shard_bound` returns the largest whole a_k satisfying (3.5) (the thesis author's code
rounded with ``max(1, round(...))``, which can overshoot the deadline; this never does).
These functions are used by the ``dab`` method and by ``melopt dab-learner``; the verifier has
its own code.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def eta(
    shards: ArrayLike,
    *,
    iterations: ArrayLike,
    model_bytes: float,
    shard_bytes: float,
    train_rate: ArrayLike,
    bandwidth: ArrayLike,
) -> np.ndarray:
    """Predicted time eta_k of Eq. (3.4) for ``shards`` a_k [s] (vectorised over learners).

    Parameters
    ----------
    shards : array_like
        a_k, shards per learner.
    iterations : array_like
        mu (passes over the local shards), scalar or per learner.
    model_bytes, shard_bytes : float
        Omega_m and Omega_d [bytes].
    train_rate : array_like
        c_k [shards/s] for one pass.
    bandwidth : array_like
        b_k [bytes/s] (download and upload, reciprocal channel).
    """
    a = np.asarray(shards, dtype=float)
    b = np.asarray(bandwidth, dtype=float)
    c = np.asarray(train_rate, dtype=float)
    mu = np.asarray(iterations, dtype=float)
    return (model_bytes + shard_bytes * a) / b + mu * a / c + model_bytes / b


def shard_bound(
    deadline: float,
    iterations: float,
    model_bytes: float,
    shard_bytes: float,
    train_rate: ArrayLike,
    bandwidth: ArrayLike,
) -> np.ndarray:
    """Largest whole number of shards a_k with eta_k < D, Eq. (3.5); 0 if not even one fits.

    Parameters
    ----------
    deadline : float
        D [s].
    iterations : float
        mu, passes over the local data.
    model_bytes, shard_bytes : float
        Omega_m and Omega_d [bytes].
    train_rate : array_like
        c_k [shards/s].
    bandwidth : array_like
        b_k [bytes/s].

    Returns
    -------
    ndarray of int64
        a_k per learner. The right-hand side of (3.5) is a real number x_k; a_k is the largest
        integer strictly below it (ceil(x_k) - 1), then corrected by evaluating Eq. (3.4) in
        floating point so that eta_k(a_k) < D and eta_k(a_k + 1) >= D hold as computed.
    """
    c = np.atleast_1d(np.asarray(train_rate, dtype=float))
    b = np.atleast_1d(np.asarray(bandwidth, dtype=float))
    x = (deadline - 2.0 * model_bytes / b) / (iterations / c + shard_bytes / b)  # Eq. (3.5)
    a = np.maximum(np.ceil(x) - 1.0, 0.0)

    def t(n: np.ndarray) -> np.ndarray:
        return eta(n, iterations=iterations, model_bytes=model_bytes, shard_bytes=shard_bytes,
                   train_rate=c, bandwidth=b)

    # x is exact up to rounding, so at most a step or two of correction is ever needed.
    for _ in range(64):
        down = (a > 0) & (t(a) >= deadline)
        up = t(a + 1.0) < deadline
        if not (down.any() or up.any()):
            break
        a = a - down + (up & ~down)
    return a.astype(np.int64)


def one_shard_time(
    iterations: float,
    model_bytes: float,
    shard_bytes: float,
    train_rate: ArrayLike,
    bandwidth: ArrayLike,
) -> np.ndarray:
    """eta_k for a single shard [s]: a learner is excluded when this is not below D."""
    return eta(1.0, iterations=iterations, model_bytes=model_bytes, shard_bytes=shard_bytes,
               train_rate=train_rate, bandwidth=bandwidth)
