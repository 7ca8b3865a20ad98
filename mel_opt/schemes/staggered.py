"""Staggered arrivals: mel_opt's allocation inside asynchronous training.

The synchronous allocation keeps every learner busy for the whole cycle (its work sized to
its speed, paper 000's Eq. (5): ``t_k = C2_k tau_k d_k + C1_k d_k + C0_k <= T``), but the
server learns once per cycle. FedBuff learns every ``B`` updates, but its learners' work is
fixed whatever their speed, so fast learners send many small updates and slow ones few, stale
ones. ``staggered`` keeps both strengths:

- the *data* of each learner is the allocation's (``d_k`` from the problem's method, as the
  synchronous allocation holds it);
- the fleet is dealt into ``G`` groups, and each learner's *work* is sized, every time it
  starts, by the problem's time model so that it arrives at its group's next *slot*: group
  ``g`` (0-based) arrives at ``(j + (g + 1) / G) P`` for ``j = 0, 1, ...``, where the period
  ``P`` is the problem's budget (T or D) times the ``period`` option. A learner that starts
  at ``t`` takes

      p_k(t) = (s - t - fixed_k) / per_pass_k,   s = the first slot with room for a step,

  passes over its data (the work clock's ``t = fixed_k + p per_pass_k``: transfers plus
  computation), whole minibatch steps as every arena scheme trains them. It starts again at
  once when it returns: no learner is ever idle, and the run-to-run noise of the clock never
  accumulates (each start re-aims at the slot, so a learner late by ``e`` seconds does ``e``
  seconds less work next time);
- the server takes a step for every group: FedBuff's buffered step (one server loop,
  :func:`mel_opt.schemes.fedbuff.run`) with a buffer of one group's size ``B``, so the model
  moves every ``P / G`` seconds instead of every ``P``. An update that arrives on plan joins
  with a staleness of ``G - 1`` steps (every other group stepped once meanwhile), or ``G``
  for a learner back before the rest of its group (it starts again at once, from the model
  before its group's step). Its weight is

      a_k = (d_k / mean d) (1 / G) / sqrt(1 + max(0, s_k - G)),

  and the step ``w <- w + eta (1 / B) sum_k a_k (w_k - w_start,k)``. The data factor is
  FedAvg's ``n_k`` (the allocation's data sizes differ). The ``1 / G``: every update carries a
  whole period's local work, and ``G`` of them land per period, so without it a period would
  move the model ``G`` times as far as a synchronous cycle, each step from a model ``G - 1``
  or ``G`` steps old. Where each update takes its learner all the way to a common optimum (long
  local work), the error follows the delayed iteration ``x_{t+1} = x_t - a x_{t-G+1}``, which
  is stable only for ``a < 2 sin(pi / (2 (2G - 1)))`` (about ``1.6 / G``), and the arena's runs
  diverged that way (FedBuff's ``1 / sqrt(1 + s)`` on the planned staleness gives ``a = 1 /
  sqrt(G)``: too much from ``G = 4`` on; at ``G = 10`` the digits ended at 0.10). With
  ``1 / G`` a period moves the model as far as one synchronous cycle at ``eta = 1``, and the
  server rate ``eta`` (tuned) sets how much faster it may go. Only lateness beyond the plan is
  down-weighted, by FedBuff's staleness function.

In the arena the period, unless given, is chosen by Wang et al.'s bound
(:mod:`mel_opt.schemes.period`) at the start; with ``rechoose`` it is chosen again every that
many budgets from the constants at the global model of the time (:meth:`StaggeredPlan.
stepped`), each new period's slots starting where the current period ends. Live, with
``period_rule`` bound, it is chosen after the probe from the constants each learner
measured there in its own process (:func:`mel_opt.live.learner.probe_constants`), over the
run's ``horizon``, each round trip also costing its learner's measured messaging. When a
learner's speed, measured over a budget of its work, has moved by more than
:data:`~mel_opt.schemes.base.SPEED_MOVE` in two such windows in a row, the live run places
the data again (the allocation at the new speeds), deals the groups again from the new data,
and the period is chosen again from the same constants
(:meth:`StaggeredPlan.placed`: the speeds and data the bound weighs are then no longer those
it chose for).

With ``G = 1`` and the period ``T`` this is the synchronous allocation's cycle on the work
clock (every learner arrives at ``T`` and, at ``eta = 1``, the step is the data-weighted
average, FedAvg's); ``G`` larger trades staleness (``G - 1`` or ``G`` on plan) for ``G`` times
as many server steps at the same work and the same bytes, and a shorter period trades local
work per update for more round trips.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.schemes import period as bound
from mel_opt.schemes.base import GRID_LR, Loop, RoundContext, SchemeSpec
from mel_opt.schemes.fedbuff import (
    ARENA_SERVER_LR,
    LIVE_SERVER_LR,
    PAPER_BUFFER,
    run,
    staleness_weight,
)
from mel_opt.settings import Setting

__all__ = ["DEFAULT_PERIOD", "GROUPS", "HORIZON", "LIVE_PERIOD", "PERIOD", "PERIOD_RULE", "PHI",
           "RECHOOSE", "SPEC", "StaggeredPlan", "deal_groups", "default_groups", "next_slot"]

GROUPS = Setting("groups", int, None, "staggered's groups G: the fleet arrives in G groups, "
                 "offset by a G-th of the period, and the server steps once per group.",
                 minimum=1, nullable=True,
                 default_doc="K / 10: about FedBuff's 10 updates per server step")
#: The live period, in budgets (live runs do not choose it by the bound yet): tuned on the
#: digits at K = 100 (IID and dirichlet:0.1) it chose an eighth; a quarter kept most of that
#: gain in 2-seed probes (0.9 in 49 s against 38 s untuned), at half its bytes (about twice
#: FedBuff's).
DEFAULT_PERIOD = 0.25
PERIOD = Setting("period", float, None, "staggered's period: how long each learner's round "
                 "trip is planned to take, in the problem's budgets (mel-async T, dab D; 1: the "
                 "synchronous allocation's bytes).", minimum=0.0, minimum_open=True,
                 nullable=True, default_doc="chosen by Wang et al.'s convergence bound from the "
                 "time model and constants measured on the learners' data")
LIVE_PERIOD = Setting("period", float, DEFAULT_PERIOD, "staggered's period: how long each "
                      "learner's round trip is planned to take, in the problem's budgets "
                      "(mel-async T, dab D; 1: the synchronous allocation's bytes).",
                      minimum=0.0, minimum_open=True)
PERIOD_RULE = Setting("period_rule", str, "fixed", "How a live run sets staggered's period: "
                      "fixed (--period), or bound (Wang et al.'s bound, from each learner's "
                      "constants measured in the probe at the starting model and its measured "
                      "speed, over --horizon; chosen again when the data is placed again at "
                      "new speeds).", choices=("fixed", "bound"))
HORIZON = Setting("horizon", float, None, "The run time that --period-rule bound plans for, "
                  "in the problem's budgets (the arena's horizon, its cycles; a live "
                  "asynchronous run's --rounds counts server steps, not time).", minimum=0.0,
                  minimum_open=True, nullable=True, default_doc="--rounds budgets")
PHI = Setting("phi", float, bound.DEFAULT_PHI, "The control constant of the bound that chooses "
              "staggered's period (its authors' CNN value).",
              minimum=0.0, minimum_open=True)
RECHOOSE = Setting("rechoose", float, None, "How often the bound's period is chosen again, in "
                   "the problem's budgets: its constants measured anew at the global model "
                   "of that time, as Wang et al. measure them every round (read only when "
                   "--period is unset).", minimum=0.0, minimum_open=True, nullable=True,
                   default_doc="once, at the start")


def default_groups(K: int) -> int:
    """``G`` when a run leaves it unset: groups of about FedBuff's ten updates, at least one
    group (``round(K / 10)``)."""
    return max(1, round(K / PAPER_BUFFER))


def deal_groups(sizes: np.ndarray, groups: int) -> np.ndarray:
    """Each learner's group: the learners with data dealt in turn, largest data first, so
    every group holds about a G-th of the data (ties by learner order); -1 for a learner
    without data (it takes no part).

    >>> deal_groups(np.array([5, 40, 0, 10, 30, 20]), 2).tolist()
    [0, 0, -1, 1, 1, 0]
    """
    n = np.asarray(sizes)
    order = np.argsort(-n, kind="stable")
    order = order[n[order] > 0]
    out = np.full(n.size, -1, dtype=np.int64)
    out[order] = np.arange(order.size) % groups
    return out


def next_slot(now: float, phase: float, period: float, need: float) -> float:
    """The first slot ``(j + phase) period`` (``j = 0, 1, ...``) at or after ``now + need``.

    >>> next_slot(0.0, 0.5, 10.0, 2.0), next_slot(4.0, 0.5, 10.0, 2.0)
    (5.0, 15.0)
    """
    j = max(0, math.ceil((now + need) / period - phase - 1e-9))
    return (j + phase) * period


@dataclass
class StaggeredPlan:
    """The work of every start and the weight of every update (module docstring).

    Attributes
    ----------
    period : float
        ``P``, each learner's planned round trip [s].
    group : ndarray of int
        Each learner's group, 0 .. G-1.
    groups : int
        ``G``.
    per_pass_s, fixed_s : ndarray
        The work clock of each learner for the data it holds: a pass's computation and the
        transfers [s].
    sizes : ndarray
        Samples each learner holds.
    batch : int
        The minibatch: a start has room for at least one step.
    origin : float
        Where the slots' grid starts [s]: 0, until the period is chosen again
        (:meth:`stepped`).
    rechoose_s : float or None
        Every how many seconds the period is chosen again (None: never).
    chooser : callable or None
        ``model -> period``: the bound's period from constants measured at ``model``.
    """

    period: float
    group: np.ndarray
    groups: int
    per_pass_s: np.ndarray
    fixed_s: np.ndarray
    sizes: np.ndarray
    batch: int
    origin: float = 0.0
    rechoose_s: float | None = None
    chooser: Callable[[Any], float] | None = None

    @classmethod
    def of(cls, ctx: RoundContext) -> StaggeredPlan:
        """The plan of an arena run: its options (``groups``, ``period``), clock and data
        sizes."""
        o = ctx.options
        plan = cls.live(o, ctx.clock.budget_s, ctx.clock.per_pass_s, ctx.clock.fixed_s,
                        ctx.sizes, int(o.batch_size))
        if o.period is None:  # chosen by the bound (mel_opt.schemes.period)
            eta, phi, budget = float(o.lr), float(o.phi), float(ctx.clock.budget_s)

            def chooser(model: Any) -> float:
                return plan.chosen_period(ctx.estimates(eta, model), ctx.horizon_s, eta, phi,
                                          budget)

            plan.period = chooser(None)
            if o.rechoose is not None:
                plan.rechoose_s = float(o.rechoose) * budget
                plan.chooser = chooser
        return plan

    def chosen_period(self, est: bound.Estimates, horizon_s: float, eta: float, phi: float,
                      budget_s: float, overhead_s: np.ndarray | None = None) -> float:
        """The period Wang et al.'s bound picks for this plan's learners (their step times
        and transfers, weighted by data) over ``horizon_s`` (:mod:`mel_opt.schemes.period`);
        ``overhead_s``: each learner's further cost of a round trip beyond its transfers (a
        live deployment's measured messaging)."""
        steps = bound.step_seconds(self.per_pass_s, self.sizes, self.batch)
        fixed = self.fixed_s if overhead_s is None else self.fixed_s + np.asarray(overhead_s)
        return bound.choose_period(steps, fixed, self.sizes.astype(float), budget_s,
                                   horizon_s, est, eta, phi)

    @classmethod
    def live(cls, options: Any, budget_s: float, per_pass_s: np.ndarray, fixed_s: np.ndarray,
             sizes: np.ndarray, batch: int, estimates: bound.Estimates | None = None,
             horizon_s: float | None = None,
             overhead_s: np.ndarray | None = None) -> StaggeredPlan:
        """The plan from a run's options (``groups``, ``period``), the problem's budget and
        each learner's time per pass over its data, transfers and data (a live run's, from
        the measured speeds). With the bound's ``estimates`` (measured by a live run's
        learners in the probe) and the run's ``horizon_s``, the period is the bound's
        (:meth:`chosen_period`, at the run's ``lr`` and ``phi``, each round trip also costing
        its learner's ``overhead_s``) instead of ``period``, chosen again from the same
        constants when the data is placed again at new speeds (:meth:`placed`)."""
        sizes = np.asarray(sizes, dtype=np.int64)
        n = max(1, int((sizes > 0).sum()))
        G = min(n, default_groups(n) if options.groups is None else int(options.groups))
        period = DEFAULT_PERIOD if options.period is None else float(options.period)
        plan = cls(period * float(budget_s), deal_groups(sizes, G), G,
                   np.asarray(per_pass_s, dtype=float), np.asarray(fixed_s, dtype=float),
                   sizes, int(batch))
        if estimates is not None:
            if horizon_s is None:
                raise ValueError("the bound's period needs the run's horizon")
            args = (estimates, float(horizon_s), float(options.lr), float(options.phi),
                    float(budget_s), overhead_s)

            def chooser(model: Any) -> float:  # the probe's constants, the speeds of now
                return plan.chosen_period(*args)

            plan.period = chooser(None)
            plan.chooser = chooser
        return plan

    @property
    def nodes(self) -> list[int]:
        """The learners that take part: those the allocation gives data."""
        return [int(k) for k in np.flatnonzero(self.sizes > 0)]

    @property
    def concurrency(self) -> int:
        """Every learner that takes part trains at once."""
        return len(self.nodes)

    @property
    def buffer(self) -> int:
        """A step's updates: one group's (``round(n / G)`` of the ``n`` that take part)."""
        return max(1, round(self.concurrency / self.groups))

    def __post_init__(self) -> None:
        # each learner's fixed cost of a start beyond its transfers (measured live: 0 until
        # then, and on the arena's clock)
        self.start_s = np.zeros(self.group.size)
        self._aimed = np.full(self.group.size, -np.inf)  # each learner's last slot
        held = self.sizes[self.sizes > 0]  # the data of those that take part (until placed)
        self._mean = float(np.mean(held)) if held.size else 1.0
        self._chosen_at = 0.0  # when the period was last chosen

    def stepped(self, model: Any, now: float) -> None:
        """After a server step at ``now``: once ``rechoose_s`` has passed since the period
        was last chosen, choose it again from constants measured at ``model``. A new period
        starts a new grid of slots where the current period ends (the first multiple of the
        old period, from the old origin, at or after every slot a learner is aiming at), so
        no learner in flight misses its slot; each learner's next start aims at its group's
        first slot on the new grid, and fills the time to it with work."""
        if self.chooser is None or self.rechoose_s is None or \
                now < self._chosen_at + self.rechoose_s:
            return
        self._chosen_at = now
        self._switch(float(self.chooser(model)), now)

    def _switch(self, new: float, now: float) -> None:
        """The period ``new`` from ``now`` on: its grid of slots starts where the current
        period ends (:meth:`stepped`)."""
        if not (math.isfinite(new) and new > 0) or new == self.period:
            return
        aimed = self._aimed[np.isfinite(self._aimed)]
        latest = max(now, float(aimed.max())) if aimed.size else now
        ends = math.ceil((latest - self.origin) / self.period - 1e-9)
        self.origin += max(0, ends) * self.period
        self.period = new

    def row(self) -> dict[str, float]:
        """The period in force, reported in each row of the arena (``period_s``)."""
        return {"period_s": float(self.period)}

    def arrival(self, node: int, now: float) -> float:
        """When ``node``, starting at ``now``, is planned back: its group's first slot after
        the one it last aimed at (one round trip per period: a learner back early does more
        work the next time, not a trip of its own) with room for its transfers, its start's
        fixed cost and one minibatch step (or its whole data, if smaller)."""
        k = int(node)
        n = max(int(self.sizes[k]), 1)
        need = self.fixed_s[k] + self.start_s[k] + self.per_pass_s[k] * min(1.0, self.batch / n)
        after = max(now + need, self._aimed[k] + self.period * 1e-6)
        return self.origin + next_slot(0.0, (int(self.group[k]) + 1) / self.groups, self.period,
                                       after - self.origin)

    def passes(self, node: int, now: float) -> float:
        """The passes ``node`` does from ``now``: what fills the time to its slot (which it
        then aims at)."""
        k = int(node)
        if self.sizes[k] <= 0 or self.per_pass_s[k] <= 0:
            return 0.0
        slot = self.arrival(k, now)
        self._aimed[k] = slot
        return max(0.0, (slot - now - self.fixed_s[k] - self.start_s[k]) / self.per_pass_s[k])

    def measured(self, node: int, per_pass_s: float, start_s: float = 0.0) -> None:
        """``node``'s pass over its data takes ``per_pass_s`` and each of its starts
        ``start_s`` more (a live run's measurements): its next starts are sized by them."""
        if math.isfinite(per_pass_s) and per_pass_s > 0:
            self.per_pass_s[int(node)] = float(per_pass_s)
        if math.isfinite(start_s) and start_s >= 0:
            self.start_s[int(node)] = float(start_s)

    def placed(self, sizes: np.ndarray, seconds: np.ndarray, now: float) -> dict[str, list[int]]:
        """The learners' data placed again at ``now`` (a live run's allocation at the
        speeds it measured, ``seconds`` per sample-pass; NaN: unchanged): each one's pass
        costs its speed times its new data, the weights follow the new data, and a period
        chosen by the bound is chosen again (the same constants, the new speeds and data),
        its slots starting where the current period ends. The groups are dealt again from
        the new data (:func:`deal_groups`, as at the start), so that each still holds about
        a G-th of it: a learner in flight keeps the slot it aims at, and its next start aims
        at its new group's first slot after that one. The learners that take part stay the
        same: one the allocation now gives nothing keeps a single sample. Returns the new
        groups (``{"group": [...]}``, -1 for a learner that takes no part)."""
        take = self.sizes > 0
        new = np.where(take, np.maximum(np.asarray(sizes, dtype=np.int64), 1), 0)
        speed = self.per_pass_s / np.maximum(self.sizes, 1)
        given = np.asarray(seconds, dtype=float)
        speed = np.where(np.isfinite(given) & (given > 0), given, speed)
        self.per_pass_s = speed * np.maximum(new, 1)
        self.sizes = new
        self.group = deal_groups(new, self.groups)
        self._mean = float(np.mean(new[take])) if take.any() else 1.0
        if self.chooser is not None:
            self._chosen_at = now
            self._switch(float(self.chooser(None)), now)
        return {"group": [int(g) for g in self.group]}

    def weight(self, node: int, staleness: int) -> float:
        """An update's weight in the server step: the learner's data over the mean of those
        that take part, over ``G`` (a period of ``G`` steps moves the model as far as one
        synchronous cycle), times FedBuff's staleness weight of the staleness beyond the
        plan's ``G`` (module docstring)."""
        k = int(node)
        late = max(0, int(staleness) - self.groups)
        return float(self.sizes[k]) / self._mean / self.groups * staleness_weight(late)


SPEC = SchemeSpec(
    "staggered", "mel_opt's allocation, asynchronous: the allocation's data, each learner's "
    "work sized to arrive in its group's slot, a server step per group",
    Loop.BUFFERED, options={"arena": (GROUPS, PERIOD, PHI, RECHOOSE, ARENA_SERVER_LR),
                            "live": (GROUPS, LIVE_PERIOD, PERIOD_RULE, HORIZON, PHI,
                                     LIVE_SERVER_LR)},
    needs=("work_clock", "allocation"), engines=("arena", "live"), serve=run,
    plan=StaggeredPlan.of, live_plan=StaggeredPlan.live,
    columns=("staleness",), title="staggered allocation",
    # 4 x 3 x 5 x 2 = 120 points: the client lr as every scheme's; G as groups of about the
    # paper buffer's ten updates (the default rule), of twenty or of five (at K = 100); the
    # period from a sixteenth of the budget to the budget (shorter round trips: less local
    # work per update, more steps; tuned on the digits at K = 100 the grid's shortest, an
    # eighth, won, so the grid reaches one step further); the server lr 1 (the period's
    # movement is the synchronous cycle's) or 2 (past the delayed step's worst-case bound
    # from G = 6 on, which assumes local work that reaches the optimum; 3 diverged at G = 10
    # on the digits).
    grid={"lr": GRID_LR, "groups": (5, None, 20), "period": (0.0625, 0.125, 0.25, 0.5, 1.0),
          "server_lr": (1.0, 2.0)})
