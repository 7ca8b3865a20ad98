"""The Lagrangian bound of the branch and bound and its subgradient optimisation.

Relax "each learner serves exactly one task" (4.4f with 4.4e) with multipliers mu_j (free;
>= 0 when D_l = 0 makes it "at most one") and the budget (4.4d) with lam >= 0:

    L(mu, lam) = sum_i min_{H, W} [H + sum_{j in W} mu_j + lam cost_i(W, H)] - sum_j mu_j - lam B.

For a task and a level H, learner j can hold k_ij(H) = floor((H - A_ij)/C_ij) shards (and is
eligible only if k_ij(H) >= L); the inner minimum over W is a 0-1 knapsack solved exactly by a
dynamic programme over shards placed (saturating at D_i), with learners taken in ascending
price so that each takes min(k_ij, shards still missing): that is the least-cost fill of W,
relaxed only by not charging the L shards of the dearer learners. The level H runs over the
task's candidate levels A_ij + C_ij k (a task's level is always one of them); the least cost is
non-increasing in H, so h_a + v(h_b) bounds an interval [h_a, h_b] from below and only
intervals that could hold the minimum are refined. Levels above UB - sum of the other tasks'
least levels cannot beat the incumbent and are skipped; a branch-and-bound node's level window
(H_i in (above_i, upto_i]) keeps only the levels inside it (a task's level is one of them, so
the two windows of a level branch together leave nothing out). Every L(mu, lam) is a lower
bound; a deflected subgradient method maximises it (the budget row scaled so that its step is
commensurate with the learners'). One dynamic programme runs the level rows of every task
together.

Two tightenings were tried at the dual optimum of a large benchmark instance and left out
because they did not raise the bound measurably: charging the dearer learners' L shards exactly
(a window-minimum programme), and splitting the budget exactly between the tasks (a
multiple-choice knapsack over per-task cost frontiers at fixed mu, instead of one lam). The
remaining gap is the relaxation's own, in the learners' rows, which branching must close.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import Coefficients, shards_within
from mel_opt.problems.med.search.types import REL_GAP, TOL


@dataclass
class _Task:
    levels: np.ndarray  # candidate levels, ascending (G,)
    caps: np.ndarray  # (G, n) shards learner j can hold at each level, 0 if < L
    D: int


@dataclass
class Node:
    """Branching decisions: fixed[j] = task j must serve, barred[i, j] = j may not serve i,
    and task i's level H_i in (above[i], upto[i]] (None: unrestricted)."""

    fixed: np.ndarray
    barred: np.ndarray
    mu: np.ndarray
    lam: float
    depth: int = 0
    above: np.ndarray | None = None
    upto: np.ndarray | None = None

    def level_window(self, i: int) -> tuple[float, float]:
        """Task i's level range (exclusive below, inclusive above)."""
        lo = -math.inf if self.above is None else float(self.above[i])
        hi = math.inf if self.upto is None else float(self.upto[i])
        return lo, hi


class OutOfTime(Exception):
    """Building the per-task level tables did not finish before the deadline."""


class Lagrangian:
    """The bound L(mu, lam) of the module docstring and its subgradient optimisation.

    Building it tabulates every learner's cap at every candidate level of every task, which at
    a thousand learners takes seconds; past ``deadline`` (a ``time.perf_counter()`` reading)
    the constructor raises :class:`OutOfTime` between tasks.
    """

    def __init__(self, inst: MedInstance, coef: Coefficients, binds: bool,
                 floor_levels: np.ndarray, upper: float, deadline: float = math.inf) -> None:
        self.inst, self.coef, self.binds = inst, coef, binds
        self.m, self.n = inst.n_tasks, inst.n_learners
        self.order = np.argsort(inst.price, kind="stable")  # fill order: cheapest first
        self.tasks: list[_Task] = []
        for i in range(self.m):
            if time.perf_counter() > deadline:
                raise OutOfTime(f"the level tables of {i} of {self.m} tasks were built")
            hi = min(float(inst.deadline[i]) * (1 + TOL),
                     upper - (floor_levels.sum() - floor_levels[i]))
            vals = []
            for j in range(self.n):
                if not coef.allowed[i, j]:
                    continue
                top = min(int(coef.cap[i, j]), int(inst.shards[i]))
                ks = np.arange(coef.L, top + 1)
                v = coef.A[i, j] + coef.C[i, j] * ks
                vals.append(v[(v >= floor_levels[i] * (1 - 1e-12)) & (v <= hi)])
            lev = np.unique(np.concatenate(vals)) if vals else np.zeros(0)
            caps = np.clip(shards_within(coef.A[i][None, :], coef.C[i][None, :],
                                         lev[:, None]), 0, int(inst.shards[i]))
            caps = np.where((caps >= coef.L) & coef.allowed[i][None, :], caps, 0)
            self.tasks.append(_Task(lev, caps, int(inst.shards[i])))

    # -- one task's subproblem ----------------------------------------------------------------
    def _programmes(self, batch: list[tuple[int, np.ndarray]], cost: np.ndarray, lam: float,
                    forced: np.ndarray, allowed: np.ndarray) -> list[np.ndarray]:
        """Least sum of costs (mu_j plus lam x price x shards) reaching D_i shards, for the
        given level rows of several tasks in one pass over the learners.

        ``batch`` holds (task, rows); ``forced`` and ``allowed`` are (m, n). Learners are taken
        cheapest first and each takes its whole cap k, except a last one that completes D_i
        with fewer (the saturating step). F keeps Dmax + 1 columns of inf to the left of the
        states, so "state s - k" is one flat gather for every row at once.
        """
        parts = [(self.tasks[i], i, r) for i, r in batch]
        Ds = np.concatenate([np.full(r.size, t.D, dtype=np.int64) for t, _, r in parts])
        caps = np.concatenate([t.caps[r] for t, _, r in parts])  # (R, n)
        of = np.concatenate([np.full(r.size, i, dtype=np.int64) for _, i, r in parts])
        allowed_r, forced_r = allowed[of], forced[of]
        R, Dm = Ds.size, int(Ds.max())
        W = 2 * (Dm + 1)
        F = np.full((R, W), math.inf)
        F[:, Dm + 1] = 0.0
        s = np.arange(Dm + 1)
        rr = np.arange(R)
        base = (rr * W)[:, None] + (Dm + 1) + s[None, :]  # flat index of (row, state)
        beyond = s[None, :] > Ds[:, None]
        for j in self.order:
            has = (caps[:, j] > 0) & allowed_r[:, j]
            fj = forced_r[:, j]
            if not has.any():
                F[fj] = math.inf  # must serve but cannot at these levels
                continue
            pj = lam * float(self.inst.price[j])
            k = np.where(has, caps[:, j], Dm + 1)  # no shards: every source is in the inf block
            cur = F[:, Dm + 1:]
            take = F.ravel()[base - k[:, None]] + (cost[j] + pj * k)[:, None]
            take[beyond] = math.inf
            # saturating step: the last learner may take fewer than k (cheapest fill)
            window = np.where(s[None, :] >= (Ds - k)[:, None], cur - pj * s[None, :], math.inf)
            take[rr, Ds] = np.minimum(take[rr, Ds], window.min(axis=1) + cost[j] + pj * Ds)
            take[~has] = math.inf
            if fj.any():
                F[:, Dm + 1:] = np.where(fj[:, None], take, np.minimum(cur, take))
            else:
                F[:, Dm + 1:] = np.minimum(cur, take)
        out = F[rr, Dm + 1 + Ds]
        return np.split(out, np.cumsum([r.size for _, _, r in parts])[:-1])

    def _choose(self, t: _Task, row: int, cost: np.ndarray, lam: float, forced: np.ndarray,
                allowed: np.ndarray) -> tuple[np.ndarray, float]:
        """The minimiser's learners and the price of its shards at one level (the same
        programme as ``_programmes`` on one row, kept for backtracking)."""
        D = t.D
        F = np.full(D + 1, math.inf)
        F[0] = 0.0
        s = np.arange(D + 1)
        steps = []
        for j in self.order:
            k = int(t.caps[row, j])
            if not allowed[j] or k == 0:
                if forced[j]:
                    return np.zeros(self.n, dtype=bool), 0.0
                continue
            pj = lam * float(self.inst.price[j])
            take = np.full(D + 1, math.inf)
            if k < D:
                take[k:D] = F[:D - k] + cost[j] + pj * k
            lo = max(D - k, 0)
            arg = lo + int(np.argmin(F[lo:] - pj * s[lo:]))
            take[D] = F[arg] + cost[j] + pj * (D - arg)
            new = take if forced[j] else np.minimum(F, take)
            steps.append((j, k, F, take, arg))
            F = new
        chosen = np.zeros(self.n, dtype=bool)
        spent = 0.0
        at = D
        for j, k, prev, take, arg in reversed(steps):
            if forced[j] or take[at] < prev[at]:
                src = at - k if at < D else arg
                chosen[j] = True
                spent += float(self.inst.price[j]) * (at - src)
                at = src
        return chosen, spent

    def task_mins(self, node: Node, mu: np.ndarray, lam: float, cutoff: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per task, min over levels of H + knapsack(H) (a valid lower bound of it).

        The knapsack runs on a coarse grid of levels first; since it is non-increasing in H,
        h_a + v(h_b) bounds every level in [h_a, h_b], and only intervals whose bound beats
        the best value so far are refined (all tasks in one pass per round).

        Returns the lower bounds (m,), the minimising level rows (m,), and the node's forced
        and allowed masks (m, n).
        """
        m = self.m
        forced = node.fixed[None, :] == np.arange(m)[:, None]
        allowed = ~node.barred & ((node.fixed < 0)[None, :] | forced)
        low = np.full(m, math.inf)
        best_rows = np.zeros(m, dtype=np.int64)
        if any(t.levels.size == 0 for t in self.tasks):
            return low, best_rows, forced, allowed
        vals: list[dict[int, float]] = [{} for _ in range(m)]
        todo = {}
        for i, t in enumerate(self.tasks):  # the rows of the node's level window
            lo, hi = node.level_window(i)
            a = int(np.searchsorted(t.levels, lo, side="right"))
            b = int(np.searchsorted(t.levels, hi, side="right")) - 1
            if b < a:
                return low, best_rows, forced, allowed
            todo[i] = np.unique(a + np.linspace(0, b - a, min(b - a + 1, 33)).astype(np.int64))
        tol = 1e-7 * max(1.0, abs(cutoff)) if math.isfinite(cutoff) else 1e-7
        while todo:
            batch = [(i, rows) for i, rows in todo.items() if rows.size]
            if not batch:
                break
            for (i, rows), out in zip(batch, self._programmes(batch, mu, lam, forced, allowed),
                                      strict=True):
                t = self.tasks[i]
                vals[i].update(zip(rows.tolist(), (t.levels[rows] + out).tolist(), strict=True))
            todo = {}
            for i, t in enumerate(self.tasks):
                pts = sorted(vals[i])
                best = min(vals[i].values())
                more = [np.linspace(a, b, min(b - a + 1, 10)).astype(np.int64)[1:-1]
                        for a, b in zip(pts[:-1], pts[1:], strict=True)
                        if b - a > 1 and t.levels[a] + (vals[i][b] - t.levels[b]) < best - tol]
                if more:
                    rows = np.unique(np.concatenate(more))
                    todo[i] = rows[[r not in vals[i] for r in rows.tolist()]]
        for i, t in enumerate(self.tasks):
            pts = sorted(vals[i])
            best_rows[i] = min(vals[i], key=vals[i].__getitem__)
            lo = vals[i][int(best_rows[i])]
            for a, b in zip(pts[:-1], pts[1:], strict=True):
                if b - a > 1:
                    lo = min(lo, t.levels[a] + (vals[i][b] - t.levels[b]))
            low[i] = lo
        return low, best_rows, forced, allowed

    def evaluate(self, node: Node, mu: np.ndarray, lam: float, cutoff: float
                 ) -> tuple[float, np.ndarray, float]:
        """L(mu, lam) at a node, the subproblems' cover (m, n) and its price of shards."""
        cover = np.zeros((self.m, self.n), dtype=bool)
        low, rows, forced, allowed = self.task_mins(node, mu, lam, cutoff)
        if not np.all(np.isfinite(low)):
            return math.inf, cover, 0.0
        spent = 0.0
        for i, t in enumerate(self.tasks):
            cover[i], c = self._choose(t, int(rows[i]), mu, lam, forced[i], allowed[i])
            spent += c
        return float(low.sum()) - float(mu.sum()) - lam * self.inst.budget, cover, spent

    def optimise(self, node: Node, upper: float, iters: int, deadline: float
                 ) -> tuple[float, np.ndarray]:
        """Deflected subgradient ascent from the node's multipliers (Polyak steps towards the
        incumbent); returns the best bound and the subproblems' cover at its multipliers.

        The budget row is scaled by S = (B / sum_i D_i) sqrt(n) (its subgradient, cost - B,
        is in price units and would otherwise swamp the learners' rows)."""
        mu, lam = node.mu.copy(), node.lam
        best, best_cover = -math.inf, np.zeros((self.m, self.n), dtype=bool)
        theta, stall = 1.0, 0
        scale = (self.inst.budget / float(self.inst.shards.sum())) * math.sqrt(self.n)
        target = upper if math.isfinite(upper) else None
        previous: np.ndarray | None = None
        for _ in range(iters):
            val, cover, spent = self.evaluate(node, mu, lam, upper)
            if not math.isfinite(val):
                return math.inf, cover
            if val > best + 1e-12 * max(1.0, abs(val)):
                best, best_cover, stall = val, cover, 0
                node.mu, node.lam = mu.copy(), lam
            else:
                stall += 1
                if stall >= 15:
                    theta, stall = theta * 0.7, 0
            if target is not None and best >= target - REL_GAP * max(1.0, abs(target)):
                break
            g = cover.sum(axis=0) - 1.0
            if self.inst.min_shards == 0:
                g = np.where(mu <= 0, np.maximum(g, 0), g)  # <= 1 only: mu_j >= 0
            gl = (spent - self.inst.budget) / scale if self.binds else 0.0
            if lam <= 0 and gl < 0:
                gl = 0.0
            direction = np.append(g, gl)
            if previous is not None:
                direction = direction + 0.3 * previous
            previous = direction
            norm = float((direction * direction).sum())
            if norm < 1e-12 or theta < 1e-3 or time.perf_counter() > deadline:
                break
            gap = (target - val) if target is not None else max(1.0, abs(val)) * 0.05
            step = theta * max(gap, 1e-9 * max(1.0, abs(val))) / norm
            mu = mu + step * direction[:-1]
            if self.inst.min_shards == 0:
                mu = np.maximum(mu, 0.0)
            lam = max(0.0, lam + step * direction[-1] / scale) if self.binds else 0.0
        return best, best_cover
