"""A global cycle of asynchronous MEL under an allocation (paper 000, Section II).

Learner k holds d_k samples (the data set is split in proportion to the d_k), runs tau_k local
updates (passes of minibatch SGD) over them from the current global model, and the orchestrator
averages the local models weighted by d_k. On the time model of Eq. (5) learner k is busy
t_k = C2_k tau_k d_k + C1_k d_k + C0_k <= T, of which C2_k tau_k d_k is computation and
C1_k d_k + C0_k the transfer of samples and model (Eq. 3-4); the cycle lasts the cycle clock T.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.validate import readonly_array
from mel_opt.problems.learning import CyclePlan, LearnerPlan, LearningCycle, RunContext
from mel_opt.problems.mel_async.instance import MelAsyncInstance


def _allocation(solution: Mapping[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
    if solution is None:  # every scheme of mel-async is a method with a solution
        raise UsageError("mel-async trains only under a method's allocation")
    return (np.asarray(solution["d"], dtype=np.int64),
            np.asarray(solution["tau"], dtype=np.int64))


class MelAsyncCycle(LearningCycle):
    """tau_k passes over d_k samples per learner, averaged by d_k, every T seconds."""

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
        plans = tuple(
            LearnerPlan(learner=k, samples=int(sizes[k]), passes=int(tau[k]), weight=float(df[k]),
                        predicted_s=float(busy[k]), comm_s=float(comm[k]),
                        columns={"d": int(d[k]), "tau": int(tau[k])})
            for k in range(inst.K))
        return CyclePlan(plans, duration_s=float(inst.cycle_time))

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


CYCLE = MelAsyncCycle()
