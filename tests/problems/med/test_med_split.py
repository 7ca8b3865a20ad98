"""The per-task oracles (min-max split, least-cost steps) against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mel_opt.problems.med import split


def brute_level(A, C, L, D):
    best = math.inf
    w = len(A)
    for d in itertools.product(range(L, D + 1), repeat=w):
        if sum(d) == D:
            best = min(best, max(a + c * x for a, c, x in zip(A, C, d, strict=True)))
    return best


groups = st.lists(st.tuples(st.floats(0.0, 5.0), st.floats(0.1, 4.0)), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(groups, st.integers(1, 2), st.integers(1, 9))
def test_min_max_level_is_the_brute_force_optimum(pairs, L, D):
    A = np.array([a for a, _ in pairs])
    C = np.array([c for _, c in pairs])
    want = brute_level(A, C, L, D)
    got = split.min_max_level(A, C, np.ones(len(pairs), dtype=int), L, D)
    if math.isinf(want):
        assert math.isinf(got)
    else:
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
        many = split.min_max_levels(A, C, np.ones((1, len(pairs))), L, D)
        assert many[0] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_grouped_counts_equal_repeated_learners():
    # two groups, counts (2, 3): the same as listing the five learners one by one
    A, C = np.array([1.0, 0.5]), np.array([2.0, 3.5])
    grouped = split.min_max_level(A, C, np.array([2, 3]), 1, 17)
    flat = brute_level([1.0, 1.0, 0.5, 0.5, 0.5], [2.0, 2.0, 3.5, 3.5, 3.5], 1, 17)
    assert grouped == pytest.approx(flat)
    counts = np.array([[2, 3], [0, 3], [2, 0], [1, 1], [0, 0]])
    many = split.min_max_levels(A, C, counts, 1, 17)
    singles = [split.min_max_level(A, C, c, 1, 17) for c in counts]
    assert np.allclose(many[:4], singles[:4]) and math.isinf(many[4]) and math.isinf(singles[4])


def test_known_level_by_hand():
    # A = (2, 2), C = (2, 3), D = 10: the 6/4 split balances at 14 (see test_med_known)
    assert split.min_max_level(np.array([2.0, 2.0]), np.array([2.0, 3.0]), np.array([1, 1]),
                               1, 10) == pytest.approx(14.0)


def brute_frontier(A, C, p, L, D, hmax):
    """Every split's (max delay, cost), reduced to the least cost at each level."""
    pts = []
    for d in itertools.product(range(L, D + 1), repeat=len(A)):
        if sum(d) != D:
            continue
        h = max(a + c * x for a, c, x in zip(A, C, d, strict=True))
        if h <= hmax + 1e-12:
            pts.append((h, sum(q * x for q, x in zip(p, d, strict=True))))
    return pts


@pytest.mark.parametrize("seed", range(25))
def test_cost_frontier_gives_the_least_cost_at_every_level(seed):
    rng = np.random.default_rng(seed)
    w = int(rng.integers(1, 4))
    A, C = rng.uniform(0, 3, w), rng.uniform(0.2, 2, w)
    p = rng.choice([0.5, 1.0, 2.0], w)
    D = int(rng.integers(w, 9))
    h0 = split.min_max_level(A, C, np.ones(w, dtype=int), 1, D)
    hmax = h0 + 6.0
    levels, costs = split.cost_frontier(A, C, p, 1, D, h0, hmax)
    pts = brute_frontier(A, C, p, 1, D, hmax)
    assert levels[0] == pytest.approx(h0)
    for h, c in pts:  # every split is dominated by a step at or below its level
        k = np.searchsorted(levels, h + 1e-12, side="right") - 1
        assert costs[k] <= c + 1e-9
    for h, c in zip(levels, costs, strict=True):  # and every step is attained by a split
        assert any(abs(c - c2) < 1e-9 and h2 <= h + 1e-9 for h2, c2 in pts)
    assert np.all(np.diff(levels) > 0) and np.all(np.diff(costs) < 0)


def test_best_case_level_lets_slow_learners_stay_out():
    # a fast learner (A = 1, C = 1) alone reaches 1 + 5 = 6 for D = 5; adding the slow one
    # (A = 10) would force >= 10 + C with its one shard, so the best case is 6, not the level
    # of "all learners" (>= 11).
    A, C = np.array([1.0, 10.0]), np.array([1.0, 1.0])
    assert split.best_case_level(A, C, 1, 5, 100.0) == pytest.approx(6.0)
    assert split.min_max_level(A, C, np.array([1, 1]), 1, 5) == pytest.approx(11.0)


def test_steps_match_the_per_learner_loop_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        g = int(rng.integers(1, 8))
        A = rng.uniform(0.0, 5.0, g)
        C = rng.uniform(0.01, 2.0, g)
        k0 = rng.integers(-2, 20, g)
        k1 = k0 + rng.integers(-3, 30, g)  # some ranges empty
        loop = [A[t] + C[t] * np.arange(k0[t], k1[t] + 1) for t in range(g)]
        want = np.concatenate(loop) if loop else np.zeros(0)
        got = split.steps(A, C, k0, k1)
        assert got.shape == want.shape
        assert np.array_equal(got, want)  # the same arithmetic, not just close


def test_steps_of_hand_ranges() -> None:
    A, C = np.array([1.0, 10.0]), np.array([0.5, 2.0])
    # t = 0: k = 2, 3 -> 2.0, 2.5; t = 1: k = 5 -> 20.0
    assert split.steps(A, C, np.array([2, 5]), np.array([3, 5])).tolist() == [2.0, 2.5, 20.0]
    assert split.steps(A, C, np.array([4, 6]), np.array([3, 5])).size == 0


def test_best_case_level_bisection_equals_the_scan() -> None:
    rng = np.random.default_rng(11)
    for _ in range(100):
        w = int(rng.integers(1, 12))
        A, C = rng.uniform(0.0, 4.0, w), rng.uniform(0.05, 2.0, w)
        L, D = int(rng.integers(1, 3)), int(rng.integers(1, 40))
        h_max = float(rng.uniform(1.0, 30.0))
        top = np.minimum(np.floor((h_max - A) / C + 1e-9), D).astype(int)
        cand = sorted({a + c * k for a, c, t in zip(A, C, top, strict=True)
                       for k in range(L, t + 1)})
        want = math.inf
        for h in cand:  # the first level where the learners that fit hold D together
            caps = np.minimum(np.floor((h - A) / C + 1e-9), D)
            if np.where(caps >= L, caps, 0).sum() >= D:
                want = h
                break
        assert split.best_case_level(A, C, L, D, h_max) == pytest.approx(want)
