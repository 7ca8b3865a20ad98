"""A global cycle of asynchronous MEL under an allocation (paper 000, Section II).

Learner k holds d_k samples (the data set is split in proportion to the d_k), runs tau_k local
updates (passes of minibatch SGD) over them from the current global model, and the orchestrator
averages the local models weighted by d_k. On the time model of Eq. (5) learner k is busy
t_k = C2_k tau_k d_k + C1_k d_k + C0_k <= T, of which C2_k tau_k d_k is computation and
C1_k d_k + C0_k the transfer of samples and model (Eq. 3-4); the cycle lasts the cycle clock T.

When the learners of a live round can no longer take the file's d samples in T (a learner was
lost: (7c) with one update each, sum_k min(d_u, (T - C0_k) / (C2_k + C1_k)) < d), the paper's
model runs on with the data they can take (:meth:`MelAsyncCycle.live_adapt`, policy ``data``:
d becomes that sum, the clock T stays), or with d kept on the least T that fits (``clock``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.validate import readonly_array
from mel_opt.problems.learning import (
    Adaptation,
    CyclePlan,
    LearnerPlan,
    LearningCycle,
    RunContext,
    WorkClock,
)
from mel_opt.problems.mel_async.instance import MelAsyncInstance
from mel_opt.problems.mel_async.windows import upper_d
from mel_opt.problems.work import median_fit

#: Bisection steps of the least cycle clock (each halves the bracket: far below a float's
#: resolution of any T).
CLOCK_STEPS = 200


def _allocation(solution: Mapping[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
    if solution is None:  # every scheme of mel-async is a method with a solution
        raise UsageError("mel-async trains only under a method's allocation")
    return (np.asarray(solution["d"], dtype=np.int64),
            np.asarray(solution["tau"], dtype=np.int64))


def _spread(inst: MelAsyncInstance) -> np.ndarray | None:
    """The learners' run-to-run ``time_cv``, or None where the instance gives none (every
    learner runs exactly to Eq. (5))."""
    cv = inst.time_cv
    return None if cv is None or not np.any(np.asarray(cv) > 0) else np.asarray(cv, dtype=float)


class MelAsyncCycle(LearningCycle):
    """tau_k passes over d_k samples per learner, averaged by d_k, every T seconds."""

    columns = ("d", "tau")
    measured_transfers = True

    def check(self, inst: MelAsyncInstance, scheme: str,
              solution: Mapping[str, Any] | None) -> None:
        d, tau = _allocation(solution)
        busy = np.asarray(inst.times(d.astype(float), tau.astype(float)))
        T = float(inst.cycle_time)
        if float(busy.max()) > T * (1 + 1e-9):
            raise UsageError(f"the allocation overruns the cycle clock: max t_k = "
                             f"{busy.max():g} s > T = {T:g} s")

    def data_shares(self, inst: MelAsyncInstance, scheme: str,
                    solution: Mapping[str, Any] | None, dataset_size: int) -> np.ndarray:
        return _allocation(solution)[0].astype(float)

    def configure_cycle(self, inst: MelAsyncInstance, ctx: RunContext, cycle: int) -> CyclePlan:
        d, tau = _allocation(ctx.solution)
        df = d.astype(float)
        busy = np.asarray(inst.times(df, tau.astype(float)))  # Eq. (5)
        comm = np.asarray(inst.c1 * df + inst.c0)  # Eq. (3)-(4): samples and model moved
        sizes = np.asarray(ctx.data_sizes, dtype=np.int64)
        cv = _spread(inst)
        plans = tuple(
            LearnerPlan(learner=k, samples=int(sizes[k]), passes=int(tau[k]), weight=float(df[k]),
                        predicted_s=float(busy[k]), comm_s=float(comm[k]),
                        time_cv=None if cv is None else float(cv[k]),
                        columns={"d": int(d[k]), "tau": int(tau[k])})
            for k in range(inst.K))
        return CyclePlan(plans, duration_s=float(inst.cycle_time))

    def work_clock(self, inst: MelAsyncInstance) -> WorkClock:
        """An equal share is u = d / K of the d samples of a cycle, so p passes cost
        t_k = C2_k p u + C1_k u + C0_k (Eq. (5): computation C2_k p u, transfers C1_k u + C0_k);
        the budget is the cycle clock T. The paper's model fixes no local work: the passes
        are what the median learner fits in T."""
        u = float(inst.total_samples) / inst.K
        per = np.asarray(inst.c2, dtype=float) * u
        fixed = np.asarray(inst.c1, dtype=float) * u + np.asarray(inst.c0, dtype=float)
        T = float(inst.cycle_time)
        return WorkClock(T, per, fixed, max(1.0, median_fit(T, fixed, per)), time_cv=_spread(inst),
                         share=u, passes_fitted=True)

    def link_rates(self, inst: MelAsyncInstance, model_bytes: float) -> np.ndarray:
        """R_k such that the live model crosses down and up in the file's C0_k = 2 P_m S_m /
        R_k (Eq. (3)-(4)): ``16 model_bytes / C0_k`` bit/s (a learner with C0_k = 0 has no
        transfer time to keep: infinite)."""
        c0 = np.asarray(inst.c0, dtype=float)
        with np.errstate(divide="ignore"):
            return np.where(c0 > 0, 16.0 * float(model_bytes) / c0, np.inf)

    def live_instance(self, inst: MelAsyncInstance, learners: np.ndarray, seconds: np.ndarray,
                      dataset_size: int) -> MelAsyncInstance:
        """C2_k from the measured seconds per sample-pass; C1_k, C0_k (the transfers of Eq.
        (3)-(4)) from the file.

        A learner trains on about d_k * N / d of the N training samples (its share of the data
        set), so one of the instance's sample-updates costs sigma_k N / d seconds.
        """
        idx = np.asarray(learners, dtype=np.int64)
        c2 = np.asarray(seconds, dtype=float)[idx] * (dataset_size / inst.total_samples)
        return dataclasses.replace(
            inst, c2=readonly_array(c2), c1=readonly_array(np.asarray(inst.c1)[idx]),
            c0=readonly_array(np.asarray(inst.c0)[idx]),
            learner_names=tuple(inst.learner_names[k] for k in idx),
            name=f"{inst.name}-live")

    def live_transfers(self, inst: MelAsyncInstance, seconds: np.ndarray,
                       rate_Bps: np.ndarray) -> MelAsyncInstance:
        """C0_k, the model's transfer down and up (Eq. (3)-(4)), from each learner's measured
        messaging per round, where measured; C1_k (the data's, emulated live) from the file."""
        measured = np.asarray(seconds, dtype=float)
        c0 = np.where(np.isfinite(measured) & (measured > 0), measured, inst.c0)
        return dataclasses.replace(inst, c0=readonly_array(c0))

    def live_adapt(self, inst: MelAsyncInstance, policy: str) -> Adaptation | None:
        """The paper's model for the learners of a live round that cannot take the file's
        d = ``total_samples`` in T with one update each: ``data``, d lowered to what they can
        take (:func:`data_they_can_take`); ``clock``, T raised to the least that takes d
        (:func:`least_clock`). None where that does not help (a learner cannot take d_l
        samples once in T; K d_u < d for ``clock``; d already fits)."""
        if policy == "data":
            return data_they_can_take(inst)
        if policy == "clock":
            return least_clock(inst)
        return None


def one_update_caps(inst: MelAsyncInstance) -> np.ndarray:
    """The most samples each learner can take with one update within T: the largest whole d_k
    with C2_k d_k + C1_k d_k + C0_k <= T (Eq. 5, tau_k = 1), at most d_u (7f); as the exact
    method counts them (:func:`~mel_opt.problems.mel_async.windows.upper_d`), so the adapted
    instance is feasible for it."""
    return np.asarray(upper_d(inst, np.ones(inst.K)))


def data_they_can_take(inst: MelAsyncInstance) -> Adaptation | None:
    """``inst`` with total_samples d lowered to sum_k of :func:`one_update_caps` (every
    learner then does one update on all it can take; T unchanged), or None when a learner
    cannot take d_l samples even once, or d already fits."""
    cap = one_update_caps(inst)
    d = int(inst.total_samples)
    total = int(cap.sum())
    if np.any(cap < inst.min_samples) or total >= d:
        return None
    bound = f" (at most d_u = {inst.max_samples} each)" if np.any(cap >= inst.max_samples) \
        else ""
    text = (f"total_samples {d} -> {total}: what the {inst.K} learners can take in "
            f"T = {inst.cycle_time:g} s with one update each{bound}")
    return Adaptation(dataclasses.replace(inst, total_samples=total), text,
                      {"total_samples": (d, total)}, data_fraction=total / d)


def least_clock(inst: MelAsyncInstance) -> Adaptation | None:
    """``inst`` with the cycle clock T raised to the least that lets its learners take
    d = total_samples with one update each (d_l <= d_k <= d_u), found by bisection on
    :func:`one_update_caps`; None when K d_u < d (no clock helps) or d already fits."""
    def fits(T: float) -> bool:
        cap = one_update_caps(dataclasses.replace(inst, cycle_time=T))
        return bool(np.all(cap >= inst.min_samples) and cap.sum() >= inst.total_samples)

    T = float(inst.cycle_time)
    if inst.K * inst.max_samples < inst.total_samples or fits(T):
        return None
    slope = np.asarray(inst.c2) + np.asarray(inst.c1)
    hi = float(np.max(slope * inst.max_samples + np.asarray(inst.c0)))  # every one takes d_u
    lo = T
    for _ in range(CLOCK_STEPS):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    text = (f"cycle_time_s {T:g} -> {hi:.6g}: the least clock on which the {inst.K} learners "
            f"can take total_samples = {inst.total_samples} with one update each")
    return Adaptation(dataclasses.replace(inst, cycle_time=hi), text, {"cycle_time_s": (T, hi)})


CYCLE = MelAsyncCycle()
