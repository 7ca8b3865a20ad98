"""The root multipliers of the Lagrangian bound by a box-step cutting-plane (bundle) method.

``Lagrangian.evaluate`` returns, with the bound L(mu, lam), each task's minimiser: a column
(task i, learners W, level H, price of its shards c). A column's value H + sum_{j in W} mu_j +
lam c is affine in (mu, lam), so the columns seen so far give a piecewise-linear model of the
dual function from above,

    L^(mu, lam) = sum_i min_{p of task i} (H_p + mu . a_p + lam c_p) - sum_j mu_j - lam B,

whose maximum over a box around the best multipliers so far is a linear programme (HiGHS):
variables z_i (task i's minimum), mu and lam; one row z_i - mu . a_p - lam c_p <= H_p per
column (kept in one HiGHS instance through an ascent, warm from the last basis). The
box-step method evaluates L at the LP's answer, moves the box there when it raises
the bound (a serious step) and shrinks the box otherwise (a null step). Unlike a subgradient
method it stops with a certificate: when the model's maximum over the box equals the best
value, the best multipliers maximise L over the box and, L being concave, over everything.

The bound is always ``evaluate``'s value at some multipliers, so it is valid whatever the LP
answers; the LP only chooses where to look. When it gives no optimal point (a time limit,
infeasible, unbounded, an error) the ascent ends there and says why (``Ascent.lp_stop``).

The same columns give the restricted master programme (the LP dual of the model): a convex
combination of each task's columns covering every learner once and within the budget. Its
fractional answer, rounded learner by learner to the task that covers it most, is a start for
the local search (``rounded_assignment``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from mel_opt.problems.med.search.lagrangian import Lagrangian, Node
from mel_opt.problems.med.search.types import REL_GAP
from mel_opt.solvers.highs import IncrementalLp, solve_arrays
from mel_opt.status import TerminationCondition

SHRINK = 0.7  # the box after a null step that did not raise the bound
GROW = 1.5  # ... after a serious step that gained at least GOOD of what the model promised
GOOD = 0.3
FIRST_BOX = 0.05  # the first box's half-width, relative to the largest |mu_j|
UNCOVERED = 1e3  # per learner: the master's penalty for leaving one uncovered [s]


@dataclass
class Columns:
    """The subproblem answers seen so far: task, learners (bool n), level, price of shards."""

    task: list[int] = field(default_factory=list)
    cover: list[np.ndarray] = field(default_factory=list)
    level: list[float] = field(default_factory=list)
    cost: list[float] = field(default_factory=list)
    seen: set[tuple[int, bytes, float]] = field(default_factory=set)

    def add(self, lag: Lagrangian, cover: np.ndarray, rows: np.ndarray, spent: np.ndarray
            ) -> None:
        for i in range(cover.shape[0]):
            self._append(i, cover[i].copy(), float(lag.tasks[i].levels[rows[i]]),
                         float(spent[i]))

    def _append(self, i: int, cover: np.ndarray, level: float, cost: float) -> None:
        """Task i's column, unless one with these learners and level is here already."""
        key = (i, np.packbits(cover).tobytes(), level)
        if key in self.seen:
            return
        self.seen.add(key)
        self.task.append(i)
        self.cover.append(cover)
        self.level.append(level)
        self.cost.append(cost)

    def __len__(self) -> int:
        return len(self.task)

    def consistent(self, node: Node) -> Columns:
        """The columns a node's subproblems can still answer: task i's column holds every
        learner fixed to i and none fixed elsewhere or barred from i (a copy; a child's
        bundle method starts from its parent's model of the dual function)."""
        out = Columns()
        forced = node.fixed[None, :] == np.arange(node.barred.shape[0])[:, None]
        allowed = ~node.barred & ((node.fixed < 0)[None, :] | forced)
        for i, cover, level, cost in zip(self.task, self.cover, self.level, self.cost,
                                         strict=True):
            lo, hi = node.level_window(i)
            if (np.any(cover & ~allowed[i]) or np.any(forced[i] & ~cover)
                    or not lo < level <= hi):
                continue
            out.task.append(i)
            out.cover.append(cover)
            out.level.append(level)
            out.cost.append(cost)
        out.seen = set(self.seen)
        return out

    def merge(self, other: Columns) -> None:
        """Add the columns of ``other`` not seen here."""
        for column in zip(other.task, other.cover, other.level, other.cost, strict=True):
            self._append(*column)

    def triplets(self, first_row: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(column index, learner, 1.0) for every learner of every column."""
        cols, learners = np.nonzero(np.array(self.cover))
        return cols + first_row, learners, np.ones(cols.size)


class _BoxModel:
    """The model's LP kept in one HiGHS instance across the steps of an ascent: new columns
    are added as rows, the box moves by changing the bounds of mu and lam, and each solve
    starts from the previous basis (a few pivots instead of a solve from scratch)."""

    def __init__(self, lag: Lagrangian) -> None:
        self.lag, self.rows = lag, 0
        m, n = lag.m, lag.n
        self.lp = IncrementalLp(np.concatenate([-np.ones(m), np.ones(n), [lag.inst.budget]]))

    def sync(self, cols: Columns) -> None:
        """Rows for the columns added since the last call: z_task - mu . a_p - c_p lam <= H_p."""
        new = range(self.rows, len(cols))
        if not new:
            return
        m, n = self.lag.m, self.lag.n
        starts: list[int] = []
        index: list[int] = []
        value: list[float] = []
        for p in new:
            starts.append(len(index))
            members = np.nonzero(cols.cover[p])[0]
            index += [cols.task[p], *(m + members).tolist(), m + n]
            value += [1.0, *([-1.0] * members.size), -cols.cost[p]]
        self.lp.add_rows(np.full(len(new), -np.inf), np.array(cols.level[self.rows:]),
                         np.array(starts), np.array(index), np.array(value))
        self.rows = len(cols)

    def maximise(self, cols: Columns, mu: np.ndarray, lam: float, box: float
                 ) -> tuple[np.ndarray, float, float] | TerminationCondition:
        """The model's maximiser over the box around (mu, lam) and its value; when HiGHS gives
        no optimal point, why it stopped instead (a time limit, infeasible, unbounded, an
        error...)."""
        lag = self.lag
        m, n = lag.m, lag.n
        self.sync(cols)
        lo = np.concatenate([mu - box, [max(0.0, lam - box)]])
        hi = np.concatenate([mu + box, [lam + box]])
        if lag.inst.min_shards == 0:  # "at most one task": mu_j >= 0
            lo[:n] = np.maximum(lo[:n], 0.0)
        if not lag.binds:
            lo[-1] = hi[-1] = 0.0
        self.lp.set_col_bounds(np.arange(m, m + n + 1), lo, hi)
        got = self.lp.minimise()
        if not got.is_optimal or got.objective is None:
            return got.termination
        return got.x[m:m + n], float(got.x[-1]), -got.objective


@dataclass(frozen=True)
class Ascent:
    """What one box-step ascent (:func:`ascend`) reached.

    Attributes
    ----------
    bound : float
        The best value of L found [s] (inf: the node cannot beat the incumbent).
    cover : (m, n) bool array
        The subproblems' cover at the best multipliers.
    steps : int
        Evaluations of L after the first.
    columns : int
        Columns in the pool when it ended.
    converged : bool
        It ended with the certificate (the model's maximum equals the best value).
    lp_stop : TerminationCondition or None
        Why the box LP gave no optimal point, when that ended the ascent (a time limit,
        infeasible, unbounded, an error...); None otherwise.
    """

    bound: float
    cover: np.ndarray
    steps: int = 0
    columns: int = 0
    converged: bool = False
    lp_stop: TerminationCondition | None = None

    @property
    def counted(self) -> bool:
        """Whether its counters mean anything: an ascent that met an infinite L (the node is
        cut) stops at once and reports none."""
        return math.isfinite(self.bound)


def _evaluate(lag: Lagrangian, node: Node, mu: np.ndarray, lam: float, cutoff: float,
              cols: Columns) -> tuple[float, np.ndarray]:
    """L(mu, lam) and the cover, storing the tasks' minimisers as columns."""
    low, rows, forced, allowed = lag.task_mins(node, mu, lam, cutoff)
    cover = np.zeros((lag.m, lag.n), dtype=bool)
    if not np.all(np.isfinite(low)):
        return math.inf, cover
    spent = np.zeros(lag.m)
    for i, t in enumerate(lag.tasks):
        cover[i], spent[i] = lag._choose(t, int(rows[i]), mu, lam, forced[i], allowed[i])
    cols.add(lag, cover, rows, spent)
    return float(low.sum()) - float(mu.sum()) - lam * lag.inst.budget, cover


def ascend(lag: Lagrangian, node: Node, upper: float, iters: int, deadline: float,
           cols: Columns) -> Ascent:
    """Box-step ascent from the node's multipliers (a subgradient warm start is expected in
    them); updates node.mu / node.lam to the best point. Returns the best bound, the
    subproblems' cover there and what the ascent did (:class:`Ascent`).

    Stops at ``iters`` evaluations, at ``deadline``, when the bound reaches ``upper`` (it
    proves the incumbent), when the model's maximum is within 1e-7 of the best (the dual
    optimum is reached), or when the box LP has no optimal point (``Ascent.lp_stop`` says why:
    the bound found so far stands, as every bound is an evaluation of L)."""
    mu, lam = node.mu.copy(), node.lam
    best, best_cover = _evaluate(lag, node, mu, lam, upper, cols)
    if not math.isfinite(best):
        return Ascent(best, best_cover)
    box = FIRST_BOX * max(1e-3, float(np.abs(mu).max()), lam)
    lp = _BoxModel(lag)
    done = 0
    converged = False
    lp_stop: TerminationCondition | None = None
    for _ in range(iters):
        if time.perf_counter() > deadline or best >= upper - REL_GAP * max(1.0, abs(upper)):
            break
        got = lp.maximise(cols, mu, lam, box)
        if isinstance(got, TerminationCondition):
            lp_stop = got
            break
        new_mu, new_lam, model = got
        if model - best <= 1e-7 * max(1.0, abs(best)):
            converged = True
            break
        val, cover = _evaluate(lag, node, new_mu, new_lam, upper, cols)
        done += 1
        if not math.isfinite(val):
            return Ascent(val, cover)
        if val > best + 1e-4 * (model - best):
            if val - best >= GOOD * (model - best):
                box *= GROW
            best, best_cover, mu, lam = val, cover, new_mu, new_lam
        else:
            box *= SHRINK
            if box < 1e-9:
                break
    node.mu, node.lam = mu.copy(), lam
    return Ascent(best, best_cover, done, len(cols), converged, lp_stop)


@dataclass
class Master:
    """The restricted master's answer: each task's share of each learner (m, n), and per
    task the weights and levels of the columns it combines."""

    score: np.ndarray
    mix: list[tuple[np.ndarray, np.ndarray]]


def master(lag: Lagrangian, cols: Columns, time_limit: float | None = None
           ) -> Master | None:
    """The restricted master LP over the columns (each task one convex combination of its
    columns; each learner covered once, a penalised slack otherwise; the budget). None when
    HiGHS gives no point."""
    m, n, P = lag.m, lag.n, len(cols)
    if P == 0:
        return None
    cost = np.concatenate([np.array(cols.level), np.full(n, UNCOVERED)])
    c_idx, learners, ones = cols.triplets()
    rows = np.concatenate([np.array(cols.task), m + learners, np.full(P, m + n),
                           m + np.arange(n)])
    vars_ = np.concatenate([np.arange(P), c_idx, np.arange(P), P + np.arange(n)])
    vals = np.concatenate([np.ones(P), ones, np.array(cols.cost), np.ones(n)])
    learner_lo = np.zeros(n) if lag.inst.min_shards == 0 else np.ones(n)
    row_lo = np.concatenate([np.ones(m), learner_lo, [-np.inf]])
    row_hi = np.concatenate([np.ones(m), np.ones(n), [lag.inst.budget if lag.binds else np.inf]])
    res = solve_arrays(cost, rows, vars_, vals, (row_lo, row_hi),
                       (np.zeros(P + n), np.ones(P + n)), np.zeros(P + n, dtype=bool),
                       time_limit=time_limit)
    if res.objective is None or res.x.size != P + n:
        return None
    x = res.x[:P]
    score = np.zeros((m, n))
    for p in np.nonzero(x > 1e-9)[0]:
        score[cols.task[p], cols.cover[p]] += x[p]
    task, level = np.array(cols.task), np.array(cols.level)
    mix = [(x[(task == i) & (x > 1e-9)], level[(task == i) & (x > 1e-9)]) for i in range(m)]
    return Master(score, mix)


def round_scores(lag: Lagrangian, score: np.ndarray) -> np.ndarray:
    """Each learner to the task whose columns cover it most in the master's answer
    (uncovered: its fastest allowed task, or unused when D_l = 0)."""
    coef = lag.coef
    assign = np.argmax(score, axis=0).astype(np.int64)
    for j in np.nonzero(score.max(axis=0) <= 1e-9)[0]:
        if lag.inst.min_shards == 0:
            assign[j] = -1
            continue
        ok = np.nonzero(coef.allowed[:, j])[0]
        assign[j] = int(ok[np.argmin(coef.C[ok, j])]) if ok.size else 0
    return assign


def rounded_assignment(lag: Lagrangian, cols: Columns, time_limit: float | None = None
                       ) -> np.ndarray | None:
    """The restricted master LP over the columns (``master``), rounded (``round_scores``).
    None when HiGHS gives no point."""
    got = master(lag, cols, time_limit)
    return None if got is None else round_scores(lag, got.score)
