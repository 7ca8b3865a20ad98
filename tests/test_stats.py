"""The one statistics module: Student-t quantiles against table values, intervals worked by
hand, the vectorised band, and the lognormal noise law."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mel_opt.stats import band, interval, lognormal_factors, mean_interval, t_quantile


def test_t_quantiles_match_the_tables() -> None:
    # printed tables: t_{0.975}(1) = 12.7062, t_{0.975}(4) = 2.776445, t_{0.975}(39) = 2.0227,
    # t_{0.95}(10) = 1.8125; far out, the normal quantile 1.959964
    assert t_quantile(0.975, 1) == pytest.approx(12.7062, abs=1e-4)
    assert t_quantile(0.975, 4) == pytest.approx(2.776445, abs=1e-6)
    assert t_quantile(0.975, 39) == pytest.approx(2.0227, abs=1e-4)
    assert t_quantile(0.95, 10) == pytest.approx(1.8125, abs=1e-4)
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959964, abs=1e-5)
    assert t_quantile(0.025, 4) == pytest.approx(-2.776445, abs=1e-6)  # symmetric
    for bad in ((0.0, 3), (1.0, 3), (0.5, 0)):
        with pytest.raises(ValueError):
            t_quantile(*bad)


def test_interval_by_hand_and_edge_cases() -> None:
    # 1..5: mean 3, s = sqrt(2.5), half = 2.776445 * sqrt(2.5) / sqrt(5) = 2.776445 sqrt(0.5)
    got = interval(np.array([1, 2, 3, 4, 5, np.nan, np.inf]))
    assert got["n"] == 5 and got["mean"] == pytest.approx(3.0)
    assert got["half_width"] == pytest.approx(2.776445 * math.sqrt(0.5), abs=1e-6)
    assert got["low"] == pytest.approx(3.0 - got["half_width"])  # type: ignore[operator]
    assert got["high"] == pytest.approx(3.0 + got["half_width"])  # type: ignore[operator]
    assert interval([]) == {"mean": None, "low": None, "high": None, "half_width": None,
                            "n": 0}
    assert interval([7.0]) == {"mean": 7.0, "low": None, "high": None, "half_width": None,
                               "n": 1}
    # a 90% interval is narrower: t_{0.95}(4) = 2.131847
    assert mean_interval([1, 2, 3, 4, 5], 0.9).half_width == pytest.approx(
        2.131847 * math.sqrt(0.5), abs=1e-6)


def test_band_is_the_interval_of_every_column() -> None:
    v = np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 3.0], [4.0, 0.0], [5.0, 0.0]])
    mean, half = band(v)
    for j in range(2):
        iv = mean_interval(v[:, j])
        assert mean[j] == pytest.approx(iv.mean) and half[j] == pytest.approx(iv.half_width)
    assert half[0] == pytest.approx(2.776445 * math.sqrt(0.5), abs=1e-6)
    m1, h1 = band(v[:1])
    assert np.array_equal(m1, v[0]) and np.array_equal(h1, [0.0, 0.0])


def test_lognormal_factors_by_hand_and_moments() -> None:
    # cv = 0.5, z = 1: sigma^2 = ln 1.25, F = exp(sqrt(ln 1.25) - ln(1.25) / 2)
    s2 = math.log(1.25)
    assert lognormal_factors(0.5, np.array([1.0]))[0] == pytest.approx(
        math.exp(math.sqrt(s2) - s2 / 2), rel=1e-12)
    z = np.random.default_rng(0).standard_normal((100_000, 3))
    f = lognormal_factors(np.array([0.0, 0.1, 0.4]), z)
    assert np.all(f[:, 0] == 1.0)
    # standard errors of the mean cv / 316 and of the sd about cv / 200 here
    assert f.mean(axis=0) == pytest.approx([1.0, 1.0, 1.0], abs=0.006)
    assert f.std(axis=0, ddof=1) == pytest.approx([0.0, 0.1, 0.4], abs=0.01)


def test_the_default_time_cv_is_the_calibrated_one_and_every_user_reads_it() -> None:
    from mel_opt.problems.dab.generate import generate as dab_generate
    from mel_opt.problems.med.generate import generate as med_generate
    from mel_opt.problems.med.instance import FIELDS
    from mel_opt.stats import DEFAULT_TIME_CV

    # the calibration: training CV 0.044 / sqrt(2 / pi) = 0.0551, transfers at most 0.104 /
    # sqrt(2 / pi) = 0.130; 30 % of a local update is transfer: 0.0549 with independent spreads,
    # 0.0777 fully correlated; 0.06 lies between
    train, transfer = 0.044 / math.sqrt(2 / math.pi), 0.104 / math.sqrt(2 / math.pi)
    assert train == pytest.approx(0.0551, abs=1e-4) and transfer == pytest.approx(0.130, abs=1e-3)
    low = math.hypot(0.7 * train, 0.3 * transfer)
    high = 0.7 * train + 0.3 * transfer
    assert low == pytest.approx(0.0549, abs=1e-4) and high == pytest.approx(0.0777, abs=1e-4)
    assert DEFAULT_TIME_CV == 0.06 and low < DEFAULT_TIME_CV < high
    learners = next(f for f in FIELDS if f.key == "learners")
    assert next(f for f in learners.fields if f.key == "time_cv").default == DEFAULT_TIME_CV
    dab = dab_generate("random", learners=3, seed=1, params={})
    med = med_generate("mays2023", learners=3, seed=1, params={})
    assert {lr["time_cv"] for lr in dab["learners"]} == {DEFAULT_TIME_CV}
    assert {lr["time_cv"] for lr in med["learners"]} == {DEFAULT_TIME_CV}
