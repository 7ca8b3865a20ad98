"""FedProx partial work (Li et al., MLSys 2020): as much local work as fits, a proximal term.

Each invited learner aims at the round's local work (``E`` passes over its local data) but does
only what fits its round budget (the paper's gamma-inexact solutions, Definition 2: "variable
amounts of work"); no learner is dropped. Its local objective adds the proximal term
``(mu / 2) ||w - w_t||^2`` (the paper's Eq. (2)), so every local step follows the gradient
``grad F_k(w) + mu (w - w_t)``. The paper's MNIST runs use ``mu = 1`` (its Figure 2 and
appendix: the best mu of {0.001, 0.01, 0.1, 1} on MNIST and FEMNIST).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mel_opt.problems.work import WorkClock
from mel_opt.schemes.base import GRID_LR, Loop, RoundClose, RoundContext, SchemeSpec
from mel_opt.schemes.deadline import invited
from mel_opt.schemes.options import LOCAL_STEPS, PARTICIPATION, PASSES
from mel_opt.settings import Setting
from mel_opt.training.device import CPU, Device
from mel_opt.training.local import Schedule, sorted_on, unsorted_on_host
from mel_opt.training.mlp import Params, stacked_gradients

__all__ = ["DEFAULT_MU", "MU", "SPEC", "FedProxPolicy", "close_at_budget", "completed",
           "fitting_work", "prox_gradient", "prox_sgd"]

#: mu of the paper's MNIST and FEMNIST runs.
DEFAULT_MU = 1.0

MU = Setting("mu", float, DEFAULT_MU, "fedprox's proximal weight mu (its authors tune it per data "
             "set over 0.001, 0.01, 0.1, 0.5 and 1: arena --tune does).", minimum=0.0)


def fitting_work(passes: float | np.ndarray, per_pass_s: np.ndarray, fixed_s: np.ndarray,
                 budget_s: float) -> np.ndarray:
    """Passes each learner does: the round's ``passes``, or the most that fit its budget.

    A learner busy ``fixed_s + p * per_pass_s`` seconds for ``p`` passes (transfers plus
    computation) does ``min(passes, (budget_s - fixed_s) / per_pass_s)``, a fraction of a
    pass included (a partial pass trains on that fraction of its samples); 0 when even the
    transfers do not fit.

    Parameters
    ----------
    passes : float or ndarray
        E, the round's local work [passes] (of each learner, where an array).
    per_pass_s : ndarray
        Computing time of one pass over each learner's local data [s].
    fixed_s : ndarray
        Time that does not depend on the work (transfers) [s].
    budget_s : float
        The round's budget [s].

    Examples
    --------
    >>> fitting_work(3, np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 11.0]), 6.0).tolist()
    [3.0, 2.5, 0.0]
    """
    per = np.asarray(per_pass_s, dtype=float)
    room = float(budget_s) - np.asarray(fixed_s, dtype=float)
    fit = np.where(per > 0, room / np.where(per > 0, per, 1.0), np.inf)
    return np.clip(np.minimum(fit, np.asarray(passes, dtype=float)), 0.0, None)


def prox_gradient(grad: Params, w: Params, anchor: Params, mu: float) -> Params:
    """The gradient of the proximal local objective: ``grad + mu (w - anchor)`` per array
    (the paper's Eq. (2); ``anchor`` is the round's global model w_t)."""
    return [g + mu * (a - b) for g, a, b in zip(grad, w, anchor, strict=True)]


def prox_sgd(params: Params, x: np.ndarray, y: np.ndarray, sched: Schedule, lr: float,
             mu: float, device: Device = CPU) -> Params:
    """Every learner's minibatches of ``sched`` with the proximal step, all learners at once.

    Each step is ``w <- w - lr (g + mu (w - w_t))`` with ``w_t`` the stacked starting models
    ``params`` (not modified). With ``mu = 0`` this is plain local SGD
    (:func:`mel_opt.training.local.local_sgd` on the same schedule).

    Parameters
    ----------
    params : list of ndarray
        Stacked starting models, leading axis K: the round's global model, once per learner
        (host arrays, or ``device``'s).
    x, y : ndarray
        The training set (the host's; their resident copies on another device); ``sched``
        holds row numbers into it.
    sched : Schedule
        Minibatches per learner (:func:`mel_opt.training.local.make_schedule`).
    lr : float
        SGD learning rate.
    mu : float
        Proximal weight (>= 0).
    device : Device
        Where to train (:mod:`mel_opt.training.device`); the trained models come back to the
        host.
    """
    order = np.argsort(-sched.steps, kind="stable")  # learners still training: a prefix
    anchor = sorted_on(device, params, order)
    w = [a.copy() for a in anchor]
    index = device.put(sched.index[order])
    weight = device.put(sched.weight[order])
    steps = sched.steps[order]
    x, y = device.resident(x), device.resident(y)
    for j in range(int(steps.max()) if steps.size else 0):
        m = int((steps > j).sum())
        p = [a[:m] for a in w]
        rows = index[:m, j]
        g = stacked_gradients(p, x[rows], y[rows], weight[:m, j])
        for a, ga, a0 in zip(p, g, anchor, strict=True):
            if a.size == 0:  # the loss tag travels along, untouched
                continue
            step = ga + mu * (a - a0[:m]) if mu else ga
            a -= (lr * step).astype(a.dtype)
    return unsorted_on_host(device, w, order)


def completed(passes: np.ndarray, predicted_s: np.ndarray, times: np.ndarray,
              per_pass_s: np.ndarray, fixed_s: np.ndarray, budget_s: float) -> np.ndarray:
    """The passes each learner completes within the budget when its real time is its
    predicted time ``predicted_s`` for ``passes`` times a slow-down ``times / predicted_s``
    (the run-to-run noise): all of them when ``times <= budget_s``, else the most that fit,
    ``(budget_s / f - fixed_s) / per_pass_s`` with ``f`` the slow-down (none when even the
    transfers do not fit).

    Examples
    --------
    2 passes of 2 s each after 1 s of transfers, predicted 5 s, ran 10 s (twice as slow):
    within a budget of 6 s it does (6 / 2 - 1) / 2 = 1 pass.

    >>> completed(np.array([2.0]), np.array([5.0]), np.array([10.0]), np.array([2.0]),
    ...           np.array([1.0]), 6.0).tolist()
    [1.0]
    """
    p = np.asarray(passes, dtype=float)
    f = np.asarray(times, dtype=float) / np.maximum(np.asarray(predicted_s, dtype=float), 1e-300)
    per = np.asarray(per_pass_s, dtype=float)
    fit = (float(budget_s) / np.maximum(f, 1e-300) - np.asarray(fixed_s, dtype=float)) / \
        np.where(per > 0, per, 1.0)
    late = np.asarray(times, dtype=float) > float(budget_s) * (1 + 1e-9)
    return np.where(late, np.clip(np.minimum(fit, p), 0.0, None), p)


def close_at_budget(clock: WorkClock, invited: np.ndarray, times: np.ndarray,
                    passes: np.ndarray) -> RoundClose:
    """A round where nobody is dropped and nobody is waited for past the budget: each invited
    learner keeps what it :func:`completed` within it (kept when that is more than nothing),
    and the round ends with its last learner, at the budget at the latest."""
    ids = np.asarray(invited, dtype=np.int64)
    budget = clock.budget_s
    done = completed(passes, clock.seconds(ids, passes), times, clock.per_pass_s[ids],
                     clock.fixed_s[ids], budget)
    duration = min(float(times.max()), budget) if times.size else budget
    return RoundClose(done > 0, duration, done)


class FedProxPolicy:
    """FedProx as a synchronous scheme: ``m`` invited at random, each doing the passes that
    fit its budget (none dropped; one slowed by the noise past the budget stops there with
    what it completed), trained with the proximal term ``mu``; the round ends when the last
    learner is done, at the budget at the latest."""

    def __init__(self, ctx: RoundContext) -> None:
        self.ctx = ctx
        self.mu = float(ctx.options.mu)

    def invite(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        c = self.ctx
        return invited(c.rng, c.clock.K, c.m), np.empty(0, np.int64)

    def work(self, invited: np.ndarray) -> np.ndarray:
        clock = self.ctx.clock
        return fitting_work(self.ctx.fixed_work(invited), clock.per_pass_s[invited],
                            clock.fixed_s[invited], clock.budget_s)

    def close(self, invited: np.ndarray, times: np.ndarray, passes: np.ndarray) -> RoundClose:
        return close_at_budget(self.ctx.clock, invited, times, passes)

    def learned(self, model: Any, invited: np.ndarray, times: np.ndarray, close: RoundClose,
                r: int, exploited: np.ndarray) -> None:
        pass


SPEC = SchemeSpec(
    "fedprox", "FedProx: each learner does what fits the budget, proximal term mu",
    Loop.ROUNDS, options={"arena": (PARTICIPATION, PASSES, LOCAL_STEPS, MU)},
    needs=("work_clock",),
    policy=FedProxPolicy,
    # 3 x 5 = 15 points. mu: its authors pick the best of {0.001, 0.01, 0.1, 1} per data set
    # (Li et al., MLSys 2020, Section 5.3.3 and appendix), with 0.5 between the two largest
    # as the reviewer's list has it; participation and work stay as the others run them.
    grid={"lr": GRID_LR, "mu": (0.001, 0.01, 0.1, 0.5, 1.0)})
