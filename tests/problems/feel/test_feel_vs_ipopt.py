"""Closed form against IPOPT on P4 (convex, fixed B) and P1 (non-convex, multi-start)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.problems.feel import formulation
from mel_opt.problems.feel.closed_form import downlink, solve_continuous
from mel_opt.problems.feel.generate import generate
from mel_opt.problems.feel.latency import coefficients
from mel_opt.problems.feel.multistart import point_efficiency
from mel_opt.solvers import ipopt
from mel_opt.solvers.base import TerminationCondition


def instance(K: int, seed: int, processor: str = "cpu", bits: str = "32",
             model: str = "densenet121", B: int | None = None):
    params = {"processor": processor, "bits_per_element": bits, "model": model}
    doc = generate(None, learners=K, seed=seed, params=params)
    if B is not None:
        doc["global_batch"] = B
    return parse_instance(doc)


def ipopt_p4(inst, B: float):
    m = formulation.build_p4_model(inst, B)
    res = ipopt.solve_nlp(m, tol=1e-11)
    assert res.termination == TerminationCondition.LOCALLY_OPTIMAL, res.message
    batch, up, dn = formulation.unscale(inst, m)
    sc = formulation.scale_of(inst)
    return res, m, batch, up, dn, sc


# Random convex P4 instances: CPU and GPU, several models and gradient sizes, B anywhere in
# [K, K B_max] (for the GPU ones above sum_k B_k^th, where the optimum is unique).
P4_CASES = [
    (6, 1, "cpu", "32", "densenet121", 0.05),
    (12, 2, "cpu", "32", "densenet121", 0.65),
    (9, 3, "cpu", "1", "mobilenetv2", 0.1),
    (20, 4, "cpu", "4", "resnet18", 0.3),
    (12, 5, "gpu", "32", "densenet121", 0.6),
    (7, 6, "gpu", "2", "mobilenetv2", 0.8),
]


@pytest.mark.parametrize(("K", "seed", "proc", "bits", "model", "frac"), P4_CASES)
def test_p4_closed_form_equals_ipopt(K, seed, proc, bits, model, frac) -> None:
    inst = instance(K, seed, proc, bits, model)
    co = coefficients(inst)
    B = float(co.lo.sum() + frac * (co.hi.sum() - co.lo.sum()))
    cf = solve_continuous(co, B)
    res, m, batch, up, dn, sc = ipopt_p4(inst, B)
    # objective: the efficiency of both points, recomputed from the latency model
    e_ip = point_efficiency(co, batch, up, dn)
    assert cf.efficiency == pytest.approx(e_ip, rel=1e-6)
    assert cf.efficiency >= e_ip * (1 - 1e-9)  # the closed form is the optimum
    # the optimum is unique here: batches and slots agree too
    np.testing.assert_allclose(batch, cf.uplink.batch, rtol=1e-5, atol=1e-4 * inst.max_batch)
    np.testing.assert_allclose(up, cf.uplink.slots, rtol=1e-5, atol=1e-7 * inst.frame_up)
    np.testing.assert_allclose(dn, cf.downlink.slots, rtol=1e-5, atol=1e-7 * inst.frame_down)
    # slot budgets (17b), (17c) of the closed form hold to 1e-9
    assert cf.uplink.slots.sum() <= inst.frame_up * (1 + 1e-9)
    assert cf.downlink.slots.sum() <= inst.frame_down * (1 + 1e-9)


def interior_thetas(co, batch, L) -> np.ndarray:
    """theta_k = ((L - e_k)/c_k - B_k) / g_k for devices strictly inside their bounds."""
    inner = (batch > co.lo + 1e-3) & (batch < co.hi - 1e-3)
    return (((L - co.e) / co.c - batch) / co.g)[inner]


def test_one_scalar_still_parameterises_interior_devices_when_bounds_bind() -> None:
    # Table-I devices with B near K B_max: several batches sit at B_max.
    inst = instance(12, 2)
    co = coefficients(inst)
    B = 1300.0
    cf = solve_continuous(co, B)
    at_top = int(np.sum(cf.uplink.batch >= co.hi - 1e-9))
    inner = int(np.sum((cf.uplink.batch > co.lo) & (cf.uplink.batch < co.hi)))
    assert at_top >= 2 and inner >= 3
    res, m, batch, up, dn, sc = ipopt_p4(inst, B)
    L_ip = float(np.max(co.compute_time(batch) + co.a / up))
    th = interior_thetas(co, batch, L_ip)
    assert th.size == inner
    np.testing.assert_allclose(th, cf.uplink.theta, rtol=1e-4)
    assert point_efficiency(co, batch, up, dn) == pytest.approx(cf.efficiency, rel=1e-7)


def test_slot_multiplier_normalisation_changes_when_bounds_bind() -> None:
    # KKT of P4: lambda_k = mu tau_k^2 / a_k and sum lambda_k = 1 give the multiplier of (17b)
    # as mu_L = 1 / sum_k tau_k^2 / a_k [s/s]. Only with every device interior does it equal
    # theta^2 / sum V (the paper's normalisation, mu* Delta L); with bounds active it does not.
    for B, all_inside in ((400.0, True), (1300.0, False)):
        inst = instance(12, 2)
        co = coefficients(inst)
        cf = solve_continuous(co, B)
        res, m, batch, up, dn, sc = ipopt_p4(inst, B)
        mu_ipopt = abs(res.multipliers["up_budget"]) * sc.L_ref / inst.frame_up
        tau = cf.uplink.slots
        mu_L = 1.0 / float((tau * tau / co.a).sum())
        assert mu_ipopt == pytest.approx(mu_L, rel=1e-4)
        paper = cf.uplink.theta**2 / float((1.0 / co.c).sum())
        if all_inside:
            assert paper == pytest.approx(mu_L, rel=1e-9)
        else:
            assert abs(paper / mu_L - 1) > 0.01


def test_downlink_latency_is_the_same_for_every_global_batch() -> None:
    inst = instance(8, 11, bits="4")
    co = coefficients(inst)
    D = downlink(co).latency
    for B in (8.0, 200.0, 1000.0):
        res, m, batch, up, dn, sc = ipopt_p4(inst, B)
        # D of IPOPT's slots (scaled into the frame: IPOPT overruns it by ~1e-8; its epigraph
        # variable d itself may sit ~1e-6 below max_k t_k^D + t_k^M within its tolerance)
        dn = dn * min(1.0, inst.frame_down / dn.sum())
        assert float(np.max(co.m + co.b / dn)) == pytest.approx(D, rel=1e-8)


def test_gpu_below_thresholds_ipopt_agrees_with_the_data_bound_answer() -> None:
    # IPOPT solves the piecewise (27) on the whole range 1..B_max (no Lemma 2 assumed).
    inst = instance(6, 12, "gpu")
    co = coefficients(inst)
    B = float(co.lo.sum()) / 2
    cf = solve_continuous(co, B)
    res, m, batch, up, dn, sc = ipopt_p4(inst, B)
    assert point_efficiency(co, batch, up, dn) == pytest.approx(cf.efficiency, rel=1e-7)


P1_CASES = [
    (6, 21, "cpu", "32", "densenet121"),
    (12, 22, "cpu", "1", "mobilenetv2"),
    (10, 23, "cpu", "8", "resnet18"),
    (8, 24, "gpu", "32", "densenet121"),
    (8, 25, "gpu", "0.05", "mobilenetv2"),
]


@pytest.mark.parametrize(("K", "seed", "proc", "bits", "model"), P1_CASES)
def test_p1_closed_form_at_least_ipopt_multistart(K, seed, proc, bits, model) -> None:
    inst = instance(K, seed, proc, bits, model)
    res = solve(inst, "ipopt", options={"starts": 3}, seed=seed)
    assert res.ok, res.message
    best_ipopt = max(r["efficiency"] for r in res.metrics["ipopt_runs"])
    cf = solve(inst, "closed-form")
    assert cf.ok
    assert cf.metrics["continuous_efficiency"] >= best_ipopt * (1 - 1e-6)
    # and IPOPT finds the same optimum (P1 is quasiconcave in B, so a local optimum is global)
    assert best_ipopt == pytest.approx(cf.metrics["continuous_efficiency"], rel=1e-6)
    # whole batches: the closed form searches whole B, IPOPT only rounds its own B
    assert cf.objective >= res.objective * (1 - 1e-12)


def test_ipopt_method_answers_pass_verification_with_tight_slot_budgets() -> None:
    inst = instance(12, 31, B=500)
    res = solve(inst, "ipopt")
    # rounded whole batches: feasible, no optimality claim; IPOPT's own stop is kept
    assert res.ok and res.status.value == "feasible"
    assert res.termination.value == "locally_optimal"
    assert res.solution["global_batch"] == 500
    assert all(isinstance(b, int) for b in res.solution["batch"])
    assert sum(res.solution["uplink_slots"]) <= inst.frame_up * (1 + 1e-9)
    assert sum(res.solution["downlink_slots"]) <= inst.frame_down * (1 + 1e-9)
    cf = solve(inst, "closed-form")
    # the same whole split: both end with the exact repair for B = 500
    assert res.objective == pytest.approx(cf.objective, rel=1e-12)
    assert res.metrics["continuous_efficiency"] == pytest.approx(
        cf.metrics["continuous_efficiency"], rel=1e-6)
    assert 0.0 <= res.metrics["rounding_loss"] < 1e-3


def test_whole_batches_break_unimodality_in_b() -> None:
    # The shipped K = 12 set-up: the best whole B is not next to the continuous optimum, so
    # rounding IPOPT's B (what the ipopt method does) loses to the closed form's B search.
    inst = instance(12, 1)
    cf = solve(inst, "closed-form")
    Bc = cf.metrics["continuous_global_batch"]
    assert abs(cf.solution["global_batch"] - Bc) > 1.0
    ip = solve(inst, "ipopt", options={"starts": 1})
    assert ip.objective < cf.objective
    assert math.isclose(ip.metrics["continuous_global_batch"], Bc, rel_tol=1e-5)
