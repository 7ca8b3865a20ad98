"""Oort's participant selection (Lai et al., OSDI 2021), as FedScale's Oort selector runs it.

The rules are those of the authors' selector as merged into FedScale (SymbioticLab/FedScale at
7ec441c: ``thirdparty/oort/oort.py``, class ``_training_selector``, fed by
``fedscale/cloud/client_manager.py`` and ``fedscale/cloud/aggregation/aggregator.py``),
written here in our own code; line numbers are those files'. A round R of the arena is
FedScale's aggregator round R.

- **First round at random.** FedScale's client manager consults Oort from its second selection
  on (client_manager.py 223-229): round 1 invites ``n`` learners uniformly at random, so the
  selector's own round clock reads R - 1 in round R. Where ``n`` is the whole population,
  every learner is invited and Oort is not consulted (client_manager.py 217-218).
- **Rewards.** A learner's reward starts as the samples one round's work trains on it,
  ``min(|B_i|, passes |B_i|)`` (FedScale: ``min(size, local_steps x batch_size)``,
  client_manager.py 62), and becomes its statistical utility (the paper's Eq. (2))

      U_i = |B_i| sqrt( (1 / |B_i|) sum_{k in B_i} Loss(k)^2 )

  once it has been kept in a round. An invited learner dropped from its round is credited
  the mean utility of that round's kept learners (0 if none was kept) and counts as explored
  too (aggregator.py 565-578).
- **Durations learned.** Each invited learner's duration is the last busy time the server
  observed for it, noise included, kept or dropped: each feedback overwrites the previous
  one (oort.py 210-220; aggregator.py 472-478 and 571-576 report a straggler's completion
  time as well). A learner never invited has no duration and no penalty. (FedScale seeds
  every duration from the device profile at registration, client_manager.py 78-85; here
  nothing is known before it is observed.) The preferred duration T is the entry at index
  ``floor(n threshold / 100)`` of the n known durations, sorted; none (no penalty) when the
  threshold reaches 100 or nothing is known yet (oort.py 274-278).
- **Scores of the explored** (oort.py 280-311, 393-402): the rewards of all learners with a
  positive reward (the unexplored ones' data-size rewards included, as FedScale's) give a
  clip value, the entry at index ``floor(0.9 n)`` of them sorted (``clip_bound`` 0.9), a low
  end ``0.999 x`` their least and a range ``max(largest - low, 1e-4)``; a learner's reward,
  clipped at the clip value, is rescaled to ``(min(reward, clip) - low) / range``, which lies
  in [0, 1]. Then the temporal bonus ``sqrt(0.1 ln(R - 1) / L_i)`` is added (R - 1 the
  selector's clock, L_i the round of its last feedback: the round it was kept in, the round
  after for a dropped learner, which FedScale records once its round has advanced), and the
  sum is multiplied by the system penalty ``(T / t_i)^alpha`` when its duration t_i exceeds T.
- **How many explore.** epsilon decays once per selection, ``max(0.9 x 0.98^(R - 1), 0.3)``
  in round R; ``floor(n epsilon)`` places explore, ``min(n - floor(n epsilon), explored)``
  exploit, and exploration takes the places left, as many as there are unexplored learners
  (oort.py 315-319, 353). Where the unexplored run short, FedScale leaves the remaining places
  to its previous explorers (its list of them is not cleared when none is left to explore,
  oort.py 341-364): here exploitation takes them instead.
- **Exploitation** (oort.py 321-337): the explored sorted by score, the reference is the score
  after the first ``n_exploit`` (index ``n_exploit`` of the sorted scores), the cut-off
  ``cut_off_util x reference`` (0.05); learners join the candidate pool in decreasing score,
  and it stops at the first below the cut-off once the pool holds more than ``10 n_exploit``;
  ``n_exploit`` are drawn from the pool without replacement, with probability proportional
  to their scores.
- **Exploration** (oort.py 341-361): each unexplored learner weighs its reward (its data
  size) times the system penalty where its duration is known; the ``floor(sample_window x
  n_explore)`` heaviest (``sample_window`` 5) are the pool, and ``n_explore`` are drawn from
  it without replacement, with probability proportional to their weights.
- **Pacer** (oort.py 167-208): each round adds to a history the mean reward of its exploited
  learners (after the round's feedback; 0 for none); before round R, where R - 1 >= 2 step and
  R - 1 is a multiple of step, the history's last ``step`` entries are summed and compared with
  the ``step`` before: a change of at most 10 % of the earlier sum relaxes the threshold
  (``+ pacer_delta``, at most 100), a change of at least 5 times the earlier sum tightens it
  (``- pacer_delta``, at least ``pacer_delta``). With FedScale's step of 20 the pacer first
  acts before round 41 (comparing rounds 21-40 with 1-20), again before round 61: an arena run
  of 40 rounds or fewer runs at the initial threshold throughout.

Defaults are FedScale's (fedscale/cloud/config_parser.py): alpha (``round_penalty``) 2,
``round_threshold`` 30 (percentile), ``pacer_step`` 20 rounds, ``pacer_delta`` 5 (percentile
points), ``exploration_factor`` 0.9, ``exploration_decay`` 0.98, ``exploration_min`` 0.3,
``cut_off_util`` 0.05, ``clip_bound`` 0.9, ``sample_window`` 5. Not ported: the blacklist (off
by default, ``blacklist_rounds`` -1) and availability traces. The number invited is our
``ceil(overcommit m)`` (FedScale floors it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.schemes.base import GRID_LR, Loop, RoundClose, RoundContext, SchemeSpec
from mel_opt.schemes.deadline import OVERCOMMIT, close_round, invited
from mel_opt.schemes.options import LOCAL_STEPS, PARTICIPATION, PASSES
from mel_opt.settings import Setting

__all__ = ["ALPHA", "SPEC", "OortParams", "OortPolicy", "OortSelector", "Pacer",
           "exploration_share", "preferred_duration", "rescaled_rewards",
           "statistical_utility", "system_penalty", "temporal_bonus"]

ALPHA = Setting("alpha", float, 2.0, "oort's system penalty exponent (round_penalty).",
                minimum=0.0)


@dataclass(frozen=True)
class OortParams:
    """Oort's parameters, FedScale's defaults (module docstring for their sources).

    ``pool_factor`` is the exploitation pool's least size in exploited learners (10),
    ``pacer_flat`` and ``pacer_sharp`` the pacer's relative changes that relax (0.1) and
    tighten (5) the threshold, ``reward_floor`` the rescaled rewards' least range (1e-4).
    """

    alpha: float = 2.0
    threshold: float = 30.0
    pacer_step: int = 20
    pacer_delta: float = 5.0
    exploration_factor: float = 0.9
    exploration_decay: float = 0.98
    exploration_min: float = 0.3
    cut_off: float = 0.05
    clip_bound: float = 0.9
    sample_window: float = 5.0
    pool_factor: float = 10.0
    pacer_flat: float = 0.1
    pacer_sharp: float = 5.0
    reward_floor: float = 1e-4


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
    """(T / t_i)^alpha for learners slower than the preferred duration T, 1 for the others
    and for an unknown duration (NaN) or no T (``inf``); t_i is taken as at least 1e-4 s
    (FedScale's guard).

    >>> system_penalty(10.0, np.array([5.0, 10.0, 20.0, np.nan]), 2.0).tolist()
    [1.0, 1.0, 0.25, 1.0]
    """
    t = np.asarray(durations, dtype=float)
    slow = t > preferred_s
    return np.where(slow, (preferred_s / np.maximum(np.where(slow, t, 1.0), 1e-4)) ** alpha,
                    1.0)


def temporal_bonus(round_no: int, last_round: np.ndarray) -> np.ndarray:
    """sqrt(0.1 ln R / L_i): the reward added to a learner whose last feedback is of round
    L_i >= 1 when the selector's clock reads R (Algorithm 1; oort.py 298-299). The selector
    passes R - 1 in the arena's round R (module docstring).

    >>> temporal_bonus(1, np.array([1])).tolist()  # ln 1 = 0: no bonus
    [0.0]
    """
    last = np.asarray(last_round, dtype=float)
    return np.sqrt(0.1 * math.log(max(round_no, 1)) / np.maximum(last, 1.0))


def exploration_share(round_no: int, factor: float = 0.9, decay: float = 0.98,
                      minimum: float = 0.3) -> float:
    """epsilon of round ``round_no`` (1, 2, ...): ``max(factor decay^(R-1), minimum)``. FedScale
    decays it before each selection, the first in round 2 (module docstring).

    >>> round(exploration_share(1), 6), round(exploration_share(2), 6), exploration_share(100)
    (0.9, 0.882, 0.3)
    """
    return max(factor * decay ** (round_no - 1), minimum)


def preferred_duration(durations: np.ndarray, threshold: float) -> float:
    """T: among the known durations (NaN: unknown) sorted, the entry at index
    ``floor(n threshold / 100)`` (the last for 100); ``inf`` (no penalty) for a threshold of
    100 or more, or none known (oort.py 274-278).

    >>> preferred_duration(np.array([4.0, 1.0, np.nan, 3.0, 2.0, 5.0]), 30.0)  # index 1
    2.0
    >>> preferred_duration(np.array([4.0, 1.0]), 100.0)
    inf
    """
    t = np.asarray(durations, dtype=float)
    t = np.sort(t[~np.isnan(t)])
    if threshold >= 100.0 or t.size == 0:
        return math.inf
    return float(t[min(int(t.size * threshold / 100.0), t.size - 1)])


def rescaled_rewards(rewards: np.ndarray, population: np.ndarray, clip_bound: float = 0.9,
                     floor: float = 1e-4) -> np.ndarray:
    """``rewards`` clipped and rescaled by the positive rewards of ``population`` (FedScale's
    ``get_norm``, oort.py 289-298, 393-402): clip value the entry at index
    ``floor(n clip_bound)`` of the n positive rewards sorted, low end ``0.999 x`` the least,
    range ``max(largest - low, floor)``; a reward becomes ``(min(reward, clip) - low) /
    range``. All 0 where no reward is positive.

    Eleven rewards 1, ..., 10 and 100: the clip value is the entry at index 9, 10; the low end
    0.999, the range 100 - 0.999; 10 and 100 both become (10 - 0.999) / 99.001:

    >>> r = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 100.0])
    >>> rescaled_rewards(r, r)[[0, 9, 10]].round(4).tolist()
    [0.0, 0.0909, 0.0909]
    """
    r = np.asarray(rewards, dtype=float)
    pos = np.sort(np.asarray(population, dtype=float))
    pos = pos[pos > 0]
    if pos.size == 0:
        return np.zeros_like(r)
    clip = pos[min(int(pos.size * clip_bound), pos.size - 1)]
    low = 0.999 * pos[0]
    return (np.minimum(r, clip) - low) / max(pos[-1] - low, floor)


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


def _draw(rng: np.random.Generator, ids: np.ndarray, weights: np.ndarray,
          k: int) -> np.ndarray:
    """``k`` of ``ids`` without replacement, with probability proportional to ``weights``;
    where fewer than ``k`` weigh anything, those and then ``k`` less them of the others at
    random (where FedScale's draw would fail)."""
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    w = np.clip(np.asarray(weights, dtype=float), 0.0, None)
    heavy = w > 0
    if np.count_nonzero(heavy) >= k:
        return np.asarray(rng.choice(ids, k, replace=False, p=w / w.sum()), dtype=np.int64)
    rest = rng.choice(ids[~heavy], k - np.count_nonzero(heavy), replace=False)
    return np.concatenate([ids[heavy], rest]).astype(np.int64)


class OortSelector:
    """FedScale's Oort training selector over K learners (module docstring for the rules).

    Parameters
    ----------
    rewards : ndarray
        Each learner's initial reward: the samples one round's work trains on it.
    params : OortParams
    rng : numpy Generator
    durations : ndarray, optional
        Durations known before any round (NaN: unknown; default: none known).

    Attributes
    ----------
    reward : ndarray
        Each learner's reward: its data-size reward until its first feedback, then its last
        statistical utility (a dropped learner: its round's mean).
    explored : ndarray of bool
        Learners that have given feedback.
    last : ndarray
        Round of each learner's last feedback (L_i).
    durations : ndarray
        Each learner's last observed duration [s] (NaN: not observed).
    pacer : Pacer
    """

    def __init__(self, rewards: np.ndarray, params: OortParams, rng: np.random.Generator,
                 durations: np.ndarray | None = None) -> None:
        self.reward = np.asarray(rewards, dtype=float).copy()
        K = self.reward.size
        self.params = params
        self.rng = rng
        self.explored = np.zeros(K, dtype=bool)
        self.last = np.zeros(K)
        self.durations = (np.full(K, np.nan) if durations is None
                          else np.asarray(durations, dtype=float).copy())
        self.pacer = Pacer(params.pacer_step, params.pacer_delta, params.threshold,
                           params.pacer_flat, params.pacer_sharp)

    @property
    def preferred_s(self) -> float:
        """T, the preferred round duration [s] (``inf``: none)."""
        return preferred_duration(self.durations, self.pacer.threshold)

    def penalty(self, learners: np.ndarray) -> np.ndarray:
        """The system penalty of ``learners`` (1 where the duration is unknown)."""
        return system_penalty(self.preferred_s, self.durations[learners], self.params.alpha)

    def scores(self, round_no: int) -> np.ndarray:
        """Every explored learner's score in the arena's round ``round_no``: (rescaled reward
        + temporal bonus at the selector's clock ``round_no - 1``) x system penalty (NaN for
        the unexplored)."""
        p = self.params
        norm = rescaled_rewards(self.reward, self.reward, p.clip_bound, p.reward_floor)
        bonus = temporal_bonus(round_no - 1, self.last)
        s = np.abs((norm + bonus) * self.penalty(np.arange(self.reward.size)))
        return np.where(self.explored, s, np.nan)

    def counts(self, n: int, round_no: int) -> tuple[int, int]:
        """(exploited, explored) places of the ``n`` of round ``round_no``."""
        p = self.params
        explored = int(self.explored.sum())
        unexplored = self.reward.size - explored
        eps = exploration_share(round_no, p.exploration_factor, p.exploration_decay,
                                p.exploration_min)
        n_exploit = min(n - int(n * eps), explored)
        n_explore = min(unexplored, n - n_exploit)
        if n_exploit + n_explore < n:  # unexplored run short: exploitation fills (not FedScale)
            n_exploit = min(n - n_explore, explored)
        return n_exploit, n_explore

    def exploit_pool(self, k: int, round_no: int) -> tuple[np.ndarray, np.ndarray]:
        """The explored learners that ``k`` exploited places are drawn from, in decreasing
        score, and their scores (oort.py 321-332)."""
        ids = np.flatnonzero(self.explored)
        s = self.scores(round_no)[ids]
        order = np.argsort(-s, kind="stable")
        ids, s = ids[order], s[order]
        cut = self.params.cut_off * s[min(k, s.size - 1)]
        stop = np.flatnonzero((np.arange(s.size) > self.params.pool_factor * k) & (s < cut))
        size = int(stop[0]) if stop.size else s.size
        return ids[:size], s[:size]

    def explore_pool(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The unexplored learners that ``k`` exploring places are drawn from, heaviest first,
        and their weights: data-size reward x system penalty (oort.py 341-356)."""
        ids = np.flatnonzero(~self.explored)
        w = self.reward[ids] * self.penalty(ids)
        order = np.argsort(-w, kind="stable")[:min(int(self.params.sample_window * k),
                                                     ids.size)]
        return ids[order], w[order]

    def select(self, n: int, round_no: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` learners of the arena's round ``round_no`` (2, 3, ...): (exploited,
        explored) index arrays, sorted."""
        n_exploit, n_explore = self.counts(n, round_no)
        exploit = np.empty(0, dtype=np.int64)
        if n_exploit > 0:
            exploit = _draw(self.rng, *self.exploit_pool(n_exploit, round_no), n_exploit)
        explore = np.empty(0, dtype=np.int64)
        if n_explore > 0:
            explore = _draw(self.rng, *self.explore_pool(n_explore), n_explore)
        return np.sort(exploit), np.sort(explore)

    def observe(self, learners: np.ndarray, rewards: np.ndarray, durations: np.ndarray,
                stamp: int) -> None:
        """Feedback of ``learners``: reward, observed duration [s], and ``stamp``, the round
        recorded as their last (oort.py 210-223)."""
        ids = np.asarray(learners, dtype=np.int64)
        self.reward[ids] = rewards
        self.durations[ids] = durations
        self.last[ids] = stamp
        self.explored[ids] = True

    def record(self, exploited: np.ndarray) -> float:
        """Feed the pacer the mean reward of a round's ``exploited`` learners (0 for none;
        oort.py 167-175); returns the percentile for the next round."""
        ids = np.asarray(exploited, dtype=np.int64)
        return self.pacer.record(float(self.reward[ids].mean()) if ids.size else 0.0)


class OortPolicy:
    """Oort as a synchronous scheme: ``ceil(overcommit m)`` invited (at random in round 1,
    then by :class:`OortSelector`), the first ``m`` within the budget kept; the selector
    learns every invited learner's observed duration, the kept learners' statistical
    utilities and the dropped learners' credit (module docstring)."""

    mu = 0.0

    def __init__(self, ctx: RoundContext) -> None:
        self.ctx = ctx
        sizes = np.asarray(ctx.sizes, dtype=float)
        work = ctx.fixed_work(np.arange(sizes.size))
        self.selector = OortSelector(sizes * np.minimum(1.0, work),
                                     OortParams(alpha=ctx.options.alpha), ctx.rng)

    def invite(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        c = self.ctx
        K = c.clock.K
        n = min(K, math.ceil(c.options.overcommit * c.m - 1e-9))
        if r <= 1 or n >= K:
            return invited(c.rng, K, c.m, c.options.overcommit), np.empty(0, dtype=np.int64)
        exploited, explored = self.selector.select(n, r)
        return np.union1d(exploited, explored), exploited

    def work(self, invited: np.ndarray) -> np.ndarray:
        return self.ctx.fixed_work(invited)

    def close(self, invited: np.ndarray, times: np.ndarray, passes: np.ndarray) -> RoundClose:
        return close_round(times, self.ctx.clock.budget_s, self.ctx.m)

    def learned(self, model: Any, invited: np.ndarray, times: np.ndarray, close: RoundClose,
                r: int, exploited: np.ndarray) -> None:
        ids = np.asarray(invited, dtype=np.int64)
        t = np.asarray(times, dtype=float)
        kept = np.asarray(close.kept, dtype=bool)
        utility = (np.asarray(self.ctx.utilities(model, ids[kept]), dtype=float)
                   if kept.any() else np.empty(0))
        mean = float(utility.mean()) if utility.size else 0.0
        self.selector.observe(ids[kept], utility, t[kept], r)
        self.selector.observe(ids[~kept], np.full(int((~kept).sum()), mean), t[~kept], r + 1)
        self.selector.record(exploited)


SPEC = SchemeSpec(
    "oort", "Oort: learners picked by statistical utility x system penalty, with a pacer",
    Loop.ROUNDS, options={"arena": (PARTICIPATION, OVERCOMMIT, PASSES, LOCAL_STEPS, ALPHA)},
    needs=("work_clock",), policy=OortPolicy,
    # 3 x 2 x 2 = 12 points. participation: Oort picks a few of many (its evaluation's 100
    # participants a round of thousands, Lai et al., OSDI 2021, Section 7.1): 0.1 and 0.3,
    # not 1 (everyone invited leaves nothing to select; that is deadline's); local_steps: the
    # passes (None) or FedScale's 20 steps. alpha stays FedScale's round_penalty 2 (--alpha),
    # which Oort's authors do not tune per task.
    grid={"lr": GRID_LR, "participation": (0.1, 0.3), "local_steps": (None, 20)})
