"""OortPolicy against FedScale's Oort selector's rules, worked by hand.

Each test drives :class:`~mel_opt.schemes.oort.OortPolicy` through its round hooks with a
small context: a real :class:`~mel_opt.problems.work.WorkClock`, given data sizes and
utilities, and a random generator that records every draw (its candidates and
probabilities) and answers with the most probable candidates, so that the pools and the
probabilities FedScale's rules give can be checked exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any, cast

import numpy as np

from mel_opt.problems.work import WorkClock
from mel_opt.schemes.base import RoundClose
from mel_opt.schemes.oort import OortParams, OortPolicy, OortSelector


class SpyRng:
    """Records each ``choice`` (candidates, probabilities or None) and returns the ``size``
    candidates of the highest probability (the first ones where none is given)."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, np.ndarray | None]] = []

    def choice(self, a: Any, size: int, replace: bool = True, p: Any = None) -> np.ndarray:
        ids = np.arange(a) if isinstance(a, (int, np.integer)) else np.asarray(a)
        probs = None if p is None else np.asarray(p, dtype=float)
        self.calls.append((ids.copy(), probs))
        if probs is None:
            return ids[:size]
        return ids[np.argsort(-probs, kind="stable")[:size]]


def policy(sizes: Sequence[float], utilities: Sequence[float], m: int, overcommit: float = 1.0,
           per_pass: Sequence[float] | None = None, passes: float = 1.0) -> OortPolicy:
    """An OortPolicy over ``len(sizes)`` learners; the clock's times are ``per_pass`` (1 s
    each by default) per pass, the deadline none."""
    K = len(sizes)
    clock = WorkClock(budget_s=math.inf,
                      per_pass_s=np.array(per_pass if per_pass else [1.0] * K),
                      fixed_s=np.zeros(K), passes=passes)
    table = np.array(utilities, dtype=float)
    ctx = SimpleNamespace(rng=SpyRng(), clock=clock, m=m, passes=passes,
                          options=SimpleNamespace(alpha=2.0, overcommit=overcommit),
                          sizes=np.array(sizes, dtype=np.int64),
                          fixed_work=lambda learners: np.full(len(learners), float(passes)),
                          utilities=lambda model, learners: table[np.asarray(learners)])
    return OortPolicy(ctx)  # type: ignore[arg-type]


def draws(pol: OortPolicy) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """The draws recorded by ``pol``'s :class:`SpyRng`."""
    return cast(SpyRng, pol.ctx.rng).calls


def learn(pol: OortPolicy, invited: list[int], times: list[float], kept: list[bool], r: int,
          exploited: tuple[int, ...] | list[int] = ()) -> None:
    """Round ``r``'s feedback: the invited learners, their observed times, who was kept."""
    pol.learned(None, np.array(invited), np.array(times), RoundClose(np.array(kept), 0.0), r,
                np.array(exploited, dtype=np.int64))


def test_rewards_are_rescaled_so_the_staleness_bonus_counts() -> None:
    # defect 1: 12 learners kept in round 1 with utilities 1..12, all 1 s (no penalty)
    u = [float(k) for k in range(1, 13)]
    pol = policy([100] * 12, u, m=1)
    learn(pol, list(range(12)), [1.0] * 12, [True] * 12, 1)
    # round 5, the selector's clock 4: bonus sqrt(0.1 ln 4 / 1) = 0.372330. Utilities clipped
    # at the entry at index floor(12 x 0.9) = 10 (11), low end 0.999, range 12 - 0.999 =
    # 11.001: learners 10 and 11 (11 and 12) score 10.001 / 11.001 + 0.372330 = 1.281429,
    # learner 0 (1) 0.001 / 11.001 + 0.372330 = 0.372421, learner 5 (6) 0.826925. The old
    # code added sqrt(0.1 ln 5) = 0.40 to the raw 1..12.
    s = pol.selector.scores(5)
    b = math.sqrt(0.1 * math.log(4))
    assert math.isclose(b, 0.372330, abs_tol=1e-6)
    np.testing.assert_allclose(s[[0, 5, 10, 11]], [0.372421, 0.826925, 1.281429, 1.281429],
                               atol=1e-6)


def test_unexplored_data_sizes_enter_the_rescaling() -> None:
    # learners 0 and 1 kept in round 1 (utilities 2, 4), learner 2 never invited: its reward
    # is its data size, 10 samples (one pass). Rewards 2, 4, 10: clip at index floor(2.7) = 2
    # (10), low 1.998, range 8.002; round 2 (clock 1): no bonus (ln 1 = 0), so learner 0
    # scores 0.002 / 8.002 = 0.000250 and learner 1 2.002 / 8.002 = 0.250187
    pol = policy([10, 10, 10], [2.0, 4.0, 0.0], m=1)
    learn(pol, [0, 1], [1.0, 1.0], [True, True], 1)
    np.testing.assert_allclose(pol.selector.scores(2)[:2], [0.000250, 0.250187], atol=1e-6)


UTILITIES = [101, 101, 81, 61, 41, 21, 11, 6, 5, 4, 3, 2, 1.5, 1]


def test_exploitation_pool_is_the_cut_off_or_ten_times_the_picks() -> None:
    # defect 2: 14 learners kept in round 1, all 1 s; one place (m 1, overcommit 1). Round 2:
    # epsilon 0.882, floor(0.882) = 0 explore, 1 exploits; no bonus (ln 1). Rewards' clip at
    # index floor(12.6) = 12 of the sorted, 101 (no clipping); low 0.999, range 100.001:
    # scores (u - 0.999) / 100.001 = 1, 1, 0.8, 0.6, 0.4, 0.2, 0.1, 0.050, 0.040, 0.030,
    # 0.020, 0.010, 0.005, 0.00001. The reference is the score at index 1 (after the one
    # exploited), 1.0; the cut-off 0.05 x 1.0. The pool takes learners in decreasing score
    # and stops at the first below 0.05 once it holds more than 10 x 1: learners 0-10 (8, 9
    # and 10 are below the cut-off but the pool is not yet 11), not 11-13. The old code kept
    # those within 95 % of the best: 0 and 1.
    pol = policy([100] * 14, UTILITIES, m=1)
    learn(pol, list(range(14)), [1.0] * 14, [True] * 14, 1)
    invited, exploited = pol.invite(2)
    assert len(draws(pol)) == 1
    pool, p = draws(pol)[0]
    assert sorted(pool.tolist()) == list(range(11))
    # probabilities proportional to the scores: sum of (u - 0.999) over 0-10 is 435 - 10.989
    # = 424.011; learner 0: 100.001 / 424.011 = 0.235845, learner 10: 2.001 / 424.011 =
    # 0.004719
    assert p is not None
    got = dict(zip(pool.tolist(), p.tolist(), strict=True))
    assert math.isclose(got[0], 0.235845, abs_tol=1e-6)
    assert math.isclose(got[10], 0.004719, abs_tol=1e-6)
    assert invited.tolist() == exploited.tolist() == [0]


def test_exploitation_pool_takes_everyone_above_the_cut_off() -> None:
    # as above with the scores of learners 10-12 at (6.5, 6.1, 6.0 - 0.999) / 100.001 =
    # 0.055, 0.051, 0.050009, all >= 0.05: they join past 11; learner 13 (0.00001) does not
    u = [101, 101, 81, 61, 41, 21, 11, 9, 8, 7, 6.5, 6.1, 6.0, 1]
    pol = policy([100] * 14, u, m=1)
    learn(pol, list(range(14)), [1.0] * 14, [True] * 14, 1)
    pol.invite(2)
    pool, _ = draws(pol)[0]
    assert sorted(pool.tolist()) == list(range(13))


def test_first_round_is_at_random() -> None:
    # FedScale's client manager picks round 1 uniformly at random (no probabilities) and
    # consults Oort from round 2 on; the old code drew round 1 by speed
    pol = policy([10] * 12, [1.0] * 12, m=2, per_pass=[k + 1.0 for k in range(12)])
    first, exploited = pol.invite(1)
    assert draws(pol)[0][1] is None
    assert first.size == 2 and exploited.size == 0


def test_exploration_by_data_size() -> None:
    # defect 4: 12 learners of 10, 20, ..., 120 samples, a pass costing 1, 2, ..., 12 s (the
    # more data the slower); 2 places (m 2, overcommit 1). Round 2 with nothing explored: 2
    # explore. The window holds the floor(5 x 2) = 10 with the most data (learners 2-11, 30..
    # 120 samples: no duration known, no penalty), drawn with probability size / (30 + ... +
    # 120) = size / 750: learner 11 120 / 750 = 0.16, learner 2 30 / 750 = 0.04. The old code
    # drew all 12 by speed, the fastest (learner 0) the likeliest.
    sizes = [10 * (k + 1) for k in range(12)]
    pol = policy(sizes, [1.0] * 12, m=2, per_pass=[k + 1.0 for k in range(12)])
    invited, exploited = pol.invite(2)
    pool, p = draws(pol)[0]
    assert p is not None
    assert sorted(pool.tolist()) == list(range(2, 12))
    got = dict(zip(pool.tolist(), p.tolist(), strict=True))
    assert math.isclose(got[11], 0.16) and math.isclose(got[2], 0.04)
    assert invited.tolist() == [10, 11] and exploited.size == 0


def test_exploration_penalises_a_known_slow_learner() -> None:
    # 12 unexplored learners of reward 10 whose durations are known beforehand (FedScale's
    # device profiles): 1 s for 0-5, 2 s for 6-11. T: index floor(12 x 0.3) = 3 of the sorted,
    # 1 s; the slow ones weigh 10 x (1 / 2)^2 = 2.5. Two explore: the window of 10 holds the
    # six fast and the first four slow (6-9); p = 10 / 70 = 1/7 and 2.5 / 70 = 1/28
    rng = SpyRng()
    sel = OortSelector(np.full(12, 10.0), OortParams(), rng,  # type: ignore[arg-type]
                       durations=np.array([1.0] * 6 + [2.0] * 6))
    sel.select(2, 2)
    pool, p = rng.calls[0]
    assert p is not None
    assert pool.tolist() == list(range(10))
    np.testing.assert_allclose(p, [1 / 7] * 6 + [1 / 28] * 4)


def test_durations_are_learned_from_observed_times() -> None:
    # defect 5: 6 learners whose clock says 1..6 s a pass. Round 1 invites 0, 2, 4, observed
    # (noise included) at 3.5, 1.2 and 9.0 s; 0 and 2 are kept (utilities 5, 7), 4 dropped
    pol = policy([10] * 6, [5.0, 0.0, 7.0, 0.0, 0.0, 0.0], m=2,
                 per_pass=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    learn(pol, [0, 2, 4], [3.5, 1.2, 9.0], [True, True, False], 1, exploited=[])
    sel = pol.selector
    # durations: the observed ones, the dropped one's too; none for the never-invited
    np.testing.assert_array_equal(sel.durations, [3.5, np.nan, 1.2, np.nan, 9.0, np.nan])
    # T: known 1.2, 3.5, 9.0, index floor(3 x 0.3) = 0: 1.2 s (the old code: 2 s, the clock's
    # second of 1..6); learner 0 is penalised by (1.2 / 3.5)^2 = 0.117551
    assert sel.preferred_s == 1.2
    assert math.isclose(float(sel.penalty(np.array([0]))[0]), 0.117551, abs_tol=1e-6)
    # the dropped learner is explored, credited the kept learners' mean utility (5 + 7) / 2
    # = 6 and stamped with the round after its own (FedScale records it once the round has
    # advanced)
    assert sel.explored.tolist() == [True, False, True, False, True, False]
    assert sel.reward[4] == 6.0
    assert sel.last.tolist() == [1.0, 0.0, 1.0, 0.0, 2.0, 0.0]
    # a later observation replaces the duration (FedScale keeps the last, not a mean)
    learn(pol, [0], [2.0], [True], 2)
    assert sel.durations[0] == 2.0


def test_pacer_is_fed_the_mean_reward_of_the_exploited() -> None:
    # round 1: 0, 1, 2 invited, 0 and 1 kept (utilities 2, 6), 2 dropped (credited 4); 1 and
    # 2 were exploited: the pacer records (6 + 4) / 2 = 5 (the old code: 6, the kept
    # exploited's sum); a round without exploitation records 0
    pol = policy([10] * 4, [2.0, 6.0, 0.0, 0.0], m=2)
    learn(pol, [0, 1, 2], [1.0, 1.0, 3.0], [True, True, False], 1, exploited=[1, 2])
    learn(pol, [0, 3], [1.0, 1.0], [True, True], 2, exploited=[])
    assert pol.selector.pacer.history == [5.0, 0.0]


def test_every_round_invites_n_distinct_learners() -> None:
    # 30 learners, m 8, overcommit 1.3: ceil(10.4) = 11 invited each of 60 rounds (past the
    # pacer's first two comparisons, the unexplored long exhausted), the first 8 finishers
    # kept, with a real generator; some utilities 0 (a learner whose losses are all 0)
    K, m = 30, 8
    rng = np.random.default_rng(3)
    pol = policy([int(s) for s in rng.integers(0, 200, K)], list(rng.uniform(0, 50, K) *
                                                              (rng.random(K) > 0.2)),
                 m=m, overcommit=1.3, per_pass=list(rng.uniform(1, 10, K)))
    pol.ctx.rng = np.random.default_rng(4)
    pol.selector.rng = pol.ctx.rng
    for r in range(1, 61):
        ids, exploited = pol.invite(r)
        assert ids.size == 11 and np.unique(ids).size == 11 and np.isin(exploited, ids).all()
        times = pol.ctx.clock.seconds(ids, 1.0) * rng.lognormal(0.0, 0.3, ids.size)
        close = pol.close(ids, times, pol.work(ids))
        pol.learned(None, ids, times, close, r, exploited)
    assert pol.selector.explored.all() and len(pol.selector.pacer.history) == 60
