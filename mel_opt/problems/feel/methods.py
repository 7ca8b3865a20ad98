"""Methods of the feel problem: the closed form, IPOPT and the baselines of Section VI.

Every method ends with whole batches that add up to the global batch and respect their bounds,
with slots recomputed for those batches (:mod:`mel_opt.problems.feel.rounding`); the continuous
optimum, where a method has one, is reported beside it with the efficiency lost to rounding.

Options (declared in :data:`CLOSED_FORM_OPTIONS` and
:data:`~mel_opt.problems.feel.multistart.MULTISTART_OPTIONS`):

- ``closed-form``: ``max_candidates`` (whole global batches tried around the continuous optimum;
  the answer is certified optimal when every batch that could still win was tried, which the
  rounding granularity makes impractical for thousands of devices: ``efficiency_upper_bound``
  then says how far from optimal it can be).
- ``ipopt``: ``starts`` and ``tol`` (:mod:`~mel_opt.problems.feel.multistart`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mel_opt import deadline
from mel_opt.problems.base import MethodOutput, SolveOptions
from mel_opt.problems.feel.closed_form import (
    Continuous,
    FreeBatchSearch,
    downlink,
    paper_mu,
    solve_continuous,
    uplink_for_batches,
)
from mel_opt.problems.feel.instance import FeelInstance
from mel_opt.problems.feel.latency import Coeffs, coefficients, efficiency
from mel_opt.problems.feel.multistart import MULTISTART_OPTIONS, ipopt_multistart
from mel_opt.problems.feel.rounding import (
    IntegerSplit,
    best_split,
    exchange_gap,
    round_to_sum,
    solution_dict,
)
from mel_opt.problems.options import Option
from mel_opt.result import SolverInfo
from mel_opt.status import TerminationCondition

CLOSED_FORM = SolverInfo("mel_opt closed form (paper 004, Theorems 1-2, Algorithm 1)", "1")
BASELINE = SolverInfo("mel_opt baseline", "1")


def continuous_extras(co: Coeffs, cont: Continuous, prefix: str = "continuous_") -> dict[str, Any]:
    """The continuous optimum reported beside a whole-batch answer."""
    B = cont.global_batch
    dl = co.xi * math.sqrt(B)
    out: dict[str, Any] = {
        f"{prefix}efficiency": cont.efficiency,
        f"{prefix}global_batch": B,
        f"{prefix}uplink_latency_s": cont.uplink.latency,
        f"{prefix}batch": np.asarray(cont.uplink.batch, dtype=float).tolist(),
        f"{prefix}E_U": cont.uplink.latency / dl,
        f"{prefix}E_D": cont.downlink.latency / dl,
    }
    if np.isfinite(cont.uplink.theta) and cont.uplink.theta > 0:
        out[f"{prefix}mu"] = paper_mu(co, cont.uplink.theta, B)
    return out


# --------------------------------------------------------------------------------------------
# Whole global batch around the continuous optimum
# --------------------------------------------------------------------------------------------


def default_max_candidates(K: int) -> int:
    """Whole global batches tried by default: 256, fewer above 2,000 devices (work ~ K)."""
    return 256 if K <= 2000 else max(8, 512_000 // K)


CLOSED_FORM_OPTIONS = (
    Option("max_candidates", int, None, "whole global batches tried around the continuous "
           "optimum (free B); more can certify larger instances", minimum=2,
           default_doc="256, or 512,000 / K above 2,000 devices"),
)


def tangent_bound(cont: Continuous, B: float) -> float:
    """Upper bound on the efficiency of any global batch B, whole batches or not [loss/s].

    L_up(B) is convex, so L_up(B) >= L* + s (B - B_c) with s = ``cont.bound_slope`` and
    E(B) <= xi sqrt(B) / (L* + D + s (B - B_c)). For an interior optimum
    (s = (L* + D) / (2 B_c)) this is E_c 2 sqrt(B B_c) / (B + B_c), the ratio of the geometric
    to the arithmetic mean of B and B_c times the continuous optimum.
    """
    xi = cont.efficiency * (cont.uplink.latency + cont.downlink.latency) / math.sqrt(
        cont.global_batch)
    den = (cont.uplink.latency + cont.downlink.latency
           + cont.bound_slope * (B - cont.global_batch))
    return xi * math.sqrt(B) / den if den > 0 else math.inf


def _window(cont: Continuous, level: float) -> tuple[float, float]:
    """Global batches whose :func:`tangent_bound` reaches ``level`` (1e-12 margin): the roots
    of level s y^2 - xi y + level (L* + D - s B_c) = 0 in y = sqrt(B)."""
    Bc, s = cont.global_batch, cont.bound_slope
    LD = cont.uplink.latency + cont.downlink.latency
    xi = cont.efficiency * LD / math.sqrt(Bc)
    lv = level * (1.0 - 1e-12)
    disc = xi * xi - 4.0 * lv * s * lv * (LD - s * Bc)
    if disc <= 0:
        return Bc, Bc
    root = math.sqrt(disc)
    y1 = (xi - root) / (2.0 * lv * s)
    y2 = (xi + root) / (2.0 * lv * s)
    return max(y1, 0.0) ** 2, y2 * y2


def search_integer_batch(co: Coeffs, D: float, cont: Continuous,
                         max_candidates: int = 256) -> tuple[IntegerSplit, dict[str, Any]]:
    """Best whole global batch B and whole batches, certified by the continuous bound.

    With whole batches the efficiency is not unimodal in B, but it never exceeds
    :func:`tangent_bound`, which falls away on both sides of the continuous optimum. After
    trying the whole batches next to the continuous optimum, only B whose bound beats the
    incumbent can still win; they form an interval, tried from the middle outwards (it shrinks
    as the incumbent improves; each B warm-starts from its neighbour). The answer is certified
    when the interval is exhausted within ``max_candidates`` (and before the deadline of
    :mod:`mel_opt.deadline` passes); otherwise ``efficiency_upper_bound`` bounds what was not
    tried.

    Returns
    -------
    (IntegerSplit, info)
    """
    lo_sum, hi_sum = int(round(co.lo.sum())), int(round(co.hi.sum()))
    Bc = cont.global_batch
    xc = np.asarray(cont.uplink.batch, dtype=float)
    first = min(max(int(math.floor(Bc)), lo_sum), hi_sum)

    def evaluate(B: int, warm: IntegerSplit | None) -> IntegerSplit:
        return best_split(co, B, suggestion=xc * (B / Bc), warm=warm, certify=False)

    def eff(split: IntegerSplit) -> float:
        return efficiency(co, split.uplink.global_batch, split.uplink.latency, D)

    best = evaluate(first, None)
    last = {-1: best, 1: best}
    nxt = {-1: first - 1, 1: first + 1}
    best_eff = eff(best)
    count = 1
    b_left, b_right = _window(cont, best_eff)

    def open_side(side: int) -> bool:
        B = nxt[side]
        if side < 0:
            return B >= lo_sum and B > b_left
        return B <= hi_sum and B < b_right

    until = deadline.current()
    while count < max_candidates and (open_side(-1) or open_side(1)) and not until.expired():
        sides = [s for s in (-1, 1) if open_side(s)]
        side = min(sides, key=lambda s: abs(nxt[s] - Bc))
        B = nxt[side]
        split = evaluate(B, last[side])
        last[side] = split
        nxt[side] = B + side
        count += 1
        e = eff(split)
        if e > best_eff:
            best, best_eff = split, e
            b_left, b_right = _window(cont, best_eff)
    certified = not (open_side(-1) or open_side(1))
    upper = best_eff
    for side in (-1, 1):
        if open_side(side):
            upper = max(upper, tangent_bound(cont, float(nxt[side])))
    best = IntegerSplit(best.uplink, best.rounds,
                        exchange_gap(co, best.uplink.latency, best.batch))
    info = {
        "integer_B_candidates": count,
        "integer_B_certified": certified,
        "integer_B_window": [b_left, b_right],
        "efficiency_upper_bound": upper,
    }
    return best, info


# --------------------------------------------------------------------------------------------
# closed-form
# --------------------------------------------------------------------------------------------


def solve_closed_form(inst: FeelInstance, opts: SolveOptions) -> MethodOutput:
    """Theorems 1-2 with Algorithm 1 and the outer search over B, then whole batches.

    Fixed ``global_batch``: Algorithm 1 for the continuous optimum, then the exact whole split
    of that B. Free B: the continuous optimum of P1, then the certified search over whole B.
    """
    co = coefficients(inst)
    max_candidates = opts.options.get("max_candidates") or default_max_candidates(co.K)
    down = downlink(co)
    extras: dict[str, Any] = {}
    if co.global_batch is not None:
        B = co.global_batch
        cont = solve_continuous(co, B)
        split = best_split(co, B, suggestion=cont.uplink.batch)
        certified = True
        extras.update({k: v for k, v in cont.uplink.info.items()
                       if k in ("corollary1_holds", "corollary2_upper_holds",
                                "corollary2_lower_holds", "iterations")})
    else:
        fb = FreeBatchSearch(co, down)
        cont = fb.solve()
        split, info = search_integer_batch(co, down.latency, cont, max_candidates)
        certified = bool(info["integer_B_certified"])
        extras.update(info)
        extras["outer_search_evaluations"] = fb.evaluations
        extras["continuous_case"] = cont.info.get("case", "")
    up = split.uplink
    eff_int = efficiency(co, up.global_batch, up.latency, down.latency)
    extras.update(continuous_extras(co, cont))
    extras["rounding_loss"] = 1.0 - eff_int / cont.efficiency
    extras["exchange_gap"] = split.exchange_gap
    answer = MethodOutput.optimal if certified else MethodOutput.feasible
    if co.global_batch is not None:
        msg = f"optimal whole batches for global_batch = {co.global_batch}"
    elif certified:
        msg = "optimal whole batches and global batch (certified by the continuous bound)"
    else:
        msg = (f"best of {extras['integer_B_candidates']} whole global batches; not certified "
               "(raise the max_candidates option): see efficiency_upper_bound")
    return answer(solution_dict(split.batch, up.slots, down.slots), CLOSED_FORM, extras, msg)


# --------------------------------------------------------------------------------------------
# ipopt
# --------------------------------------------------------------------------------------------


def solve_ipopt(inst: FeelInstance, opts: SolveOptions) -> MethodOutput:
    """P4 + P5 (fixed ``global_batch``) or P1 with multi-start by IPOPT, then whole batches.

    See :func:`mel_opt.problems.feel.multistart.ipopt_multistart` for the options and the
    steps.
    """
    return ipopt_multistart(inst, opts)


IPOPT_OPTIONS = MULTISTART_OPTIONS


# --------------------------------------------------------------------------------------------
# Baselines (Section VI-D, and equal slots)
# --------------------------------------------------------------------------------------------


def _with_optimal_slots(inst: FeelInstance, co: Coeffs, batch: np.ndarray, what: str,
                        extras: dict[str, Any] | None = None) -> MethodOutput:
    B = int(round(float(batch.sum())))
    if co.global_batch is not None and B != co.global_batch:
        return MethodOutput.nothing(TerminationCondition.INFEASIBLE, BASELINE, {},
                                    f"{what} gives a global batch of {B}, but the instance "
                                    f"fixes global_batch = {co.global_batch}")
    up = uplink_for_batches(co, batch)
    down = downlink(co)
    return MethodOutput.feasible(solution_dict(batch, up.slots, down.slots), BASELINE,
                                 dict(extras or {}), f"{what}; slots by Theorems 1-2")


def solve_online(inst: FeelInstance, opts: SolveOptions) -> MethodOutput:
    """Online learning: B_k = 1 for every device, optimal slots for those batches."""
    co = coefficients(inst)
    return _with_optimal_slots(inst, co, np.ones(co.K), "online learning (B_k = 1)")


def solve_full_batch(inst: FeelInstance, opts: SolveOptions) -> MethodOutput:
    """Full batch: B_k = B^max for every device, optimal slots for those batches."""
    co = coefficients(inst)
    return _with_optimal_slots(inst, co, np.full(co.K, float(co.max_batch)),
                               f"full batch (B_k = {co.max_batch})")


def solve_random_batch(inst: FeelInstance, opts: SolveOptions) -> MethodOutput:
    """Random batch sizes, uniform on 1..B^max (seeded), optimal slots for them.

    With a fixed ``global_batch`` the batches are a random split of it (uniform weights,
    rounded within the bounds).
    """
    co = coefficients(inst)
    rng = np.random.default_rng(opts.seed)
    ones = np.ones(co.K)
    top = np.full(co.K, float(co.max_batch))
    if co.global_batch is None:
        batch = rng.integers(1, co.max_batch + 1, size=co.K).astype(float)
    else:
        w = rng.uniform(0.0, 1.0, co.K)
        batch = round_to_sum(1.0 + (co.global_batch - co.K) * w / w.sum(), co.global_batch,
                             ones, top)
    return _with_optimal_slots(inst, co, batch, f"random batch sizes (seed {opts.seed})",
                               {"seed": opts.seed})


def equal_slot_batches(co: Coeffs) -> tuple[np.ndarray, float, float]:
    """Best whole batches when every device gets T_f / K of both frames.

    With equal slots the upload and download times are fixed (K a_k / T_f^U, K b_k / T_f^D);
    for an uplink latency L each device takes the most samples that finish by L, so the best L
    is one of the K B^max finishing times t_k^L(b) + K a_k / T_f^U, enumerated exactly.

    Returns
    -------
    (batch, L, D) : whole batches, uplink and downlink latencies [s].
    """
    K = co.K
    u = K * co.a / co.frame_up
    D = float(np.max(co.m + K * co.b / co.frame_down))
    b = np.arange(1, co.max_batch + 1, dtype=float)
    t = co.e[:, None] + co.c[:, None] * np.maximum(b[None, :], co.lo[:, None])
    finish = t + u[:, None]  # (K, B^max), nondecreasing along each row
    L0 = float(finish[:, 0].max())  # every device must take one sample
    values = np.sort(finish.ravel())
    values = values[values >= L0]
    distinct = np.unique(values)
    counts = np.searchsorted(np.sort(finish.ravel()), distinct, side="right")
    # counts include units below L0 of devices that reach it: the count of units <= v.
    if co.global_batch is None:
        score = np.sqrt(counts) / (distinct + D)
        j = int(np.argmax(score))
    else:
        j = int(np.searchsorted(counts, co.global_batch, side="left"))
    L = float(distinct[j])
    batch = (finish <= L).sum(axis=1).astype(float)
    if co.global_batch is not None:
        # Fewer samples than counted: drop the latest-finishing units (never a device's first).
        extra = int(batch.sum()) - co.global_batch
        while extra > 0:
            top = np.where(batch >= 2, finish[np.arange(K), batch.astype(int) - 1], -np.inf)
            batch[int(np.argmax(top))] -= 1.0
            extra -= 1
        L = float(np.max(co.compute_time(batch) + u))
    return batch, L, D


def solve_equal_slots(inst: FeelInstance, opts: SolveOptions) -> MethodOutput:
    """Equal TDMA slots T_f / K (uplink and downlink), best whole batches for them."""
    co = coefficients(inst)
    batch, L, D = equal_slot_batches(co)
    if co.global_batch is not None and int(batch.sum()) != co.global_batch:
        return MethodOutput.nothing(  # pragma: no cover
            TerminationCondition.INFEASIBLE, BASELINE, {},
            "equal slots cannot place global_batch samples")
    up = np.full(co.K, co.frame_up / co.K)
    dn = np.full(co.K, co.frame_down / co.K)
    return MethodOutput.feasible(solution_dict(batch, up, dn), BASELINE, {},
                                 "equal slots, best whole batches for them")


__all__ = [
    "efficiency",
    "equal_slot_batches",
    "search_integer_batch",
    "solution_dict",
    "solve_closed_form",
    "solve_equal_slots",
    "solve_full_batch",
    "solve_ipopt",
    "solve_online",
    "solve_random_batch",
]
