"""Independent re-check of a med solution against its instance.

Recomputes every expected delay from the raw instance fields (probabilities, bandwidths,
training rates, model and shard sizes, iterations) with its own code: nothing here calls the
methods, the model coefficients or the split routines.

Checks (each reported with its violation, 0 when satisfied):

- ``integrality``: every d_ij is a whole number >= 0 (largest distance from one);
- ``one_task`` (4.4f): no learner holds shards of two tasks (shards held outside the first);
- ``assignment``: ``assignment`` agrees with the non-zero entries of ``d``;
- ``dataset`` (4.4c): |sum_j d_ij - D_i| / D_i, largest over tasks;
- ``min_shards`` (4.4e): shortfall of sum_i d_ij below D_l, relative to D_l;
- ``budget`` (4.4d): (sum_ij p_j d_ij - B)^+ / B;
- ``deadline`` (4.4b): (delta_ij - T_i)^+ / T_i over assigned pairs, where delta_ij is the
  expected delay (4.3) with the iterations, or, when the solution carries ``planning_states``
  (the MMTT baselines), the delay in the state the allocation was planned for.

The objective is (4.4a), sum_i max_{j: d_ij > 0} delta_ij with expected delays, for every
method, so that any two methods' objectives compare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.errors import SolverError
from mel_opt.problems.base import Checked
from mel_opt.problems.med.instance import MedInstance
from mel_opt.result import Verification

TOL = 1e-7


def _pair_delays(inst: MedInstance, d: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """delta_ij = sum_k probs_jk [(2 Omega_i + alpha_i d_ij)/b_jk + tau_i d_ij / R_ijk] on
    assigned pairs, 0 elsewhere [s], (m, n)."""
    m, n = d.shape
    out = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            if d[i, j] <= 0:
                continue
            total = 0.0
            for k in range(inst.n_states):
                net = (2 * inst.model_bytes[i] + inst.shard_bytes[i] * d[i, j]) \
                    / inst.bandwidth[j, k]
                work = inst.iterations[i] * d[i, j] / inst.train_rate[j, i, k]
                total += probs[j, k] * (net + work)
            out[i, j] = total
    return out


def verify(inst: MedInstance, solution: Mapping[str, Any]) -> Checked:
    """Re-check ``solution`` ({"assignment", "d"[, "planning_states"]}) against ``inst``."""
    m, n = inst.n_tasks, inst.n_learners
    try:
        raw = np.asarray(solution["d"], dtype=float)
        assignment = np.asarray(solution.get("assignment", []), dtype=float)
    except (KeyError, TypeError, ValueError) as exc:
        raise SolverError(f"med solution is malformed: {exc}") from None
    if raw.shape != (m, n):
        raise SolverError(f"med solution d has shape {raw.shape}, expected ({m}, {n})")
    checks: dict[str, float] = {}
    checks["integrality"] = float(np.max(np.abs(raw - np.round(raw)), initial=0.0)) + float(
        max(0.0, -raw.min(initial=0.0)))
    d = np.maximum(0, np.round(raw)).astype(np.int64)

    held = d > 0
    extra = 0
    for j in range(n):
        tasks_held = np.nonzero(held[:, j])[0]
        if tasks_held.size > 1:
            extra += int(d[tasks_held[1:], j].sum())
    checks["one_task"] = float(extra)

    mismatch = 0
    if assignment.shape == (n,):
        for j in range(n):
            tasks_held = np.nonzero(held[:, j])[0]
            expect = int(tasks_held[0]) if tasks_held.size else -1
            mismatch += int(assignment[j] != expect)
    else:
        mismatch = n
    checks["assignment"] = float(mismatch)

    totals = d.sum(axis=1)
    checks["dataset"] = float(np.max(np.abs(totals - inst.shards) / inst.shards))
    per_learner = d.sum(axis=0)
    if inst.min_shards > 0:
        short = np.maximum(0, inst.min_shards - per_learner)
        checks["min_shards"] = float(short.max() / inst.min_shards)
    else:
        checks["min_shards"] = 0.0
    cost = float((d * inst.price[None, :]).sum())
    checks["budget"] = max(0.0, cost - inst.budget) / inst.budget

    expected = _pair_delays(inst, d, inst.probs)
    notes: list[str] = []
    planning = solution.get("planning_states")
    if planning is not None:
        states = np.asarray(planning, dtype=np.int64)
        if states.shape != (n,) or states.min() < 0 or states.max() >= inst.n_states:
            raise SolverError("med solution planning_states must give one state per learner")
        onehot = np.zeros((n, inst.n_states))
        onehot[np.arange(n), states] = 1.0
        planned = _pair_delays(inst, d, onehot)
        notes.append("deadline checked with the delays of the planning states")
    else:
        planned = expected
    late = np.where(held, (planned - inst.deadline[:, None]) / inst.deadline[:, None], 0.0)
    checks["deadline"] = float(max(0.0, late.max(initial=0.0)))

    task_delay = expected.max(axis=1)
    objective = float(task_delay.sum())
    counts = held.sum(axis=1)
    metrics: dict[str, Any] = {
        "task_delay": task_delay.tolist(),
        "sum_task_delay": objective,
        "cost": cost,
        "budget_used": cost / inst.budget,
        "learners_per_task": counts.tolist(),
        "idle_learners": int((per_learner == 0).sum()),
    }
    if planning is not None:
        metrics["planned_task_delay"] = planned.max(axis=1).tolist()
    worst = max(checks.values())
    feasible = (checks["integrality"] <= 1e-9 and checks["one_task"] == 0
                and checks["assignment"] == 0 and checks["dataset"] == 0
                and checks["min_shards"] == 0 and checks["budget"] <= TOL
                and checks["deadline"] <= TOL)
    return Checked(Verification(feasible, worst, checks, tuple(notes)), metrics, objective)
