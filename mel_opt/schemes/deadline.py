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

import numpy as np

__all__ = ["DEFAULT_OVERCOMMIT", "RoundClose", "close_round", "invited"]

#: FedScale's default over-commitment (invite 1.3 m learners, keep the first m).
DEFAULT_OVERCOMMIT = 1.3


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


class RoundClose:
    """How a round ended: who is kept and how long it lasted.

    Attributes
    ----------
    kept : ndarray of bool
        Per invited learner (the order of ``times``): its update is aggregated.
    duration_s : float
        The round's length on the clock [s].
    """

    def __init__(self, kept: np.ndarray, duration_s: float) -> None:
        self.kept = kept
        self.duration_s = duration_s


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
