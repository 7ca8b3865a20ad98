"""The knapsack subproblem of the Lagrangian bound against enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mel_opt.api import parse_instance
from mel_opt.problems.med.generate import generate
from mel_opt.problems.med.latency import coefficients
from mel_opt.problems.med.search.lagrangian import Lagrangian


def _fill_cost_by_subsets(caps, price, order, D, mu, lam, forced, allowed):
    """The Lagrangian subproblem at one level by enumeration: every subset W of learners with
    a shard to give (forced ones included), filled cheapest first up to D (the last one takes
    the remainder, dearer ones none), cost sum_W mu_j + lam x price of the shards."""
    cand = [j for j in order if allowed[j] and caps[j] > 0]
    if any(forced[j] and j not in cand for j in range(len(caps))):
        return math.inf
    best = math.inf
    for r in range(len(cand) + 1):
        for W in itertools.combinations(cand, r):
            if not all(j in W for j in range(len(caps)) if forced[j]):
                continue
            left, cost = D, 0.0
            for j in W:  # combinations keep the price order of cand
                take = min(int(caps[j]), left)
                left -= take
                cost += mu[j] + lam * price[j] * take
            if left == 0:
                best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_lagrangian_subproblem_matches_enumeration(seed):
    # the knapsack of the bound, run for several tasks at once, against enumeration
    rng = np.random.default_rng(seed)
    inst = parse_instance(generate("hetero", learners=7, tasks=3, seed=seed))
    coef = coefficients(inst)
    lag = Lagrangian(inst, coef, True, np.zeros(3), math.inf)
    finite = 0
    for _ in range(5):
        mu = rng.normal(0.0, 0.5, 7)
        lam = float(abs(rng.normal(0.3, 0.2)))
        forced = np.zeros((3, 7), dtype=bool)
        allowed = rng.random((3, 7)) < 0.85
        j = int(rng.integers(7))
        forced[int(rng.integers(3)), j] = True
        allowed[:, j] = forced[:, j]
        batch = [(i, np.unique(rng.integers(0, t.levels.size, 6)))
                 for i, t in enumerate(lag.tasks) if t.levels.size]
        outs = lag._programmes(batch, mu, lam, forced, allowed)
        for (i, rows), out in zip(batch, outs, strict=True):
            t = lag.tasks[i]
            for r, got in zip(rows, out, strict=True):
                want = _fill_cost_by_subsets(t.caps[r], inst.price, lag.order, t.D, mu, lam,
                                             forced[i], allowed[i])
                assert got == pytest.approx(want, rel=1e-9, abs=1e-9)
                finite += math.isfinite(want)
    assert finite >= 10
