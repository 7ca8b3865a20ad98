"""Who plans a live round: the server, from measured speeds, or the learners themselves.

A :class:`~mel_opt.live.rounds.LiveRun` picks its planner once, from its problem's learner side
(:attr:`~mel_opt.problems.learning.LearnerSide.plans_own_work`), and asks it, and only it,
everything that differs between the two ways. A planner reads what it needs of the run (a
:class:`PlanView`) and returns decisions (a :class:`Draft`, the learners' plans, what a
report's measurement means); the run applies them:

- :class:`ServerPlans` (mel-async, feel, med, adaptive-tau): the server keeps every learner's
  speed estimate (from the probe and every report), solves the round's instance with the run's
  method from those estimates (``LearningCycle.live_instance``, then :func:`mel_opt.api.solve`,
  so the allocation is verified) and sends each learner its plan; when the file's job no longer
  fits the learners it has (one was lost), the problem's cycle says what they do instead
  (``LearningCycle.live_adapt``, by the run's ``adapt`` setting) and that is solved;
- :class:`LearnersPlan` (dab, thesis Algorithm 10): the server sends each learner a brief
  (``LearningCycle.briefs``), each decides its own work from its own benchmark and reports the
  plan it made; the server never learns a speed.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt import api
from mel_opt.errors import UsageError
from mel_opt.live.estimates import Measurement
from mel_opt.live.settings import LiveSettings
from mel_opt.problems.learning import (
    Adaptation,
    CyclePlan,
    LearnerPlan,
    LearningCycle,
    RunContext,
)
from mel_opt.problems.messages import ProbeReport, TrainReport
from mel_opt.result import Result
from mel_opt.training.partition import proportional_sizes

__all__ = ["Draft", "LearnersPlan", "PlanView", "Planner", "ServerPlans", "planner_for"]

#: A round's compute time beyond this is not believed (a day) [s].
MAX_ROUND_S = 86_400.0


@dataclass(frozen=True)
class PlanView:
    """What a planner reads of the run when it plans a round.

    Attributes
    ----------
    cycle : LearningCycle
    problem, method : str
    instance : instance
        The instance the rounds are planned from (the file's, as the problem's feedback left
        it, its transfers as measured where the run measures them).
    seconds : ndarray
        Each learner's estimated seconds per sample-pass (NaN: unknown; read-only).
    dataset_size : int
        Training samples of the data set.
    sample_bytes : float
        Bytes of one sample as the papers store it.
    settings : LiveSettings
    """

    cycle: LearningCycle
    problem: str
    method: str
    instance: Any
    seconds: np.ndarray
    dataset_size: int
    sample_bytes: float
    settings: LiveSettings


@dataclass
class Draft:
    """A planned round before its orders are written.

    Attributes
    ----------
    cycle : CyclePlan
        The cycle's rules, and the learners' plans where the server made them.
    learners : list of int
        The learners that get an order.
    briefs : dict of int to Mapping
        What each learner that plans its own work is told.
    allocation : dict
    method : str
    solve_s : float
    last : bool
    adapted : Adaptation or None
        What the problem changed in the file's job for these learners (None: nothing).
    """

    cycle: CyclePlan
    learners: list[int]
    briefs: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    allocation: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    solve_s: float = 0.0
    last: bool = False
    adapted: Adaptation | None = None


class Planner(abc.ABC):
    """How the rounds of a live run are planned and its measurements taken."""

    @abc.abstractmethod
    def known(self, seconds: np.ndarray) -> set[int]:
        """Learners this planner can plan for (before the missing are left out), given each
        learner's estimated speed (NaN: unknown)."""

    @abc.abstractmethod
    def probed(self, report: ProbeReport) -> Measurement | str:
        """What a learner's probe means: a measurement for its speed estimate, or why it is
        refused ('' : nothing to take)."""

    @abc.abstractmethod
    def plan(self, view: PlanView, r: int, active: np.ndarray) -> Draft:
        """Round ``r`` for the ``active`` learners."""

    @abc.abstractmethod
    def learner_plans(self, cycle: CyclePlan, claims: Mapping[int, LearnerPlan],
                      got: Mapping[int, TrainReport]) -> dict[int, LearnerPlan]:
        """Each learner's plan for the round (the server's in ``cycle``, or the one it claimed
        or reported)."""

    @abc.abstractmethod
    def measured(self, report: TrainReport) -> Measurement | str:
        """What a report's measured time means: a measurement for the learner's speed
        estimate, or why it is not believed ('' : believed, nothing to take)."""


class ServerPlans(Planner):
    """The server solves every round from its estimates of the learners' speeds."""

    def known(self, seconds: np.ndarray) -> set[int]:
        return set(np.flatnonzero(np.isfinite(seconds)).tolist())

    def probed(self, report: ProbeReport) -> Measurement | str:
        return Measurement.of(report.learner, report.compute_s, report.work)

    def plan(self, view: PlanView, r: int, active: np.ndarray) -> Draft:
        start = time.perf_counter()
        s = view.settings
        inst, res, adapted = self._solve(view, r, active)
        solve_s = time.perf_counter() - start
        N = view.dataset_size
        shares = view.cycle.live_shares(inst, view.method, res.solution, int(active.size), N)
        # an adaptation that gives the learners less data gives them that part of the set
        used = N if adapted is None else max(int(active.size), round(N * adapted.data_fraction))
        sizes = proportional_sizes(shares, used)
        ctx = RunContext(view.method, res.solution, s.seed, sizes,
                         {"batch_size": s.batch_size}, sample_bytes=view.sample_bytes)
        local = view.cycle.configure_cycle(inst, ctx, r)
        # the round's instance numbers its learners 0..n-1: back to the learners of the file
        plans = tuple(dataclasses.replace(p, learner=int(active[p.learner]))
                      for p in local.learners)
        cycle = dataclasses.replace(local, learners=plans)
        return Draft(cycle, [p.learner for p in plans], allocation=dict(res.solution),
                     method=view.method, solve_s=solve_s,
                     last=bool(res.metrics.get("last_round", False)), adapted=adapted)

    @staticmethod
    def _solve(view: PlanView, r: int, active: np.ndarray
               ) -> tuple[Any, Result, Adaptation | None]:
        """The round's instance, its verified solution and the adaptation made (None: the
        file's job fits the ``active`` learners at their measured speeds).

        Raises
        ------
        UsageError
            No verified allocation, and none after the problem's adaptation (or it has none).
        """
        s = view.settings
        inst = view.cycle.live_instance(view.instance, active, view.seconds,
                                        view.dataset_size)
        res = api.solve(inst, view.method, time_limit=s.time_limit, seed=s.seed)
        if res.ok:
            return inst, res, None
        why = (f"round {r}: {view.method} gave no verified allocation for the measured "
               f"learners ({res.status.value}: {res.message})")
        adapted = None if s.adapt == "none" else view.cycle.live_adapt(inst, s.adapt)
        if adapted is None:
            raise UsageError(why + ("" if s.adapt == "none" else
                                    f" (no adaptation of {view.problem} helps: adapt = "
                                    f"{s.adapt})"))
        again = api.solve(adapted.instance, view.method, time_limit=s.time_limit, seed=s.seed)
        if not again.ok:
            raise UsageError(f"{why}, nor after adapting ({adapted.text}: "
                             f"{again.status.value}: {again.message})")
        return adapted.instance, again, adapted

    def learner_plans(self, cycle: CyclePlan, claims: Mapping[int, LearnerPlan],
                      got: Mapping[int, TrainReport]) -> dict[int, LearnerPlan]:
        return {p.learner: p for p in cycle.learners}

    def measured(self, report: TrainReport) -> Measurement | str:
        return Measurement.of(report.learner, report.compute_s, report.work)


class LearnersPlan(Planner):
    """Every learner plans its own work from a brief; the server learns no speed."""

    def __init__(self, K: int) -> None:
        self.K = K

    def known(self, seconds: np.ndarray) -> set[int]:
        return set(range(self.K))

    def probed(self, report: ProbeReport) -> Measurement | str:
        return ""  # its speed stays its own

    def plan(self, view: PlanView, r: int, active: np.ndarray) -> Draft:
        rules, briefs = view.cycle.briefs(view.instance, active, view.dataset_size,
                                          view.sample_bytes)
        return Draft(rules, [int(k) for k in active], dict(briefs), method="decentralised")

    def learner_plans(self, cycle: CyclePlan, claims: Mapping[int, LearnerPlan],
                      got: Mapping[int, TrainReport]) -> dict[int, LearnerPlan]:
        # the plans claimed before the round (data shipped), else those reported with it
        return {**claims,
                **{k: report.plan for k, report in got.items() if report.plan is not None}}

    def measured(self, report: TrainReport) -> Measurement | str:
        # called for a learner that trained (one that halted reports no time): no training
        # takes no time, and none takes longer than a day
        value = report.compute_s
        if not math.isfinite(value) or not 0.0 < value <= MAX_ROUND_S:
            return f"compute_s must lie in (0, {MAX_ROUND_S:g}] s, got {value!r}"
        return ""


def planner_for(cycle: LearningCycle, K: int) -> Planner:
    """The planner of a live run of ``cycle`` with ``K`` learners: chosen once, by its learner
    side."""
    return LearnersPlan(K) if cycle.learner_side.plans_own_work else ServerPlans()
