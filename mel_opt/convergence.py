"""Wang et al.'s local-update divergence h(tau) (IEEE JSAC 2019), shared by the adaptive-tau
control (:mod:`mel_opt.problems.adaptive_tau.control`) and ``staggered``'s chosen period
(:mod:`mel_opt.schemes.period`).

    h(tau) = max(0, (delta / beta) ((eta beta + 1)^tau - 1) - eta delta tau)

bounds how far ``tau`` local gradient steps of size ``eta`` on a learner's own loss take its
model from the model that steps on the global loss would reach (beta: the loss's smoothness,
delta: the gradient divergence between the learners). (eta beta + 1)^tau - 1 is evaluated as
expm1(tau log1p(eta beta)), which keeps the digits the literal power loses when eta beta is
tiny (beta is floored at 1e-5, as the authors' client floors its estimate); an overflow gives
h = inf; a zero delta makes h exactly 0.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BETA_FLOOR", "h_values"]

BETA_FLOOR = 1e-5  # the authors' client floors its beta estimate here


def h_values(tau: np.ndarray, beta: float, delta: float, eta: float) -> np.ndarray:
    """h(tau) for an array of tau (float array of the same shape).

    >>> h_values(np.array([1.0, 2.0]), beta=1.0, delta=2.0, eta=0.5).tolist()
    [0.0, 0.5]
    """
    tau = np.asarray(tau, dtype=float)
    if delta == 0.0:
        return np.zeros_like(tau)
    beta = max(beta, BETA_FLOOR)
    with np.errstate(over="ignore", invalid="ignore"):
        growth = np.expm1(tau * np.log1p(eta * beta))  # (eta beta + 1)^tau - 1
        h = (delta / beta) * growth - eta * delta * tau
    return np.maximum(h, 0.0)
