"""Speed estimates of live learners: the average follows, bad reports never poison it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mel_opt.live.estimates import MAX_JUMP, Estimates, Measurement, read_measurement


def test_first_measurement_sets_the_estimate_then_the_average_follows() -> None:
    est = Estimates.unknown(2, alpha=0.5)
    assert est.known.size == 0
    assert est.update(Measurement(0, 2.0, 1000.0), 0) == ""  # 2 ms per sample-pass
    assert est.seconds[0] == pytest.approx(2e-3)
    assert est.update(Measurement(0, 4.0, 1000.0), 1) == ""
    assert est.seconds[0] == pytest.approx(3e-3)  # 0.5 * 2e-3 + 0.5 * 4e-3
    assert est.update(Measurement(0, 4.0, 1000.0), 2) == ""
    assert est.seconds[0] == pytest.approx(3.5e-3)
    assert math.isnan(est.seconds[1]) and est.known.tolist() == [0]


def test_a_throttled_learner_is_learned_within_a_few_cycles() -> None:
    est = Estimates.unknown(1, alpha=0.5)
    est.update(Measurement(0, 1.0, 1e4), 0)  # probe at full speed: 1e-4 s per sample-pass
    for cycle in range(1, 5):  # then it runs at a quarter of a core: 4e-4
        est.update(Measurement(0, 4.0, 1e4), cycle)
    assert abs(est.seconds[0] - 4e-4) / 4e-4 < 0.05  # within 5 % after four cycles


@pytest.mark.parametrize("metrics, words", [
    ({"compute_s": float("nan"), "work": 10}, "finite positive"),
    ({"compute_s": float("inf"), "work": 10}, "finite positive"),
    ({"compute_s": -1.0, "work": 10}, "finite positive"),
    ({"compute_s": 1.0, "work": 0}, "finite positive"),
    ({"compute_s": "fast", "work": 10}, "not a number"),
    ({"work": 10}, "not a number"),
])
def test_unusable_metrics_are_named(metrics: dict, words: str) -> None:
    m = read_measurement(3, metrics)
    assert isinstance(m, str) and words in m


def test_absurd_measurements_are_refused_and_leave_the_estimate_alone() -> None:
    est = Estimates.unknown(1)
    est.update(Measurement(0, 1.0, 1000.0), 0)
    before = float(est.seconds[0])
    far = Measurement(0, 1.0 * MAX_JUMP * 1.5, 1000.0)
    assert "times off the estimate" in est.update(far, 1)
    assert "outside" in est.update(Measurement(0, 1e-12, 1000.0), 1)
    assert "outside" in est.update(Measurement(0, 1e6, 1.0), 1)
    assert est.seconds[0] == before
    assert [h["accepted"] for h in est.history] == [True, False, False, False]
    assert np.isfinite(est.seconds).all()


def test_the_same_jump_twice_is_the_learners_speed() -> None:
    # a probe taken while the learner was starved of its core: 1 ms per sample-pass
    est = Estimates.unknown(2, alpha=0.5)
    est.update(Measurement(0, 1.0, 1000.0), 0)
    # round 1 measures 0.5 s per sample-pass, 500 times the probe: an outlier, refused
    assert "times off the estimate" in est.update(Measurement(0, 500.0, 1000.0), 1)
    assert est.seconds[0] == pytest.approx(1e-3)
    # round 2 measures 0.6 s, as far off, within 2 times of round 1's: believed, from scratch
    assert est.update(Measurement(0, 600.0, 1000.0), 2) == ""
    assert est.seconds[0] == pytest.approx(0.6)
    assert [h["accepted"] for h in est.history] == [True, False, True]
    # an outlier after it is refused again; two that disagree are both refused
    assert "times off" in est.update(Measurement(0, 1.0, 1000.0), 3)
    assert "times off" in est.update(Measurement(0, 0.2, 1000.0), 4)  # 5x the one before
    assert est.seconds[0] == pytest.approx(0.6)
    # a jump, then a measurement out of range, then the jump again: not two in a row
    est.update(Measurement(1, 1.0, 1000.0), 0)
    est.update(Measurement(1, 500.0, 1000.0), 1)
    est.update(Measurement(1, 1e6, 1.0), 2)
    assert "times off" in est.update(Measurement(1, 500.0, 1000.0), 3)
    assert est.seconds[1] == pytest.approx(1e-3)


def test_a_start_is_split_into_its_fixed_cost_and_a_rate_by_hand() -> None:
    """start_cost by least squares on compute = start + rate x work, worked by hand."""
    from mel_opt.live.estimates import start_cost

    # work 100, 200, 300 for 0.2, 0.35, 0.45 s: mean work 200, mean compute 1/3; the
    # deviations' products (-100)(-2/15) + 0 + (100)(7/60) over their squares 20,000 give
    # 0.00125 s per sample-pass and 1/3 - 0.25 = 1/12 s a start
    c = start_cost([(0.2, 100), (0.35, 200), (0.45, 300)])
    assert c is not None
    assert c.start_s == pytest.approx(1 / 12) and c.seconds == pytest.approx(0.00125)
    # a negative fixed part is noise: none, and the rate keeps the total, 1.0 / 600
    c = start_cost([(0.15, 100), (0.35, 200), (0.5, 300)])
    assert c is not None and c.start_s == 0.0 and c.seconds == pytest.approx(1.0 / 600)
    # one that leaves the shortest start's work almost no time is cut to 0.9 of it: the
    # line 0.099 + 1e-5 w is cut to 0.09, the rate (0.303 - 3 x 0.09) / 600 = 5.5e-5
    c = start_cost([(0.1, 100), (0.101, 200), (0.102, 300)])
    assert c is not None and c.start_s == pytest.approx(0.09)
    assert c.seconds == pytest.approx(5.5e-5)
    # the probe's doubling steps on an exact line
    c = start_cost([(0.2 + 1e-4 * w, w) for w in (256, 512, 1024)])
    assert c is not None and (c.start_s, c.seconds) == pytest.approx((0.2, 1e-4))
    # what cannot be told apart: one start, starts of about the same work, a broken time
    assert start_cost([(0.3, 100)]) is None
    assert start_cost([(0.3, 100), (0.31, 105)]) is None
    assert start_cost([(0.3, 100), (math.nan, 200)]) is None
    assert start_cost([(0.3, 100), (0.0, 200)]) is None
