"""Oort's participant selection (Lai et al., OSDI 2021): statistical times system utility.

A learner's utility (the paper's Eq. (2)) is its statistical utility

    U_i = |B_i| sqrt( (1 / |B_i|) sum_{k in B_i} Loss(k)^2 )

(the root mean square of its samples' losses, times how many it has), plus a bonus for the
rounds since it last took part, ``sqrt(0.1 ln R / L_i)`` (R the current round, L_i the round
it last took part in: Algorithm 1), times the system penalty ``(T / t_i)^alpha`` when its round
duration t_i exceeds the preferred duration T (1 otherwise). T is the ``threshold``-th
percentile of the learners' durations; the pacer (FedScale's, thirdparty/oort/oort.py 177-208)
compares the summed utility of the last ``step`` rounds with that of the ``step`` rounds
before, after every ``step``-th round from round ``2 step`` on (first before round 41 with
the default step of 20): a change of at most 10 % relaxes T (``threshold + delta``, at most
100), a change of at least 5 times the earlier sum tightens it (``threshold - delta``, at
least ``delta``). A share epsilon of each round's picks explores learners not seen
yet, the faster first; epsilon starts at 0.9 and decays by 0.98 a round down to 0.3. The rest
exploit: learners whose utility is at least 95 % of the last one that would be picked are
admitted, and the picks are drawn among them with probability proportional to their utility.

Defaults are those of the authors' artifact as merged into FedScale: alpha (``round_penalty``)
2, ``round_threshold`` 30 (percentile), ``pacer_step`` 20 rounds, ``pacer_delta`` 5
(percentile points), ``exploration_factor`` 0.9, ``exploration_decay`` 0.98,
``exploration_min`` 0.3, ``cut_off_util`` 0.05.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.schemes.base import Loop, RoundClose, RoundContext, SchemeSpec
from mel_opt.schemes.deadline import OVERCOMMIT, close_round
from mel_opt.schemes.options import PARTICIPATION, PASSES
from mel_opt.settings import Setting

__all__ = ["ALPHA", "SPEC", "OortParams", "OortPolicy", "OortSelector", "Pacer",
           "exploration_share", "preferred_duration", "statistical_utility", "system_penalty",
           "temporal_bonus"]

ALPHA = Setting("alpha", float, 2.0, "oort's system penalty exponent (round_penalty).",
                minimum=0.0)


@dataclass(frozen=True)
class OortParams:
    """Oort's parameters (module docstring for their sources)."""

    alpha: float = 2.0
    threshold: float = 30.0
    pacer_step: int = 20
    pacer_delta: float = 5.0
    exploration_factor: float = 0.9
    exploration_decay: float = 0.98
    exploration_min: float = 0.3
    cut_off: float = 0.05


def statistical_utility(losses: np.ndarray) -> float:
    """|B| sqrt(mean of squared losses) over a learner's samples (Eq. (2)); 0 for none.

    >>> statistical_utility(np.array([1.0, 1.0, 7.0, 1.0]))  # 4 sqrt(52 / 4)
    14.422205101855956
    """
    loss = np.asarray(losses, dtype=float)
    if loss.size == 0:
        return 0.0
    return float(loss.size * math.sqrt(float(np.mean(loss * loss))))


def system_penalty(preferred_s: float, durations: np.ndarray, alpha: float) -> np.ndarray:
    """(T / t_i)^alpha for learners slower than the preferred duration T, 1 for the others.

    >>> system_penalty(10.0, np.array([5.0, 10.0, 20.0]), 2.0).tolist()
    [1.0, 1.0, 0.25]
    """
    t = np.asarray(durations, dtype=float)
    slow = t > preferred_s
    return np.where(slow, (preferred_s / np.where(slow, t, 1.0)) ** alpha, 1.0)


def temporal_bonus(round_no: int, last_round: np.ndarray) -> np.ndarray:
    """sqrt(0.1 ln R / L_i): the utility added to a learner last seen in round L_i >= 1 when
    round R is picked (Algorithm 1)."""
    last = np.asarray(last_round, dtype=float)
    return np.sqrt(0.1 * math.log(max(round_no, 1)) / np.maximum(last, 1.0))


def exploration_share(round_no: int, factor: float = 0.9, decay: float = 0.98,
                      minimum: float = 0.3) -> float:
    """epsilon of round ``round_no`` (1, 2, ...): ``max(factor decay^(R-1), minimum)``.

    >>> round(exploration_share(1), 6), round(exploration_share(2), 6), exploration_share(100)
    (0.9, 0.882, 0.3)
    """
    return max(factor * decay ** (round_no - 1), minimum)


def preferred_duration(durations: np.ndarray, threshold: float) -> float:
    """T: the duration at the ``threshold``-th percentile of the sorted durations (the entry
    at index ``floor(n threshold / 100)``, the last for 100).

    >>> preferred_duration(np.array([4.0, 1.0, 3.0, 2.0, 5.0]), 30.0)  # index 1 of 1..5
    2.0
    """
    t = np.sort(np.asarray(durations, dtype=float))
    return float(t[min(int(t.size * threshold / 100.0), t.size - 1)])


class Pacer:
    """Oort's pacer (oort.py 177-208): relaxes the preferred duration's percentile when the
    exploited utility is flat, tightens it when it jumps.

    :meth:`record` takes one round's exploited utility; after every ``step``-th round from
    round ``2 step`` on, the sum of the last ``step`` entries is compared with the sum of the
    ``step`` before: a change of at most ``flat`` (10 %) of the earlier sum raises the
    percentile by ``delta`` (at most 100), a change of at least ``sharp`` (5) times the
    earlier sum lowers it by ``delta`` (at least ``delta``).

    Examples
    --------
    >>> p = Pacer(step=2, delta=5.0, threshold=30.0)
    >>> [p.record(u) for u in (3.0, 3.0, 3.5, 2.9)]  # |6.4 - 6| <= 0.6: relax
    [30.0, 30.0, 30.0, 35.0]
    >>> [p.record(u) for u in (20.0, 20.0)]  # |40 - 6.4| >= 5 x 6.4: tighten
    [35.0, 30.0]
    """

    def __init__(self, step: int, delta: float, threshold: float, flat: float = 0.1,
                 sharp: float = 5.0) -> None:
        self.step = max(1, int(step))
        self.delta = float(delta)
        self.threshold = float(threshold)
        self.flat = float(flat)
        self.sharp = float(sharp)
        self.history: list[float] = []

    def record(self, utility: float) -> float:
        """Add one round's exploited utility; returns the percentile for the next round."""
        self.history.append(float(utility))
        n, s = len(self.history), self.step
        if n >= 2 * s and n % s == 0:
            before = sum(self.history[-2 * s:-s])
            change = abs(sum(self.history[-s:]) - before)
            if change <= self.flat * before:
                self.threshold = min(100.0, self.threshold + self.delta)
            elif change >= self.sharp * before:
                self.threshold = max(self.delta, self.threshold - self.delta)
        return self.threshold


class OortSelector:
    """Oort's selection over K learners whose round durations are known (device profiles).

    Parameters
    ----------
    durations : ndarray
        Each learner's round duration for the round's work [s].
    params : OortParams
    rng : numpy Generator
    """

    def __init__(self, durations: np.ndarray, params: OortParams,
                 rng: np.random.Generator) -> None:
        self.durations = np.asarray(durations, dtype=float)
        self.params = params
        self.rng = rng
        K = self.durations.size
        self.utility = np.full(K, np.nan)  # NaN: not explored yet
        self.last = np.zeros(K)
        self.pacer = Pacer(params.pacer_step, params.pacer_delta, params.threshold)

    @property
    def preferred_s(self) -> float:
        """T, the preferred round duration [s]."""
        return preferred_duration(self.durations, self.pacer.threshold)

    def scores(self, round_no: int) -> np.ndarray:
        """Every explored learner's (utility + temporal bonus) x system penalty (NaN for
        the unexplored)."""
        bonus = temporal_bonus(round_no, self.last)
        pen = system_penalty(self.preferred_s, self.durations, self.params.alpha)
        return (self.utility + bonus) * pen

    def select(self, n: int, round_no: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` learners of round ``round_no``: (exploited, explored) index arrays."""
        p = self.params
        unexplored = np.flatnonzero(np.isnan(self.utility))
        explored = np.flatnonzero(~np.isnan(self.utility))
        eps = exploration_share(round_no, p.exploration_factor, p.exploration_decay,
                                p.exploration_min)
        n_explore = min(unexplored.size, max(n - explored.size, round(eps * n)))
        n_exploit = min(n - n_explore, explored.size)
        exploit = np.empty(0, dtype=np.int64)
        if n_exploit > 0:
            s = self.scores(round_no)[explored]
            cut = (1.0 - p.cut_off) * np.sort(s)[::-1][n_exploit - 1]
            w = np.maximum(s[s >= cut], 1e-12)
            exploit = self.rng.choice(explored[s >= cut], n_exploit, replace=False,
                                      p=w / w.sum())
        explore = np.empty(0, dtype=np.int64)
        if n_explore > 0:
            speed = 1.0 / np.maximum(self.durations[unexplored], 1e-12)
            explore = self.rng.choice(unexplored, n_explore, replace=False,
                                      p=speed / speed.sum())
        return np.sort(exploit), np.sort(explore)

    def update(self, learners: np.ndarray, utilities: np.ndarray, round_no: int,
               exploited: np.ndarray) -> None:
        """Record the statistical utilities of the learners kept in round ``round_no`` and
        feed the pacer the summed utility of those that were exploited."""
        ids = np.asarray(learners, dtype=np.int64)
        u = np.asarray(utilities, dtype=float)
        self.utility[ids] = u
        self.last[ids] = round_no
        self.pacer.record(float(u[np.isin(ids, exploited)].sum()))


class OortPolicy:
    """Oort as a synchronous scheme: ``ceil(overcommit m)`` picked by :class:`OortSelector`
    (each learner's duration for the round's passes known in advance), the first ``m`` within
    the budget kept, their statistical utilities recorded."""

    mu = 0.0

    def __init__(self, ctx: RoundContext) -> None:
        self.ctx = ctx
        clock = ctx.clock
        self.selector = OortSelector(clock.seconds(np.arange(clock.K), ctx.passes),
                                     OortParams(alpha=ctx.options.alpha), ctx.rng)

    def invite(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        c = self.ctx
        n = min(c.clock.K, math.ceil(c.options.overcommit * c.m - 1e-9))
        exploited, explored = self.selector.select(n, r)
        return np.union1d(exploited, explored), exploited

    def work(self, invited: np.ndarray) -> np.ndarray:
        return np.full(invited.size, self.ctx.passes)

    def close(self, times: np.ndarray, passes: np.ndarray) -> RoundClose:
        return close_round(times, self.ctx.clock.budget_s, self.ctx.m)

    def learned(self, model: Any, invited: np.ndarray, times: np.ndarray, close: RoundClose,
                r: int, exploited: np.ndarray) -> None:
        kept = invited[close.kept]
        if kept.size == 0:
            return
        self.selector.update(kept, self.ctx.utilities(model, kept), r, exploited)


SPEC = SchemeSpec(
    "oort", "Oort: learners picked by statistical utility x system penalty, with a pacer",
    Loop.ROUNDS, options={"arena": (PARTICIPATION, OVERCOMMIT, PASSES, ALPHA)},
    needs=("work_clock",), policy=OortPolicy)
