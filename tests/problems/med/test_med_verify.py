"""The verifier checks each rule of (4.4) on its own, from the raw instance fields."""

from __future__ import annotations

import pytest

from mel_opt.api import parse_instance
from mel_opt.errors import SolverError
from mel_opt.problems.med.verify import verify


@pytest.fixture
def two_tasks(make_doc, learner):
    # 3 learners, R = 1 everywhere (A = 2 s, C = 2 s/shard); task 0: D = 4, T = 11;
    # task 1: D = 2; prices 1, 2, 3; budget 12.
    return parse_instance(make_doc(
        [{"shards": 4, "deadline_s": 11.0}, {"shards": 2}],
        [learner(1.0, price=1.0, tasks=2), learner(1.0, price=2.0, tasks=2),
         learner(1.0, price=3.0, tasks=2)], budget=12.0))


def sol(assignment, d):
    return {"assignment": assignment, "d": d}


def test_feasible_solution_and_its_objective(two_tasks):
    # w0, w1 on task 0 with 2 shards each: 2 + 2*2 = 6 s; w2 on task 1 with 2: 6 s.
    # cost 1*2 + 2*2 + 3*2 = 12 = budget; objective 6 + 6 = 12.
    ch = verify(two_tasks, sol([0, 0, 1], [[2, 2, 0], [0, 0, 2]]))
    assert ch.verification.feasible
    assert ch.objective == pytest.approx(12.0)
    assert ch.metrics["task_delay"] == pytest.approx([6.0, 6.0])
    assert ch.metrics["cost"] == pytest.approx(12.0)
    assert all(v == 0 for v in ch.verification.checks.values())


def test_budget_rule(two_tasks):
    # w2 (price 3) takes 3 of task 0: cost 1*1 + 3*3 + 2*2 = 14 > 12 -> (14 - 12) / 12
    ch = verify(two_tasks, sol([0, 1, 0], [[1, 0, 3], [0, 2, 0]]))
    assert not ch.verification.feasible
    assert ch.verification.checks["budget"] == pytest.approx(2 / 12)
    assert ch.verification.checks["deadline"] == 0  # 2 + 2*3 = 8 <= 11


def test_deadline_rule(two_tasks, make_doc, learner):
    # w0 alone holds all 4 shards of task 0: 2 + 2*4 = 10 <= 11 is fine; with T = 9 it is
    # late by (10 - 9) / 9.
    inst = parse_instance(make_doc([{"shards": 4, "deadline_s": 9.0}, {"shards": 2}],
                                   [learner(1.0, tasks=2), learner(1.0, tasks=2)]))
    ch = verify(inst, sol([0, 1], [[4, 0], [0, 2]]))
    assert ch.verification.checks["deadline"] == pytest.approx(1 / 9)
    assert not ch.verification.feasible


def test_dataset_rule(two_tasks):
    ch = verify(two_tasks, sol([0, 0, 1], [[2, 1, 0], [0, 0, 2]]))
    assert ch.verification.checks["dataset"] == pytest.approx(1 / 4)
    assert not ch.verification.feasible


def test_one_task_rule(two_tasks):
    # w0 holds shards of both tasks: the 1 shard beyond its first task counts
    ch = verify(two_tasks, sol([0, 0, 1], [[2, 2, 0], [1, 0, 1]]))
    assert ch.verification.checks["one_task"] == 1
    assert not ch.verification.feasible


def test_min_shards_rule(two_tasks):
    # w1 holds nothing although D_l = 1
    ch = verify(two_tasks, sol([0, -1, 1], [[4, 0, 0], [0, 0, 2]]))
    assert ch.verification.checks["min_shards"] == 1
    assert ch.verification.checks["assignment"] == 0
    assert not ch.verification.feasible


def test_assignment_must_match_d(two_tasks):
    ch = verify(two_tasks, sol([1, 0, 1], [[2, 2, 0], [0, 0, 2]]))
    assert ch.verification.checks["assignment"] == 1


def test_integrality(two_tasks):
    ch = verify(two_tasks, sol([0, 0, 1], [[2.5, 1.5, 0], [0, 0, 2]]))
    assert ch.verification.checks["integrality"] == pytest.approx(0.5)
    assert not ch.verification.feasible


def test_malformed_solution_is_an_error(two_tasks):
    with pytest.raises(SolverError, match="shape"):
        verify(two_tasks, sol([0, 0, 1], [[1, 1, 1]]))
