"""The exact value of one assignment of learners to tasks (thesis Eq. 4.4 with it fixed).

Each task's min-max level comes from ``split``; with a budget that can bind, the best levels
under it come from ``budget.best_levels`` over the tasks' least-cost steps, pruned at the value
to beat: a candidate whose levels without the budget already reach it is dropped before any
budget work, and so is one whose budget Lagrangian bound (``budget.relaxed_bound``, at the
critical multiplier of the last assignment that was valued in full below its cutoff: the
local search's current one, whose neighbours' multipliers are close) reaches it. That bound
is valid at any multiplier, so the pruning never drops a candidate that beats the value; it
spares the budget's dynamic programme, which took two thirds of a local search's time at
100 learners x 10 tasks, for most of the candidates a local search rejects. The local searches
and the branch and bound rank assignments by this value.
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
        # the budget's multiplier for the Lagrangian pruning (None: none yet) and, per task
        # and members, min_H (H + mu C(H)) with the mu it was computed at
        self.mu: float | None = None
        self._relaxed: dict[tuple[int, tuple[int, ...]], tuple[float, float]] = {}
        self.relaxed_cuts = 0  # candidates the Lagrangian pruning dropped

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
        if math.isfinite(cutoff) and self._relaxed_cut(parts, fronts, cutoff):
            self.relaxed_cuts += 1
            return 0.0, math.inf, None
        got = budget_mod.best_levels(fronts, self.inst.budget, cutoff)
        if got is None:  # not below the cutoff (without one: cannot happen after the check)
            return (0.0 if math.isfinite(cutoff) else 1e-9), math.inf, None
        # the pruning's multiplier follows the assignments valued in full below the cutoff
        self.mu = budget_mod.critical_multiplier(fronts, self.inst.budget)
        return 0.0, got[0], [float(fronts[i][0][k]) for i, k in enumerate(got[1])]

    def _relaxed_cut(self, parts: list[tuple[int, ...]],
                     fronts: list[tuple[np.ndarray, np.ndarray]], cutoff: float) -> bool:
        """Whether the budget's Lagrangian bound at ``self.mu`` (``budget.relaxed_bound``, per
        task cached) shows that these tasks' best levels under the budget reach ``cutoff``."""
        mu = self.mu
        if mu is None or mu <= 0.0:
            return False
        total = 0.0
        for i, p in enumerate(parts):
            key = (i, p)
            got = self._relaxed.get(key)
            if got is None or got[0] != mu:
                lev, cost = fronts[i]
                got = (mu, float(np.min(lev + mu * cost)))
                self._relaxed[key] = got
            total += got[1]
        limit = self.inst.budget * (1 + budget_mod.REL_TOL) + budget_mod.REL_TOL
        bound = total - mu * limit
        # a margin for round-off in the bound (it only ever keeps more)
        slack = 1e-9 * (abs(cutoff) + abs(total) + mu * limit) + 1e-12
        return bound >= cutoff + slack
