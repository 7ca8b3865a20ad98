"""The box-step bundle method of the root bound: a valid bound, at least the subgradient's, and
a master rounding that the local search turns into a verified allocation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.problems.med.generate import generate
from mel_opt.problems.med.latency import budget_can_bind, coefficients
from mel_opt.problems.med.search import branch_and_bound, bundle
from mel_opt.problems.med.search.bounding import floor_levels
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.lagrangian import Lagrangian, Node
from mel_opt.problems.med.search.local import local_search


def _root(inst):
    coef = coefficients(inst)
    lag = Lagrangian(inst, coef, budget_can_bind(inst),
                     floor_levels(inst, coef), math.inf)
    node = Node(np.full(inst.n_learners, -1, dtype=np.int64),
                np.zeros((inst.n_tasks, inst.n_learners), dtype=bool),
                np.zeros(inst.n_learners), 0.0)
    return coef, lag, node


@pytest.mark.parametrize("seed", range(12))
def test_bundle_bound_is_below_the_brute_force_optimum(seed, tiny_case):
    inst, want = tiny_case(300 + seed)
    _, lag, node = _root(inst)
    lag.optimise(node, math.inf, 10, math.inf)
    got = bundle.ascend(lag, node, math.inf, 200, math.inf, bundle.Columns()).bound
    if math.isfinite(want):
        assert got <= want * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_bundle_bound_is_valid_and_beats_the_subgradient(seed):
    # 12 different learners, 3 tasks, binding budget: HiGHS proves the optimum
    inst = parse_instance(generate("hetero", learners=12, tasks=3, seed=seed))
    ref = solve(inst, "highs", time_limit=120)
    assert ref.status.value == "optimal"
    _, lag, node = _root(inst)
    sub = Node(node.fixed.copy(), node.barred.copy(), node.mu.copy(), 0.0)
    plain, _ = lag.optimise(sub, ref.objective, 300, math.inf)  # the old root
    lag.optimise(node, math.inf, 30, math.inf)
    cols = bundle.Columns()
    got = bundle.ascend(lag, node, math.inf, 300, math.inf, cols).bound
    assert got <= ref.objective * (1 + 1e-9)
    assert got >= plain - 1e-9 * abs(plain)
    # the master's rounding, polished: when feasible (on small instances it may not be; the
    # search then starts from the greedy assignment) never below the optimum
    coef = coefficients(inst)
    ev = Evaluator(inst, coef, budget_can_bind(inst))
    cand = bundle.rounded_assignment(lag, cols)
    assert cand is not None
    _, val = local_search(ev, cand, math.inf)
    assert ref.objective * (1 - 1e-9) <= val


def test_bundle_certificate_on_a_larger_instance():
    # 50 learners x 5 tasks (the benchmark's size): the bundle reaches its certificate (the
    # model's maximum equals the best value) and its bound is at least the 300 subgradient
    # steps' of the old root; both are below a verified allocation.
    inst = parse_instance(generate("hetero", learners=50, tasks=5, seed=0))
    _, lag, node = _root(inst)
    sub = Node(node.fixed.copy(), node.barred.copy(), node.mu.copy(), 0.0)
    plain, _ = lag.optimise(sub, math.inf, 300, math.inf)
    lag.optimise(node, math.inf, 30, math.inf)
    stats = bundle.ascend(lag, node, math.inf, 400, math.inf, bundle.Columns())
    got = stats.bound
    assert stats.converged
    assert got >= plain - 1e-9 * abs(plain)
    # any verified allocation bounds it from above: the search's after a second will do
    res = solve(inst, "exact", time_limit=1)
    assert res.ok and got <= res.objective


def test_consistent_columns_keep_only_what_a_node_allows():
    raw = bundle.Columns()
    covers = [np.array([1, 1, 0], bool), np.array([0, 1, 1], bool), np.array([1, 0, 0], bool)]
    for i, c in zip((0, 1, 1), covers, strict=True):
        raw.task.append(i)
        raw.cover.append(c)
        raw.level.append(1.0 + i)
        raw.cost.append(2.0)
    cols = bundle.Columns()
    cols.merge(raw)
    assert len(cols) == 3
    # learner 0 fixed to task 0: task 1's column holding it goes, task 0's column without it
    # would go too; learner 2 barred from task 1
    node = Node(np.array([0, -1, -1]), np.zeros((2, 3), dtype=bool), np.zeros(3), 0.0)
    assert cols.consistent(node).task == [0, 1]
    node.barred[1, 2] = True
    kept = cols.consistent(node)
    assert kept.task == [0] and kept.cover[0].tolist() == [True, True, False]
    # merging adds only what is new
    more = bundle.Columns()
    more.task, more.cover, more.level, more.cost = [0, 1], [covers[0], covers[0]], [1.0, 5.0], \
        [2.0, 3.0]
    before = len(cols)
    cols.merge(more)
    assert len(cols) == before + 1 and cols.level[-1] == 5.0


def _node_optimum(inst, node) -> float:
    """The optimum over the assignments a node allows, by enumeration (exact values)."""
    import itertools

    from mel_opt.problems.med.search.types import parts_of

    coef = coefficients(inst)
    ev = Evaluator(inst, coef, budget_can_bind(inst))
    m, n = inst.n_tasks, inst.n_learners
    choices = range(m) if inst.min_shards > 0 else range(-1, m)
    best = math.inf
    for assign in itertools.product(choices, repeat=n):
        a = np.array(assign, dtype=np.int64)
        if any(node.fixed[j] >= 0 and a[j] != node.fixed[j] for j in range(n)):
            continue
        if any(a[j] >= 0 and node.barred[a[j], j] for j in range(n)):
            continue
        excess, val, _ = ev.value(parts_of(a, m))
        if excess == 0:
            best = min(best, val)
    return best


@pytest.mark.parametrize("seed", range(8))
def test_child_bounds_from_the_warm_bundle_are_valid(seed, random_doc, brute_force):
    # every child (a learner fixed to a task, or barred from it) of the root: the bundle
    # bound from the root's multipliers and its columns is at most the child's optimum by
    # enumeration, and the root's at most the brute-force optimum
    rng = np.random.default_rng(500 + seed)
    doc = random_doc(rng, int(rng.integers(3, 6)), 2)
    inst = parse_instance(doc)
    coef = coefficients(inst)
    search = branch_and_bound.BranchAndBound(inst, coef, None)
    _, lag, root = _root(inst)
    got, _ = search.bounding.root(lag, root, math.inf)
    want = brute_force(doc)
    if not math.isfinite(want):
        return
    assert got <= want * (1 + 1e-9)
    for j in range(inst.n_learners):
        for i in range(inst.n_tasks):
            fixed = root.fixed.copy()
            fixed[j] = i
            barred = np.zeros_like(root.barred)
            barred[:, j] = True
            barred[i, j] = False
            bar = np.zeros_like(root.barred)
            bar[i, j] = True
            for child in (Node(fixed, barred, root.mu.copy(), root.lam, 1),
                          Node(root.fixed.copy(), bar, root.mu.copy(), root.lam, 1)):
                b, _ = search.bounding.child(lag, child)
                opt = _node_optimum(inst, child)
                assert b <= opt * (1 + 1e-9) + 1e-9
                # the child's master, rounded and polished: never below the optimum
                search.best_first().polish_master(lag)
                assert search.best.value >= want * (1 - 1e-9)
