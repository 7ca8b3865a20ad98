"""The box of learner-type count vectors and the programmes over it (thesis Eq. 4.4).

Learners with identical coefficients (a *type*; with a budget that can bind, also an identical
price) are interchangeable, so an assignment is only a matrix of counts n[i, t] (learners of type
t on task i), and task i's best level H_i(n[i]) depends on its row only. The count vectors are
the cells of a box prod_t [0, N_t]. Over that box, the dynamic programme over the tasks whose
state is the vector r of learners of each type still free is

    f_m(r) = 0 if r = 0 (or for every r when D_l = 0 lets learners rest), else +inf
    f_i(r) = min_{0 < s <= r} values_i(s) + f_{i+1}(r - s)       (componentwise <=)

with values_i = H_i (the budget-free optimum f_0(N)), or the tasks' least costs, or the
Lagrangian values of ``type_search``. For a fixed s the cells r >= s and the cells r - s are two
sub-boxes, so each s is one vectorised array operation; H_i(s) for every cell comes from
``split.min_max_levels`` (vectorised).
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import numpy as np

from mel_opt.problems.med import split
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import Coefficients, shards_within
from mel_opt.problems.med.search.types import TOL

Frontier = tuple[np.ndarray, np.ndarray]  # (levels ascending [s], least costs descending)


class TypeSpace:
    """Learner types, their counts, and count vectors as cells of a K-dimensional box."""

    def __init__(self, labels: np.ndarray) -> None:
        self.labels = labels
        self.K = int(labels.max()) + 1
        self.members = [np.nonzero(labels == t)[0] for t in range(self.K)]
        self.count = np.array([m.size for m in self.members], dtype=np.int64)
        self.rep = np.array([m[0] for m in self.members], dtype=np.int64)
        self.shape = tuple(int(c) + 1 for c in self.count)
        self.size = math.prod(self.shape)  # Python ints: np.prod wraps around past 2^63

    def digits(self) -> np.ndarray:
        """Every count vector, (size, K), in C order of the box."""
        return np.indices(self.shape).reshape(self.K, -1).T

    def below(self, r: np.ndarray) -> np.ndarray:
        """Every count vector s <= r (componentwise), (k, K)."""
        return np.indices(tuple(int(x) + 1 for x in r)).reshape(self.K, -1).T

    @functools.cached_property
    def boxes(self) -> list[tuple[tuple[int, ...], tuple[slice, ...], tuple[slice, ...]]]:
        """Per cell s (flat C order): s, the sub-box [s, N] and the sub-box [0, N - s]."""
        out = []
        for s in self.digits():
            cell = tuple(int(x) for x in s)
            hi = tuple(slice(x, None) for x in cell)
            lo = tuple(slice(0, int(n) - x + 1) for x, n in zip(cell, self.count, strict=True))
            out.append((cell, hi, lo))
        return out


class TypeProgramme:
    """One instance's type box: per-task levels of every cell, the programmes over the box,
    least-cost frontiers of a task's cell and the realisation of a choice of cells."""

    def __init__(self, inst: MedInstance, coef: Coefficients, space: TypeSpace, binds: bool,
                 start: float, time_limit: float | None) -> None:
        self.inst, self.coef, self.space, self.binds = inst, coef, space, binds
        self.start, self.time_limit = start, time_limit
        self.m = inst.n_tasks
        self.idle_ok = inst.min_shards == 0
        digits = space.digits()
        self.levels = np.stack([self._task_levels(i, digits).reshape(space.shape)
                                for i in range(self.m)])  # (m, *shape)
        self.frontiers: dict[tuple[int, tuple[int, ...]], Frontier] = {}
        self.stats: dict[str, Any] = {"types": space.K, "states": space.size, "leaves": 0,
                                      "nodes": 0}

    # -- per-task levels and least costs of every count vector -------------------------------
    def _task_levels(self, i: int, digits: np.ndarray) -> np.ndarray:
        sp, coef, inst = self.space, self.coef, self.inst
        A, C = coef.A[i, sp.rep], coef.C[i, sp.rep]
        D, T = int(inst.shards[i]), float(inst.deadline[i])
        out = split.min_max_levels(A, C, digits, coef.L, D)
        barred = ~coef.allowed[i, sp.rep]
        out[np.any((digits > 0) & barred[None, :], axis=1)] = math.inf
        out[out > T * (1 + TOL)] = math.inf
        return out

    def least_costs(self, i: int, digits: np.ndarray) -> np.ndarray:
        """Least cost of task i for every count vector: all learners at their deadline caps,
        cheapest first (the bottom of each cost frontier)."""
        sp, coef, inst = self.space, self.coef, self.inst
        order = np.argsort(inst.price[sp.rep], kind="stable")
        p = inst.price[sp.rep][order]
        n = digits[:, order].astype(float)
        cap = np.minimum(coef.cap[i, sp.rep][order], int(inst.shards[i]))
        extra = n * np.maximum(0, cap - coef.L)[None, :]
        need = int(inst.shards[i]) - coef.L * n.sum(axis=1)
        before = np.cumsum(extra, axis=1) - extra
        take = np.clip(need[:, None] - before, 0, extra)
        cost = coef.L * (n * p).sum(axis=1) + (take * p).sum(axis=1)
        lv = self.levels[i].reshape(-1)
        return np.where(np.isfinite(lv), cost, math.inf).reshape(sp.shape)

    # -- the programme ------------------------------------------------------------------------
    def programme(self, values: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """f_i over the whole box for per-task ``values`` (m, *shape), and argmin choices.

        f_i[r] = min_{s <= r} values[i][s] + f_{i+1}[r - s]: for each s, the cells r >= s are
        the sub-box [s, N], paired with the sub-box [0, N - s] of f_{i+1} (array views).
        """
        sp = self.space
        f_next = np.full(sp.shape, math.inf)
        if self.idle_ok:
            f_next[...] = 0.0
        else:
            f_next[(0,) * sp.K] = 0.0
        fs = [f_next]
        choices = []
        boxes = sp.boxes
        for i in range(self.m - 1, -1, -1):
            f = np.full(sp.shape, math.inf)
            ch = np.full(sp.shape, -1, dtype=np.int64)
            flat_vals = values[i].reshape(-1)
            for flat in np.nonzero(np.isfinite(flat_vals))[0]:
                _, hi, lo = boxes[flat]
                cand = flat_vals[flat] + f_next[lo]
                view, cview = f[hi], ch[hi]
                better = cand < view
                view[better] = cand[better]
                cview[better] = flat
            fs.append(f)
            choices.append(ch)
            f_next = f
        fs.reverse()
        choices.reverse()
        return fs, choices

    def walk(self, choices: list[np.ndarray]) -> list[tuple[int, ...]]:
        """The cells the programme's argmin ``choices`` pick, task by task, from the full box."""
        r = self.space.count.copy()
        picks = []
        for i in range(self.m):
            s = np.unravel_index(int(choices[i][tuple(r)]), self.space.shape)
            picks.append(tuple(int(x) for x in s))
            r = r - np.array(s)
        return picks

    # -- realisation --------------------------------------------------------------------------
    def realise(self, picks: list[tuple[int, ...]], levels: list[float]
                ) -> tuple[np.ndarray, np.ndarray]:
        """An assignment (task per learner, -1 unused) and whole shards d (m, n) meeting each
        task's ``levels`` with the counts ``picks``, cheapest learners where most shards go."""
        sp, inst, coef = self.space, self.inst, self.coef
        assignment = np.full(inst.n_learners, -1, dtype=np.int64)
        for t in range(sp.K):
            # slots of type t, the roomiest (most shards at the task's level) first, get the
            # cheapest learners of the type (matters only when prices differ within a type)
            slots = []
            for i, s in enumerate(picks):
                room = int(shards_within(coef.A[i, sp.rep[t]], coef.C[i, sp.rep[t]], levels[i]))
                slots.extend([(-room, i)] * s[t])
            slots.sort()
            members = sp.members[t][np.argsort(inst.price[sp.members[t]], kind="stable")]
            for (_, i), j in zip(slots, members, strict=False):
                assignment[j] = i
        d = np.zeros((self.m, inst.n_learners), dtype=np.int64)
        for i in range(self.m):
            W = np.nonzero(assignment == i)[0]
            part = split.split_at(coef.A[i, W], coef.C[i, W], inst.price[W], coef.L,
                                  int(inst.shards[i]), levels[i])
            if part is None:  # cannot happen: the level was computed from these learners
                raise RuntimeError(f"internal: no split of task {i} at level {levels[i]}")
            d[i, W] = part
        return assignment, d

    def frontier(self, i: int, s: tuple[int, ...], h_max: float) -> Frontier:
        """Task i's least-cost steps with the counts ``s``, levels up to ``h_max`` (cached)."""
        key = (i, s)
        if key not in self.frontiers:
            sp, coef = self.space, self.coef
            reps = np.repeat(sp.rep, s)
            self.frontiers[key] = split.cost_frontier(
                coef.A[i, reps], coef.C[i, reps], self.inst.price[reps], coef.L,
                int(self.inst.shards[i]), float(self.levels[(i, *s)]),
                float(self.inst.deadline[i]) * (1 + TOL))
        lev, cost = self.frontiers[key]
        keep = lev <= h_max
        return lev[keep], cost[keep]

    def out_of_time(self) -> bool:
        return (self.time_limit is not None
                and time.perf_counter() - self.start > self.time_limit)
