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
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.lagrangian import Lagrangian, Node
from mel_opt.problems.med.search.local import local_search


def _root(inst):
    coef = coefficients(inst)
    lag = Lagrangian(inst, coef, budget_can_bind(inst),
                     branch_and_bound._floor_levels(inst, coef), math.inf)
    node = Node(np.full(inst.n_learners, -1, dtype=np.int64),
                np.zeros((inst.n_tasks, inst.n_learners), dtype=bool),
                np.zeros(inst.n_learners), 0.0)
    return coef, lag, node


@pytest.mark.parametrize("seed", range(12))
def test_bundle_bound_is_below_the_brute_force_optimum(seed, random_doc, brute_force):
    rng = np.random.default_rng(300 + seed)
    doc = random_doc(rng, int(rng.integers(3, 6)), int(rng.integers(1, 3)))
    inst = parse_instance(doc)
    want = brute_force(doc)
    _, lag, node = _root(inst)
    lag.optimise(node, math.inf, 10, math.inf)
    got, _ = bundle.ascend(lag, node, math.inf, 200, math.inf, bundle.Columns())
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
    got, _ = bundle.ascend(lag, node, math.inf, 300, math.inf, cols)
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
    stats: dict = {}
    got, _ = bundle.ascend(lag, node, math.inf, 400, math.inf, bundle.Columns(), stats)
    assert stats["bundle_converged"]
    assert got >= plain - 1e-9 * abs(plain)
    res = solve(inst, "exact", time_limit=20)
    assert res.ok and got <= res.objective
