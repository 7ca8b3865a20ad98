"""A global cycle of DAB under an allocation (thesis Chapter 3).

Learner k downloads the model and its a_k shards, trains them for its passes (the solution's
tau_k where the scheme sets one, else mu) and uploads the model; the orchestrator averages the
models weighted by a_k. A learner with a_k = 0 halts (Algorithm 10) and sits the cycle out. On
the time model of Eq. (3.4) learner k is busy eta_k = (Omega_m + Omega_d a_k) / b_k +
mu a_k / c_k + Omega_m / b_k, of which mu a_k / c_k is computation; each eta_k varies from run
to run by the learner's ``time_cv``, and the cycle ends with the last update. The deadline D
judges it: truancy is the time past D in % of D.

Shards become samples of the training data set: one shard is the data set's size over the
instance's ``total_shards`` (or over the shards allocated, without it), at least one sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.problems.dab.instance import DabInstance
from mel_opt.problems.dab.latency import eta
from mel_opt.problems.learning import CyclePlan, LearnerPlan, LearningCycle, RunContext


def _allocation(inst: DabInstance,
                solution: Mapping[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
    """(shards a_k, passes) per learner."""
    if solution is None:  # every scheme of dab is a method with a solution
        raise UsageError("dab trains only under a method's allocation")
    shards = np.asarray(solution["shards"], dtype=np.int64)
    passes = np.asarray(solution.get("tau") or [inst.iterations] * inst.K, dtype=np.int64)
    return shards, passes


def _per_shard(inst: DabInstance, shards: np.ndarray, dataset_size: int) -> int:
    """Training samples per shard: the data set over total_shards (or the shards given)."""
    ref = inst.total_shards if inst.total_shards is not None else int(shards.sum())
    return max(1, dataset_size // max(ref, 1))


class DabCycle(LearningCycle):
    """a_k shards for mu passes per learner, averaged by a_k, until the last update."""

    def data_shares(self, inst: DabInstance, scheme: str, solution: Mapping[str, Any] | None,
                    dataset_size: int) -> np.ndarray:
        shards, _ = _allocation(inst, solution)
        samples = shards * _per_shard(inst, shards, dataset_size)
        return np.where(shards > 0, samples, 1e-9).astype(float)

    def configure_cycle(self, inst: DabInstance, ctx: RunContext, cycle: int) -> CyclePlan:
        shards, passes = _allocation(inst, ctx.solution)
        per_shard = _per_shard(inst, shards, ctx.dataset_size)
        used = np.flatnonzero(shards > 0)
        a, mu = shards[used], passes[used]
        busy = np.asarray(eta(a, iterations=mu, model_bytes=inst.model_bytes,
                              shard_bytes=inst.shard_bytes, train_rate=inst.train_rate[used],
                              bandwidth=inst.bandwidth[used]), dtype=float)  # Eq. (3.4)
        compute = mu * a / inst.train_rate[used]
        plans = tuple(
            LearnerPlan(learner=int(k), samples=int(a[i]) * per_shard, passes=int(mu[i]),
                        weight=float(a[i]), predicted_s=float(busy[i]),
                        comm_s=float(busy[i] - compute[i]), time_cv=float(inst.time_cv[k]),
                        columns={"shards": int(a[i]), "tau": int(mu[i])})
            for i, k in enumerate(used))
        return CyclePlan(plans, deadline_s=float(inst.deadline))


CYCLE = DabCycle()
