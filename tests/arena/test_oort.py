"""Oort's utility, penalty, exploration, preferred duration, pacer and selector, by hand (the
rules of FedScale's Oort selector, mel_opt/schemes/oort.py's docstring)."""

from __future__ import annotations

import math

import numpy as np

from mel_opt.schemes.oort import (
    OortParams,
    OortSelector,
    Pacer,
    exploration_share,
    preferred_duration,
    rescaled_rewards,
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
    # an unknown duration (NaN) and no preferred duration (inf) are not penalised
    assert system_penalty(10.0, np.array([np.nan]), 2.0).tolist() == [1.0]
    assert system_penalty(math.inf, np.array([1e9]), 2.0).tolist() == [1.0]
    # round 10, last seen in rounds 1 and 5: sqrt(0.1 ln 10 / 1), sqrt(0.1 ln 10 / 5)
    np.testing.assert_allclose(temporal_bonus(10, np.array([1, 5])),
                               [math.sqrt(0.1 * math.log(10)), math.sqrt(0.02 * math.log(10))])


def test_exploration_decays_to_its_floor() -> None:
    assert exploration_share(1) == 0.9
    assert math.isclose(exploration_share(3), 0.9 * 0.98 ** 2)
    # 0.9 * 0.98^(R-1) < 0.3 from R - 1 > ln(1/3) / ln(0.98) = 54.4, i.e. R = 56
    assert exploration_share(55) > 0.3 and exploration_share(56) == 0.3


def test_preferred_duration_percentile_of_the_known() -> None:
    t = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 10.0, 7.0, 6.0, 9.0, 8.0])
    assert preferred_duration(t, 30.0) == 4.0  # index floor(10 x 0.3) = 3 of 1..10
    assert preferred_duration(t, 0.0) == 1.0
    assert preferred_duration(t, 99.0) == 10.0  # index floor(9.9) = 9
    # FedScale: no preferred duration (no penalty) once the threshold reaches 100
    assert preferred_duration(t, 100.0) == math.inf
    # the unknown (NaN) do not count: known 5, 1, 4 sorted 1, 4, 5, index floor(0.9) = 0
    assert preferred_duration(np.array([5.0, np.nan, 1.0, 4.0, np.nan]), 30.0) == 1.0
    assert preferred_duration(np.array([np.nan, np.nan]), 30.0) == math.inf


def test_rewards_clipped_at_the_90th_percentile_and_rescaled() -> None:
    # 12 rewards 1..12: clip value the entry at index floor(12 x 0.9) = 10, i.e. 11; low end
    # 0.999 x 1, range 12 - 0.999 = 11.001: 12 and 11 both become 10.001 / 11.001, 1 becomes
    # 0.001 / 11.001, 6 becomes 5.001 / 11.001
    r = np.arange(1.0, 13.0)
    got = rescaled_rewards(r, r)
    np.testing.assert_allclose(got[[0, 5, 10, 11]],
                               [0.001 / 11.001, 5.001 / 11.001, 10.001 / 11.001,
                                10.001 / 11.001])
    assert got.min() >= 0.0 and got.max() <= 1.0
    # only positive rewards make the statistics; none positive: all 0
    np.testing.assert_allclose(rescaled_rewards(np.array([0.0, 4.0]), np.array([0.0, 4.0, 2.0])),
                               [(0 - 1.998) / 2.002, (4 - 1.998) / 2.002])
    assert rescaled_rewards(np.array([0.0]), np.array([0.0])).tolist() == [0.0]


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


def test_selector_counts_explore_floor_and_fill() -> None:
    sel = OortSelector(np.ones(20), OortParams(), np.random.default_rng(0))
    sel.observe(np.arange(3), np.ones(3), np.ones(3), 1)
    # round 2: epsilon 0.882, floor(10 x 0.882) = 8 explore, min(10 - 8, 3 explored) = 2
    # exploit, min(17 unexplored, 10 - 2) = 8 explore
    assert sel.counts(10, 2) == (2, 8)
    # one explored: exploitation gets 1, exploration the other 9
    sel = OortSelector(np.ones(20), OortParams(), np.random.default_rng(0))
    sel.observe(np.array([0]), np.ones(1), np.ones(1), 1)
    assert sel.counts(10, 2) == (1, 9)
    # one unexplored left: exploitation 2 + exploration 1 leave 7 places, which exploitation
    # takes (FedScale would leave them to its previous explorers): (9, 1)
    sel.observe(np.arange(19), np.ones(19), np.ones(19), 1)
    assert sel.counts(10, 2) == (9, 1)


def test_selector_scores_and_draws() -> None:
    # 4 learners; 0-2 observed in round 1 (utilities 2, 4, 10, durations 1, 1, 4 s); 3 is
    # unexplored with a data-size reward of 8
    sel = OortSelector(np.array([5.0, 5.0, 5.0, 8.0]), OortParams(), np.random.default_rng(0))
    sel.observe(np.array([0, 1, 2]), np.array([2.0, 4.0, 10.0]), np.array([1.0, 1.0, 4.0]), 1)
    # T: known 1, 1, 4, index floor(0.9) = 0: 1 s; learner 2 is penalised by (1/4)^2
    assert sel.preferred_s == 1.0
    # rewards 2, 4, 10, 8: clip at index floor(3.6) = 3 (10), low 1.998, range 8.002; round 3:
    # clock 2, bonus sqrt(0.1 ln 2 / 1) = 0.263297
    b = math.sqrt(0.1 * math.log(2))
    s = sel.scores(3)
    np.testing.assert_allclose(s[:3], [0.002 / 8.002 + b, 2.002 / 8.002 + b,
                                       (8.002 / 8.002 + b) / 16])
    assert math.isnan(s[3])
    exploit, explore = sel.select(2, 3)
    # round 3: epsilon 0.9 x 0.98^2 = 0.864, floor(1.73) = 1 explores (learner 3, the only
    # one), 1 exploits
    assert explore.tolist() == [3] and exploit.size == 1
