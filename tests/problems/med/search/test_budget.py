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
