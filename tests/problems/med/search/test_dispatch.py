"""The entry point of ``exact`` against brute force, against ``highs``, and its two searches
against each other."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.problems.med.generate import generate
from mel_opt.problems.med.latency import coefficients
from mel_opt.problems.med.search import branch_and_bound, dispatch


@pytest.mark.parametrize("seed", range(40))
def test_exact_matches_brute_force(seed, random_doc, brute_force):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    m = int(rng.integers(1, min(n, 3) + 1))
    doc = random_doc(rng, n, m)
    inst = parse_instance(doc)
    want = brute_force(doc)
    res = solve(inst, "exact")
    if math.isinf(want):
        assert res.status.value == "infeasible"
    else:
        assert res.status.value == "optimal"
        assert res.ok
        assert res.objective == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("n, m, params", [
    (10, 4, {}), (8, 3, {}), (8, 3, {"experiment": "tasks"}),
    (9, 3, {"experiment": "tasks", "budget": "120"}), (6, 2, {"budget": "70"}),
])
def test_highs_agrees_with_exact_on_the_preset(n, m, params):
    inst = parse_instance(generate("mays2023", learners=n, tasks=m, seed=1, params=params))
    a, b = solve(inst, "exact"), solve(inst, "highs", time_limit=60)
    assert a.status.value == b.status.value
    if a.ok:
        assert b.ok
        assert a.objective == pytest.approx(b.objective, rel=1e-6)


@pytest.mark.parametrize("seed", [1, 2])
def test_highs_agrees_with_exact_on_heterogeneous_learners(seed):
    inst = parse_instance(generate("hetero", learners=7, tasks=3, seed=seed))
    a, b = solve(inst, "exact"), solve(inst, "highs", time_limit=60)
    assert a.status.value == b.status.value == "optimal"
    assert a.objective == pytest.approx(b.objective, rel=1e-6)


def test_many_types_path_agrees_with_type_programme():
    # 9 distinct learners: the type programme (512 states) and the Lagrangian search both prove
    inst = parse_instance(generate("hetero", learners=9, tasks=3, seed=4,
                                   params={"budget_factor": "3"}))
    a = dispatch.solve(inst)
    b = branch_and_bound.solve(inst, coefficients(inst), time_limit=60)
    assert a.termination.value == b.termination.value == "optimal"
    assert a.objective == pytest.approx(b.objective, rel=1e-9)


def test_type_space_size_is_exact_beyond_int64() -> None:
    # 70 types of one learner each: 2^70 count vectors. np.prod wrapped this around to 0 and
    # let a 1,000-learner instance past the size check into np.indices (64 dimensions at most).
    import numpy as np

    from mel_opt.problems.med.search.type_box import TypeSpace

    space = TypeSpace(np.arange(70))
    assert space.size == 2**70
