"""The type-programme search: a proven optimum of (4.4) when learners fall into few types.

For a fixed assignment, every task's min-max split is easy (``split.min_max_level``); the hard
part is the assignment. Over the box of type count vectors (``type_box``), the programme with
the tasks' levels gives the optimum when the budget cannot bind (sum_i D_i max_j p_j <= B).
With three learner types (the thesis set-up) there are at most (n/3 + 1)^3 cells.

With a budget that can bind, learners of one type must also share a price. The programme
computed without the budget, f, is an exact bound on the cost-to-go, and a depth-first search
over the price-aware box visits assignments in the order of that bound; each complete assignment
gets its exact budget-constrained value (``budget.best_levels`` over the tasks' least-cost
steps), and the search stops when the bound of every open branch reaches the best value found.
Branches are also cut when the tasks' least possible costs (a second programme) exceed the
budget, or when the fixed tasks cannot fit what the rest leaves of it. If the first complete
assignment does not fit the budget at its budget-free value, the search restarts with the
Lagrangian bound max_lam [programme over min_H (H + lam C_i(H)) - lam B] added (lam by bisection
on the sign of the supergradient), which is far tighter when the budget binds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import Coefficients
from mel_opt.problems.med.search import budget as budget_mod
from mel_opt.problems.med.search.type_box import TypeProgramme, TypeSpace
from mel_opt.problems.med.search.types import TOL, SearchOutcome
from mel_opt.status import TerminationCondition as TC

# per task: flat levels, costs, segment starts and the cells they belong to
FlatFrontiers = list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
Multiplier = tuple[float, np.ndarray, list[np.ndarray], float]  # lam, g, its programme, Phi


def solve_types(inst: MedInstance, coef: Coefficients, space: TypeSpace, binds: bool,
                start: float, time_limit: float | None) -> SearchOutcome:
    """The programme over ``space`` (``binds``: with the budget search), see the docstring.

    ``start`` is the ``time.perf_counter()`` reading the time limit counts from.
    """
    tp = TypeProgramme(inst, coef, space, binds, start, time_limit)
    fs, choices = tp.programme(tp.levels)
    full = tuple(int(c) for c in space.count)
    lb = float(fs[0][full])
    if not math.isfinite(lb):
        return SearchOutcome(TC.INFEASIBLE, bound=math.inf, stats=tp.stats, message=(
            "no assignment meets every deadline (4.4b) with the dataset (4.4c), "
            "minimum-shard (4.4e) and one-task (4.4f) rules"))
    if not binds:
        picks = tp.walk(choices)
        levels = [float(tp.levels[(i, *s)]) for i, s in enumerate(picks)]
        assignment, d = tp.realise(picks, levels)
        tp.stats["leaves"] = 1
        return SearchOutcome(TC.CONVERGED, assignment, d, lb, lb, stats=tp.stats,
                             message="proven optimal (type programme; the budget cannot bind)")
    return _budget_search(tp, fs, lb)


# --------------------------------------------------------------------------------------------
# the Lagrangian bound on the budget over the type box
# --------------------------------------------------------------------------------------------
def _all_frontiers(tp: TypeProgramme) -> FlatFrontiers:
    """Per task: flat levels, costs, segment starts and the cells they belong to."""
    out = []
    for i in range(tp.m):
        states = np.argwhere(np.isfinite(tp.levels[i]))
        levs, costs, starts = [], [], []
        at = 0
        for s in states:
            lv, c = tp.frontier(i, tuple(int(x) for x in s), math.inf)
            levs.append(lv)
            costs.append(c)
            starts.append(at)
            at += lv.size
        out.append((np.concatenate(levs), np.concatenate(costs), np.array(starts), states))
    return out


def _lagrangian(tp: TypeProgramme, flat: FlatFrontiers, lam: float
                ) -> tuple[np.ndarray, list[np.ndarray], float, float]:
    """Budget priced at ``lam``: g_i(s) = min over task i's steps of H + lam C(H), its
    programme, Phi(lam) = f_0(N) - lam B (a lower bound on the optimum for every lam >= 0)
    and a supergradient of Phi at lam (cost of the minimiser minus B)."""
    g = np.full((tp.m, *tp.space.shape), math.inf)
    where = []
    for i, (lev, cost, starts, states) in enumerate(flat):
        val = lev + lam * cost
        g[(i, *states.T)] = np.minimum.reduceat(val, starts)
        where.append((val, cost, starts, states))
    gfs, choices = tp.programme(g)
    full = tuple(int(c) for c in tp.space.count)
    spent = 0.0
    for i, s in enumerate(tp.walk(choices)):
        val, cost, starts, states = where[i]
        row = int(np.nonzero(np.all(states == np.array(s), axis=1))[0][0])
        stop = starts[row + 1] if row + 1 < starts.size else val.size
        spent += float(cost[starts[row] + int(np.argmin(val[starts[row]:stop]))])
    return g, gfs, float(gfs[0][full]) - lam * tp.inst.budget, spent - tp.inst.budget


def _best_multiplier(tp: TypeProgramme, lb: float) -> Multiplier:
    """Maximise the concave Phi(lam) by bisection on the sign of its supergradient."""
    flat = _all_frontiers(tp)
    g0, gfs0, phi0, _ = _lagrangian(tp, flat, 0.0)
    best = (0.0, g0, gfs0, phi0)
    lo, hi = 0.0, max(lb, 1e-9) / tp.inst.budget
    for _ in range(60):  # find hi with a non-positive supergradient
        g, gfs, phi, slope = _lagrangian(tp, flat, hi)
        if phi > best[3]:
            best = (hi, g, gfs, phi)
        if slope <= 0:
            break
        lo, hi = hi, hi * 4
    for _ in range(14):
        mid = 0.5 * (lo + hi)
        g, gfs, phi, slope = _lagrangian(tp, flat, mid)
        if phi > best[3]:
            best = (mid, g, gfs, phi)
        if slope > 0:
            lo = mid
        else:
            hi = mid
    return best


# --------------------------------------------------------------------------------------------
# the budget search
# --------------------------------------------------------------------------------------------
@dataclass
class _SearchState:
    """Incumbent and control flags of the budget search."""

    value: float = math.inf
    picks: list[tuple[int, ...]] | None = None
    levels: list[float] | None = None
    timed_out: bool = False
    stop_after_first: bool = True
    lag: tuple[float, np.ndarray, list[np.ndarray]] | None = None


class _BudgetSearch:
    """Depth-first search over the price-aware box in the order of the bound, exact leaves."""

    def __init__(self, tp: TypeProgramme, fs: list[np.ndarray]) -> None:
        self.tp, self.fs = tp, fs
        digits = tp.space.digits()
        self.floor = np.stack([tp.least_costs(i, digits) for i in range(tp.m)])
        self.cost_fs, _ = tp.programme(self.floor)
        self.limit = tp.inst.budget * (1 + TOL) + TOL
        self.st = _SearchState()

    def leaf(self, picks: list[tuple[int, ...]], sum_h: float) -> None:
        """A complete assignment: its exact value under the budget; kept if it is better."""
        tp, st = self.tp, self.st
        tp.stats["leaves"] += 1
        fronts = []
        for t, s in enumerate(picks):
            others = sum_h - float(tp.levels[(t, *s)])
            fronts.append(tp.frontier(t, s, st.value - others))
        got = budget_mod.best_levels(fronts, tp.inst.budget, cutoff=st.value - TOL)
        if got is not None and got[0] < st.value - TOL:
            st.value = got[0]
            st.picks = list(picks)
            st.levels = [float(fronts[t][0][k]) for t, k in enumerate(got[1])]

    def fixed_tasks_fit(self, i: int, r: np.ndarray, picks: list[tuple[int, ...]]) -> bool:
        """The fixed tasks 0..i-1 fit what the rest leaves of the budget at the least, at a
        value that can still beat the incumbent."""
        tp = self.tp
        fronts = [tp.frontier(t, s, math.inf) for t, s in enumerate(picks)]
        part = budget_mod.best_levels(fronts, tp.inst.budget - float(self.cost_fs[i][tuple(r)]),
                                      cutoff=self.st.value - float(self.fs[i][tuple(r)]))
        return part is not None

    def visit(self, i: int, r: np.ndarray, sum_h: float, sum_g: float, sum_floor: float,
              picks: list[tuple[int, ...]]) -> bool:
        """Explore below; False once the search must stop (time, or first-leaf probe)."""
        tp, st = self.tp, self.st
        tp.stats["nodes"] += 1
        if tp.out_of_time():
            st.timed_out = True
            return False
        if i == tp.m:
            self.leaf(picks, sum_h)
            return not st.stop_after_first
        if i >= 2 and math.isfinite(st.value) and not self.fixed_tasks_fit(i, r, picks):
            return True
        subs = tp.space.below(r)
        idx = (i, *subs.T)
        rest = tuple((r[None, :] - subs).T)
        bound = sum_h + tp.levels[idx] + self.fs[i + 1][rest]
        lag = st.lag
        if lag is not None:
            lam, g, gfs = lag
            bound = np.maximum(bound, sum_g + g[idx] + gfs[i + 1][rest] - lam * tp.inst.budget)
        cost_ok = sum_floor + self.floor[idx] + self.cost_fs[i + 1][rest] <= self.limit
        ok = np.isfinite(bound) & cost_ok & (bound < st.value - TOL)
        for k in np.nonzero(ok)[0][np.argsort(bound[ok], kind="stable")]:
            if bound[k] >= st.value - TOL:
                break  # sorted by bound: nothing further can improve
            s = tuple(int(x) for x in subs[k])
            gs = float(lag[1][(i, *s)]) if lag is not None else 0.0
            if not self.visit(i + 1, r - subs[k], sum_h + float(tp.levels[(i, *s)]),
                              sum_g + gs, sum_floor + float(self.floor[(i, *s)]), [*picks, s]):
                return False
        return True


def _budget_search(tp: TypeProgramme, fs: list[np.ndarray], lb: float) -> SearchOutcome:
    """Depth-first search in the order of the bound, exact leaves (module docstring).

    First with the budget-free bound; if the budget-free optimum does not fit the budget,
    the Lagrangian bound max_lam Phi(lam) (budget priced at lam per unit) is added and the
    search restarts from the incumbent.
    """
    search = _BudgetSearch(tp, fs)
    st = search.st
    full = tp.space.count.copy()
    infeasible = SearchOutcome(TC.INFEASIBLE, bound=math.inf, stats=tp.stats, message=(
        "no assignment fits the budget (4.4d) while meeting the deadlines (4.4b)"))
    if not search.cost_fs[0][tuple(full)] <= search.limit:
        return infeasible
    search.visit(0, full, 0.0, 0.0, 0.0, [])  # probe: the budget-free optimum, if it fits
    st.stop_after_first = False
    bound = lb
    if not st.timed_out and st.value > lb + TOL * max(1.0, lb):
        lam, g, gfs, phi = _best_multiplier(tp, lb)
        tp.stats["lagrange_multiplier"] = lam
        tp.stats["lagrange_bound"] = phi
        bound = max(lb, phi)
        if lam > 0:
            st.lag = (lam, g, gfs)
        if not tp.out_of_time():
            search.visit(0, full, 0.0, 0.0, 0.0, [])
    tp.stats["budget_free_bound"] = lb
    if st.picks is None:
        if st.timed_out:
            return SearchOutcome(TC.TIME_LIMIT, bound=bound, stats=tp.stats,
                                 message="time limit before any allocation fitting the budget")
        return infeasible
    assert st.levels is not None
    assignment, d = tp.realise(st.picks, st.levels)
    if st.timed_out:
        return SearchOutcome(TC.TIME_LIMIT, assignment, d, st.value, bound,
                             stats=tp.stats, message="time limit: best allocation found")
    return SearchOutcome(TC.CONVERGED, assignment, d, st.value, st.value, stats=tp.stats,
                         message="proven optimal (type programme with budget search)")
