"""The MED integer program (thesis Eq. 4.4) as a Pyomo model, strengthened.

Variables: x_ij binary (learner j serves task i), d_ij integer shards, H_i continuous (task i's
maximum expected delay; the author's code made it an integer ceiling, mel_opt does not).

    min  sum_i H_i                                                          (4.4a)
    s.t. H_i >= A_ij x_ij + C_ij d_ij             (max over assigned pairs; 4.4a, 4.3)
         H_i <= T_i                               (deadline, 4.4b)
         sum_j d_ij = D_i                         (dataset, 4.4c)
         sum_ij p_j d_ij <= B                     (budget, 4.4d)
         L x_ij <= d_ij <= cap_ij x_ij            (4.4e with L = max(D_l, 1), and d = 0 off x)
         sum_i x_ij = 1   (<= 1 when D_l = 0)     (one task per learner, 4.4f)

Because x_ij = 0 forces d_ij = 0, the product x_ij d_ij of the delay is just d_ij and the delay
row is linear; the fixed part A_ij (model download and upload) is charged only when x_ij = 1.

Strengthening (valid for every optimal solution, so the optimum is unchanged):

- per-pair caps cap_ij = floor((T_i - A_ij) / C_ij) from the deadline; pairs with cap_ij < L are
  left out, and H_i is bounded below by the task's best case (its min-max split over every
  learner allowed to serve it) and above by T_i;
- symmetry breaking among identical learners (same coefficients for every task), sorted by
  price: for consecutive learners j, j' with the same price (or any prices when the budget cannot
  bind) the task index of j is at most that of j', and on a shared task d_ij >= d_ij' >= d_ij - 1
  (rebalancing shards inside such a group never raises the maximum, the cost or the sums, so some
  optimum is balanced); when j is strictly cheaper, sum_i d_ij >= sum_i d_ij' (swapping the two
  learners' roles keeps every delay and does not raise the cost).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from mel_opt.lazy import lazy_module
from mel_opt.problems.med import split
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import (
    Coefficients,
    budget_can_bind,
    coefficients,
    learner_types,
)

if TYPE_CHECKING:
    import pyomo.environ as pyo
else:  # Pyomo loads when a model is built, not when the package is imported
    pyo = lazy_module("pyomo.environ")


def best_case_levels(inst: MedInstance, coef: Coefficients) -> np.ndarray:
    """Per task, the least max expected delay any set of learners can reach [s].

    A valid lower bound on H_i in any feasible solution (``split.best_case_level``; note that
    using *every* learner is not a bound: each must hold L shards); ``inf`` for a task no learner
    can serve within its deadline.
    """
    return np.array([split.best_case_level(coef.A[i], coef.C[i], coef.L, int(inst.shards[i]),
                                           float(inst.deadline[i]) * (1 + 1e-9))
                     for i in range(inst.n_tasks)])


def build_milp_model(inst: MedInstance, *, symmetry: bool = True) -> pyo.ConcreteModel:
    """The strengthened (4.4) model; ``symmetry=False`` leaves out the symmetry breaking.

    Variable names: ``x[i,j]``, ``d[i,j]`` for allowed pairs only, ``H[i]``.
    """
    coef = coefficients(inst)
    m_, n_ = inst.n_tasks, inst.n_learners
    L = coef.L
    pairs = [(i, j) for i in range(m_) for j in range(n_) if coef.allowed[i, j]]
    lower = best_case_levels(inst, coef)

    m = pyo.ConcreteModel(name=f"med_{inst.name}")
    m.T = pyo.RangeSet(0, m_ - 1)
    m.P = pyo.Set(initialize=pairs, dimen=2, ordered=True)
    m.x = pyo.Var(m.P, domain=pyo.Binary)
    m.d = pyo.Var(m.P, domain=pyo.NonNegativeIntegers,
                  bounds=lambda _, i, j: (0, int(min(coef.cap[i, j], inst.shards[i]))))

    def h_bounds(_: Any, i: int) -> tuple[float, float]:
        lo = float(lower[i]) if np.isfinite(lower[i]) else 0.0
        return (min(lo, float(inst.deadline[i])), float(inst.deadline[i]))

    m.H = pyo.Var(m.T, bounds=h_bounds)
    m.obj = pyo.Objective(expr=sum(m.H[i] for i in m.T), sense=pyo.minimize)

    m.delay = pyo.Constraint(
        m.P, rule=lambda m, i, j: m.H[i] >= float(coef.A[i, j]) * m.x[i, j]
        + float(coef.C[i, j]) * m.d[i, j])
    m.low = pyo.Constraint(m.P, rule=lambda m, i, j: m.d[i, j] >= L * m.x[i, j])
    m.high = pyo.Constraint(
        m.P, rule=lambda m, i, j: m.d[i, j] <= int(min(coef.cap[i, j], inst.shards[i]))
        * m.x[i, j])

    by_task: dict[int, list[int]] = {i: [] for i in range(m_)}
    by_learner: dict[int, list[int]] = {j: [] for j in range(n_)}
    for i, j in pairs:
        by_task[i].append(j)
        by_learner[j].append(i)

    def dataset(m: Any, i: int) -> Any:
        if not by_task[i]:
            return pyo.Constraint.Infeasible
        return sum(m.d[i, j] for j in by_task[i]) == int(inst.shards[i])

    m.dataset = pyo.Constraint(m.T, rule=dataset)
    m.budget = pyo.Constraint(expr=sum(float(inst.price[j]) * m.d[i, j] for i, j in pairs)
                              <= float(inst.budget))

    def one_task(m: Any, j: int) -> Any:
        if not by_learner[j]:
            return pyo.Constraint.Infeasible if inst.min_shards > 0 else pyo.Constraint.Skip
        total = sum(m.x[i, j] for i in by_learner[j])
        return total == 1 if inst.min_shards > 0 else total <= 1

    m.Lset = pyo.RangeSet(0, n_ - 1)
    m.one_task = pyo.Constraint(m.Lset, rule=one_task)

    if symmetry:
        _break_symmetry(m, inst, coef, by_learner)
    return m


def _break_symmetry(m: pyo.ConcreteModel, inst: MedInstance, coef: Coefficients,
                    by_learner: dict[int, list[int]]) -> None:
    types = learner_types(coef)
    priced = budget_can_bind(inst)
    chains: list[tuple[int, int]] = []  # interchangeable pairs (same price or budget slack)
    cheaper: list[tuple[int, int]] = []  # same coefficients, first one strictly cheaper
    for t in np.unique(types):
        members = np.nonzero(types == t)[0]
        members = members[np.lexsort((members, inst.price[members]))]
        for j, k in zip(members[:-1].tolist(), members[1:].tolist(), strict=True):
            if priced and inst.price[j] < inst.price[k]:
                cheaper.append((j, k))
            else:
                chains.append((j, k))
    m.chains = pyo.Set(initialize=chains, dimen=2, ordered=True)
    m.cheaper = pyo.Set(initialize=cheaper, dimen=2, ordered=True)
    # unused learners (D_l = 0) get index m, after every task
    n_tasks = inst.n_tasks

    def index(m: Any, j: int) -> Any:
        used = sum(m.x[i, j] for i in by_learner[j])
        return sum(i * m.x[i, j] for i in by_learner[j]) + n_tasks * (1 - used)

    m.order = pyo.Constraint(m.chains, rule=lambda m, j, k: index(m, j) <= index(m, k))
    shared = [(i, j, k) for j, k in chains for i in by_learner[j]]
    m.shared = pyo.Set(initialize=shared, dimen=3, ordered=True)

    def big(i: int, j: int) -> int:
        return int(min(coef.cap[i, j], inst.shards[i]))

    # identical learners share allowed tasks and caps, so (i, k) is a pair whenever (i, j) is
    m.sym_desc = pyo.Constraint(
        m.shared, rule=lambda m, i, j, k: m.d[i, j] + big(i, j) * (1 - m.x[i, j]) >= m.d[i, k])
    m.sym_bal = pyo.Constraint(
        m.shared, rule=lambda m, i, j, k: m.d[i, j] <= m.d[i, k] + 1 + big(i, j) * (1 - m.x[i, k]))
    # swapping the roles of two learners with equal coefficients keeps every delay and changes
    # the cost by (p_j - p_k)(d_k - d_j): the cheaper one holds at least as many shards
    m.sym_cheaper = pyo.Constraint(
        m.cheaper, rule=lambda m, j, k: sum(m.d[i, j] for i in by_learner[j])
        >= sum(m.d[i, k] for i in by_learner[k]))


def read_solution(m: pyo.ConcreteModel, values: dict[str, float], inst: MedInstance
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Assignment (task per learner, -1 unused) and d (m x n) from a solver's variable values."""
    d = np.zeros((inst.n_tasks, inst.n_learners), dtype=np.int64)
    for i, j in m.P:
        d[i, j] = int(round(values.get(m.d[i, j].name, 0.0)))
    assignment = np.full(inst.n_learners, -1, dtype=np.int64)
    for j in range(inst.n_learners):
        held = np.nonzero(d[:, j] > 0)[0]
        if held.size:
            assignment[j] = int(held[0])
    return assignment, d
