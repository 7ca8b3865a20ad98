"""The primal side of the branch and bound: the evaluator's cutoff and the local searches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mel_opt.api import parse_instance
from mel_opt.problems.med.generate import generate
from mel_opt.problems.med.latency import coefficients
from mel_opt.problems.med.search import branch_and_bound
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.local import greedy, iterated_local_search, local_search
from mel_opt.problems.med.search.types import parts_of


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_evaluator_cutoff_only_prunes_values_it_cannot_beat(seed):
    # the cutoff is a shortcut of the local search: below it the value is the plain one,
    # at or above it a feasible assignment reads (0, inf)
    inst = parse_instance(generate("hetero", learners=12, tasks=3, seed=seed))
    coef = coefficients(inst)
    rng = np.random.default_rng(seed)
    ev, checked = Evaluator(inst, coef, True), 0
    base, _ = local_search(ev, greedy(ev), math.inf)
    for _ in range(60):  # neighbours of a good assignment: mostly feasible
        assign = base.copy()
        for j in rng.choice(12, 1):
            assign[j] = rng.choice(np.nonzero(coef.allowed[:, j])[0])
        parts = parts_of(assign, 3)
        excess, value, _ = ev.value(parts)
        if excess > 0:
            continue
        checked += 1
        for cut in (value * 0.99, value, value * 1.01):
            got = ev.value(parts, cut)[:2]
            assert got == ((0.0, value) if value < cut else (0.0, math.inf))
    assert checked >= 5


def test_iterated_local_search_improves_and_reports_true_values():
    inst = parse_instance(generate("hetero", learners=16, tasks=3, seed=3))
    coef = coefficients(inst)
    ev = Evaluator(inst, coef, True)
    start, value = local_search(ev, greedy(ev), math.inf)
    got, best, kicks = iterated_local_search(ev, start, value, math.inf, patience=15)
    assert kicks >= 15 and best <= value
    assert ev.value(parts_of(got, 3))[:2] == (0.0, pytest.approx(best, rel=1e-12))
    # the proven optimum is a floor for it (and local search alone is not always there)
    proof = branch_and_bound.solve(inst, coef, time_limit=60)
    assert proof.termination.value == "optimal"
    assert best >= proof.objective * (1 - 1e-9)


def test_iterated_local_search_goes_on_from_what_between_hands_it():
    # the hook hands over a better allocation (found "elsewhere": a long local search here)
    # once: the search goes on from it, so it ends at most at its value; the hook sees the
    # search's best before every kick, never worse than what it handed over afterwards
    inst = parse_instance(generate("hetero", learners=20, tasks=4, seed=3))
    ev = Evaluator(inst, coefficients(inst), True)
    start = greedy(ev)
    start_value = ev.value(parts_of(start, 4))[1]
    good, good_value = local_search(ev, start, math.inf)
    assert good_value < start_value
    seen: list[float] = []

    def between(best, value):
        assert ev.value(parts_of(best, 4))[1] == pytest.approx(value)
        seen.append(value)
        return (good, good_value) if len(seen) == 1 else None

    got, value, kicks = iterated_local_search(ev, start, start_value, math.inf, patience=5,
                                              between=between)
    assert seen[0] == start_value and kicks == len(seen)
    assert all(v <= good_value for v in seen[1:])
    assert value <= good_value and ev.value(parts_of(got, 4))[1] == pytest.approx(value)


@pytest.mark.parametrize("seed", [3, 4])
def test_the_evaluators_lagrangian_pruning_changes_no_answer(seed):
    # the local search with the budget's Lagrangian pruning takes the same path as without
    # it (same allocation, same number of candidates valued); what it drops, valued in full,
    # does not beat the cutoff it was dropped at
    inst = parse_instance(generate("hetero", learners=30, tasks=5, seed=seed))
    coef = coefficients(inst)
    plain = Evaluator(inst, coef, True)
    plain._relaxed_cut = lambda *_: False
    pruned = Evaluator(inst, coef, True)
    dropped: list[tuple[list[tuple[int, ...]], float]] = []
    cut = pruned._relaxed_cut

    def recorded(parts, fronts, cutoff):
        got = cut(parts, fronts, cutoff)
        if got:
            dropped.append((parts, cutoff))
        return got

    pruned._relaxed_cut = recorded
    calls = {id(plain): 0, id(pruned): 0}
    for ev in (plain, pruned):
        value = ev.value

        def counted(*args, _value=value, _ev=ev, **kwargs):
            calls[id(_ev)] += 1
            return _value(*args, **kwargs)

        ev.value = counted
    a, va = local_search(plain, greedy(plain), math.inf)
    b, vb = local_search(pruned, greedy(pruned), math.inf)
    assert np.array_equal(a, b) and va == vb and calls[id(plain)] == calls[id(pruned)]
    assert dropped and pruned.relaxed_cuts == len(dropped) and plain.relaxed_cuts == 0
    fresh = Evaluator(inst, coef, True)
    for parts, cutoff in dropped[:50]:
        excess, value, _ = fresh.value(parts)
        assert excess == 0 and value >= cutoff


def test_local_search_stops_where_its_poll_says():
    # the poll sees the current value before each learner; True ends the search there with
    # an allocation of that value
    inst = parse_instance(generate("hetero", learners=20, tasks=4, seed=3))
    ev = Evaluator(inst, coefficients(inst), True)
    start = greedy(ev)
    seen: list[float] = []

    def poll(value):
        seen.append(value)
        return len(seen) == 25

    got, value = local_search(ev, start, math.inf, poll=poll)
    assert len(seen) == 25 and value == seen[-1]
    assert ev.value(parts_of(got, 4))[:2] == (0.0, pytest.approx(value, rel=1e-12))
    full, full_value = local_search(ev, start, math.inf)
    assert full_value <= value


def test_moved_parts_are_those_of_the_changed_assignment():
    from mel_opt.problems.med.search.local import _moved

    assign = np.array([0, 1, -1, 0, 2, 1])
    parts = parts_of(assign, 3)
    assert parts == [(0, 3), (1, 5), (4,)]
    # learner 3 moves from task 0 to task 2; learner 2 from unused to task 1
    assert _moved(parts, {0: ((3,), ()), 2: ((), (3,))}) == [(0,), (1, 5), (3, 4)]
    assert _moved(parts, {-1: ((2,), ()), 1: ((), (2,))}) == [(0, 3), (1, 2, 5), (4,)]
    # learners 0 (task 0) and 5 (task 1) swap
    assert _moved(parts, {0: ((0,), (5,)), 1: ((5,), (0,))}) == [(3, 5), (0, 1), (4,)]
    assert parts == [(0, 3), (1, 5), (4,)]  # unchanged
