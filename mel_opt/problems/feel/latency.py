"""The coefficient form of a feel instance shared by every method (not by the verifier).

Every latency of the round is written with a handful of per-device coefficients:

    upload   t_k^U = a_k / tau_k^U,      a_k = s T_f^U / R_k^U     [s^2]      (10)
    download t_k^D = b_k / tau_k^D,      b_k = s T_f^D / R_k^D     [s^2]      (11)
    update   t_k^M = m_k                                          [s]        (12), (28)
    compute  t_k^L(B_k) = e_k + c_k max(B_k, lo_k)  for 1 <= B_k <= hi_k     (9), (27)

CPU (Eq. (9)): c_k = C / f_k = 1 / V_k, e_k = 0, lo_k = 1, hi_k = B^max.

GPU (Eq. (27)): c_k is the slope, lo_k = max(1, min(B_k^th, B^max)) and e_k = t_k^l - c_k B_k^th,
so that t_k^L = t_k^l on the data-bound region B_k <= B_k^th and grows linearly after it. On
[lo_k, hi_k] the compute time is the linear e_k + c_k B_k; when B_k^th >= B^max the device is
data-bound everywhere and lo_k = hi_k = B^max, e_k = t_k^l - c_k B^max. Lemma 2 (an optimum has
B_k >= lo_k) holds for every global batch B >= sum_k lo_k by an exchange argument: moving samples
from a device above lo_k to one below it keeps the receiver's latency at t_k^l and does not raise
the giver's. Below sum_k lo_k (only possible with a fixed ``global_batch``) every device can stay
in its data-bound region and the compute latency is t_k^l whatever the split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from mel_opt.problems.feel.instance import MIN_BATCH, FeelInstance


@dataclass(frozen=True, eq=False)
class Coeffs:
    """Per-device coefficients of the latency model (arrays of shape (K,)).

    Attributes
    ----------
    a, b : ndarray
        Upload and download numerators [s^2]: t^U = a / tau^U, t^D = b / tau^D.
    c : ndarray
        Seconds per sample in the compute-bound region [s/sample].
    e : ndarray
        Offset of the linear compute time on [lo, hi] [s].
    lo, hi : ndarray
        Working range of the batch (whole numbers stored as floats) [samples].
    m : ndarray
        Local model update latency [s].
    frame_up, frame_down : float
        T_f^U and T_f^D [s].
    xi : float
        Loss decay coefficient of Eq. (8).
    max_batch : int
        B^max [samples].
    global_batch : int or None
        Fixed global batch, if the instance fixes it.
    gpu : bool
    """

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    e: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    m: np.ndarray
    frame_up: float
    frame_down: float
    xi: float
    max_batch: int
    global_batch: int | None
    gpu: bool

    @property
    def K(self) -> int:
        return int(self.a.shape[0])

    @cached_property
    def g(self) -> np.ndarray:
        """sqrt(a_k / c_k) [s sqrt(sample)]: the interior slot is g_k / theta (Theorem 1)."""
        return np.sqrt(self.a / self.c)

    @cached_property
    def V(self) -> np.ndarray:
        """Training speed V_k = 1 / c_k [samples/s] (the paper's local training speed)."""
        return 1.0 / self.c

    @cached_property
    def t_floor(self) -> np.ndarray:
        """Least compute latency of each device, t_k^L(lo_k) [s]."""
        return self.e + self.c * self.lo

    def compute_time(self, batch: np.ndarray) -> np.ndarray:
        """t_k^L(B_k) of Eq. (9) / (27) for batches in [1, hi_k] [s]."""
        return self.e + self.c * np.maximum(np.asarray(batch, dtype=float), self.lo)

    @property
    def min_global(self) -> int:
        """Least global batch, K (every device trains at least one sample)."""
        return self.K * MIN_BATCH

    @property
    def max_global(self) -> int:
        """Largest global batch, K B^max."""
        return self.K * self.max_batch


def coefficients(inst: FeelInstance) -> Coeffs:
    """Build the coefficient form of ``inst`` (see the module docstring)."""
    K = inst.K
    s = inst.gradient_bits
    a = s * inst.frame_up / np.asarray(inst.uplink_bps, dtype=float)
    b = s * inst.frame_down / np.asarray(inst.downlink_bps, dtype=float)
    bmax = float(inst.max_batch)
    hi = np.full(K, bmax)
    if inst.is_gpu:
        assert inst.slope is not None and inst.t_low is not None
        assert inst.batch_threshold is not None and inst.update_s is not None
        c = np.asarray(inst.slope, dtype=float).copy()
        th = np.asarray(inst.batch_threshold, dtype=float)
        lo = np.maximum(float(MIN_BATCH), np.minimum(th, bmax))
        # t^L(lo) = t_low + c (lo - th)^+ ; e is chosen so that e + c lo equals it.
        t_at_lo = np.asarray(inst.t_low, dtype=float) + c * np.maximum(lo - th, 0.0)
        e = t_at_lo - c * lo
        m = np.asarray(inst.update_s, dtype=float).copy()
    else:
        assert inst.cpu_hz is not None and inst.cycles_per_sample is not None
        assert inst.update_cycles is not None
        f = np.asarray(inst.cpu_hz, dtype=float)
        c = inst.cycles_per_sample / f
        e = np.zeros(K)
        lo = np.full(K, float(MIN_BATCH))
        m = inst.update_cycles / f
    for arr in (a, b, c, e, lo, hi, m):
        arr.setflags(write=False)
    return Coeffs(a=a, b=b, c=c, e=e, lo=lo, hi=hi, m=m, frame_up=inst.frame_up,
                  frame_down=inst.frame_down, xi=inst.loss_decay_coeff,
                  max_batch=inst.max_batch, global_batch=inst.global_batch, gpu=inst.is_gpu)


def efficiency(co: Coeffs, B: float, L: float, D: float) -> float:
    """xi sqrt(B) / (L + D), Eq. (16) [loss/s]."""
    return co.xi * math.sqrt(B) / (L + D)
