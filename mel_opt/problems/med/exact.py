"""``exact``: a proven optimum of (4.4) from the problem's structure.

For a fixed assignment, every task's min-max split is easy (``split.min_max_level``); the hard
part is the assignment. Learners with identical coefficients (a *type*; with a budget that can
bind, also an identical price) are interchangeable, so an assignment is only a matrix of counts
n[i, t] (learners of type t on task i), and task i's best level H_i(n[i]) depends on its row only.

Without the budget (or when it cannot bind, sum_i D_i max_j p_j <= B), the optimum is a dynamic
programme over the tasks whose state is the vector r of learners of each type still free:

    f_m(r) = 0 if r = 0 (or for every r when D_l = 0 lets learners rest), else +inf
    f_i(r) = min_{0 < s <= r} H_i(s) + f_{i+1}(r - s)       (componentwise <=)
    optimum = f_0(N).

The count vectors are the cells of a box prod_t [0, N_t]; for a fixed s the cells r >= s and
the cells r - s are two sub-boxes, so each s is one vectorised array operation. H_i(s) for every
cell comes from ``split.min_max_levels`` (vectorised). With three learner types (the thesis
set-up) there are at most (n/3 + 1)^3 cells: milliseconds.

With a budget that can bind, learners of one type must also share a price. First the programme
without prices (coarse types) gives the budget-free optimum, a lower bound; if a realisation of
it (cheapest learners where the most shards go) fits the budget, it is optimal. Otherwise f
(computed without the budget) is an exact bound on the cost-to-go, and a depth-first search
over the price-aware box visits assignments in the order of that bound; each complete
assignment gets its exact budget-constrained value (``budget.best_levels`` over the tasks'
least-cost steps), and the search stops when the bound of every open branch reaches the best
value found. Branches are also cut when the tasks' least possible costs (a second programme)
exceed the budget, or when the fixed tasks cannot fit what the rest leaves of it. If the first
complete assignment does not fit the budget at its budget-free value, the search restarts with
the Lagrangian bound max_lam [programme over min_H (H + lam C_i(H)) - lam B] added (lam by
bisection on the sign of the supergradient), which is far tighter when the budget binds.

Instances with too many types for these programmes (every learner different, n > 14) go to the
Lagrangian branch and bound of ``large`` (capped at ``LARGE_DEFAULT_LIMIT`` seconds when no time
limit is given; it then reports its gap).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt.problems.med import budget as budget_mod
from mel_opt.problems.med import split
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.model import (
    Coefficients,
    budget_can_bind,
    coefficients,
    learner_types,
    shards_within,
)
from mel_opt.solvers.base import Termination

MAX_STATES = 20_000  # largest prod(N_t + 1) the programmes take on
LARGE_DEFAULT_LIMIT = 300.0  # s, the Lagrangian search's cap when no time limit is given
TOL = 1e-9


@dataclass
class _SearchState:
    """Incumbent and control flags of the budget search."""

    value: float = math.inf
    picks: list[tuple[int, ...]] | None = None
    levels: list[float] | None = None
    timed_out: bool = False
    stop_after_first: bool = True
    lag: tuple[float, np.ndarray, list[np.ndarray]] | None = None


@dataclass
class Outcome:
    """What the exact method found.

    ``objective`` is the sum of the tasks' levels of the returned allocation; ``bound`` a proven
    lower bound on the optimum (equal to ``objective`` when optimal).
    """

    termination: Termination
    assignment: np.ndarray | None = None
    d: np.ndarray | None = None
    objective: float | None = None
    bound: float | None = None
    message: str = ""
    stats: dict[str, Any] = field(default_factory=dict)


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


class TypeSpace:
    """Learner types, their counts, and count vectors as cells of a K-dimensional box."""

    def __init__(self, labels: np.ndarray) -> None:
        self.labels = labels
        self.K = int(labels.max()) + 1
        self.members = [np.nonzero(labels == t)[0] for t in range(self.K)]
        self.count = np.array([m.size for m in self.members], dtype=np.int64)
        self.rep = np.array([m[0] for m in self.members], dtype=np.int64)
        self.shape = tuple(int(c) + 1 for c in self.count)
        self.size = int(np.prod(self.shape))

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


def solve(inst: MedInstance, *, time_limit: float | None = None) -> Outcome:
    """The exact method (see the module docstring); many types go to ``large``."""
    start = time.perf_counter()
    coef = coefficients(inst)
    why = structural_check(inst, coef)
    if why is not None:
        return Outcome(Termination.INFEASIBLE, message=why)
    binds = budget_can_bind(inst)
    if binds:
        # fast path: the optimum without the budget (coarser types: prices ignored) is a lower
        # bound; if one of its realisations fits the budget, it is optimal
        coarse = TypeSpace(learner_types(coef))
        if coarse.size <= MAX_STATES:
            probe = _TypeDP(inst, coef, coarse, False, start, time_limit).run()
            if probe.termination == Termination.INFEASIBLE or (
                    probe.d is not None
                    and float((probe.d * inst.price[None, :]).sum()) <= inst.budget * (1 + TOL)):
                probe.message = probe.message.replace(
                    "the budget cannot bind", "its budget-free optimum fits the budget")
                return probe
    space = TypeSpace(learner_types(coef, inst.price if binds else None))
    if space.size > MAX_STATES:
        from mel_opt.problems.med import large

        limit = LARGE_DEFAULT_LIMIT if time_limit is None else time_limit
        return large.solve(inst, coef, time_limit=limit)
    return _TypeDP(inst, coef, space, binds, start, time_limit).run()


class _TypeDP:
    """The programmes and the budget search over one instance's type box."""

    def __init__(self, inst: MedInstance, coef: Coefficients, space: TypeSpace, binds: bool,
                 start: float, time_limit: float | None) -> None:
        self.inst, self.coef, self.space, self.binds = inst, coef, space, binds
        self.start, self.time_limit = start, time_limit
        self.m = inst.n_tasks
        self.idle_ok = inst.min_shards == 0
        digits = space.digits()
        self.levels = np.stack([self._task_levels(i, digits).reshape(space.shape)
                                for i in range(self.m)])  # (m, *shape)
        self.frontiers: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}
        self.stats: dict[str, Any] = {"types": space.K, "states": space.size, "leaves": 0,
                                      "nodes": 0}

    # -- per-task levels of every count vector ---------------------------------------------
    def _task_levels(self, i: int, digits: np.ndarray) -> np.ndarray:
        sp, coef, inst = self.space, self.coef, self.inst
        A, C = coef.A[i, sp.rep], coef.C[i, sp.rep]
        D, T = int(inst.shards[i]), float(inst.deadline[i])
        out = split.min_max_levels(A, C, digits, coef.L, D)
        barred = ~coef.allowed[i, sp.rep]
        out[np.any((digits > 0) & barred[None, :], axis=1)] = math.inf
        out[out > T * (1 + TOL)] = math.inf
        return out

    def _least_costs(self, i: int, digits: np.ndarray) -> np.ndarray:
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
    def _programme(self, values: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
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
            vals = values[i]
            flat_vals = vals.reshape(-1)
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

    def _walk(self, choices: list[np.ndarray]) -> list[tuple[int, ...]]:
        r = self.space.count.copy()
        picks = []
        for i in range(self.m):
            s = np.unravel_index(int(choices[i][tuple(r)]), self.space.shape)
            picks.append(tuple(int(x) for x in s))
            r = r - np.array(s)
        return picks

    # -- realisation --------------------------------------------------------------------------
    def _realise(self, picks: list[tuple[int, ...]], levels: list[float]
                 ) -> tuple[np.ndarray, np.ndarray]:
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

    def _frontier(self, i: int, s: tuple[int, ...], h_max: float
                  ) -> tuple[np.ndarray, np.ndarray]:
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

    def _out_of_time(self) -> bool:
        return (self.time_limit is not None
                and time.perf_counter() - self.start > self.time_limit)

    # -- driver -------------------------------------------------------------------------------
    def run(self) -> Outcome:
        fs, choices = self._programme(self.levels)
        full = tuple(int(c) for c in self.space.count)
        lb = float(fs[0][full])
        if not math.isfinite(lb):
            return Outcome(Termination.INFEASIBLE, bound=math.inf, stats=self.stats, message=(
                "no assignment meets every deadline (4.4b) with the dataset (4.4c), "
                "minimum-shard (4.4e) and one-task (4.4f) rules"))
        if not self.binds:
            picks = self._walk(choices)
            levels = [float(self.levels[(i, *s)]) for i, s in enumerate(picks)]
            assignment, d = self._realise(picks, levels)
            self.stats["leaves"] = 1
            return Outcome(Termination.OPTIMAL, assignment, d, lb, lb, stats=self.stats,
                           message="proven optimal (type programme; the budget cannot bind)")
        return self._search(fs, lb)

    def _all_frontiers(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per task: flat levels, costs, segment starts and the states they belong to."""
        out = []
        for i in range(self.m):
            states = np.argwhere(np.isfinite(self.levels[i]))
            levs, costs, starts = [], [], []
            at = 0
            for s in states:
                lv, c = self._frontier(i, tuple(int(x) for x in s), math.inf)
                levs.append(lv)
                costs.append(c)
                starts.append(at)
                at += lv.size
            out.append((np.concatenate(levs), np.concatenate(costs), np.array(starts), states))
        return out

    def _lagrangian(self, flat: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
                    lam: float) -> tuple[np.ndarray, list[np.ndarray], float, float]:
        """Budget priced at ``lam``: g_i(s) = min over task i's steps of H + lam C(H), its
        programme, Phi(lam) = f_0(N) - lam B (a lower bound on the optimum for every lam >= 0)
        and a supergradient of Phi at lam (cost of the minimiser minus B)."""
        g = np.full((self.m, *self.space.shape), math.inf)
        where = []
        for i, (lev, cost, starts, states) in enumerate(flat):
            val = lev + lam * cost
            g[(i, *states.T)] = np.minimum.reduceat(val, starts)
            where.append((val, cost, starts, states))
        gfs, choices = self._programme(g)
        full = tuple(int(c) for c in self.space.count)
        spent = 0.0
        for i, s in enumerate(self._walk(choices)):
            val, cost, starts, states = where[i]
            row = int(np.nonzero(np.all(states == np.array(s), axis=1))[0][0])
            stop = starts[row + 1] if row + 1 < starts.size else val.size
            spent += float(cost[starts[row] + int(np.argmin(val[starts[row]:stop]))])
        return g, gfs, float(gfs[0][full]) - lam * self.inst.budget, spent - self.inst.budget

    def _best_multiplier(self, lb: float) -> tuple[float, np.ndarray, list[np.ndarray], float]:
        """Maximise the concave Phi(lam) by bisection on the sign of its supergradient."""
        flat = self._all_frontiers()
        g0, gfs0, phi0, _ = self._lagrangian(flat, 0.0)
        best = (0.0, g0, gfs0, phi0)
        lo, hi = 0.0, max(lb, 1e-9) / self.inst.budget
        for _ in range(60):  # find hi with a non-positive supergradient
            g, gfs, phi, slope = self._lagrangian(flat, hi)
            if phi > best[3]:
                best = (hi, g, gfs, phi)
            if slope <= 0:
                break
            lo, hi = hi, hi * 4
        for _ in range(14):
            mid = 0.5 * (lo + hi)
            g, gfs, phi, slope = self._lagrangian(flat, mid)
            if phi > best[3]:
                best = (mid, g, gfs, phi)
            if slope > 0:
                lo = mid
            else:
                hi = mid
        return best

    def _search(self, fs: list[np.ndarray], lb: float) -> Outcome:
        """Depth-first search in the order of the bound, exact leaves (module docstring).

        First with the budget-free bound; if the budget-free optimum does not fit the budget,
        the Lagrangian bound max_lam Phi(lam) (budget priced at lam per unit) is added and the
        search restarts from the incumbent.
        """
        sp, inst = self.space, self.inst
        digits = sp.digits()
        floor = np.stack([self._least_costs(i, digits) for i in range(self.m)])
        cost_fs, _ = self._programme(floor)
        full = sp.count.copy()
        limit = inst.budget * (1 + TOL) + TOL
        infeasible = Outcome(Termination.INFEASIBLE, bound=math.inf, stats=self.stats, message=(
            "no assignment fits the budget (4.4d) while meeting the deadlines (4.4b)"))
        if not cost_fs[0][tuple(full)] <= limit:
            return infeasible
        st = _SearchState()

        def leaf(picks: list[tuple[int, ...]], sum_h: float) -> None:
            self.stats["leaves"] += 1
            fronts = []
            for t, s in enumerate(picks):
                others = sum_h - float(self.levels[(t, *s)])
                fronts.append(self._frontier(t, s, st.value - others))
            got = budget_mod.best_levels(fronts, inst.budget, cutoff=st.value - TOL)
            if got is not None and got[0] < st.value - TOL:
                st.value = got[0]
                st.picks = list(picks)
                st.levels = [float(fronts[t][0][k]) for t, k in enumerate(got[1])]

        def visit(i: int, r: np.ndarray, sum_h: float, sum_g: float, sum_floor: float,
                  picks: list[tuple[int, ...]]) -> bool:
            """Explore below; False once the search must stop (time, or first-leaf probe)."""
            self.stats["nodes"] += 1
            if self._out_of_time():
                st.timed_out = True
                return False
            if i == self.m:
                leaf(picks, sum_h)
                return not st.stop_after_first
            if i >= 2 and math.isfinite(st.value):
                # the fixed tasks must fit what the rest leaves of the budget at the least
                fronts = [self._frontier(t, s, math.inf) for t, s in enumerate(picks)]
                part = budget_mod.best_levels(fronts, inst.budget - float(cost_fs[i][tuple(r)]),
                                              cutoff=st.value - float(fs[i][tuple(r)]))
                if part is None:
                    return True
            subs = sp.below(r)
            idx = (i, *subs.T)
            rest = tuple((r[None, :] - subs).T)
            bound = sum_h + self.levels[idx] + fs[i + 1][rest]
            lag = st.lag
            if lag is not None:
                lam, g, gfs = lag
                bound = np.maximum(bound, sum_g + g[idx] + gfs[i + 1][rest] - lam * inst.budget)
            cost_ok = sum_floor + floor[idx] + cost_fs[i + 1][rest] <= limit
            ok = np.isfinite(bound) & cost_ok & (bound < st.value - TOL)
            for k in np.nonzero(ok)[0][np.argsort(bound[ok], kind="stable")]:
                if bound[k] >= st.value - TOL:
                    break  # sorted by bound: nothing further can improve
                s = tuple(int(x) for x in subs[k])
                gs = float(lag[1][(i, *s)]) if lag is not None else 0.0
                if not visit(i + 1, r - subs[k], sum_h + float(self.levels[(i, *s)]),
                             sum_g + gs, sum_floor + float(floor[(i, *s)]), [*picks, s]):
                    return False
            return True

        visit(0, full, 0.0, 0.0, 0.0, [])  # probe: the budget-free optimum, if it fits
        st.stop_after_first = False
        bound = lb
        if not st.timed_out and st.value > lb + TOL * max(1.0, lb):
            lam, g, gfs, phi = self._best_multiplier(lb)
            self.stats["lagrange_multiplier"] = lam
            self.stats["lagrange_bound"] = phi
            bound = max(lb, phi)
            if lam > 0:
                st.lag = (lam, g, gfs)
            if not self._out_of_time():
                visit(0, full, 0.0, 0.0, 0.0, [])
        self.stats["budget_free_bound"] = lb
        if st.picks is None:
            if st.timed_out:
                return Outcome(Termination.TIME_LIMIT, bound=bound, stats=self.stats,
                               message="time limit before any allocation fitting the budget")
            return infeasible
        assert st.levels is not None
        assignment, d = self._realise(st.picks, st.levels)
        if st.timed_out:
            return Outcome(Termination.TIME_LIMIT, assignment, d, st.value, bound,
                           stats=self.stats, message="time limit: best allocation found")
        return Outcome(Termination.OPTIMAL, assignment, d, st.value, st.value,
                       stats=self.stats,
                       message="proven optimal (type programme with budget search)")
