"""Staggered arrivals worked by hand: groups, slots, each start's work, the weights, the
staleness bound and the server step of the one buffered loop."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from mel_opt.schemes.fedbuff import Model, Update, run
from mel_opt.schemes.staggered import StaggeredPlan, deal_groups, default_groups, next_slot


def _plan(sizes: list[int], groups: int, period: float, per_pass: list[float],
          fixed: list[float], batch: int = 10) -> StaggeredPlan:
    sz = np.array(sizes, dtype=np.int64)
    return StaggeredPlan(period, deal_groups(sz, groups), groups, np.array(per_pass, float),
                         np.array(fixed, float), sz, batch)


def test_groups_are_dealt_largest_data_first_and_a_learner_without_data_takes_no_part() -> None:
    # holders by data: 0 (100), 1 (50), 3 (25) -> groups 0, 1, 0; learner 2 holds nothing
    assert deal_groups(np.array([100, 50, 0, 25]), 2).tolist() == [0, 1, -1, 0]
    assert default_groups(100) == 10 and default_groups(1000) == 100
    assert default_groups(14) == 1 and default_groups(4) == 1
    plan = _plan([100, 50, 0, 25], 2, 10.0, [2, 1, 1, 0.5], [1, 1, 1, 2])
    assert plan.nodes == [0, 1, 3] and plan.concurrency == 3 and plan.buffer == 2


def test_slots_and_each_starts_work_by_hand() -> None:
    # G = 2, P = 10 s: group 0 arrives at 5, 15, 25, ... s; group 1 at 10, 20, ... s
    assert next_slot(0.0, 0.5, 10.0, 1.2) == 5.0
    assert next_slot(4.9, 0.5, 10.0, 0.2) == 15.0  # 5.1 > 5: the next one
    assert next_slot(0.0, 1.0, 10.0, 0.0) == 10.0
    plan = _plan([100, 50, 0, 25], 2, 10.0, [2, 1, 1, 0.5], [1, 1, 1, 2])
    # learner 0 (group 0) at 0 s: room for transfers 1 s and a minibatch (10 of 100
    # samples: 0.2 s) before 5 s; (5 - 0 - 1) / 2 = 2 passes
    assert plan.passes(0, 0.0) == pytest.approx(2.0)
    # learner 1 (group 1) at 0 s: slot 10 s, (10 - 1) / 1 = 9 passes
    assert plan.passes(1, 0.0) == pytest.approx(9.0)
    # learner 3 (group 0) at 0 s: slot 5 s, (5 - 2) / 0.5 = 6 passes
    assert plan.passes(3, 0.0) == pytest.approx(6.0)
    # a learner without data does nothing
    assert plan.passes(2, 0.0) == 0.0
    # learner 0 back early at 4.6 s aims past the slot it had (5 s): at 15 s,
    # (15 - 4.6 - 1) / 2 = 4.7 passes, one trip per period
    assert plan.passes(0, 4.6) == pytest.approx(4.7)
    # back late at 15.5 s: its next slot 25 s, (25 - 15.5 - 1) / 2 = 4.25 passes
    assert plan.passes(0, 15.5) == pytest.approx(4.25)
    # learner 3 back at 24 s, too late for 25 s (it needs 2.2 s): 35 s, (35 - 24 - 2) / 0.5
    assert plan.passes(3, 24.0) == pytest.approx(18.0)


def test_a_measured_start_cost_is_room_every_start_leaves() -> None:
    plan = _plan([100, 50, 0, 25], 2, 10.0, [2, 1, 1, 0.5], [1, 1, 1, 2])
    # learner 0 measured live: a pass 2.5 s, each start 0.5 s beyond its transfers: at 0 s,
    # (5 - 1 - 0.5) / 2.5 = 1.4 passes
    plan.measured(0, 2.5, 0.5)
    assert plan.passes(0, 0.0) == pytest.approx(1.4)
    # learner 3 measured a 2.9 s start: at 0 s it needs 2 + 2.9 + a minibatch (10 of 25
    # samples: 0.2 s) = 5.1 s > 5 s, so it aims at 15 s: (15 - 2 - 2.9) / 0.5 = 20.2 passes
    plan.measured(3, 0.5, 2.9)
    assert plan.passes(3, 0.0) == pytest.approx(20.2)
    # a start cost that is not a number leaves the last one: at 15 s, 25 s,
    # (25 - 15 - 2 - 2.9) / 0.5 = 10.2 passes
    plan.measured(3, 0.5, math.nan)
    assert plan.passes(3, 15.0) == pytest.approx(10.2)


def test_a_period_chosen_again_starts_its_grid_where_the_current_period_ends() -> None:
    # G = 2, P = 10 s, the period chosen again every 12 s (the chooser says 4 s)
    plan = _plan([100, 50, 0, 25], 2, 10.0, [2, 1, 1, 0.5], [1, 1, 1, 2])
    seen: list[object] = []

    def chooser(model: object) -> float:
        seen.append(model)
        return 4.0

    plan.rechoose_s, plan.chooser = 12.0, chooser
    plan.passes(0, 0.0)   # aims at 5 s
    plan.passes(1, 0.0)   # aims at 10 s
    plan.stepped("w5", 5.0)  # 5 < 12 s: not yet
    assert plan.period == 10.0 and plan.origin == 0.0 and seen == []
    assert plan.passes(0, 5.0) == pytest.approx((15 - 5 - 1) / 2)  # aims at 15 s
    plan.stepped("w12", 12.0)
    # chosen at 12 s from the model then; learner 0 aims at 15 s, so the current period
    # ends at 20 s: the new grid starts there, group 0 at 22, 26, ... s, group 1 at 24, ...
    assert seen == ["w12"] and plan.period == 4.0 and plan.origin == 20.0
    # learner 0 back at 15 s: its group's first new slot, 22 s: (22 - 15 - 1) / 2 = 3 passes
    assert plan.passes(0, 15.0) == pytest.approx(3.0)
    # learner 1 back at 20 s: 24 s, (24 - 20 - 1) / 1 = 3 passes; then 28 s from 24 s
    assert plan.passes(1, 20.0) == pytest.approx(3.0)
    assert plan.passes(1, 24.0) == pytest.approx(3.0)
    # learner 3 (group 0, needs 2 + 0.5 * 10/25 = 2.2 s) at 20.5 s: 22 s is too soon, so 26 s
    assert plan.passes(3, 20.5) == pytest.approx((26 - 20.5 - 2) / 0.5)
    plan.stepped("w20", 20.0)  # 8 s since the last choice: not yet
    assert seen == ["w12"]
    plan.stepped("w24", 24.0)  # the same period again: the grid stays
    assert seen == ["w12", "w24"] and plan.origin == 20.0
    # no chooser (a fixed period): never chosen again
    fixed = _plan([100, 50], 2, 10.0, [2, 1], [1, 1])
    fixed.stepped("w", 100.0)
    assert fixed.period == 10.0 and fixed.origin == 0.0


def test_weights_by_data_over_groups_and_lateness_beyond_the_plan() -> None:
    plan = _plan([100, 50, 0, 25], 2, 10.0, [2, 1, 1, 0.5], [1, 1, 1, 2])
    mean = 175 / 3  # of the learners that take part
    # on plan (staleness G = 2 or less): data over the mean, over G
    assert plan.weight(0, 2) == pytest.approx(100 / mean / 2)
    assert plan.weight(0, 0) == pytest.approx(100 / mean / 2)
    # two steps late (staleness 4): FedBuff's 1 / sqrt(1 + 2) on the excess
    assert plan.weight(1, 4) == pytest.approx(50 / mean / 2 / math.sqrt(3))


class _Clock:
    """Learners that answer exactly when the plan's work says (transfers plus passes), with
    their starting model plus one in every entry (a delta of 1)."""

    def __init__(self, plan: StaggeredPlan) -> None:
        self.plan, self.now = plan, 0.0
        self._events: list[tuple[float, int, Model]] = []

    def push(self, node: int, model: Model, version: int) -> None:
        p = self.plan.passes(node, self.now)
        done = self.now + self.plan.fixed_s[node] + p * self.plan.per_pass_s[node]
        heapq.heappush(self._events, (done, node, [a + 1.0 for a in model]))

    def pull(self) -> list[tuple[int, Update]]:
        if not self._events:
            return []
        self.now, node, model = heapq.heappop(self._events)
        return [(node, model)]

    def overdue(self) -> list[int]:
        return []


def test_steps_every_period_over_g_with_staleness_g_minus_1_and_a_cycles_movement() -> None:
    # six learners with equal data, G = 3, P = 6 s: a step every 2 s, from group 0's
    # arrival at 2 s on. From the second period on, the learner of a group back first (the
    # lower number: answers at one time come in learner order) started again before its
    # group's step, from a model G = 3 steps old at its next arrival; the other after it:
    # G - 1 = 2 steps
    sizes = [10] * 6
    plan = _plan(sizes, 3, 6.0, [1.0] * 6, [0.5] * 6)
    assert plan.group.tolist() == [0, 1, 2, 0, 1, 2] and plan.buffer == 2
    clock = _Clock(plan)
    steps: list[tuple[float, list[int], float]] = []
    out = run(clock, plan.nodes, [np.zeros(1)], buffer=plan.buffer,
              concurrency=plan.concurrency, steps=9, weigh=plan.weight,
              on_step=lambda st, m: steps.append((clock.now, st.staleness, float(m[0][0]))))
    assert [t for t, _, _ in steps] == pytest.approx([2, 4, 6, 8, 10, 12, 14, 16, 18])
    assert [s for _, s, _ in steps[:3]] == [[0, 0], [1, 1], [2, 2]]
    assert all(s == [3, 2] for _, s, _ in steps[3:])
    # every update is a delta of 1 with weight (10 / 10) / 3; a step adds (1 / 2) x 2 x 1/3:
    # a period (3 steps) moves the model by 1, as a synchronous cycle of deltas 1 would
    assert [m for _, _, m in steps] == pytest.approx([k / 3 for k in range(1, 10)])
    assert out.model[0][0] == pytest.approx(3.0)


def test_one_group_at_eta_1_is_the_data_weighted_average() -> None:
    # G = 1: both learners arrive at the period's end; the step is FedAvg's average by data
    plan = _plan([30, 10], 1, 4.0, [1.0, 1.0], [0.0, 0.0])

    class Fixed(_Clock):
        def push(self, node: int, model: Model, version: int) -> None:
            p = self.plan.passes(node, self.now)
            done = self.now + p * self.plan.per_pass_s[node]
            heapq.heappush(self._events, (done, node, [np.array([1.0 if node == 0 else 5.0])]))

    out = run(Fixed(plan), plan.nodes, [np.zeros(1)], buffer=plan.buffer,
              concurrency=plan.concurrency, steps=1, weigh=plan.weight)
    assert out.steps[0].staleness == [0, 0]
    assert out.model[0][0] == pytest.approx((30 * 1.0 + 10 * 5.0) / 40)
