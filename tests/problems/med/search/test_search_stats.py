"""The branch and bound's typed statistics: their conversion to the result's keys, and the
bundle's box LP that stops without an optimal point (recorded, never silently 'no point')."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.problems.med.generate import generate
from mel_opt.problems.med.latency import budget_can_bind, coefficients
from mel_opt.problems.med.search import branch_and_bound, bundle, companion
from mel_opt.problems.med.search.bounding import floor_levels
from mel_opt.problems.med.search.lagrangian import Lagrangian, Node
from mel_opt.problems.med.search.search_stats import SearchStats
from mel_opt.solvers import highs
from mel_opt.solvers.base import SolutionStatus, SolverResult
from mel_opt.status import TerminationCondition as TC

COVER = np.zeros((1, 1), dtype=bool)


def test_one_core_statistics_give_the_result_keys_in_order():
    # every phase of a one-core run recorded: the keys (exact prefixes each with search_) and
    # their order are those of the result JSON before the statistics were typed
    stats = SearchStats(nodes=2, root_ascent=bundle.Ascent(21.5, COVER, 16, 45, True),
                        root_bound=21.5, incumbent_from_master=22.0,
                        incumbent_after_local_search=21.9, ils_kicks=100,
                        incumbent_before_branching=21.8, bound=21.8)
    assert list(stats.as_dict().items()) == [
        ("method", "lagrangian branch and bound"), ("nodes", 2), ("bundle_steps", 16),
        ("bundle_columns", 45), ("bundle_converged", True), ("root_bound", 21.5),
        ("incumbent_from_master", 22.0), ("incumbent_after_local_search", 21.9),
        ("ils_kicks", 100), ("incumbent_before_branching", 21.8), ("bound", 21.8)]


def test_companion_statistics_and_what_is_left_out():
    # with a companion: its line and the allocations it gave (none: no key); a root ascent
    # cut by an infinite bound reports no counters; before the root, only method and nodes
    stats = SearchStats(nodes=7, root_ascent=bundle.Ascent(30.0, COVER, 3, 9, False),
                        root_bound=30.0, companion=True, companion_allocations=3, bound=30.5)
    assert list(stats.as_dict().items()) == [
        ("method", "lagrangian branch and bound"), ("nodes", 7), ("bundle_steps", 3),
        ("bundle_columns", 9), ("bundle_converged", False), ("root_bound", 30.0),
        ("companion", "primal heuristics in a second process beside the branching"),
        ("companion_allocations", 3), ("bound", 30.5)]
    stats.companion_allocations = 0
    assert "companion_allocations" not in stats.as_dict()
    cut = SearchStats(root_ascent=bundle.Ascent(math.inf, COVER), root_bound=math.inf)
    assert list(cut.as_dict()) == ["method", "nodes", "root_bound"]
    assert SearchStats().as_dict() == {"method": "lagrangian branch and bound", "nodes": 0}


def test_ascents_ended_by_the_box_lp_are_counted_by_why():
    stats = SearchStats()
    for why in (TC.INFEASIBLE, None, TC.ERROR, TC.INFEASIBLE):
        stats.note_ascent(bundle.Ascent(1.0, COVER, lp_stop=why))
    got = stats.as_dict()
    assert got["bundle_lp_infeasible"] == 2 and got["bundle_lp_error"] == 1
    assert not any(k.startswith("bundle_lp_") for k in SearchStats().as_dict())


def _stopped(why: TC):
    def minimise(self):
        return SolverResult(why, SolutionStatus.NONE, None, message="patched")
    return minimise


@pytest.mark.parametrize("why", [TC.INFEASIBLE, TC.UNBOUNDED, TC.ERROR, TC.TIME_LIMIT])
def test_an_ascent_ends_where_the_box_lp_stops_and_says_why(why, monkeypatch, tiny_case):
    # the box LP stops before the first step: the bound is L at the starting multipliers
    # (lagrangian.evaluate, the subgradient's own evaluation), the multipliers stay, no step
    inst, _ = tiny_case(301)
    coef = coefficients(inst)
    lag = Lagrangian(inst, coef, budget_can_bind(inst),
                     floor_levels(inst, coef), math.inf)
    node = Node(np.full(inst.n_learners, -1, dtype=np.int64),
                np.zeros((inst.n_tasks, inst.n_learners), dtype=bool),
                np.zeros(inst.n_learners), 0.0)
    lag.optimise(node, math.inf, 10, math.inf)
    mu, lam = node.mu.copy(), node.lam
    want = lag.evaluate(node, mu, lam, math.inf)[0]
    monkeypatch.setattr(highs.IncrementalLp, "minimise", _stopped(why))
    got = bundle.ascend(lag, node, math.inf, 50, math.inf, bundle.Columns())
    assert got.lp_stop is why and got.steps == 0 and not got.converged
    assert got.bound == pytest.approx(want, rel=1e-12)
    assert node.mu.tolist() == mu.tolist() and node.lam == lam


def test_a_search_whose_box_lp_fails_still_proves_and_records_it(monkeypatch, tiny_case):
    # every box LP of the root and the children reports an error: the bounds come from the
    # evaluations alone (no bundle step), the brute-force optimum is still proven, and every
    # search that branched says the LP ended its ascents
    monkeypatch.setattr(highs.IncrementalLp, "minimise", _stopped(TC.ERROR))
    monkeypatch.setattr(companion, "available", lambda: False)
    branched = 0
    for seed in range(300, 312):
        inst, want = tiny_case(seed)
        out = branch_and_bound.solve(inst, coefficients(inst), time_limit=30)
        if math.isinf(want):
            assert out.termination is TC.INFEASIBLE
        else:
            assert out.termination is TC.CONVERGED
            assert out.objective == pytest.approx(want, rel=1e-9)
        assert out.stats["bundle_steps"] == 0
        if out.stats["nodes"] > 0:
            assert out.stats["bundle_lp_error"] >= 1
            branched += 1
    assert branched >= 3


def test_exact_keeps_its_metric_keys_on_one_core(monkeypatch):
    # 16 different learners, 3 tasks, binding budget: the branch and bound proves 21.8144
    # (recorded by the search before its statistics were typed: 21.814351623232273, root
    # bound 21.7883); the metrics are the same keys in the same order as then
    monkeypatch.setattr(companion, "available", lambda: False)
    inst = parse_instance(generate("hetero", learners=16, tasks=3, seed=0))
    res = solve(inst, "exact", time_limit=60)
    assert res.status.value == "optimal"
    assert res.objective == pytest.approx(21.814351623232273, rel=1e-9)
    assert float(res.metrics["search_root_bound"]) == pytest.approx(21.7883, abs=1e-4)
    assert [k for k in res.metrics if k.startswith("search_")] == [
        "search_method", "search_nodes", "search_bundle_steps", "search_bundle_columns",
        "search_bundle_converged", "search_root_bound", "search_incumbent_from_master",
        "search_incumbent_after_local_search", "search_ils_kicks",
        "search_incumbent_before_branching", "search_bound"]
