"""A global cycle of DAB under an allocation (thesis Chapter 3).

Learner k downloads the model and its a_k shards, trains them for its passes (the solution's
tau_k where the scheme sets one, else mu) and uploads the model; the orchestrator averages the
models weighted by a_k. A learner with a_k = 0 halts (Algorithm 10) and sits the cycle out. On
the time model of Eq. (3.4) learner k is busy eta_k = (Omega_m + Omega_d a_k) / b_k +
mu a_k / c_k + Omega_m / b_k, of which mu a_k / c_k is computation; each eta_k varies from run
to run by the learner's ``time_cv``, and the cycle ends with the last update. The deadline D
judges it: truancy is the time past D in % of D.

Shards become samples of the training data set: one shard is ``shard_bytes`` of the data set's
samples (the thesis's shard, 1,568,000 bytes, is 500 MNIST images of 28 x 28 in float32), or
fewer where the data set is too small to hold the shards the allocation needs: at most the
data set's size over the instance's ``total_shards`` (over the shards allocated, without it);
at least one sample. On the 8 x 8 digits (1,437 images of 256 bytes) the second rule decides,
on Fashion-MNIST or MNIST (60,000 of 3,136 bytes) the first, the thesis's own shard.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.validate import readonly_array
from mel_opt.problems.dab.instance import DabInstance
from mel_opt.problems.dab.latency import eta, shard_bound
from mel_opt.problems.learning import (
    CyclePlan,
    LearnerPlan,
    LearnerSide,
    LearningCycle,
    RunContext,
    WorkClock,
)
from mel_opt.problems.messages import TrainOrder


def _allocation(inst: DabInstance,
                solution: Mapping[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
    """(shards a_k, passes) per learner."""
    if solution is None:  # every scheme of dab is a method with a solution
        raise UsageError("dab trains only under a method's allocation")
    shards = np.asarray(solution["shards"], dtype=np.int64)
    passes = np.asarray(solution.get("tau") or [inst.iterations] * inst.K, dtype=np.int64)
    return shards, passes


def _per_shard(inst: DabInstance, shards: np.ndarray, dataset_size: int,
               sample_bytes: float = 0.0) -> int:
    """Training samples per shard (module docstring): a shard's bytes of samples of
    ``sample_bytes`` each (0: unknown, not used), at most the data set over total_shards (or
    the shards given), at least one."""
    ref = inst.total_shards if inst.total_shards is not None else int(shards.sum())
    per = dataset_size // max(ref, 1)
    if sample_bytes > 0:
        per = min(per, int(float(inst.shard_bytes) // sample_bytes))
    return max(1, per)


class DabLearner(LearnerSide):
    """A DAB learner decides its own a_k (thesis Algorithm 10) from its own benchmark."""

    plans_own_work = True
    claims_data = True  # its a_k shards come from the orchestrator (Algorithm 10)

    def own_plan(self, order: TrainOrder, seconds: float, learner: int) -> LearnerPlan:
        """Learner k's own a_k by Eq. (3.5) from its own benchmark: c_k = 1 / (sigma_k x
        samples per shard) shards/s, and its predicted eta_k (Eq. (3.4)). a_k = 0: it halts
        (Algorithm 10, lines 18-19) and trains nothing. ``order.brief`` is
        :meth:`DabCycle.learner_config`."""
        brief = order.brief
        per_shard = int(brief["per_shard"])
        mu = int(brief["iterations"])
        rate = 1.0 / (float(seconds) * per_shard)
        model, shard = float(brief["model_bytes"]), float(brief["shard_bytes"])
        c, b = np.array([rate]), np.array([float(brief["bandwidth_Bps"])])
        a = int(shard_bound(float(brief["deadline_s"]), mu, model, shard, c, b)[0])
        busy = float(np.asarray(eta(a, iterations=mu, model_bytes=model, shard_bytes=shard,
                                    train_rate=c, bandwidth=b), dtype=float).ravel()[0])
        compute = mu * a / rate
        return LearnerPlan(learner=learner, samples=a * per_shard, passes=mu, weight=float(a),
                           predicted_s=busy, comm_s=busy - compute,
                           columns={"shards": a, "tau": mu})


class DabCycle(LearningCycle):
    """a_k shards for mu passes per learner, averaged by a_k, until the last update; live,
    each learner decides its own a_k (:class:`DabLearner`)."""

    learner_side = DabLearner()
    columns = ("shards", "tau")
    measured_transfers = True

    def data_shares(self, inst: DabInstance, scheme: str, solution: Mapping[str, Any] | None,
                    dataset_size: int) -> np.ndarray:
        shards, _ = _allocation(inst, solution)
        samples = shards * _per_shard(inst, shards, dataset_size)
        return np.where(shards > 0, samples, 1e-9).astype(float)

    def configure_cycle(self, inst: DabInstance, ctx: RunContext, cycle: int) -> CyclePlan:
        shards, passes = _allocation(inst, ctx.solution)
        per_shard = _per_shard(inst, shards, ctx.dataset_size, ctx.sample_bytes)
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

    # -- fixed work (the field's alternatives) ---------------------------------------------
    def work_clock(self, inst: DabInstance) -> WorkClock:
        """An equal share is a = S / K shards of the S the population holds (``total_shards``,
        or the shards Eq. (3.5) places where the file gives none), so learner k is busy
        eta_k = (Omega_m + Omega_d a) / b_k + p a / c_k + Omega_m / b_k for p passes (Eq.
        (3.1)-(3.4)); the budget is the deadline D, the passes the problem's mu, and each time
        varies from run to run by the learner's ``time_cv``."""
        c = np.asarray(inst.train_rate, dtype=float)
        b = np.asarray(inst.bandwidth, dtype=float)
        S = inst.total_shards
        if S is None:
            S = int(np.asarray(shard_bound(float(inst.deadline), int(inst.iterations),
                                           float(inst.model_bytes), float(inst.shard_bytes),
                                           c, b)).sum())
        a = max(float(S), 1.0) / inst.K
        fixed = (2.0 * float(inst.model_bytes) + float(inst.shard_bytes) * a) / b  # (3.1), (3.3)
        per = a / c  # Eq. (3.2) per pass
        return WorkClock(float(inst.deadline), per, fixed, float(inst.iterations),
                         np.asarray(inst.time_cv, dtype=float), share=a)

    def work_samples(self, inst: DabInstance, clock: WorkClock, dataset_size: int,
                     sample_bytes: float = 0.0) -> int:
        """The share's a shards of the data set's samples per shard (as a learner's brief,
        :meth:`learner_config`, counts them)."""
        per_shard = int(self.learner_config(inst, 0, dataset_size, sample_bytes)["per_shard"])
        return max(1, int(round(clock.share * per_shard)))

    # -- live runs: decentralised, as the thesis runs DAB (Algorithm 10) --------------------
    def link_rates(self, inst: DabInstance, model_bytes: float) -> np.ndarray:
        """8 b_k bit/s: the file's link bandwidth b_k (Eq. (3.1), (3.3)), whatever the model."""
        return 8.0 * np.asarray(inst.bandwidth, dtype=float)

    def live_transfers(self, inst: DabInstance, seconds: np.ndarray,
                       rate_Bps: np.ndarray) -> DabInstance:
        """b_k (Eq. (3.1), (3.3)) from each learner's measured rate where its shards were
        shipped and measured: what it is then told in its brief and plans its a_k with."""
        measured = np.asarray(rate_Bps, dtype=float)
        b = np.where(np.isfinite(measured) & (measured > 0), measured, inst.bandwidth)
        return dataclasses.replace(inst, bandwidth=readonly_array(b))

    def learner_config(self, inst: DabInstance, learner: int, dataset_size: int,
                       sample_bytes: float = 0.0) -> dict[str, Any]:
        """What the orchestrator sends learner k: the deadline, the passes, the model and shard
        sizes, the samples per shard and the link bandwidth b_k of the file (transfers between
        processes on one machine are emulated from it). Nothing about its speed.

        Samples per shard: the data set over ``total_shards``; without it, over the shards
        Eq. (3.5) places with the file's own rates (what the emulator's ``dab`` allocation
        holds), since the learners' own choices are not known before they decide."""
        shards = np.zeros(inst.K, dtype=np.int64)
        if inst.total_shards is None:
            shards = np.asarray(shard_bound(float(inst.deadline), int(inst.iterations),
                                            float(inst.model_bytes), float(inst.shard_bytes),
                                            inst.train_rate, inst.bandwidth), dtype=np.int64)
        return {"deadline_s": float(inst.deadline), "iterations": int(inst.iterations),
                "model_bytes": float(inst.model_bytes), "shard_bytes": float(inst.shard_bytes),
                "bandwidth_Bps": float(inst.bandwidth[learner]),
                "per_shard": _per_shard(inst, shards, dataset_size, sample_bytes)}

    def briefs(self, inst: DabInstance, learners: np.ndarray, dataset_size: int,
               sample_bytes: float = 0.0) -> tuple[CyclePlan, dict[int, Mapping[str, Any]]]:
        """The deadline D judges every learner; each is told :meth:`learner_config`."""
        return (CyclePlan((), deadline_s=float(inst.deadline)),
                {int(k): self.learner_config(inst, int(k), dataset_size, sample_bytes)
                 for k in learners})


CYCLE = DabCycle()
