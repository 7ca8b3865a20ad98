"""The budget subproblem of a fixed assignment (multiple-choice knapsack) against enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mel_opt.problems.med.search import budget


def test_best_levels_is_the_knapsack_optimum():
    rng = np.random.default_rng(7)
    for _ in range(30):
        fronts = []
        for _ in range(int(rng.integers(1, 4))):
            k = int(rng.integers(1, 5))
            lev = np.sort(rng.uniform(0, 10, k))
            cost = np.sort(rng.uniform(0, 10, k))[::-1]
            fronts.append((lev, cost))
        B = float(rng.uniform(5, 25))
        want, pick = math.inf, None
        for combo in itertools.product(*[range(f[0].size) for f in fronts]):
            c = sum(f[1][i] for f, i in zip(fronts, combo, strict=True))
            h = sum(f[0][i] for f, i in zip(fronts, combo, strict=True))
            if c <= B and h < want:
                want, pick = h, combo
        got = budget.best_levels(fronts, B)
        if pick is None:
            assert got is None
        else:
            assert got[0] == pytest.approx(want)
            assert sum(f[1][i] for f, i in zip(fronts, got[1], strict=True)) <= B + 1e-9


def pareto_dp(fronts, B):
    """Reference: the plain Pareto dynamic programme, no pruning (least sum of levels)."""
    states = {(0.0, 0.0)}
    for lev, cost in fronts:
        nxt = sorted((h + a, c + b) for h, c in states for a, b in zip(lev, cost, strict=True)
                     if c + b <= B * (1 + 1e-9) + 1e-9)
        states, best_c = set(), math.inf
        for h, c in nxt:
            if c < best_c:
                states.add((h, c))
                best_c = c
    return min((h for h, _ in states), default=None)


def random_fronts(rng, m, k_max):
    fronts = []
    for _ in range(m):
        k = int(rng.integers(1, k_max))
        lev = np.cumsum(rng.uniform(0.01, 1.0, k)) + rng.uniform(0, 5)
        cost = np.cumsum(rng.uniform(0.01, 3.0, k))[::-1] + rng.uniform(0, 5)
        fronts.append((lev, cost))
    return fronts


@pytest.mark.parametrize("prune_from", [0, budget.PRUNE_FROM], ids=["always-pruned", "default"])
@pytest.mark.parametrize("seed", range(6))
def test_pruned_programme_equals_the_plain_one(seed, prune_from, monkeypatch):
    # enough tasks and steps for the Lagrangian pruning to drop most partial choices
    monkeypatch.setattr(budget, "PRUNE_FROM", prune_from)
    rng = np.random.default_rng(100 + seed)
    for _ in range(15):
        fronts = random_fronts(rng, int(rng.integers(2, 7)), 25)
        cheap = sum(float(c.min()) for _, c in fronts)
        dear = sum(float(c.max()) for _, c in fronts)
        B = float(rng.uniform(cheap * 0.98, dear))
        want = pareto_dp(fronts, B)
        got = budget.best_levels(fronts, B)
        if want is None:
            assert got is None
            continue
        assert got is not None
        assert got[0] == pytest.approx(want, rel=1e-12)
        assert got[0] == pytest.approx(sum(f[0][i] for f, i in zip(fronts, got[1], strict=True)))
        assert sum(f[1][i] for f, i in zip(fronts, got[1], strict=True)) <= B * (1 + 1e-9) + 1e-9
        # a cutoff above the optimum keeps it; at the optimum nothing is below it
        assert budget.best_levels(fronts, B, cutoff=want + 1e-6)[0] == pytest.approx(want)
        assert budget.best_levels(fronts, B, cutoff=want * (1 - 1e-9)) is None


def test_relaxation_answer_is_feasible_and_bounds_the_optimum():
    rng = np.random.default_rng(3)
    fronts = random_fronts(rng, 5, 30)
    cheap = sum(float(c.min()) for _, c in fronts)
    dear = sum(float(c.max()) for _, c in fronts)
    B = 0.5 * (cheap + dear)
    mu, upper, pick = budget._relaxation(fronts, B)
    assert mu > 0
    assert sum(f[1][i] for f, i in zip(fronts, pick, strict=True)) <= B
    lower = sum(float(np.min(lv + mu * c)) for lv, c in fronts) - mu * B
    assert lower <= pareto_dp(fronts, B) + 1e-9 <= upper + 2e-9


def test_relaxed_bound_and_critical_multiplier_by_hand():
    # task a: level 1 at cost 10 or level 2 at cost 4; task b: level 1 at cost 8 or 3 at 2;
    # budget 12. Choices (levels, cost): (1,1) 18 > 12, (1,3) 4 at 12, (2,1) 3 at 12,
    # (2,3) 5 at 6: the optimum is 3. Below mu = 1/6 task a's minimiser of H + mu C is level
    # 1 (18 > 12 with b's level 1); from 1/6 to 1/3 it is (2, 1), cost 12: mu* = 1/6, where
    # the bound min(1 + 10/6, 2 + 4/6) + min(1 + 8/6, 3 + 2/6) - 12/6 = 8/3 + 7/3 - 2 = 3
    fronts = [(np.array([1.0, 2.0]), np.array([10.0, 4.0])),
              (np.array([1.0, 3.0]), np.array([8.0, 2.0]))]
    assert budget.best_levels(fronts, 12.0) == (3.0, [1, 0])
    mu = budget.critical_multiplier(fronts, 12.0)
    assert mu == pytest.approx(1 / 6, rel=1e-6)
    assert budget.relaxed_bound(fronts, 12.0, 1 / 6) == pytest.approx(3.0, abs=1e-7)
    assert budget.relaxed_bound(fronts, 12.0, 0.0) == pytest.approx(2.0)  # least levels
    assert budget.relaxed_bound(fronts, 12.0, 1.0) == pytest.approx(6 + 5 - 12, abs=1e-7)
    assert budget.critical_multiplier(fronts, 100.0) == 0.0  # the least levels fit
    assert budget.critical_multiplier(fronts, 5.0) is None  # even the cheapest do not


def test_relaxed_bound_never_above_the_knapsack_optimum():
    rng = np.random.default_rng(11)
    for _ in range(40):
        fronts = random_fronts(rng, int(rng.integers(1, 5)), int(rng.integers(2, 8)))
        cheap = sum(float(c.min()) for _, c in fronts)
        dear = sum(float(c.max()) for _, c in fronts)
        B = float(rng.uniform(cheap, dear + 1.0))
        best = pareto_dp(fronts, B)
        for mu in (0.0, 0.01, 0.1, 1.0, 10.0, budget.critical_multiplier(fronts, B)):
            assert budget.relaxed_bound(fronts, B, mu) <= best + 1e-9
