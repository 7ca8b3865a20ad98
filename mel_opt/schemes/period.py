"""The period chosen: staggered's round trip picked by Wang et al.'s convergence bound.

Every FL paper takes the time between two aggregations as given (mel-async's cycle T, dab's
deadline D, FedBuff's fixed local work). ``staggered`` makes it a decision: its period ``P`` is
how long each learner's round trip is planned to take, and it trades local work per update
(drift between the learners' models) against round trips (transfers that do no learning).
Tuned on the digits, the best period was an interior point, between a sixteenth and an eighth
of the cycle: shorter, the transfers eat the round trip; longer, the learners drift apart.

Wang et al. (IEEE JSAC 2019; the adaptive-tau control of paper 003, :mod:`mel_opt.problems.
adaptive_tau.control`) bound the loss that federated averaging with ``tau`` local steps
between aggregations reaches when a budget ``R`` of a resource is spent, each local step
costing ``c`` and each aggregation ``b``:

    h(tau) = (delta / beta) ((eta beta + 1)^tau - 1) - eta delta tau
    T(tau) = tau R / (c tau + b)                     (local steps within the budget)
    G(tau) = (1 + sqrt(1 + 4 T^2 phi rho eta h / tau)) / (2 T eta phi) + rho h

and set ``tau`` to G's minimiser. Here the resource is time and the round trip is the period,
and the learners differ: learner ``k`` (a local step taking ``c_k`` seconds, its transfers
``f_k``, the problem's time model) fits

    tau_k(P) = max(0, (P - f_k) / c_k)

steps in a period. We take the fleet's ``tau(P)`` as the data-weighted mean of the
``tau_k(P)`` (FedAvg weighs the learners' models by their data) and ``T(P) = tau(P) R / P``
(a period ``P`` lasts ``P`` seconds of the horizon ``R``), so that a fleet of equal learners
(``c_k = c``, ``f_k = f``) gives back Wang et al.'s ``T(tau)`` exactly at ``P = f + c tau``.
The period is the ``P`` of the candidates ``f_bar + c_bar tau`` (``tau = 1, 2, ...``, the
fleet's data-weighted means, at most the problem's budget) that minimises ``G``; its first
minimiser, as the authors' linear scan takes it.

The bound's constants are measured on the learners' own data at the run's starting model
``w0`` (:func:`estimate`), as Wang et al.'s nodes measure them each round: the gradient
divergence ``delta = sum_k d_k ||grad F_k(w0) - grad F(w0)|| / d``; the Lipschitz and
smoothness estimates ``rho_k = |F_k(w_k) - F_k(w0)| / ||w_k - w0||`` and ``beta_k =
||grad F_k(w_k) - grad F_k(w0)|| / ||w_k - w0||`` between ``w0`` and the learner's model
``w_k`` after one local gradient step, averaged by data (each learner's part,
:func:`learner_constants`, is what a live learner computes in its own process and sends in
its probe; :func:`combine` is the server's part). ``eta`` is the client learning rate.
``phi`` is the bound's control constant, which no measurement gives: its authors set it per
model (0.025 for their SVM, 5e-5 for their CNN); the option ``phi`` defaults to the CNN's,
the value for the neural networks the arena trains.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mel_opt.convergence import h_values
from mel_opt.mlp import stacked_gradients, stacked_loss

__all__ = ["DEFAULT_PHI", "Estimates", "LearnerConstants", "bound", "choose_period", "combine",
           "estimate", "fleet_steps", "learner_constants", "step_seconds"]

#: Wang et al.'s control constant for their CNN (the bound's one constant that is not
#: measured; 0.025 for their SVM).
DEFAULT_PHI = 5e-5

Params = list[np.ndarray]


@dataclass(frozen=True)
class Estimates:
    """The bound's measured constants: the loss's smoothness ``beta``, its Lipschitz
    constant ``rho`` and the learners' gradient divergence ``delta`` (module docstring)."""

    beta: float
    rho: float
    delta: float


def step_seconds(per_pass_s: np.ndarray, sizes: np.ndarray, batch: int) -> np.ndarray:
    """Each learner's seconds per local minibatch step: a pass over its ``n`` samples is
    ``ceil(n / batch)`` steps (inf for a learner without data)."""
    n = np.asarray(sizes, dtype=np.int64)
    steps = -(-n // max(1, int(batch)))
    with np.errstate(divide="ignore"):
        return np.where(steps > 0, np.asarray(per_pass_s, dtype=float) / np.maximum(steps, 1),
                        np.inf)


def fleet_steps(period: np.ndarray, step_s: np.ndarray, fixed_s: np.ndarray,
                weights: np.ndarray) -> np.ndarray:
    """``tau(P)``: the data-weighted mean of the local steps each learner fits in a period
    ``P`` after its transfers (for an array of periods).

    >>> fleet_steps(np.array([3.0]), np.array([1.0, 0.5]), np.array([1.0, 1.0]),
    ...             np.array([1.0, 3.0])).tolist()
    [3.5]
    """
    P = np.asarray(period, dtype=float)[:, None]
    w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    with np.errstate(invalid="ignore"):
        each = np.maximum(0.0, (P - np.asarray(fixed_s, float)[None]) / np.asarray(step_s)[None])
    each = np.where(np.isfinite(each), each, 0.0)
    return np.asarray(each @ w)


def bound(period: np.ndarray, step_s: np.ndarray, fixed_s: np.ndarray, weights: np.ndarray,
          horizon_s: float, est: Estimates, eta: float, phi: float) -> np.ndarray:
    """Wang et al.'s ``G`` at each period (module docstring): inf where no learner fits a
    step."""
    P = np.asarray(period, dtype=float)
    tau = fleet_steps(P, step_s, fixed_s, weights)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        T = tau * float(horizon_s) / P
        h = np.zeros_like(tau) if est.rho == 0.0 else \
            est.rho * h_values(np.maximum(tau, 1.0), est.beta, est.delta, eta)
        root = np.sqrt(np.maximum(0.0, 1.0 + 4.0 * T ** 2 * phi * eta * h / tau))
        G = (1.0 + root) / (2.0 * T * eta * phi) + h
    return np.where((tau > 0) & np.isfinite(G), G, np.inf)


def choose_period(step_s: np.ndarray, fixed_s: np.ndarray, weights: np.ndarray,
                  budget_s: float, horizon_s: float, est: Estimates, eta: float,
                  phi: float = DEFAULT_PHI) -> float:
    """The period [s]: the first minimiser of :func:`bound` over ``P = f_bar + c_bar tau``,
    ``tau = 1, 2, ...``, up to the problem's budget (at least one candidate: the budget
    itself when not even one step fits before it)."""
    w = np.asarray(weights, dtype=float)
    ok = (w > 0) & np.isfinite(np.asarray(step_s, dtype=float))
    if not ok.any():
        return float(budget_s)
    w, c, f = w[ok] / w[ok].sum(), np.asarray(step_s, float)[ok], np.asarray(fixed_s, float)[ok]
    c_bar, f_bar = float(w @ c), float(w @ f)
    most = max(1, math.floor((float(budget_s) - f_bar) / c_bar)) if c_bar > 0 else 1
    cands = np.minimum(f_bar + c_bar * np.arange(1, most + 1, dtype=float), float(budget_s))
    G = bound(cands, c, f, w, horizon_s, est, eta, phi)
    if not np.isfinite(G).any():
        return float(budget_s)
    return float(cands[int(np.argmin(G))])


def _flat(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])


def _loss_grad(model: Params, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
    stacked = [a[None] for a in model]
    w = np.full((1, y.size), 1.0 / y.size, dtype=x.dtype)
    loss = float(stacked_loss(stacked, x[None], y[None])[0])
    grads = stacked_gradients(stacked, x[None], y[None], w)
    return loss, [g[0] for g in grads]


@dataclass(frozen=True)
class LearnerConstants:
    """What one learner measures for the bound at a model ``w0`` on its own data: its mean
    loss's gradient there (flattened, float64) and its ``rho_k`` and ``beta_k`` between
    ``w0`` and its model after one full gradient step (module docstring)."""

    gradient: np.ndarray
    rho: float
    beta: float


def learner_constants(model: Params, x: np.ndarray, y: np.ndarray,
                      eta: float) -> LearnerConstants:
    """One learner's :class:`LearnerConstants` at ``model`` on its samples ``x``, ``y``, its
    ``w_k`` one full gradient step of ``eta`` from ``model`` (a live learner computes this in
    its own process, in the probe)."""
    loss, grad = _loss_grad(model, x, y)
    flat = _flat(grad)
    dist = eta * float(np.linalg.norm(flat))  # ||w_k - w0||
    if dist == 0.0:  # no gradient: this learner's data says nothing of rho and beta
        return LearnerConstants(flat, 0.0, 0.0)
    step = [(np.asarray(a, np.float64) - eta * np.asarray(g, np.float64)).astype(a.dtype)
            for a, g in zip(model, grad, strict=True)]
    loss_k, grad_k = _loss_grad(step, x, y)
    return LearnerConstants(flat, abs(loss_k - loss) / dist,
                            float(np.linalg.norm(_flat(grad_k) - flat)) / dist)


def combine(constants: Sequence[LearnerConstants], sizes: Sequence[float] | np.ndarray
            ) -> Estimates:
    """The fleet's :class:`Estimates` from its learners' constants, each weighted by its
    data: ``beta`` and ``rho`` the data-weighted means, ``delta`` the data-weighted mean
    distance of each gradient from the data-weighted mean gradient. Learners of no data take
    no part.

    >>> g = [LearnerConstants(np.array([1.0, 0.0]), 2.0, 4.0),
    ...      LearnerConstants(np.array([-1.0, 0.0]), 1.0, 1.0)]
    >>> combine(g, [1, 3])
    Estimates(beta=1.75, rho=1.25, delta=0.75)
    """
    w = np.asarray(sizes, dtype=float)
    keep = [i for i in range(len(constants)) if w[i] > 0]
    if not keep:
        return Estimates(0.0, 0.0, 0.0)
    w = w[keep]
    # one gradient at a time: no K x P stack (at K = 1,000 learners of a 200,000-parameter
    # model a stack and its differences would be 3.2 GB)
    mean = np.zeros_like(constants[keep[0]].gradient, dtype=np.float64)
    for wk, i in zip(w, keep, strict=True):
        mean += wk * constants[i].gradient
    mean /= w.sum()
    spread = [float(np.linalg.norm(constants[i].gradient - mean)) for i in keep]
    delta = float(w @ np.asarray(spread) / w.sum())
    return Estimates(float(np.average([constants[i].beta for i in keep], weights=w)),
                     float(np.average([constants[i].rho for i in keep], weights=w)), delta)


def estimate(model: Params, x: np.ndarray, y: np.ndarray, pools: Sequence[np.ndarray],
             eta: float) -> Estimates:
    """``beta``, ``rho`` and ``delta`` at ``model`` on the learners' data (each learner's
    rows ``pools[k]`` of ``x``, ``y``), each learner's ``w_k`` one full gradient step of
    ``eta`` from it (module docstring). Learners without data take no part."""
    held = [np.asarray(rows) for rows in pools if np.size(rows) > 0]
    return combine([learner_constants(model, x[rows], y[rows], eta) for rows in held],
                   [rows.size for rows in held])
