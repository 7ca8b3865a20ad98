"""Hand-worked med answers: 2 learners, 1-2 tasks (every number derived in the comments).

Units: Omega = alpha = 1 MB and bandwidth 1 MB/s unless stated, so a learner's fixed delay is
A = 2 Omega / b = 2 s and its per-shard delay C = alpha / b + tau / R = 1 + tau / R s.
"""

from __future__ import annotations

import pytest

from mel_opt.api import parse_instance, solve

TOL = 1e-9


def _both(inst):
    return [solve(inst, method) for method in ("exact", "highs")]


def test_one_task_min_max_split(make_doc, learner):
    # learner 0: R = 1 -> C = 2 s/shard; learner 1: R = 0.5 -> C = 3 s/shard; D = 10.
    # max(2 + 2 d0, 2 + 3 d1), d0 + d1 = 10: d0 = 6, d1 = 4 gives 14 and 14 (balanced), and
    # any other split puts one learner above 14 (d0 = 7: 16; d1 = 5: 17). Optimum 14.
    inst = parse_instance(make_doc([{"shards": 10}], [learner(1.0), learner(0.5)]))
    for res in _both(inst):
        assert res.ok
        assert res.objective == pytest.approx(14.0, abs=TOL)
        assert res.solution["d"] == [[6, 4]]
        assert res.solution["assignment"] == [0, 0]
        assert res.metrics["task_delay"] == pytest.approx([14.0])


def test_one_task_budget_moves_shards(make_doc, learner):
    # as above with prices 2 and 1 and budget 15: the min-max split costs 2*6 + 4 = 16 > 15.
    # d0 = 5, d1 = 5 costs 15 with delays 12 and 17 -> 17; d0 = 4 costs 14 but 2 + 3*6 = 20.
    # Optimum 17 at (5, 5).
    inst = parse_instance(make_doc([{"shards": 10}],
                                   [learner(1.0, price=2.0), learner(0.5, price=1.0)],
                                   budget=15.0))
    for res in _both(inst):
        assert res.ok
        assert res.objective == pytest.approx(17.0, abs=TOL)
        assert res.solution["d"] == [[5, 5]]
        assert res.metrics["cost"] == pytest.approx(15.0)


def test_one_task_deadline_makes_it_infeasible(make_doc, learner):
    # deadline 13: d0 <= (13 - 2) / 2 -> 5, d1 <= (13 - 2) / 3 -> 3; 5 + 3 = 8 < 10 shards.
    inst = parse_instance(make_doc([{"shards": 10, "deadline_s": 13.0}],
                                   [learner(1.0), learner(0.5)]))
    for res in _both(inst):
        assert res.status.value == "infeasible"
        assert res.solution == {}


def test_two_tasks_one_learner_each(make_doc, learner):
    # task 0: D = 4, task 1: D = 2; learner 0: R = 1 on both (C = 2); learner 1: R = 0.5 on
    # task 0 (C = 3) and R = 2 on task 1 (C = 1.5). With D_l = 1 both work, one task each:
    #   w0 -> t0, w1 -> t1: (2 + 2*4) + (2 + 1.5*2) = 10 + 5 = 15
    #   w0 -> t1, w1 -> t0: (2 + 2*2) + (2 + 3*4)   = 6 + 14 = 20.  Optimum 15.
    inst = parse_instance(make_doc([{"shards": 4}, {"shards": 2}],
                                   [learner([1.0, 1.0]), learner([0.5, 2.0])]))
    for res in _both(inst):
        assert res.ok
        assert res.objective == pytest.approx(15.0, abs=TOL)
        assert res.solution["assignment"] == [0, 1]
        assert res.solution["d"] == [[4, 0], [0, 2]]
        assert res.metrics["task_delay"] == pytest.approx([10.0, 5.0])


def test_two_tasks_deadline_too_short_for_one_learner(make_doc, learner):
    # as above but task 0's deadline is 9 s: w0 on t0 needs 10 s, w1 on t0 needs 14 s, so no
    # learner can take all 4 shards of t0 alone and each task needs its own learner: infeasible.
    inst = parse_instance(make_doc([{"shards": 4, "deadline_s": 9.0}, {"shards": 2}],
                                   [learner([1.0, 1.0]), learner([0.5, 2.0])]))
    for res in _both(inst):
        assert res.status.value == "infeasible"


def test_iterations_multiply_training(make_doc, learner):
    # iterations 3 with R = 1: C = 1 + 3 = 4 s/shard for both learners; D = 4 -> 2 + 2 each:
    # 2 + 4*2 = 10. (Eq. 4.2 read literally, without tau, would give 2 + 2*2 = 6.)
    inst = parse_instance(make_doc([{"shards": 4, "iterations": 3}],
                                   [learner(1.0), learner(1.0)]))
    for res in _both(inst):
        assert res.objective == pytest.approx(10.0, abs=TOL)
        assert res.solution["d"] == [[2, 2]]


def test_expected_delay_over_two_states(make_doc):
    # learner 0: states equally likely; b = (1, 0.5) MB/s, R = (1, 0.25), iterations 2:
    #   E[1/b] = 0.5*1 + 0.5*2 = 1.5 us/B -> A = 2 MB * 1.5 = 3 s, alpha E[1/b] = 1.5 s/shard,
    #   E[1/R] = 0.5*1 + 0.5*4 = 2.5 -> C = 1.5 + 2*2.5 = 6.5 s/shard.
    # learner 1: always state 0: A = 2, C = 1 + 2*1 = 3.  D = 10:
    #   d0 = 3: 3 + 19.5 = 22.5, d1 = 7: 2 + 21 = 23 -> 23; d0 = 2: d1 = 8 -> 26;
    #   d0 = 4: 3 + 26 = 29. Optimum 23 at (3, 7).
    lrn = [
        {"state_probs": [0.5, 0.5], "bandwidth_Bps": [1e6, 0.5e6], "train_rate": [[1.0, 0.25]]},
        {"state_probs": [1.0, 0.0], "bandwidth_Bps": [1e6, 1e6], "train_rate": [[1.0, 1.0]]},
    ]
    inst = parse_instance(make_doc([{"shards": 10, "iterations": 2}], lrn))
    for res in _both(inst):
        assert res.objective == pytest.approx(23.0, abs=TOL)
        assert res.solution["d"] == [[3, 7]]
        assert res.metrics["task_delay"] == pytest.approx([23.0])
    # MMTT-Uncertain believing learner 0 is in state 0 sees two identical learners (A = 2,
    # C = 3) and splits 5/5 (planned 17 s each); by the expected delays that is
    # max(3 + 6.5*5, 2 + 3*5) = 35.5.
    from mel_opt.problems.med.methods import solve_known_states
    from mel_opt.problems.med.verify import verify

    out = solve_known_states(inst, [0, 0])
    assert out.solution["d"] == [[5, 5]]
    checked = verify(inst, out.solution)
    assert checked.objective == pytest.approx(35.5)
    assert checked.metrics["planned_task_delay"] == pytest.approx([17.0])
    assert checked.verification.feasible


def test_unused_learner_when_min_shards_is_zero(make_doc, learner):
    # D_l = 0: a slow learner (R = 0.01 -> C = 101 s/shard) would push the level to >= 103 s,
    # so it stays unused (assignment -1) and the fast one takes all 5 shards: 2 + 2*5 = 12.
    inst = parse_instance(make_doc([{"shards": 5, "deadline_s": 200.0}],
                                   [learner(1.0), learner(0.01)], min_shards_per_learner=0))
    for res in _both(inst):
        assert res.objective == pytest.approx(12.0, abs=TOL)
        assert res.solution["assignment"] == [0, -1]
        assert res.metrics["idle_learners"] == 1
