"""IPOPT on the relaxation (8) against the certified optimum, and its repaired integer answer."""

from __future__ import annotations

import numpy as np
import pytest

import mel_opt
from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.generate import generate


@pytest.mark.parametrize(("preset", "K", "seed", "form"), [
    ("mohammad2020", 5, 0, "pairwise"),
    ("mohammad2020", 12, 1, "pairwise"),
    ("mohammad2020", 20, 2, "minmax"),
    ("random", 8, 3, "pairwise"),
    ("random", 15, 4, "pairwise"),
    ("random", 15, 4, "minmax"),
    ("random", 60, 5, "minmax"),
])
def test_ipopt_never_below_certified_relaxed_optimum(preset, K, seed, form):
    inst = mel_opt.parse_instance(generate(preset, learners=K, seed=seed,
                                           params={"cycle_time_s": "7.5"}))
    cert = W.relaxed_optimum(inst)
    res = mel_opt.solve(inst, "ipopt", options={"form": form})
    if cert is None:
        assert not res.status.has_solution
        return
    z = res.metrics["relaxed_objective"]
    assert res.metrics["relaxed_status"] == "locally_optimal"
    assert z >= cert.z - 1e-6
    if res.status.has_solution:
        assert res.verification.feasible
        assert res.metrics["learners_not_busy"] == 0
        exact = mel_opt.solve(inst, "exact")
        assert res.metrics["max_staleness"] >= exact.metrics["max_staleness"]


def test_ipopt_finds_zero_staleness_when_relaxation_allows():
    # hand-worked K = 2 case (test_mel_async_known): the relaxation balances at d1 = 7.5
    doc = {"problem": "mel-async", "schema_version": 1, "cycle_time_s": 10.0,
           "total_samples": 10, "min_samples": 1, "max_samples": 10,
           "learners": [{"name": "a", "c2": 0.01, "c1": 0, "c0": 0},
                        {"name": "b", "c2": 0.03, "c1": 0, "c0": 0}]}
    res = mel_opt.solve(mel_opt.parse_instance(doc), "ipopt")
    assert res.metrics["relaxed_objective"] == pytest.approx(0.0, abs=1e-6)
    # floored 7.5 -> 7, repaired to sum 10 -> d = (7, 3): the integer answer of exact
    assert res.solution["d"] == [7, 3]
    assert res.solution["tau"] == [142, 111]


def test_pairwise_form_has_quadratic_many_rows():
    from mel_opt.problems.mel_async.formulation import build_relaxed_model

    inst = mel_opt.parse_instance(generate("random", learners=10, seed=0))
    import pyomo.environ as pyo

    pw = build_relaxed_model(inst, "pairwise")
    mm = build_relaxed_model(inst, "minmax")
    n_pw = sum(1 for _ in pw.component_data_objects(pyo.Constraint))
    n_mm = sum(1 for _ in mm.component_data_objects(pyo.Constraint))
    assert n_pw == 10 + 1 + 2 * 45  # (8c), (8d), two rows per pair for (8b)
    assert n_mm == 10 + 1 + 2 * 10 + 1


def test_kkt_point_satisfies_time_equality():
    from mel_opt.problems.mel_async.kkt import kkt_point

    inst = mel_opt.parse_instance(generate("mohammad2020", learners=10, seed=4))
    t_bar, d = kkt_point(inst)
    assert d.sum() == pytest.approx(inst.total_samples, rel=1e-9)
    inside = (d > inst.min_samples) & (d < inst.max_samples)
    t = inst.c2 * t_bar * d + inst.c1 * d + inst.c0
    assert np.allclose(t[inside], inst.cycle_time, rtol=1e-9)  # (8c) with the common tau


@pytest.mark.parametrize(("K", "seed"), [(15, 4), (60, 5)])
def test_large_k_options_keep_the_answer(K, seed, monkeypatch):
    # The options used from LARGE_K learners on change how IPOPT gets there, not where: the
    # same relaxed optimum (the certified one) and a verified integer answer.
    from mel_opt.problems.mel_async import methods

    inst = mel_opt.parse_instance(generate("random", learners=K, seed=seed,
                                           params={"cycle_time_s": "7.5"}))
    cert = W.relaxed_optimum(inst)
    plain = mel_opt.solve(inst, "ipopt")
    monkeypatch.setattr(methods, "LARGE_K", 2)
    tuned = mel_opt.solve(inst, "ipopt")
    assert plain.metrics["ipopt_options"] == {}
    assert tuned.metrics["ipopt_options"] == methods.LARGE_K_IPOPT_OPTIONS
    assert tuned.status.has_solution and tuned.verification.feasible
    assert tuned.metrics["relaxed_objective"] >= cert.z - 1e-6
    assert tuned.metrics["relaxed_objective"] == pytest.approx(
        plain.metrics["relaxed_objective"], abs=1e-4)
