"""The one place mel_opt computes confidence intervals and run-to-run noise.

- :func:`t_quantile`, :func:`interval`: the mean of repeated runs (seeds, trials) and its
  two-sided Student-t confidence interval, mean +- t_{(1+level)/2, n-1} s / sqrt(n) with s the
  sample standard deviation (ddof 1). Used by the med simulator, the training reports and
  the sweep plots.
- :func:`band`: the same interval for every column of a (runs x points) array at once, for
  the bands of figures.
- :func:`lognormal_factors`: run-to-run noise of a time, a lognormal factor with mean 1 and a
  given coefficient of variation; the med simulator and the training emulator's dab cycle
  both draw their noise through it. :data:`DEFAULT_TIME_CV` is the coefficient of variation
  a learner's time gets when its file does not say (med's default, dab's generator and the
  papers' experiments use it).
- :func:`kaplan_meier`, :func:`km_band`, :func:`km_median`: times to an event (a target
  reached) of which some are right-censored (not reached by the end of the run): the
  Kaplan-Meier estimate of their distribution, Greenwood's variance, the log-log pointwise
  band and the median with its Brookmeyer-Crowley interval read from that band.
- :func:`sign_interval`: the median of paired differences and its distribution-free interval
  between two order statistics (the sign test's interval), exact binomial coverage.

scipy is a required dependency; it is imported inside the functions, so importing this
module costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

#: Default coefficient of variation of a learner's time from run to run (within one state of
#: a med learner), the ``cv`` of :func:`lognormal_factors`. Calibrated from the thesis'
#: Chapter 3 measurements on its Jetson Nanos (derivation in the module docstring of
#: ``mel_opt/problems/med/generate.py``): subset benchmarking's training-time error levels
#: off at about 4.4% (Fig. 3.2, 6-10 shards) and the download-time error is 10.4% at 10
#: shards (Fig. 3.3); a mean absolute error e of a normal spread means a CV of
#: e / sqrt(2 / pi), which gives 0.055 for training and at most 0.13 for transfers, 0.055 to
#: 0.077 for a whole local update; we take 0.06.
DEFAULT_TIME_CV = 0.06


def t_quantile(p: float, df: float) -> float:
    """Quantile ``p`` of the Student-t distribution with ``df`` degrees of freedom.

    Raises
    ------
    ValueError
        If p is not in (0, 1) or df is not positive.
    """
    if not 0.0 < p < 1.0:
        raise ValueError("p must lie in (0, 1)")
    if not df > 0:
        raise ValueError("df must be positive")
    from scipy.stats import t as student_t

    return float(student_t.ppf(p, df))


@dataclass(frozen=True)
class Interval:
    """Mean of n values and the half-width of its confidence interval.

    Attributes
    ----------
    mean : float or None
        None when there is no finite value.
    half_width : float or None
        None when n < 2 (no spread to estimate).
    n : int
        Finite values used.
    """

    mean: float | None
    half_width: float | None
    n: int

    @property
    def low(self) -> float | None:
        return None if self.mean is None or self.half_width is None \
            else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.mean is None or self.half_width is None \
            else self.mean + self.half_width


def mean_interval(values: Iterable[float] | np.ndarray, level: float = 0.95) -> Interval:
    """Mean and Student-t interval of the finite entries of ``values`` (NaN and inf dropped)."""
    v = np.asarray(list(values) if not isinstance(values, np.ndarray) else values,
                   dtype=float).ravel()
    v = v[np.isfinite(v)]
    n = int(v.size)
    if n == 0:
        return Interval(None, None, 0)
    mean = float(v.mean())
    if n == 1:
        return Interval(mean, None, 1)
    half = t_quantile(0.5 + level / 2.0, n - 1) * float(v.std(ddof=1)) / math.sqrt(n)
    return Interval(mean, half, n)


def interval(values: Iterable[float] | np.ndarray,
             level: float = 0.95) -> dict[str, float | int | None]:
    """:func:`mean_interval` as ``{"mean", "low", "high", "half_width", "n"}`` (JSON-ready;
    None where undefined: every bound when n = 0, the bounds and width when n = 1)."""
    iv = mean_interval(values, level)
    return {"mean": iv.mean, "low": iv.low, "high": iv.high, "half_width": iv.half_width,
            "n": iv.n}


def band(values: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Column means of ``values`` (runs, points) and the half-widths of their intervals.

    Every column holds the same n runs (no NaN handling: a figure's runs are complete); with
    one run the half-widths are zero.
    """
    v = np.asarray(values, dtype=float)
    mean = v.mean(axis=0)
    n = v.shape[0]
    if n < 2:
        return mean, np.zeros_like(mean)
    return mean, t_quantile(0.5 + level / 2.0, n - 1) * v.std(axis=0, ddof=1) / math.sqrt(n)


def lognormal_factors(cv: np.ndarray | float, z: np.ndarray) -> np.ndarray:
    """Run-to-run noise factors F = exp(sigma Z - sigma^2 / 2), sigma^2 = ln(1 + cv^2).

    With Z standard normal, F is lognormal with E[F] = 1 and sd(F) = cv exactly (F = 1 where
    cv = 0): a time t becomes t F, unbiased, with relative spread cv.

    Parameters
    ----------
    cv : float or ndarray
        Coefficients of variation (>= 0), broadcast against ``z`` (e.g. one per learner on
        the last axis).
    z : ndarray
        Standard normal draws.
    """
    sigma = np.sqrt(np.log1p(np.asarray(cv, dtype=float) ** 2))
    return np.asarray(np.exp(sigma * np.asarray(z, dtype=float) - 0.5 * sigma**2))


# ---- times to an event, some right-censored ----------------------------------------------------


@dataclass(frozen=True)
class KaplanMeier:
    """The Kaplan-Meier estimate from right-censored times (:func:`kaplan_meier`).

    Attributes
    ----------
    time : tuple of float
        The distinct times at which at least one event happened, ascending.
    at_risk : tuple of int
        n_i: the subjects whose time (event or censoring) is ``>= time[i]``; one censored at
        the instant of an event counts as at risk at it (the usual convention: events first).
    events : tuple of int
        d_i: the events at ``time[i]``.
    survival : tuple of float
        S(time[i]) = prod_{j <= i} (1 - d_j / n_j): the estimated probability that the event
        has not happened by ``time[i]`` (inclusive). S = 1 before ``time[0]`` and keeps its
        last value up to the last time observed; beyond that it is unknown.
    greenwood : tuple of float
        sum_{j <= i} d_j / (n_j (n_j - d_j)): Greenwood's estimate of var(log S(time[i]))
        (inf once S = 0).
    n : int
        Times given, events and censorings.
    """

    time: tuple[float, ...]
    at_risk: tuple[int, ...]
    events: tuple[int, ...]
    survival: tuple[float, ...]
    greenwood: tuple[float, ...]
    n: int


def kaplan_meier(times: Iterable[float], events: Iterable[bool]) -> KaplanMeier:
    """The product-limit estimate of Kaplan & Meier (JASA 53, 1958) with Greenwood's variance
    (1926).

    Parameters
    ----------
    times : iterable of float
        Each subject's time: that of its event where ``events`` says so, else that of its
        censoring (the event had not happened by then: e.g. a run that ended first).
    events : iterable of bool

    Raises
    ------
    ValueError
        ``times`` and ``events`` of different lengths, or a time that is NaN or infinite.

    Examples
    --------
    Events at 3, 5 and 8, censored at 5 and 10: 5 at risk at t = 3 (S = 4/5), 4 at t = 5 (the
    one censored at 5 still counts: S = 0.8 x 3/4 = 0.6), 2 at t = 8 (S = 0.6 x 1/2 = 0.3):

    >>> km = kaplan_meier([3, 5, 5, 8, 10], [True, True, False, True, False])
    >>> km.time, km.at_risk, km.events
    ((3.0, 5.0, 8.0), (5, 4, 2), (1, 1, 1))
    >>> [round(s, 12) for s in km.survival]
    [0.8, 0.6, 0.3]
    >>> [round(g, 6) for g in km.greenwood]  # 1/(5 x 4), + 1/(4 x 3), + 1/(2 x 1)
    [0.05, 0.133333, 0.633333]
    """
    t = np.asarray(list(times), dtype=float)
    e = np.asarray(list(events), dtype=bool)
    if t.shape != e.shape:
        raise ValueError("times and events differ in length")
    if not np.all(np.isfinite(t)):
        raise ValueError("every time must be finite")
    out: dict[str, list[float]] = {"time": [], "at_risk": [], "events": [], "survival": [],
                                   "greenwood": []}
    s, g = 1.0, 0.0
    for u in np.unique(t[e]):
        n = int(np.count_nonzero(t >= u))
        d = int(np.count_nonzero((t == u) & e))
        s *= 1.0 - d / n
        g = g + d / (n * (n - d)) if n > d else math.inf
        for key, v in (("time", float(u)), ("at_risk", n), ("events", d), ("survival", s),
                       ("greenwood", g)):
            out[key].append(v)
    return KaplanMeier(tuple(out["time"]), tuple(int(v) for v in out["at_risk"]),
                       tuple(int(v) for v in out["events"]), tuple(out["survival"]),
                       tuple(out["greenwood"]), int(t.size))


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError("level must lie in (0, 1)")
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2.0)


def km_band(km: KaplanMeier, level: float = 0.95) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The pointwise ``level`` band of S at each ``km.time``: (lows, highs).

    The log-log band (Kalbfleisch & Prentice, The Statistical Analysis of Failure Time Data,
    2nd ed., 2002; Klein & Moeschberger, Survival Analysis, 2nd ed., 2003, Section 4.3, their
    "log-transformed" interval): log(-log S) is taken as normal with variance
    sigma^2 / (log S)^2, sigma^2 Greenwood's sum, which gives [S^(1/theta), S^theta] with
    theta = exp(z sigma / log S). Unlike the plain Greenwood band S +- z S sigma it stays
    inside [0, 1] and keeps its coverage in small samples. Where S = 0 (every subject still
    at risk had its event) it is undefined: low 0, high NaN.

    Examples
    --------
    >>> km = kaplan_meier([3, 5, 5, 8, 10], [True, True, False, True, False])
    >>> low, high = km_band(km)
    >>> [round(v, 3) for v in low], [round(v, 3) for v in high]
    ([0.204, 0.126, 0.012], [0.969, 0.882, 0.719])
    """
    z = _z(level)
    lows: list[float] = []
    highs: list[float] = []
    for s, g in zip(km.survival, km.greenwood, strict=True):
        if s <= 0.0:
            lows.append(0.0)
            highs.append(math.nan)
            continue
        theta = math.exp(z * math.sqrt(g) / math.log(s))
        lows.append(s ** (1.0 / theta))
        highs.append(s**theta)
    return tuple(lows), tuple(highs)


@dataclass(frozen=True)
class SurvivalMedian:
    """The median of a Kaplan-Meier estimate and its interval (:func:`km_median`).

    Attributes
    ----------
    median, low, high : float
        Times; ``math.inf`` where the estimate (the band's low, the band's high) never falls
        to 1/2 within the data: the median, or that end of its interval, lies beyond the last
        time observed (or, for ``high``, cannot be told from the data).
    level : float
    """

    median: float
    low: float
    high: float
    level: float


def _first_at_or_below_half(time: tuple[float, ...], values: Iterable[float]) -> float:
    for t, v in zip(time, values, strict=True):
        if v <= 0.5 + 1e-12:  # NaN is never below
            return t
    return math.inf


def km_median(km: KaplanMeier, level: float = 0.95) -> SurvivalMedian:
    """The median time of ``km`` and its Brookmeyer-Crowley ``level`` interval.

    The median is the first event time at which S falls to 1/2 or below (``inf`` where it
    never does: the event had not happened for more than half the subjects by the end of what
    was observed). The interval is that of Brookmeyer & Crowley (Biometrics 38, 1982), built
    with the log-log band of :func:`km_band` as Klein & Moeschberger (2003, Section 4.5) build
    it: the times t at which the band contains 1/2, i.e. the medians a level-``level`` test of
    S(t) = 1/2 does not reject. It runs from the first event time at which the band's low
    falls to 1/2 or below to the first at which its high does; an end the band never reaches
    within the data is ``inf`` (where the curve falls to 0 the band's high is undefined, so
    the interval's high end is ``inf`` there too, as R's ``survival`` package gives NA).

    Examples
    --------
    The example of :func:`kaplan_meier`: S falls to 0.3 <= 1/2 at t = 8; the band's low is
    0.204 already at t = 3, its high never falls below 0.719:

    >>> km_median(kaplan_meier([3, 5, 5, 8, 10], [True, True, False, True, False]))
    SurvivalMedian(median=8.0, low=3.0, high=inf, level=0.95)

    Two events in five subjects: S = 0.6 at the end, the median is not reached.

    >>> km_median(kaplan_meier([2, 4, 9, 9, 9], [True, True, False, False, False])).median
    inf
    """
    lows, highs = km_band(km, level)
    return SurvivalMedian(_first_at_or_below_half(km.time, km.survival),
                          _first_at_or_below_half(km.time, lows),
                          _first_at_or_below_half(km.time, highs), level)


# ---- paired differences ----------------------------------------------------------------------


@dataclass(frozen=True)
class OrderInterval:
    """The median of n values and a distribution-free interval for it (:func:`sign_interval`).

    Attributes
    ----------
    median : float
        The sample median (the mean of the two middle values where n is even; NaN for n = 0).
    low, high : float
        The k-th smallest and the k-th largest value; ``-inf`` and ``inf`` where n is too
        small for any pair of order statistics to reach the level (k = 0).
    n : int
    rank : int
        k (0: unbounded).
    coverage : float
        The interval's exact coverage, 1 - 2 P(Binomial(n, 1/2) <= k - 1), at least the
        level asked (1 when unbounded).
    """

    median: float
    low: float
    high: float
    n: int
    rank: int
    coverage: float


def sign_interval(values: Iterable[float], level: float = 0.95) -> OrderInterval:
    """The median of ``values`` and the sign test's distribution-free interval for it.

    For n independent values of a continuous distribution with median M, the interval from
    the k-th smallest value x_(k) to the k-th largest x_(n+1-k) misses M only when k or fewer
    values fall on one side of it, so it covers M with probability 1 - 2 P(B <= k - 1),
    B ~ Binomial(n, 1/2), whatever the distribution (Conover, Practical Nonparametric
    Statistics, 3rd ed., 1999, Section 3.2; the interval is the set of medians a two-sided
    sign test does not reject). The largest k whose coverage is at least ``level`` is taken,
    so the coverage is exact and never below ``level`` (with ties, which a discrete
    distribution brings, it is higher). With 95 % at least 6 values are needed
    (1 - 2 / 2^6 = 0.969; five give at most 1 - 2 / 2^5 = 0.9375): fewer give the unbounded
    interval. Only the ranks matter, so values may be ``+-inf`` (an end of the interval is
    then one-sided).

    Raises
    ------
    ValueError
        A NaN value, or a level outside (0, 1).

    Examples
    --------
    Six values: k = 1, [min, max], coverage 1 - 2/64; nine: k = 2, 1 - 2 (1 + 9) / 512:

    >>> sign_interval([-3, -1, -4, -1, -5, -9])
    OrderInterval(median=-3.5, low=-9.0, high=-1.0, n=6, rank=1, coverage=0.96875)
    >>> iv = sign_interval(range(1, 10))
    >>> iv.low, iv.high, iv.rank, iv.coverage
    (2.0, 8.0, 2, 0.9609375)
    >>> sign_interval([1, 2, 3, 4, 5])  # five values cannot reach 95 %
    OrderInterval(median=3.0, low=-inf, high=inf, n=5, rank=0, coverage=1.0)
    """
    if not 0.0 < level < 1.0:
        raise ValueError("level must lie in (0, 1)")
    v = np.sort(np.asarray(list(values), dtype=float))
    if np.any(np.isnan(v)):
        raise ValueError("a value is NaN")
    n = int(v.size)
    if n == 0:
        return OrderInterval(math.nan, -math.inf, math.inf, 0, 0, 1.0)
    median = float(v[(n - 1) // 2]) if n % 2 else float((v[n // 2 - 1] + v[n // 2]) / 2.0)
    # the largest k with 1 - 2 P(B <= k - 1) >= level; tail = sum_{i < k} C(n, i), exact
    k, tail = 0, 0
    while k + 1 <= (n + 1) // 2 and 2 * (tail + math.comb(n, k)) / 2**n <= 1.0 - level:
        tail += math.comb(n, k)
        k += 1
    if k == 0:
        return OrderInterval(median, -math.inf, math.inf, n, 0, 1.0)
    return OrderInterval(median, float(v[k - 1]), float(v[n - k]), n, k,
                         1.0 - 2 * tail / 2**n)
