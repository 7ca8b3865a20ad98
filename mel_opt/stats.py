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
