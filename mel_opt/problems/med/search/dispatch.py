"""The entry point of med's exact method: checks, then the search that fits the instance.

1. ``structural_check``: reasons no allocation can exist whatever the assignment.
2. With a budget that can bind, the programme without prices (coarse types) gives the
   budget-free optimum, a lower bound; if a realisation of it (cheapest learners where the most
   shards go) fits the budget, it is optimal.
3. Otherwise the type-programme search (``type_search``) over the learner types (price-aware
   when the budget can bind), when the type box has at most ``MAX_STATES`` cells.
4. Instances with too many types (every learner different, n > 14) go to the Lagrangian branch
   and bound (``branch_and_bound``), capped at ``LARGE_DEFAULT_LIMIT`` seconds when no time
   limit is given; it then reports its gap.
"""

from __future__ import annotations

import time

import numpy as np

from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import (
    Coefficients,
    budget_can_bind,
    coefficients,
    learner_types,
)
from mel_opt.problems.med.search import branch_and_bound
from mel_opt.problems.med.search.type_box import TypeSpace
from mel_opt.problems.med.search.type_search import solve_types
from mel_opt.problems.med.search.types import TOL, SearchOutcome
from mel_opt.status import TerminationCondition as TC

MAX_STATES = 20_000  # largest prod(N_t + 1) the programmes take on
LARGE_DEFAULT_LIMIT = 300.0  # s, the Lagrangian search's cap when no time limit is given


def structural_check(inst: MedInstance, coef: Coefficients) -> str | None:
    """Why no allocation can exist whatever the assignment (None when nothing obvious)."""
    allowed = coef.allowed
    for i in range(inst.n_tasks):
        if not allowed[i].any():
            return (f"no learner can serve task {inst.task_names[i]!r} within its deadline "
                    f"{inst.deadline[i]:g} s even with {coef.L} shard(s)")
    if inst.min_shards > 0:
        for j in range(inst.n_learners):
            if not allowed[:, j].any():
                return (f"learner {inst.learner_names[j]!r} must hold at least {coef.L} "
                        "shard(s) but meets no task's deadline with them")
    n_used = inst.n_learners if inst.min_shards > 0 else inst.n_tasks
    least = coef.L * np.sort(inst.price)[:n_used].sum() + (
        int(inst.shards.sum()) - coef.L * n_used) * float(inst.price.min())
    if least > inst.budget * (1 + TOL):
        return f"even the cheapest allocation costs {least:.6g} > budget {inst.budget:g}"
    return None


def _budget_free_answer(inst: MedInstance, coef: Coefficients, start: float,
                        time_limit: float | None) -> SearchOutcome | None:
    """The budget-free optimum over coarse types (prices ignored) when it settles the
    instance: it is infeasible, or one of its realisations fits the budget (then optimal)."""
    coarse = TypeSpace(learner_types(coef))
    if coarse.size > MAX_STATES:
        return None
    probe = solve_types(inst, coef, coarse, False, start, time_limit)
    if probe.termination == TC.INFEASIBLE or (
            probe.d is not None
            and float((probe.d * inst.price[None, :]).sum()) <= inst.budget * (1 + TOL)):
        probe.message = probe.message.replace(
            "the budget cannot bind", "its budget-free optimum fits the budget")
        return probe
    return None


def solve(inst: MedInstance, *, time_limit: float | None = None,
          running: branch_and_bound.Running | None = None) -> SearchOutcome:
    """The exact method (see the module docstring) within ``time_limit`` seconds (None: none
    for the type programmes, ``LARGE_DEFAULT_LIMIT`` for the branch and bound). ``running``
    is handed to the branch and bound (:class:`branch_and_bound.Running`)."""
    start = time.perf_counter()
    coef = coefficients(inst)
    why = structural_check(inst, coef)
    if why is not None:
        return SearchOutcome(TC.INFEASIBLE, message=why)
    binds = budget_can_bind(inst)
    if binds:
        settled = _budget_free_answer(inst, coef, start, time_limit)
        if settled is not None:
            return settled
    space = TypeSpace(learner_types(coef, inst.price if binds else None))
    if space.size > MAX_STATES:
        # The limit counts from this function's start, not from the branch and bound's.
        spent = time.perf_counter() - start
        limit = LARGE_DEFAULT_LIMIT if time_limit is None else max(0.0, time_limit - spent)
        return branch_and_bound.solve(inst, coef, time_limit=limit, running=running)
    return solve_types(inst, coef, space, binds, start, time_limit)
