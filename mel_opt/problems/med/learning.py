"""A global cycle of MED under an allocation (thesis Chapter 4), as live runs train it.

Every task i is its own federated learning job with its own model: the learners assigned to it
(``assignment[j] == i``) download its model and their d_ij shards, train tau_i passes over
them and upload the model, and the orchestrator averages task i's models weighted by d_ij.
Learner j's expected time is the delay of Eq. (4.3) with the iterations, A_ij + C_ij d_ij
(:mod:`~mel_opt.problems.med.latency`), of which tau_i d_ij E[1/R_ij] is computation and the
rest the transfers of the model and the shards; it is judged against its task's deadline T_i.

Shards become samples: one shard of task i is the training set's size over D_i (at least one
sample). The emulator trains one global model and does not run this cycle
(``emulated = False``); ``melopt simulate`` judges MED's deadlines on the thesis's clock, and
``melopt live`` trains the tasks' models on real learner processes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.validate import readonly_array
from mel_opt.problems.learning import CyclePlan, LearnerPlan, LearningCycle, RunContext
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import coefficients


def per_shard(inst: MedInstance, dataset_size: int) -> np.ndarray:
    """Training samples per shard of each task: the data set over D_i, at least one."""
    return np.maximum(1, int(dataset_size) // np.asarray(inst.shards, dtype=np.int64))


class MedCycle(LearningCycle):
    """One model per task; d_ij shards for tau_i passes per assigned learner, each task's
    models averaged by d_ij, every learner judged by its task's deadline."""

    emulated = False
    columns = ("task", "shards", "tau")

    def tasks(self, inst: MedInstance) -> int:
        return int(inst.n_tasks)

    def live_learners(self, inst: MedInstance, nodes: int | None) -> int:
        return int(inst.n_learners)

    def data_shares(self, inst: MedInstance, scheme: str, solution: Mapping[str, Any] | None,
                    dataset_size: int) -> np.ndarray:
        return np.ones(int(inst.n_learners))

    def configure_cycle(self, inst: MedInstance, ctx: RunContext, cycle: int) -> CyclePlan:
        if ctx.solution is None:
            raise UsageError("med trains only under a method's allocation")
        assignment = np.asarray(ctx.solution["assignment"], dtype=np.int64)
        d = np.asarray(ctx.solution["d"], dtype=np.int64)
        coef = coefficients(inst)
        inv_b = (inst.probs / inst.bandwidth).sum(axis=1)  # E[1/b_j]
        per = per_shard(inst, ctx.dataset_size)
        plans = []
        for j, i in enumerate(assignment.tolist()):
            if i < 0 or d[i, j] <= 0:
                continue  # an unused learner sits the cycle out
            shards = int(d[i, j])
            busy = float(coef.A[i, j] + coef.C[i, j] * shards)  # Eq. (4.3) with tau_i
            comm = float(coef.A[i, j] + inst.shard_bytes[i] * inv_b[j] * shards)
            tau = int(inst.iterations[i])
            plans.append(LearnerPlan(
                learner=j, samples=shards * int(per[i]), passes=tau, weight=float(shards),
                predicted_s=busy, comm_s=comm, task=int(i),
                columns={"task": int(i), "shards": shards, "tau": tau},
                deadline_s=float(inst.deadline[i])))
        return CyclePlan(tuple(plans), deadline_s=float(np.max(inst.deadline)))

    def live_instance(self, inst: MedInstance, learners: np.ndarray, seconds: np.ndarray,
                      dataset_size: int) -> MedInstance:
        """The instance of the answering ``learners``, each one's training rate R_ijk from its
        measured seconds per sample-pass sigma_j: 1 / (sigma_j x samples per shard of task i)
        shards/s in every state (a measured speed is the learner's speed now, whatever the
        state; the per-state bandwidths of the file stay, since transfers between processes
        on one machine are emulated from them)."""
        idx = np.asarray(learners, dtype=np.int64)
        sigma = np.asarray(seconds, dtype=float)[idx]
        per = per_shard(inst, dataset_size).astype(float)
        rate = 1.0 / (sigma[:, None, None] * per[None, :, None])
        rate = np.broadcast_to(rate, (idx.size, inst.n_tasks, inst.n_states)).copy()
        return dataclasses.replace(
            inst, learner_names=tuple(inst.learner_names[j] for j in idx),
            price=readonly_array(np.asarray(inst.price)[idx]),
            probs=readonly_array(np.asarray(inst.probs)[idx]),
            bandwidth=readonly_array(np.asarray(inst.bandwidth)[idx]),
            train_rate=readonly_array(rate),
            time_cv=readonly_array(np.asarray(inst.time_cv)[idx]),
            name=f"{inst.name}-live")


CYCLE = MedCycle()
