"""The adaptive-tau control loop of paper 003 as live runs train it.

Paper 003 demonstrates the control algorithm of Wang et al.: every node runs tau local updates
(here minibatch SGD steps) from the global model, the aggregator averages the local models
weighted by the nodes' data sizes, and between two aggregations the aggregator re-estimates the
quantities the control rule needs from measurements "taken at all edge nodes and the
aggregator" (paper 003, Sec. I), then sets the next tau (:mod:`~mel_opt.problems.adaptive_tau.
control`) and stops when the resource budget is spent.

What the learners report and what the server makes of it (:meth:`AdaptiveTauCycle.
live_feedback`), each round t with global model w(t) at its start:

- rho_i = |F_i(w_i) - F_i(w(t))| / ||w_i - w(t)|| and beta_i = ||grad F_i(w_i) - grad F_i(w(t))||
  / ||w_i - w(t)||, with w_i node i's local model of the previous round (Lipschitz and
  smoothness estimates); rho and beta are their averages weighted by the data sizes D_i;
- grad F_i(w(t)): the server forms grad F(w(t)) = sum_i D_i grad F_i(w(t)) / D and the gradient
  divergence delta = sum_i D_i ||grad F_i(w(t)) - grad F(w(t))|| / D;
- time per local update c: the slowest node's measured training time over tau (a synchronous
  round waits for it; our reading); time per aggregation b: the round's wall time minus that
  training (messages, starting the learner, the statistics, the aggregation);
- the time used so far s: the sum of the rounds' wall times. Further resource types of the file
  are charged by their own c_m tau + b_m (they cannot be measured here).

The estimates of a round describe w(t), so they set the tau of round t + 1, as in the authors'
loop; the first round runs on the file's estimates. The newest estimate replaces the last (the
authors' moving-average holding parameter 0). The emulator does not run this cycle
(``emulated = False``): the statistics need gradients at two models per learner and round.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.validate import readonly_array
from mel_opt.problems.adaptive_tau.instance import AdaptiveTauInstance
from mel_opt.problems.adaptive_tau.statistics import GradientStatistics
from mel_opt.problems.learning import (
    CyclePlan,
    Feedback,
    LearnerPlan,
    LearningCycle,
    LiveReport,
    RunContext,
)

#: Nodes of a live run when ``--nodes`` is not given: the five of paper 003's demo.
DEFAULT_NODES = 5
#: Largest accepted estimate of beta, rho or delta (the instance's own range).
MAX_ESTIMATE = 1e9


def time_resource(inst: AdaptiveTauInstance) -> int:
    """Index of the resource measured in wall seconds: the one named ``time``, else the first."""
    names = list(inst.resource_names)
    return names.index("time") if "time" in names else 0


def _flat(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(a, dtype=float).ravel() for a in arrays])


def gradient_divergence(gradients: Sequence[Sequence[np.ndarray]],
                        weights: np.ndarray) -> float:
    """delta = sum_i D_i ||g_i - g|| / D with g = sum_i D_i g_i / D (the weights are D_i)."""
    G = np.stack([_flat(g) for g in gradients])
    w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    mean = w @ G
    return float(w @ np.linalg.norm(G - mean, axis=1))


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _weighted(values: list[tuple[float, float]]) -> float | None:
    """sum w v / sum w over the finite, non-negative values (None when none is)."""
    ok = [(v, w) for v, w in values if math.isfinite(v) and 0.0 <= v <= MAX_ESTIMATE]
    if not ok:
        return None
    total = sum(w for _, w in ok)
    return sum(v * w for v, w in ok) / total if total > 0 else None


class AdaptiveTauCycle(LearningCycle):
    """tau minibatch steps per node, averaged by data size; the next tau from measurements."""

    emulated = False
    has_deadline = False  # the control rule keeps a budget, not a per-round deadline
    learner_side = GradientStatistics()
    plotted = {"tau": "tau"}
    columns = ("tau", "aggregation_s")

    def live_learners(self, inst: AdaptiveTauInstance, nodes: int | None) -> int:
        return int(nodes) if nodes else DEFAULT_NODES

    def live_shares(self, inst: AdaptiveTauInstance, scheme: str,
                    solution: Mapping[str, Any] | None, learners: int,
                    dataset_size: int) -> np.ndarray:
        return np.ones(int(learners))

    def live_instance(self, inst: AdaptiveTauInstance, learners: np.ndarray,
                      seconds: np.ndarray, dataset_size: int) -> AdaptiveTauInstance:
        """The instance as :meth:`live_feedback` left it (its estimates are the run's)."""
        return inst

    def configure_cycle(self, inst: AdaptiveTauInstance, ctx: RunContext,
                        cycle: int) -> CyclePlan:
        if ctx.solution is None:
            raise UsageError("adaptive-tau trains only under a method's tau")
        tau = int(ctx.solution["tau"])
        batch = int(ctx.options.get("batch_size", 32))
        m = time_resource(inst)
        c, b = float(inst.local_cost[m]), float(inst.global_cost[m])  # the latest estimates
        sizes = np.asarray(ctx.data_sizes, dtype=float)
        # each learner's part of the round is its tau updates (c tau); the aggregation b is
        # the round's own wall time beyond them, measured by the server, not by a learner
        plans = tuple(
            LearnerPlan(learner=k, samples=tau * batch, passes=1, weight=float(sizes[k]),
                        predicted_s=c * tau, columns={"tau": tau, "aggregation_s": b})
            for k in range(sizes.size))
        return CyclePlan(plans)

    def live_feedback(self, inst: AdaptiveTauInstance, plan: CyclePlan,
                      reports: Sequence[LiveReport], wall_s: float) -> Feedback:
        """The next round's instance: rho, beta, delta, c, b of the time resource and the
        consumption s from this round's measurements (see the module docstring)."""
        if not plan.learners:
            return Feedback(inst)
        tau = int(plan.learners[0].columns.get("tau", plan.learners[0].samples))
        m = time_resource(inst)
        used = np.array(inst.used, dtype=float)
        local = np.array(inst.local_cost, dtype=float)
        glob = np.array(inst.global_cost, dtype=float)
        for r in range(inst.M):  # resources measured here: time; the others by the file
            used[r] += wall_s if r == m else local[r] * tau + glob[r]
        record: dict[str, Any] = {"tau": tau}
        beta, rho, delta = inst.beta, inst.rho, inst.delta
        if reports:
            slowest = max(rep.compute_s for rep in reports)
            local[m] = max(slowest / max(tau, 1), 1e-9)
            glob[m] = max(wall_s - slowest, 0.0)
            new_rho = _weighted([(_number(rep.metrics.get("rho")), rep.weight)
                                 for rep in reports])
            new_beta = _weighted([(_number(rep.metrics.get("beta")), rep.weight)
                                  for rep in reports])
            rho = rho if new_rho is None else new_rho
            beta = beta if new_beta is None else new_beta
            grads = [(rep.arrays["gradient"], rep.weight) for rep in reports
                     if "gradient" in rep.arrays]
            if len(grads) >= 1:
                value = gradient_divergence([g for g, _ in grads],
                                            np.array([w for _, w in grads]))
                if math.isfinite(value):
                    delta = min(value, MAX_ESTIMATE)
        budget = np.asarray(inst.budget, dtype=float)
        spent = bool(np.any(used >= budget))
        # a round that cannot fit one more update and aggregation ends the run (and keeps the
        # instance valid: R_m > c_m + b_m with use_min_loss)
        room = budget - (local + glob if inst.use_min_loss else 0.0)
        stop = spent or bool(np.any(room <= 0))
        nxt = dataclasses.replace(
            inst, beta=float(beta), rho=float(rho), delta=float(delta), tau_current=max(tau, 1),
            local_cost=readonly_array(local), global_cost=readonly_array(glob),
            used=readonly_array(np.minimum(used, budget)), name=inst.name)
        record.update(beta=float(beta), rho=float(rho), delta=float(delta),
                      local_update_s=float(local[m]), aggregation_s=float(glob[m]),
                      used=float(used[m]), budget=float(budget[m]), budget_spent=stop)
        return Feedback(nxt, stop, record)


CYCLE = AdaptiveTauCycle()
