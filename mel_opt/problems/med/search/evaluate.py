"""The exact value of one assignment of learners to tasks (thesis Eq. 4.4 with it fixed).

Each task's min-max level comes from ``split``; with a budget that can bind, the best levels
under it come from ``budget.best_levels`` over the tasks' least-cost steps, pruned at the value
to beat: a candidate whose levels without the budget already reach it is dropped before any
budget work. The local searches and the branch and bound rank assignments by this value.
"""

from __future__ import annotations

import math

import numpy as np

from mel_opt.problems.med import split
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import Coefficients
from mel_opt.problems.med.search import budget as budget_mod
from mel_opt.problems.med.search.types import TOL


class Evaluator:
    """Exact value of assignments (tuple of member tuples per task), with caches."""

    def __init__(self, inst: MedInstance, coef: Coefficients, binds: bool) -> None:
        self.inst, self.coef, self.binds = inst, coef, binds
        self.m = inst.n_tasks
        self._level: dict[tuple[int, tuple[int, ...]], float] = {}
        self._front: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}

    def raw_level(self, i: int, members: tuple[int, ...]) -> float:
        """Min-max level of task i with these learners, deadline ignored (inf if empty or
        |W| L > D_i)."""
        key = (i, members)
        if key not in self._level:
            W = np.array(members, dtype=np.int64)
            val = math.inf
            if W.size:
                val = split.min_max_level(self.coef.A[i, W], self.coef.C[i, W],
                                          np.ones(W.size, dtype=np.int64), self.coef.L,
                                          int(self.inst.shards[i]))
            self._level[key] = val
        return self._level[key]

    def level(self, i: int, members: tuple[int, ...]) -> float:
        """``raw_level`` if it meets the deadline T_i (4.4b), else inf."""
        val = self.raw_level(i, members)
        return val if val <= self.inst.deadline[i] * (1 + TOL) else math.inf

    def frontier(self, i: int, members: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        key = (i, members)
        if key not in self._front:
            W = np.array(members, dtype=np.int64)
            self._front[key] = split.cost_frontier(
                self.coef.A[i, W], self.coef.C[i, W], self.inst.price[W], self.coef.L,
                int(self.inst.shards[i]), self.level(i, members),
                float(self.inst.deadline[i]) * (1 + TOL))
        return self._front[key]

    def value(self, parts: list[tuple[int, ...]], cutoff: float = math.inf
              ) -> tuple[float, float, list[float] | None]:
        """(excess, value, levels): excess > 0 measures infeasibility (inf levels or budget
        overrun at the cheapest levels); value is the sum of levels when feasible.

        With a finite ``cutoff`` only values below it are of interest: a feasible assignment
        that cannot beat it comes back as (0, inf, None) (the budget search prunes on it)."""
        raw = [self.raw_level(i, p) for i, p in enumerate(parts)]
        late = sum(1e6 if not math.isfinite(h) else max(0.0, h - float(self.inst.deadline[i]))
                   for i, h in enumerate(raw))
        if late > TOL:
            return late, math.inf, None
        levels = raw
        if not self.binds:
            return 0.0, float(sum(levels)), levels
        if sum(raw) >= cutoff:  # the budget only raises levels: cannot beat the cutoff
            return 0.0, math.inf, None
        fronts = [self.frontier(i, p) for i, p in enumerate(parts)]
        cheapest = sum(float(c.min()) for _, c in fronts)
        if cheapest > self.inst.budget * (1 + TOL):
            return cheapest - self.inst.budget, math.inf, None
        got = budget_mod.best_levels(fronts, self.inst.budget, cutoff)
        if got is None:  # not below the cutoff (without one: cannot happen after the check)
            return (0.0 if math.isfinite(cutoff) else 1e-9), math.inf, None
        return 0.0, got[0], [float(fronts[i][0][k]) for i, k in enumerate(got[1])]
