"""The learning-cycle interface: every declared cycle keeps it, and a new problem trains with no
edit outside its own package (here: a problem registered by the test alone)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest

from mel_opt import api
from mel_opt.examples import load_example
from mel_opt.problems import all_problems
from mel_opt.problems.base import Checked, Instance, MethodOutput, MethodSpec, ProblemSpec
from mel_opt.problems.learning import (
    CyclePlan,
    LearnerPlan,
    LearningCycle,
    Reply,
    RunContext,
    weighted_average,
)
from mel_opt.result import SolverInfo, Verification
from mel_opt.training import TrainSettings, load_dataset, train, trainable_problems

TRAINABLE = [p for p, s in all_problems().items() if s.learning is not None]


def test_the_papers_training_problems_declare_a_cycle() -> None:
    assert set(TRAINABLE) == {"mel-async", "dab", "feel", "med", "adaptive-tau"}
    # med (a model per task) and adaptive-tau (gradient statistics) train live only
    assert set(trainable_problems()) == {"mel-async", "dab", "feel"}


@pytest.mark.parametrize("problem", TRAINABLE)
def test_every_cycle_plans_the_default_allocation(problem: str) -> None:
    spec = all_problems()[problem]
    cycle = spec.learning
    assert cycle is not None
    inst = load_example(problem)
    res = api.solve(inst, spec.default_method)
    assert res.ok
    N = 1000
    K = cycle.live_learners(inst, None)
    shares = cycle.live_shares(inst, spec.default_method, res.solution, K, N)
    assert shares.shape == (K,) and np.all(shares > 0)
    sizes = np.maximum(1, np.floor(N * shares / shares.sum())).astype(int)
    ctx = RunContext(spec.default_method, res.solution, 0, sizes)
    for c in (1, 2):
        plan = cycle.configure_cycle(inst, ctx, c)
        ids = plan.learner_ids
        assert ids.size and len(set(ids.tolist())) == ids.size
        assert np.all((ids >= 0) & (ids < K))
        for p in plan.learners:
            assert p.samples >= 1 and p.passes >= 1 and p.weight > 0
            assert 0.0 <= p.comm_s <= p.predicted_s and np.isfinite(p.predicted_s)
        replies = [Reply(int(k), p.predicted_s) for k, p in zip(ids, plan.learners,
                                                                 strict=True)]
        models = [np.arange(ids.size, dtype=float)[:, None] * np.ones((1, 3))]
        agg = cycle.aggregate(plan, replies, models)
        w = plan.column("weight")
        assert agg.model[0] == pytest.approx(np.full(3, (w * np.arange(ids.size)).sum()
                                                     / w.sum()))
        assert agg.duration_s >= max(r.seconds for r in replies) - 1e-12


def test_close_judges_the_deadline() -> None:
    plan = CyclePlan((LearnerPlan(0, 5, 1, 1.0, 8.0), LearnerPlan(1, 5, 1, 3.0, 9.0)),
                     deadline_s=10.0)
    cycle = _ToyCycle()
    assert cycle.close(plan, [Reply(0, 8.0), Reply(1, 12.5)]) == (12.5, 25.0, (1,))
    assert cycle.close(plan, [Reply(0, 8.0), Reply(1, 9.5)]) == (9.5, 0.0, ())
    # learners with deadlines of their own (med's tasks) are each judged by their own
    own = CyclePlan((LearnerPlan(0, 5, 1, 1.0, 4.0, deadline_s=5.0),
                     LearnerPlan(1, 5, 1, 1.0, 9.0, deadline_s=10.0)), deadline_s=10.0)
    assert cycle.close(own, [Reply(0, 6.0), Reply(1, 8.0)]) == (8.0, 20.0, (0,))
    assert cycle.close(own, [Reply(0, 4.5), Reply(1, 11.0)]) == (11.0, 10.0, (1,))
    # a learner that did not answer is simply not aggregated: weights of those that did
    agg = cycle.aggregate(plan, [Reply(1, 9.0)], [np.array([[2.0, 4.0]])])
    assert agg.model[0] == pytest.approx([2.0, 4.0])
    assert weighted_average([np.array([[0.0], [4.0]])], np.array([1.0, 3.0]))[0] == \
        pytest.approx([3.0])


# --- a problem that exists only in this test -------------------------------------------------
TOY = "toy-learning"


@dataclass(frozen=True, eq=False, kw_only=True)
class ToyInstance(Instance):
    problem: ClassVar[str] = TOY
    K: int = 3
    cycle_s: float = 2.5


def _parse(doc: Mapping[str, Any], source: str | None) -> ToyInstance:
    return ToyInstance(name=str(doc.get("name", "toy")))


def _verify(inst: ToyInstance, solution: Mapping[str, Any]) -> Checked:
    passes = np.asarray(solution["passes"])
    ok = passes.shape == (inst.K,) and bool(np.all(passes >= 1))
    return Checked(Verification(ok, 0.0 if ok else 1.0), {}, float(passes.sum()))


def _ones(inst: ToyInstance, opts: Any) -> MethodOutput:
    return MethodOutput.feasible({"passes": [1, 2, 3]}, SolverInfo("toy"))


class _ToyCycle(LearningCycle):
    """Learner k runs passes[k] passes over its local data; the cycle lasts cycle_s."""

    schemes = {"lazy": "every learner one pass"}

    def configure_cycle(self, inst: ToyInstance, ctx: RunContext, cycle: int) -> CyclePlan:
        passes = [1] * inst.K if ctx.solution is None else ctx.solution["passes"]
        plans = tuple(LearnerPlan(k, int(ctx.data_sizes[k]), int(passes[k]), 1.0,
                                  0.1 * passes[k]) for k in range(inst.K))
        return CyclePlan(plans, duration_s=inst.cycle_s)


@pytest.fixture
def toy() -> Iterator[ToyInstance]:
    problems = all_problems()
    problems[TOY] = ProblemSpec(name=TOY, summary="toy", parse=_parse, verify=_verify,
                                methods={"ones": MethodSpec("ones", _ones, "toy", "baseline")},
                                default_method="ones", learning=_ToyCycle())
    yield ToyInstance(name="toy")
    problems.pop(TOY, None)


def test_a_new_problem_trains_through_its_own_cycle(toy: ToyInstance) -> None:
    data = load_dataset("digits", max_train=300, max_test=100)
    run = train(toy, TrainSettings(schemes=("ones", "lazy"), cycles=3, seeds=2,
                                   model="softmax", lr=0.5), data=data)
    assert run.schemes == ["ones", "lazy"] and not run.infeasible
    assert run.allocations["ones"] == {"passes": [1, 2, 3]}
    for scheme in ("ones", "lazy"):
        rows = [r for r in run.rows if r["scheme"] == scheme and r["seed"] == 0]
        assert [r["time_s"] for r in rows] == pytest.approx([0.0, 2.5, 5.0, 7.5])
        assert rows[-1]["accuracy"] > rows[0]["accuracy"] + 0.3  # it learned
    ones = [r["loss"] for r in run.rows if r["scheme"] == "ones"]
    lazy = [r["loss"] for r in run.rows if r["scheme"] == "lazy"]
    assert ones != lazy  # the allocation's passes reached the trainer
