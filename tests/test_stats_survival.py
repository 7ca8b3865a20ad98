"""Kaplan-Meier, its log-log band and median interval, and the sign test's interval, checked
against values worked by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest

from mel_opt.stats import kaplan_meier, km_band, km_median, sign_interval


def _band(s: float, greenwood: float, z: float = 1.959963984540054) -> tuple[float, float]:
    """The log-log band written out once more: theta = exp(z sigma / ln S), [S^(1/theta),
    S^theta]."""
    theta = math.exp(z * math.sqrt(greenwood) / math.log(s))
    return s ** (1 / theta), s**theta


def test_km_steps_with_censoring_worked_by_hand() -> None:
    # times 3, 5, censored 5, 8, censored 10:
    #   t = 3: 5 at risk, 1 event: S = 4/5 = 0.8,          Greenwood 1/(5*4) = 0.05
    #   t = 5: 4 at risk (5, 5+, 8, 10+): S = 0.8 * 3/4 = 0.6,   + 1/(4*3) -> 0.133333
    #   t = 8: 2 at risk (8, 10+): S = 0.6 * 1/2 = 0.3,         + 1/(2*1) -> 0.633333
    km = kaplan_meier([3, 5, 5, 8, 10], [True, True, False, True, False])
    assert km.time == (3.0, 5.0, 8.0)
    assert km.at_risk == (5, 4, 2) and km.events == (1, 1, 1) and km.n == 5
    assert km.survival == pytest.approx((0.8, 0.6, 0.3))
    assert km.greenwood == pytest.approx((0.05, 0.05 + 1 / 12, 0.05 + 1 / 12 + 0.5))
    low, high = km_band(km)
    # t = 3: sigma = 0.2236, ln 0.8 = -0.2231, theta = exp(-1.964) = 0.1403:
    #   [0.8^7.13, 0.8^0.140] = [0.204, 0.969]
    assert low[0] == pytest.approx(0.204, abs=5e-4) and high[0] == pytest.approx(0.969, abs=5e-4)
    # t = 8: sigma = 0.7958, ln 0.3 = -1.204, theta = exp(-1.2955) = 0.2738:
    #   [0.3^3.652, 0.3^0.2738] = [0.0123, 0.719]
    assert low[2] == pytest.approx(0.0123, abs=5e-4) and high[2] == pytest.approx(0.719, abs=5e-4)
    for i, (s, g) in enumerate(zip(km.survival, km.greenwood, strict=True)):
        assert (low[i], high[i]) == pytest.approx(_band(s, g))
    # the median: S first <= 1/2 at 8; the band's low is <= 1/2 from t = 3, its high never
    med = km_median(km)
    assert (med.median, med.low, med.high) == (8.0, 3.0, math.inf)


def test_km_ties_events_before_censoring_and_several_events_at_once() -> None:
    # 2, 2, 2+, 4, 4+, 6: t = 2: 6 at risk, 2 events: S = 4/6; Greenwood 2/(6*4) = 1/12
    #                     t = 4: 3 at risk (4, 4+, 6), 1 event: S = 4/6 * 2/3 = 4/9; + 1/(3*2)
    #                     t = 6: 1 at risk, 1 event: S = 0, Greenwood inf
    km = kaplan_meier([2, 2, 2, 4, 4, 6], [True, True, False, True, False, True])
    assert km.time == (2.0, 4.0, 6.0) and km.at_risk == (6, 3, 1) and km.events == (2, 1, 1)
    assert km.survival == pytest.approx((4 / 6, 4 / 9, 0.0))
    assert km.greenwood[:2] == pytest.approx((1 / 12, 1 / 12 + 1 / 6))
    assert km.greenwood[2] == math.inf
    low, high = km_band(km)
    assert low[2] == 0.0 and math.isnan(high[2])  # S = 0: the band is undefined
    assert km_median(km).median == 4.0


def test_km_median_interval_closes_with_ten_events() -> None:
    # 1 .. 10, every one an event: after i events S = (10 - i)/10 and Greenwood's sum
    # telescopes, sum_{n=10-i+1}^{10} 1/(n(n-1)) = 1/(10-i) - 1/10.
    km = kaplan_meier(range(1, 11), [True] * 10)
    for i in range(1, 10):
        assert km.survival[i - 1] == pytest.approx((10 - i) / 10)
        assert km.greenwood[i - 1] == pytest.approx(1 / (10 - i) - 1 / 10)
    low, high = km_band(km)
    # t = 1: S = 0.9, sigma = 0.1054, theta = exp(-1.961) = 0.1407: low = 0.9^7.106 = 0.473
    assert low[0] == pytest.approx(0.473, abs=1e-3)
    # t = 7: S = 0.3, Greenwood 1/3 - 1/10: theta = 0.4555, high = 0.3^0.4555 = 0.578 > 1/2;
    # t = 8: S = 0.2, Greenwood 1/2 - 1/10: theta = 0.4629, high = 0.2^0.4629 = 0.475 <= 1/2
    assert high[6] == pytest.approx(0.578, abs=1e-3)
    assert high[7] == pytest.approx(0.475, abs=1e-3)
    # the median: S = 0.5 at t = 5 (the first time at or below 1/2)
    med = km_median(km)
    assert (med.median, med.low, med.high, med.level) == (5.0, 1.0, 8.0, 0.95)


def test_km_median_not_reached_and_empty() -> None:
    # 2 of 5 reached: S = 0.8, 0.6, never <= 1/2: the median is beyond the data
    med = km_median(kaplan_meier([2, 4, 9, 9, 9], [True, True, False, False, False]))
    assert med.median == math.inf and med.high == math.inf
    assert med.low == 2.0  # t = 2: S = 0.8, Greenwood 1/20: low 0.204 <= 1/2 already
    empty = km_median(kaplan_meier([], []))
    assert (empty.median, empty.low, empty.high) == (math.inf, math.inf, math.inf)
    # every one censored: no step at all
    none = kaplan_meier([5, 5, 5], [False, False, False])
    assert none.time == () and km_median(none).median == math.inf


def test_km_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="length"):
        kaplan_meier([1, 2], [True])
    with pytest.raises(ValueError, match="finite"):
        kaplan_meier([1, math.inf], [True, False])
    with pytest.raises(ValueError, match="level"):
        km_band(kaplan_meier([1], [True]), level=1.0)


@pytest.mark.parametrize(("n", "rank", "coverage"), [
    (5, 0, 1.0),                      # 1 - 2/32 = 0.9375 < 0.95: no interval
    (6, 1, 1 - 2 / 64),               # 0.96875
    (8, 1, 1 - 2 / 256),              # k = 2 would give 1 - 2 * 9/256 = 0.930
    (9, 2, 1 - 2 * (1 + 9) / 512),    # 0.9609
    (10, 2, 1 - 2 * (1 + 10) / 1024),  # 0.9785; k = 3: 1 - 2 * 56/1024 = 0.891
    # sum_{i<6} C(20, i) = 1 + 20 + 190 + 1140 + 4845 + 15504 = 21700: 0.9586; k = 7 adds
    # C(20, 6) = 38760: 1 - 2 * 60460/2^20 = 0.885
    (20, 6, 1 - 2 * 21700 / 2**20),
])
def test_sign_interval_ranks_and_exact_coverage(n: int, rank: int, coverage: float) -> None:
    iv = sign_interval([float(i) for i in range(1, n + 1)])
    assert iv.rank == rank and iv.coverage == pytest.approx(coverage) and iv.n == n
    if rank:
        assert (iv.low, iv.high) == (float(rank), float(n + 1 - rank))
    else:
        assert (iv.low, iv.high) == (-math.inf, math.inf)
    assert iv.median == pytest.approx((n + 1) / 2)


def test_sign_interval_infinite_values_and_errors() -> None:
    iv = sign_interval([1, 2, 3, 4, 5, math.inf])  # ranks only: the high end is one-sided
    assert (iv.low, iv.high, iv.median) == (1.0, math.inf, 3.5)
    assert math.isnan(sign_interval([]).median) and sign_interval([]).n == 0
    with pytest.raises(ValueError, match="NaN"):
        sign_interval([1.0, math.nan])
    with pytest.raises(ValueError, match="level"):
        sign_interval([1.0], level=0.0)
