"""Who plans a live round: the server, from measured speeds, or the learners themselves.

A :class:`~mel_opt.live.rounds.LiveRun` picks its planner once, from its problem's learner side
(:attr:`~mel_opt.problems.learning.LearnerSide.plans_own_work`), and asks it, and only it,
everything that differs between the two ways:

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
from typing import TYPE_CHECKING, Any

import numpy as np

from mel_opt import api
from mel_opt.errors import UsageError
from mel_opt.problems.learning import (
    Adaptation,
    CyclePlan,
    LearnerPlan,
    LearningCycle,
    RunContext,
    sample_bytes,
)
from mel_opt.problems.messages import ProbeReport, TrainReport
from mel_opt.training.partition import proportional_sizes

if TYPE_CHECKING:
    from mel_opt.live.rounds import LiveRun, RoundPlan
    from mel_opt.result import Result

__all__ = ["Draft", "LearnersPlan", "Planner", "ServerPlans", "planner_for"]

#: A round's compute time beyond this is not believed (a day) [s].
MAX_ROUND_S = 86_400.0


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
    def known(self, run: LiveRun) -> set[int]:
        """Learners this planner can plan for (before the missing are left out)."""

    @abc.abstractmethod
    def probed(self, run: LiveRun, report: ProbeReport) -> str:
        """Take a learner's probe; why its measurement was refused ('' when taken)."""

    @abc.abstractmethod
    def plan(self, run: LiveRun, r: int, active: np.ndarray) -> Draft:
        """Round ``r`` for the ``active`` learners."""

    @abc.abstractmethod
    def learner_plans(self, run: LiveRun, plan: RoundPlan,
                      got: Mapping[int, TrainReport]) -> dict[int, LearnerPlan]:
        """Each learner's plan for the round (the server's, or the one it reported)."""

    @abc.abstractmethod
    def measured(self, run: LiveRun, report: TrainReport, r: int) -> str:
        """Judge (and take) a report's measured time; why it is not believed ('' when it
        is)."""


class ServerPlans(Planner):
    """The server solves every round from its estimates of the learners' speeds."""

    def known(self, run: LiveRun) -> set[int]:
        return set(run.estimates.known.tolist())

    def probed(self, run: LiveRun, report: ProbeReport) -> str:
        return run.measure(report.learner, report.compute_s, report.work, 0)

    def plan(self, run: LiveRun, r: int, active: np.ndarray) -> Draft:
        start = time.perf_counter()
        s = run.settings
        inst, res, adapted = self._solve(run, r, active)
        solve_s = time.perf_counter() - start
        shares = run.cycle.live_shares(inst, run.method, res.solution, int(active.size),
                                       run.N)
        # an adaptation that gives the learners less data gives them that part of the set
        used = run.N if adapted is None else max(int(active.size),
                                                 round(run.N * adapted.data_fraction))
        sizes = proportional_sizes(shares, used)
        ctx = RunContext(run.method, res.solution, s.seed, sizes, {"batch_size": s.batch_size},
                         sample_bytes=sample_bytes(run.data.features))
        local = run.cycle.configure_cycle(inst, ctx, r)
        # the round's instance numbers its learners 0..n-1: back to the learners of the file
        plans = tuple(dataclasses.replace(p, learner=int(active[p.learner]))
                      for p in local.learners)
        cycle = dataclasses.replace(local, learners=plans)
        return Draft(cycle, [p.learner for p in plans], allocation=dict(res.solution),
                     method=run.method, solve_s=solve_s,
                     last=bool(res.metrics.get("last_round", False)), adapted=adapted)

    @staticmethod
    def _solve(run: LiveRun, r: int, active: np.ndarray
               ) -> tuple[Any, Result, Adaptation | None]:
        """The round's instance, its verified solution and the adaptation made (None: the
        file's job fits the ``active`` learners at their measured speeds).

        Raises
        ------
        UsageError
            No verified allocation, and none after the problem's adaptation (or it has none).
        """
        s = run.settings
        inst = run.cycle.live_instance(run.planned, active, run.estimates.seconds, run.N)
        res = api.solve(inst, run.method, time_limit=s.time_limit, seed=s.seed)
        if res.ok:
            return inst, res, None
        why = (f"round {r}: {run.method} gave no verified allocation for the measured "
               f"learners ({res.status.value}: {res.message})")
        adapted = None if s.adapt == "none" else run.cycle.live_adapt(inst, s.adapt)
        if adapted is None:
            raise UsageError(why + ("" if s.adapt == "none" else
                                    f" (no adaptation of {run.spec.name} helps: adapt = "
                                    f"{s.adapt})"))
        again = api.solve(adapted.instance, run.method, time_limit=s.time_limit, seed=s.seed)
        if not again.ok:
            raise UsageError(f"{why}, nor after adapting ({adapted.text}: "
                             f"{again.status.value}: {again.message})")
        return adapted.instance, again, adapted

    def learner_plans(self, run: LiveRun, plan: RoundPlan,
                      got: Mapping[int, TrainReport]) -> dict[int, LearnerPlan]:
        return {p.learner: p for p in plan.cycle.learners}

    def measured(self, run: LiveRun, report: TrainReport, r: int) -> str:
        return run.measure(report.learner, report.compute_s, report.work, r)


class LearnersPlan(Planner):
    """Every learner plans its own work from a brief; the server learns no speed."""

    def known(self, run: LiveRun) -> set[int]:
        return set(range(run.K))

    def probed(self, run: LiveRun, report: ProbeReport) -> str:
        return ""  # its speed stays its own

    def plan(self, run: LiveRun, r: int, active: np.ndarray) -> Draft:
        rules, briefs = run.cycle.briefs(run.planned, active, run.N,
                                         sample_bytes(run.data.features))
        return Draft(rules, [int(k) for k in active], dict(briefs), method="decentralised")

    def learner_plans(self, run: LiveRun, plan: RoundPlan,
                      got: Mapping[int, TrainReport]) -> dict[int, LearnerPlan]:
        # the plans claimed before the round (data shipped), else those reported with it
        return {**plan.claims,
                **{k: report.plan for k, report in got.items() if report.plan is not None}}

    def measured(self, run: LiveRun, report: TrainReport, r: int) -> str:
        # called for a learner that trained (one that halted reports no time): no training
        # takes no time, and none takes longer than a day
        value = report.compute_s
        if not math.isfinite(value) or not 0.0 < value <= MAX_ROUND_S:
            return f"compute_s must lie in (0, {MAX_ROUND_S:g}] s, got {value!r}"
        return ""


def planner_for(cycle: LearningCycle) -> Planner:
    """The planner of a live run of ``cycle``: chosen once, by its learner side."""
    return LearnersPlan() if cycle.learner_side.plans_own_work else ServerPlans()
