"""Whole-sample batches: rounding-and-repair (suggest and improve) with recomputed slots.

Devices train whole samples. For a whole global batch B the integer problem is

    min L  s.t.  sum_k a_k / (L - t_k^L(B_k)) <= T_f^U,  sum_k B_k = B,  B_k in {lo_k..hi_k}

(the slots are continuous: for given batches, tau_k = a_k / (L - t_k^L) is Theorem 1's slot
formula). *Suggest*: round a continuous answer to whole numbers that add up to B (largest
remainders, within the bounds). *Improve*: at the latency L of the current batches, the
cheapest way to place B whole samples, min sum_k a_k / (L - e_k - c_k B_k), is a separable
convex resource allocation, solved exactly by taking the B cheapest unit increments (marginal
costs rise along each device); if its slot sum falls below T_f^U the round can be shortened,
so L is recomputed for the new batches and the step repeats (a Dinkelbach-type iteration: L
strictly falls, so it stops). When it stops no integer split fits in a shorter uplink phase
(any split feasible at L' < L would cost less than T_f^U at L), so the batches are optimal for
that B. The exchange gap (largest saving of moving one sample, relative to T_f^U) is reported
as a certificate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.problems.feel.closed_form import Phase, uplink_for_batches
from mel_opt.problems.feel.latency import Coeffs


def round_to_sum(x: np.ndarray, B: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whole numbers within [lo, hi] that add up to B, near x (largest remainder).

    Parameters
    ----------
    x : ndarray
        Continuous suggestion [samples].
    B : int
        Required sum; sum lo <= B <= sum hi.
    lo, hi : ndarray
        Whole-number bounds.

    Returns
    -------
    ndarray of float (whole values)
    """
    x = np.clip(np.asarray(x, dtype=float), lo, hi)
    out = np.clip(np.floor(x), lo, hi)
    frac = x - out
    r = int(round(B - out.sum()))
    while r != 0:
        if r > 0:
            room = np.flatnonzero(out < hi)
            order = room[np.argsort(-frac[room], kind="stable")][:r]
            out[order] += 1.0
            frac[order] -= 1.0
            r -= order.size
        else:
            room = np.flatnonzero(out > lo)
            order = room[np.argsort(frac[room], kind="stable")][:-r]
            out[order] -= 1.0
            frac[order] += 1.0
            r += order.size
        if order.size == 0:  # pragma: no cover - excluded by sum lo <= B <= sum hi
            raise ValueError("round_to_sum: B outside [sum lo, sum hi]")
    return out


def _unit_cost(a: np.ndarray, c: np.ndarray, slack0: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Slot cost of the unit b -> b+1 at latency L: a c / (y (y - c)), y = L - e - c b.

    Equal to a / (y - c) - a / y without its cancellation.
    """
    y = slack0 - c * b
    return a * c / (y * (y - c))


def _marginal(co: Coeffs, slack0: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _unit_cost(co.a, co.c, slack0, b)


def _largest_feasible(co: Coeffs, slack0: np.ndarray) -> np.ndarray:
    """Largest whole batch with a positive slack L - e - c B, capped at hi."""
    ub = np.floor(slack0 / co.c)
    ub = np.where(slack0 - co.c * ub <= 0, ub - 1.0, ub)
    return np.minimum(co.hi, ub)


def _count(co: Coeffs, slack0: np.ndarray, ub: np.ndarray, nu: float) -> np.ndarray:
    """Batches made of every unit whose marginal cost is at most nu."""
    Y = 0.5 * (co.c + np.sqrt(co.c * co.c + 4.0 * co.a * co.c / nu))
    return np.clip(np.floor((slack0 - Y) / co.c) + 1.0, co.lo, ub)


def _cheapest_split(co: Coeffs, L: float, B: int, x: np.ndarray) -> np.ndarray:
    """Exact minimiser of sum_k a_k / (L - e_k - c_k B_k) over whole splits of B.

    ``x`` is a split feasible at L (positive slacks); it brackets the marginal threshold.
    """
    slack0 = L - co.e
    a, c = co.a, co.c
    y = slack0 - c * x  # slack of the current batch, > 0
    ac = a * c
    with np.errstate(divide="ignore", invalid="ignore"):
        add = np.where((x < co.hi) & (y > c), ac / (y * (y - c)), np.inf)
        rem = np.where(x > co.lo, ac / ((y + c) * y), -np.inf)
    rmax, amin = rem.max(), add.min()
    if rmax <= amin or rmax == -np.inf or amin == np.inf:
        return x  # no exchange helps: already the cheapest split
    ub = _largest_feasible(co, slack0)
    nu_hi = float(add[np.isfinite(add)].max())
    nu_lo = float(rem[np.isfinite(rem)].min()) * (1.0 - 1e-12)
    xl = _count(co, slack0, ub, nu_lo)
    while xl.sum() > B:
        nu_lo *= 0.5
        xl = _count(co, slack0, ub, nu_lo)
    xh = _count(co, slack0, ub, nu_hi)
    while xh.sum() < B:
        nu_hi *= 2.0
        xh = _count(co, slack0, ub, nu_hi)
        if nu_hi > 1e300:  # pragma: no cover - x itself proves sum ub >= B
            xh = ub.copy()
            break
    limit = max(4 * co.K, 1024)
    while xh.sum() - xl.sum() > limit and nu_hi > nu_lo * (1.0 + 1e-14):
        nu = float(np.sqrt(nu_lo * nu_hi))
        xm = _count(co, slack0, ub, nu)
        if xm.sum() <= B:
            nu_lo, xl = nu, xm
        else:
            nu_hi, xh = nu, xm
    r = int(round(B - xl.sum()))
    if r == 0:
        return xl
    n = (xh - xl).astype(np.int64)
    dev = np.repeat(np.arange(co.K), n)
    start = np.repeat(np.cumsum(n) - n, n)
    b = xl[dev] + (np.arange(dev.size) - start)
    cost = _unit_cost(co.a[dev], co.c[dev], slack0[dev], b)
    pick = np.argpartition(cost, r - 1)[:r] if r < cost.size else np.arange(cost.size)
    return xl + np.bincount(dev[pick], minlength=co.K).astype(float)


def exchange_gap(co: Coeffs, L: float, x: np.ndarray) -> float:
    """Largest slot saving [s] of moving one sample between devices at latency L, / T_f^U.

    0 (or below) certifies that no single move lowers the slot sum, i.e. the split is the
    cheapest at L.
    """
    slack0 = L - co.e
    ub = _largest_feasible(co, slack0)
    add = np.where(x < ub, _marginal(co, slack0, x), np.inf)
    rem = np.where(x > co.lo, _marginal(co, slack0, x - 1.0), -np.inf)
    if not (np.isfinite(add).any() and np.isfinite(rem).any()):
        return 0.0
    return float(max(0.0, rem.max() - add.min()) / co.frame_up)


@dataclass(frozen=True)
class IntegerSplit:
    """Whole batches for one global batch with their optimal uplink slots.

    Attributes
    ----------
    uplink : Phase
        Latency L [s], slots [s] and the batches (whole numbers stored as floats).
    rounds : int
        Improve iterations (latency recomputations).
    exchange_gap : float
        :func:`exchange_gap` at the end (0 for an exact split).
    """

    uplink: Phase
    rounds: int
    exchange_gap: float

    @property
    def batch(self) -> np.ndarray:
        """The whole batches [samples] (floats holding whole numbers)."""
        assert self.uplink.batch is not None
        return self.uplink.batch


def best_split(co: Coeffs, B: int, suggestion: np.ndarray | None = None,
               warm: IntegerSplit | None = None, certify: bool = True) -> IntegerSplit:
    """Optimal whole batches for global batch B, starting from a rounded suggestion.

    Parameters
    ----------
    co : Coeffs
    B : int
        Whole global batch in [K, K B^max].
    suggestion : ndarray, optional
        Continuous batches to round (default: B spread in proportion to 1 / c_k).
    warm : IntegerSplit, optional
        An optimal split for B - 1 or B + 1: one sample is added or removed where it costs
        least, and the improve loop starts from there.
    certify : bool
        Compute the exchange gap (else it is reported as nan).

    Returns
    -------
    IntegerSplit
    """
    lo_sum = int(round(co.lo.sum()))
    if B < lo_sum:
        # GPU data-bound region: every split of 1 <= B_k <= lo_k has t_k^L = t_k^l.
        x = round_to_sum(1.0 + (co.lo - 1.0) * (B - co.K) / max(lo_sum - co.K, 1), B,
                         np.ones(co.K), co.lo)
        return IntegerSplit(uplink_for_batches(co, x), 0, 0.0)
    hint: dict[str, float] = {}
    if warm is not None and abs(int(round(warm.uplink.global_batch)) - B) == 1:
        x = warm.batch.copy()
        L0 = warm.uplink.latency
        # One more sample never shortens the uplink phase, one fewer never lengthens it.
        hint = {"left": L0} if B > warm.uplink.global_batch else {"right": L0}
        slack0 = L0 - co.e
        if B > warm.uplink.global_batch:
            cost = np.where(x < co.hi, co.a / np.maximum(slack0 - co.c * (x + 1.0), 1e-300)
                            - co.a / (slack0 - co.c * x), np.inf)
            cost = np.where(slack0 - co.c * (x + 1.0) > 0, cost, np.inf)
            k = int(np.argmin(cost))
            if not np.isfinite(cost[k]):
                k = int(np.argmin(np.where(x < co.hi, co.c, np.inf)))
            x[k] += 1.0
        else:
            gain = np.where(x > co.lo, co.a / (slack0 - co.c * x)
                            - co.a / (slack0 - co.c * (x - 1.0)), -np.inf)
            x[int(np.argmax(gain))] -= 1.0
    else:
        if suggestion is None:
            suggestion = B * (1.0 / co.c) / float((1.0 / co.c).sum())
        x = round_to_sum(suggestion, B, co.lo, co.hi)
    up = uplink_for_batches(co, x, **hint)
    rounds = 0
    for rounds in range(1, 200):  # noqa: B007 - the count is reported
        L = up.latency
        x_new = _cheapest_split(co, L, B, x)
        if np.array_equal(x_new, x):
            break
        slots_new = float((co.a / (L - co.compute_time(x_new))).sum())
        if not slots_new < co.frame_up * (1.0 - 1e-13):
            break
        x = x_new
        up = uplink_for_batches(co, x, right=L)
    gap = exchange_gap(co, up.latency, x) if certify else float("nan")
    return IntegerSplit(up, rounds, gap)


def solution_dict(batch: np.ndarray, up_slots: np.ndarray,
                  down_slots: np.ndarray) -> dict[str, Any]:
    """The result-contract keys of feel: ``batch``, ``global_batch``, ``uplink_slots``,
    ``downlink_slots`` (whole batches as ints, slots in seconds)."""
    b = np.rint(np.asarray(batch, dtype=float)).astype(np.int64)
    return {
        "batch": b.tolist(),
        "global_batch": int(b.sum()),
        "uplink_slots": np.asarray(up_slots, dtype=float).tolist(),
        "downlink_slots": np.asarray(down_slots, dtype=float).tolist(),
    }
