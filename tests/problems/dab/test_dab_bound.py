"""DAB's bound a_k (thesis Eq. 3.5): known answers and the never-overshoot property."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mel_opt.api import parse_instance, solve
from mel_opt.problems.dab import shard_bound
from mel_opt.result import Status

SHARD = 1_568_000  # 500 x 784 float32


def eta_ref(a: float, D_unused: float, mu: float, om: float, od: float, c: float,
            b: float) -> float:
    """Eq. (3.4) written out again for the tests: download + train + upload."""
    return (om + od * a) / b + mu * a / c + om / b


def doc(learners: list[dict], **top: float) -> dict:
    base = {"problem": "dab", "schema_version": 1, "name": "t", "deadline_s": 15.0,
            "iterations": 1, "model_bytes": 6.156 * SHARD, "shard_bytes": SHARD}
    base.update(top)
    base["learners"] = learners
    return base


def test_worked_example_gives_92_shards() -> None:
    # The worked example of the thesis author's DAB code: Omega_m = 6.156 shards, b = 9.25 shards/s,
    # c = 25.08 shards/s, mu = 1, D = 15 s.
    #   2 Omega_m / b = 12.312 / 9.25          = 1.331027 s
    #   mu / c + Omega_d / b = 1/25.08 + 1/9.25 = 0.039872 + 0.108108 = 0.147980 s/shard
    #   a_k < (15 - 1.331027) / 0.147980 = 92.37  ->  a_k = 92
    #   eta(92) = 1.331027 + 92 * 0.147980 = 14.945 s < 15;  eta(93) = 15.093 s >= 15
    inst = parse_instance(doc([{"name": "w", "train_rate": 25.08, "bandwidth_Bps": 9.25 * SHARD}]))
    res = solve(inst, "dab")
    assert res.status is Status.OPTIMAL and res.ok
    assert res.solution == {"shards": [92]}
    assert res.metrics["max_eta_s"] == pytest.approx(14.9452, abs=1e-4)
    assert res.metrics["shards_per_cycle"] == 92
    assert res.metrics["truancy"] == pytest.approx((14.9452 - 15) / 15, abs=1e-5)


def test_authors_rounding_would_overshoot_but_the_bound_does_not() -> None:
    # mu = 1, c = 1 shard/s, b = 1e9 B/s (transfers ~ 0), D = 10.7 s:
    # x = (10.7 - 2 om/b) / (1 + od/b) = 10.68 -> round() = 11 -> eta = 11.02 s > D.
    # The strict bound gives 10 (eta = 10.02 s).
    c, b, om, od, D = 1.0, 1e9, 1e6, 1e6, 10.7
    x = (D - 2 * om / b) / (1 / c + od / b)
    assert round(x) == 11 and eta_ref(11, D, 1, om, od, c, b) > D
    a = shard_bound(D, 1, om, od, [c], [b])
    assert a.tolist() == [10]
    assert eta_ref(10, D, 1, om, od, c, b) < D


def test_exact_integer_right_hand_side_is_excluded_by_strictness() -> None:
    # c = 1 shard/s, b = 1 B/s with om = 0.5 B and od = 1 B, mu = 1:
    # eta(a) = (0.5 + a)/1 + a + 0.5 = 2a + 1, D = 21 -> x = (21 - 1) / 2 = 10 exactly.
    # eta(10) = 21 = D is not < D, so a_k = 9.
    assert shard_bound(21.0, 1, 0.5, 1.0, [1.0], [1.0]).tolist() == [9]


def test_learner_that_cannot_train_one_shard_is_excluded_and_reported() -> None:
    # slow: c = 0.05 shard/s -> one shard takes 20 s > D = 15 s.
    inst = parse_instance(doc([
        {"name": "fast", "train_rate": 25.08, "bandwidth_Bps": 9.25 * SHARD},
        {"name": "slow", "train_rate": 0.05, "bandwidth_Bps": 9.25 * SHARD},
    ]))
    res = solve(inst, "dab")
    assert res.solution["shards"] == [92, 0]
    assert res.metrics["excluded"] == ["slow"]
    assert res.metrics["learners_used"] == 1
    assert "excluded" in res.message and "slow" in res.message
    assert "only a_k" in res.message  # the privacy statement
    assert res.metrics["orchestrator_view"] == {"fast": 92, "slow": 0}


def test_all_learners_excluded_is_infeasible() -> None:
    inst = parse_instance(doc([{"name": "slow", "train_rate": 0.05, "bandwidth_Bps": SHARD}]))
    res = solve(inst, "dab")
    assert res.status is Status.INFEASIBLE and res.solution == {}
    assert "no learner" in res.message


def test_more_iterations_fewer_shards() -> None:
    # Same learner as the worked example with mu = 5:
    # a_k < (15 - 1.331027) / (5/25.08 + 1/9.25) = 13.668973 / 0.307469 = 44.46 -> 44
    a = shard_bound(15.0, 5, 6.156 * SHARD, SHARD, [25.08], [9.25 * SHARD])
    assert a.tolist() == [44]


@settings(max_examples=300, deadline=None)
@given(
    D=st.floats(0.01, 1e4),
    mu=st.integers(1, 50),
    om=st.floats(1.0, 1e9),
    od=st.floats(1.0, 1e8),
    c=st.floats(1e-3, 1e4),
    b=st.floats(1e2, 1e10),
)
def test_bound_never_overshoots_and_is_the_largest(D: float, mu: int, om: float, od: float,
                                                   c: float, b: float) -> None:
    a = int(shard_bound(D, mu, om, od, [c], [b])[0])
    assert a >= 0
    if a >= 1:
        assert eta_ref(a, D, mu, om, od, c, b) < D  # strictly inside the deadline
    assert eta_ref(a + 1, D, mu, om, od, c, b) >= D  # one more shard does not fit
    # and it agrees with Eq. (3.5) read as real numbers, up to rounding at the boundary
    x = (D - 2 * om / b) / (mu / c + od / b)
    assert abs(a - max(0, math.ceil(x) - 1)) <= 1


def test_bound_is_vectorised_over_learners() -> None:
    rng = np.random.default_rng(5)
    c = rng.uniform(0.5, 30, 200)
    b = rng.uniform(1e6, 2e7, 200)
    a = shard_bound(15.0, 5, 161_920.0, SHARD, c, b)
    one = [int(shard_bound(15.0, 5, 161_920.0, SHARD, [ci], [bi])[0])
           for ci, bi in zip(c, b, strict=True)]
    assert a.tolist() == one
