"""Deadline dropping: FedAvg with one fixed local work, a round deadline, late learners dropped.

Every learner invited to a round does the same local work (``E`` passes over its local data,
FedAvg of McMahan et al., AISTATS 2017); the round ends when the first ``m`` invited learners
have finished, or at the deadline ``D`` if fewer than ``m`` finish by then; whoever has not
finished when it ends is dropped and its update discarded. FedScale (Lai et al., ICML 2022)
invites ``ceil(overcommit * m)`` learners at random and keeps the first ``m`` (its default
over-commitment is 1.3); without over-commitment (1.0) every invited learner that meets the
deadline is kept.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mel_opt.schemes.base import GRID_LR, Loop, RoundClose, RoundContext, SchemeSpec
from mel_opt.schemes.options import LOCAL_STEPS, PARTICIPATION, PASSES
from mel_opt.settings import Setting

__all__ = ["DEFAULT_OVERCOMMIT", "OVERCOMMIT", "SPEC", "DeadlinePolicy", "RoundClose",
           "close_round", "invited"]

#: FedScale's default over-commitment (invite 1.3 m learners, keep the first m).
DEFAULT_OVERCOMMIT = 1.3

OVERCOMMIT = Setting(
    "overcommit", float, DEFAULT_OVERCOMMIT, "deadline and oort invite this many times the "
    "learners they aggregate and keep the first (FedScale's 1.3).", minimum=1.0)


def invited(rng: np.random.Generator, K: int, m: int, overcommit: float = 1.0) -> np.ndarray:
    """Learners invited to a round: ``min(K, ceil(overcommit * m))`` of the K, uniformly at
    random without replacement (FedAvg's and FedScale's random selection), sorted.

    Parameters
    ----------
    rng : numpy Generator
    K : int
        Learners in the population.
    m : int
        Learners a round aggregates (1 <= m <= K).
    overcommit : float
        Factor >= 1 on the learners invited.
    """
    if not 1 <= m <= K or overcommit < 1:
        raise ValueError(f"need 1 <= m <= K and overcommit >= 1, got m={m}, K={K}, "
                         f"overcommit={overcommit}")
    n = min(K, math.ceil(overcommit * m - 1e-9))
    return np.sort(rng.choice(K, n, replace=False))


def close_round(times: np.ndarray, deadline: float, keep: int) -> RoundClose:
    """The round's end: the ``keep``-th finish time if that is within ``deadline``, else the
    deadline; the learners finished by then are kept (at most ``keep``: ties broken by
    position), the rest dropped.

    Parameters
    ----------
    times : ndarray
        Busy time of every invited learner for the round's fixed work [s].
    deadline : float
        D [s] (``inf``: no deadline, the round waits for the ``keep`` fastest).
    keep : int
        m, the learners the round aggregates.

    Examples
    --------
    Times (4, 1, 9, 3), deadline 5, keep 2: the second finish is at 3 s, so the round lasts
    3 s and keeps the learners of 1 s and 3 s; with keep 3 the third finish (4 s) is still
    within the deadline; with keep 4 the fourth (9 s) is not: the round lasts 5 s and keeps
    the three of 1, 3 and 4 s.

    >>> r = close_round(np.array([4.0, 1.0, 9.0, 3.0]), 5.0, 4)
    >>> r.kept.tolist(), r.duration_s
    ([True, True, False, True], 5.0)
    """
    t = np.asarray(times, dtype=float)
    order = np.argsort(t, kind="stable")
    kept = np.zeros(t.size, dtype=bool)
    if t.size == 0 or keep < 1:
        return RoundClose(kept, float(deadline) if math.isfinite(deadline) else 0.0)
    first = order[:keep]
    in_time = first[t[first] <= deadline]
    kept[in_time] = True
    # all of the first min(keep, invited) in time: the round ends at the last of them;
    # otherwise it waits until the deadline
    duration = float(t[first[-1]]) if in_time.size == first.size else float(deadline)
    return RoundClose(kept, duration)


class DeadlinePolicy:
    """Deadline dropping as a synchronous scheme: ``ceil(overcommit m)`` invited at random,
    the same passes each, the first ``m`` within the budget kept."""

    mu = 0.0

    def __init__(self, ctx: RoundContext) -> None:
        self.ctx = ctx

    def invite(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        c = self.ctx
        return invited(c.rng, c.clock.K, c.m, c.options.overcommit), np.empty(0, np.int64)

    def work(self, invited: np.ndarray) -> np.ndarray:
        return self.ctx.fixed_work(invited)

    def close(self, invited: np.ndarray, times: np.ndarray, passes: np.ndarray) -> RoundClose:
        return close_round(times, self.ctx.clock.budget_s, self.ctx.m)

    def learned(self, model: Any, invited: np.ndarray, times: np.ndarray, close: RoundClose,
                r: int, exploited: np.ndarray) -> None:
        pass


SPEC = SchemeSpec(
    "deadline", "FedAvg, fixed local work, round deadline, the late dropped (over-commitment)",
    Loop.ROUNDS, options={"arena": (PARTICIPATION, OVERCOMMIT, PASSES, LOCAL_STEPS)},
    needs=("work_clock",), policy=DeadlinePolicy,
    # 3 x 3 x 2 = 18 points. participation: FedAvg's C, which its authors vary over
    # {0.1, 0.2, 0.5, 1} (McMahan et al., AISTATS 2017, Table 1), 0.1 FedScale's share;
    # local_steps: the passes (None) or FedScale's fixed 20 steps, the work level that sets
    # who meets the deadline; overcommit stays FedScale's 1.3.
    grid={"lr": GRID_LR, "participation": (0.1, 0.3, 1.0), "local_steps": (None, 20)})
