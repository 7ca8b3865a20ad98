"""A problem that exists only for a test: it plugs into mel_opt from outside the package.

``toy-fit``: K learners, learner k needs ``seconds_per_sample[k]`` seconds per training sample;
each gets d_k samples (one pass) so that it is busy at most ``cycle_time_s``. Method ``fit``
gives each the most that fits, d_k = floor(T / s_k) (optimal for the sum: the learners are
independent); ``equal`` gives every learner the slowest one's amount. Its learners do one thing
beyond training (:class:`ToyLearner`): they report the loss of the model they received, and the
server records the mean of those losses each round (:meth:`ToyCycle.live_feedback`), which the
live figure draws (``plotted``). Each plan reports a column of the toy's own, ``spare_s``
(T - s_k d_k: the learner's idle time in the cycle). Its learning cycle declares a work clock
(an equal share of the slowest learner's samples, one pass each), so every scheme of the
registry runs on it in the arena and live.

Registered through the entry-point group ``mel_opt.problems`` by the test, never by mel_opt:
the test shows that ``melopt train`` and ``melopt live`` take a new problem with no edit
outside its own package.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.errors import InstanceError, Issue
from mel_opt.problems.base import Checked, Instance, MethodOutput, MethodSpec, ProblemSpec
from mel_opt.problems.learning import (
    CyclePlan,
    Extras,
    Feedback,
    LearnerPlan,
    LearnerSide,
    LearningCycle,
    LiveReport,
    RunContext,
    WorkClock,
)
from mel_opt.result import SolverInfo, Verification
from mel_opt.status import TerminationCondition

NAME = "toy-fit"


@dataclass(frozen=True)
class ToyInstance(Instance):
    problem = NAME
    seconds: tuple[float, ...] = ()
    cycle_time: float = 1.0

    @property
    def K(self) -> int:
        return len(self.seconds)

    @property
    def learner_names(self) -> tuple[str, ...]:
        return tuple(f"toy{k}" for k in range(self.K))


def parse(doc: Mapping[str, Any], source: str | None = None) -> ToyInstance:
    seconds = doc.get("seconds_per_sample")
    T = doc.get("cycle_time_s")
    if not isinstance(seconds, list) or not seconds or not all(
            isinstance(s, (int, float)) and s > 0 for s in seconds):
        raise InstanceError(Issue("seconds_per_sample", "must be a list of positive numbers"),
                            source)
    if not isinstance(T, (int, float)) or not T > 0:
        raise InstanceError(Issue("cycle_time_s", "must be a positive number"), source)
    return ToyInstance(name=str(doc.get("name", "toy")), seconds=tuple(map(float, seconds)),
                       cycle_time=float(T))


def _most(inst: ToyInstance) -> list[int]:
    return [math.floor(inst.cycle_time / s * (1 + 1e-12)) for s in inst.seconds]


def solve_fit(inst: ToyInstance, opts: Any) -> MethodOutput:
    d = _most(inst)
    if min(d) < 1:
        return MethodOutput.nothing(TerminationCondition.INFEASIBLE, SolverInfo("fit"),
                                    message="a learner cannot take one sample")
    return MethodOutput.optimal({"d": d}, SolverInfo("fit"))


def solve_equal(inst: ToyInstance, opts: Any) -> MethodOutput:
    return MethodOutput.feasible({"d": [min(_most(inst))] * inst.K}, SolverInfo("equal"))


def verify(inst: ToyInstance, solution: Mapping[str, Any]) -> Checked:
    d = [int(v) for v in solution["d"]]
    over = max(max(0.0, s * dk - inst.cycle_time) / inst.cycle_time
               for s, dk in zip(inst.seconds, d, strict=True))
    short = max(0, 1 - min(d))
    feasible = over <= 1e-9 and short == 0
    return Checked(Verification(feasible, max(over, float(short)),
                                {"time": over, "at_least_one": float(short)}),
                   {"samples": sum(d)}, float(sum(d)))


class ToyLearner(LearnerSide):
    """A toy learner reports the loss of the model it received, before training."""

    def before_training(self, order: Any, local: Any, memory: Any) -> Extras:
        loss, _ = local.loss_and_gradient(order.model, 256)
        return Extras({"start_loss": loss})


class ToyCycle(LearningCycle):
    learner_side = ToyLearner()
    plotted = {"start_loss": "loss before training"}
    columns = ("d", "spare_s")
    # live, no learner is judged late: the test's rounds run on a machine that may be busy
    has_deadline = False

    def configure_cycle(self, inst: ToyInstance, ctx: RunContext, cycle: int) -> CyclePlan:
        d = ctx.solution["d"]
        plans = tuple(LearnerPlan(k, samples=int(d[k]), passes=1, weight=float(d[k]),
                                  predicted_s=inst.seconds[k] * d[k],
                                  columns={"d": int(d[k]),
                                           "spare_s": inst.cycle_time - inst.seconds[k] * d[k]})
                      for k in range(inst.K))
        return CyclePlan(plans, deadline_s=inst.cycle_time)

    def work_clock(self, inst: ToyInstance) -> WorkClock:
        """An equal share: the samples the slowest learner fits in T, one pass each."""
        share = float(min(_most(inst)))
        per = np.asarray(inst.seconds, dtype=float) * share
        return WorkClock(inst.cycle_time, per, np.zeros(inst.K), 1.0, share=share)

    def live_instance(self, inst: ToyInstance, learners: np.ndarray, seconds: np.ndarray,
                      dataset_size: int) -> ToyInstance:
        idx = [int(k) for k in learners]
        return dataclasses.replace(inst, seconds=tuple(float(seconds[k]) for k in idx))

    def live_feedback(self, inst: ToyInstance, plan: CyclePlan, reports: Sequence[LiveReport],
                      wall_s: float) -> Feedback:
        losses = [r.metrics["start_loss"] for r in reports if "start_loss" in r.metrics]
        return Feedback(inst, record={"start_loss": float(np.mean(losses)) if losses else None,
                                      "reported": len(losses)})


PROBLEM = ProblemSpec(
    name=NAME, summary="a test's own problem", parse=parse, verify=verify,
    methods={"fit": MethodSpec("fit", solve_fit, "most samples that fit", "exact",
                               proves_optimality=True),
             "equal": MethodSpec("equal", solve_equal, "the slowest learner's amount",
                                 "baseline")},
    default_method="fit", sense="max", key_metrics=("samples",), learning=ToyCycle())
