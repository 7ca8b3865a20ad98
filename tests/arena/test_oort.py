"""Oort's utility, penalty, exploration, preferred duration and pacer, by hand."""

from __future__ import annotations

import math

import numpy as np

from mel_opt.schemes.oort import (
    OortParams,
    OortSelector,
    Pacer,
    exploration_share,
    preferred_duration,
    statistical_utility,
    system_penalty,
    temporal_bonus,
)


def test_statistical_utility() -> None:
    # |B| sqrt(mean l^2): 4 samples with losses 1, 1, 7, 1 -> 4 sqrt(52 / 4) = 4 sqrt(13)
    assert math.isclose(statistical_utility(np.array([1.0, 1.0, 7.0, 1.0])), 4 * math.sqrt(13))
    assert statistical_utility(np.array([3.0])) == 3.0
    assert statistical_utility(np.array([])) == 0.0


def test_system_penalty_and_bonus() -> None:
    # T = 10 s, alpha = 2: faster or equal -> 1; 20 s -> (10/20)^2; 40 s -> 1/16
    np.testing.assert_allclose(system_penalty(10.0, np.array([5.0, 10.0, 20.0, 40.0]), 2.0),
                               [1.0, 1.0, 0.25, 1 / 16])
    np.testing.assert_allclose(system_penalty(10.0, np.array([20.0]), 0.5), [math.sqrt(0.5)])
    # round 10, last seen in rounds 1 and 5: sqrt(0.1 ln 10 / 1), sqrt(0.1 ln 10 / 5)
    np.testing.assert_allclose(temporal_bonus(10, np.array([1, 5])),
                               [math.sqrt(0.1 * math.log(10)), math.sqrt(0.02 * math.log(10))])


def test_exploration_decays_to_its_floor() -> None:
    assert exploration_share(1) == 0.9
    assert math.isclose(exploration_share(3), 0.9 * 0.98 ** 2)
    # 0.9 * 0.98^(R-1) < 0.3 from R - 1 > ln(1/3) / ln(0.98) = 54.4, i.e. R = 56
    assert exploration_share(55) > 0.3 and exploration_share(56) == 0.3


def test_preferred_duration_percentile() -> None:
    t = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 7.0, 6.0, 9.0, 8.0])
    assert preferred_duration(t, 30.0) == 4.0  # index 3 of 1..10
    assert preferred_duration(t, 0.0) == 1.0
    assert preferred_duration(t, 100.0) == 10.0


def test_pacer_relaxes_when_flat_and_tightens_on_a_jump() -> None:
    p = Pacer(step=2, delta=5.0, threshold=30.0)
    # records 1-4: rounds 1-2 sum 10, rounds 3-4 sum 9.2: |9.2 - 10| = 0.8 <= 1 (10 %): a
    # small fall relaxes too, to 35 (the old rule, "not larger", relaxed here as well);
    # rounds 5-6 sum 10: |10 - 9.2| = 0.8 <= 0.92: a small rise relaxes, to 40 (the old rule
    # did not); rounds 7-8 sum 60: |60 - 10| = 50 >= 5 x 10: tightens, to 35; rounds 9-10
    # sum 20: |20 - 60| = 40, neither <= 6 nor >= 300: kept at 35
    got = [p.record(u) for u in (5.0, 5.0, 4.6, 4.6, 5.0, 5.0, 30.0, 30.0, 10.0, 10.0)]
    assert got == [30.0, 30.0, 30.0, 35.0, 35.0, 40.0, 40.0, 35.0, 35.0, 35.0]
    # bounds: at most 100, at least delta
    q = Pacer(step=1, delta=50.0, threshold=90.0)
    assert [q.record(1.0) for _ in range(3)] == [90.0, 100.0, 100.0]
    low = Pacer(step=1, delta=5.0, threshold=5.0)
    assert [low.record(u) for u in (1.0, 6.0, 36.0)] == [5.0, 5.0, 5.0]  # 5x jumps, at 5


def test_pacer_first_acts_after_twice_its_step() -> None:
    # FedScale's step of 20 with a flat utility: the first comparison is after round 40
    # (rounds 21-40 against 1-20), so round 41 is the first at 35
    p = Pacer(step=20, delta=5.0, threshold=30.0)
    got = [p.record(1.0) for _ in range(60)]
    assert got[:39] == [30.0] * 39 and got[39] == 35.0
    assert got[40:59] == [35.0] * 19 and got[59] == 40.0


def test_selector_explores_then_exploits_the_useful() -> None:
    durations = np.array([1.0, 2.0, 3.0, 4.0, 50.0, 60.0])
    sel = OortSelector(durations, OortParams(), np.random.default_rng(0))
    # round 1: nothing explored, every pick explores
    exploit, explore = sel.select(3, 1)
    assert exploit.size == 0 and explore.size == 3
    # learners 0-3 explored with utilities 100, 1, 1, 1; round 2, 4 picks: eps = 0.882 asks
    # round(3.53) = 4 explorers, only 2 are unexplored (4, 5), so 2 exploit
    sel = OortSelector(durations, OortParams(), np.random.default_rng(0))
    sel.update(np.array([0, 1, 2, 3]), np.array([100.0, 1.0, 1.0, 1.0]), 1,
               np.empty(0, dtype=np.int64))
    exploit, explore = sel.select(4, 2)
    assert explore.tolist() == [4, 5]
    # exploit scores (u + bonus) x penalty: 0 and 1 (durations <= T = 2 s) unpenalised, 2 by
    # (2/3)^2, 3 by (2/4)^2; the cut-off is 95 % of the 2nd best (learner 1): only 0 and 1
    assert exploit.tolist() == [0, 1]
    # T at the 30th percentile of the six durations is the entry at index 1: 2 s; learner 3
    # (4 s) is penalised by (2/4)^2
    assert sel.preferred_s == 2.0
    s = sel.scores(2)
    bonus = math.sqrt(0.1 * math.log(2))
    assert math.isclose(s[3], (1.0 + bonus) * 0.25)
    assert math.isnan(s[4])
