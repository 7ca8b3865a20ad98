"""adaptive-tau: the vectorised scan against a direct evaluation of the authors' formula."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.problems.adaptive_tau import objective_values, scan
from mel_opt.result import Status

C, B = 0.013015156, 0.131604348  # config.py mean local update / aggregation times [s]


def doc(**kw: object) -> dict:
    base: dict = {"problem": "adaptive-tau", "schema_version": 1, "name": "t", "beta": 1.0,
                  "delta": 0.1, "rho": 1.0, "step_size": 0.01, "phi": 0.025,
                  "tau_current": 10, "tau_max": 100, "use_min_loss": True,
                  "resources": [{"budget": 15.0, "local_cost": C, "global_cost": B}]}
    base.update(kw)
    return base


def direct_tau(beta: float, delta: float, rho: float, eta: float, phi: float, c: float,
               b: float, R: float, tau_current: int, tau_max: int, use_min_loss: bool) -> int:
    """The authors' rule read literally: a Python loop with math.pow and strict <."""
    beta = max(beta, 1e-5)
    best_tau, best = 1, math.inf
    for tau in range(1, 10 * tau_current + 1):
        try:
            grow = math.pow(eta * beta + 1, tau)
        except OverflowError:
            grow = math.inf
        h = max(0.0, (delta / beta) * (grow - 1) - eta * delta * tau) if delta else 0.0
        T = ((R - c - b) if use_min_loss else R) * tau / (c * tau + b)
        rh = rho * h if rho else 0.0
        if math.isinf(rh):
            continue
        G = (1 + math.sqrt(max(0.0, 1 + 4 * T**2 * phi * rho * eta * h / tau))) / (
            2 * T * eta * phi) + rh
        if G < best:
            best, best_tau = G, tau
    return min(best_tau, tau_max)


GRID = list(itertools.product(
    [1e-6, 0.3, 2.0, 25.0],      # beta (1e-6 is floored at 1e-5)
    [0.0, 0.05, 0.7],            # delta (0: h = 0 everywhere)
    [0.0, 0.5, 8.0],             # rho
    [0.025, 5e-5],               # phi (SVM, CNN)
    [1, 10, 40],                 # tau_current
    [True, False],               # use_min_loss
))


def test_scan_matches_direct_evaluation_on_a_grid() -> None:
    mismatches = []
    for beta, delta, rho, phi, tau_cur, min_loss in GRID:
        d = doc(beta=beta, delta=delta, rho=rho, phi=phi, tau_current=tau_cur,
                use_min_loss=min_loss)
        inst = parse_instance(d)
        got = scan(inst).tau_capped
        want = direct_tau(beta, delta, rho, 0.01, phi, C, B, 15.0, tau_cur, 100, min_loss)
        if got != want:
            # only a tie in floating point may differ: same G to 1e-12 relative
            G = objective_values(np.array([got, want], dtype=float), inst)
            if not math.isclose(G[0], G[1], rel_tol=1e-12):
                mismatches.append((beta, delta, rho, phi, tau_cur, min_loss, got, want))
    assert not mismatches, mismatches
    assert len(GRID) == 432


def test_h_zero_gives_the_top_of_the_range_capped() -> None:
    # delta = 0 -> h = 0 -> G = 1 / (T eta phi), strictly decreasing as T(tau) grows with tau:
    # the first minimiser is the top of the range, 10 * tau_current.
    inst = parse_instance(doc(delta=0.0, tau_current=5))
    sc = scan(inst)
    assert sc.tau_first_min == 50 and sc.tau == 50
    # G(50) = 1 / (T(50) eta phi), T(50) = (15 - c - b) * 50 / (50 c + b)
    T50 = (15 - C - B) * 50 / (50 * C + B)
    assert sc.G_min == pytest.approx(1 / (T50 * 0.01 * 0.025), rel=1e-12)
    capped = scan(parse_instance(doc(delta=0.0, tau_current=5, tau_max=20)))
    assert (capped.tau_first_min, capped.tau_capped, capped.tau) == (50, 20, 20)
    res = solve(parse_instance(doc(delta=0.0, tau_current=5, tau_max=20)))
    assert res.status is Status.FEASIBLE and res.solution == {"tau": 20}
    assert "capped at tau_max = 20" in res.message


def test_rho_zero_behaves_as_h_zero() -> None:
    sc = scan(parse_instance(doc(rho=0.0, delta=5.0, beta=50.0, tau_current=3)))
    assert sc.tau_first_min == 30


def test_end_of_budget_rule_worked_by_hand() -> None:
    # beta 1, delta 0.1, rho 1, phi 0.025, tau_current 10: tau* = 66 -> capped 66 (<= 100).
    # used s = 14.5 of R = 15: s + c (66 + 1) + 2 b = 14.5 + 0.872 + 0.263 = 15.635 >= 15,
    # so tau = floor((15 - 14.5 - 2 b - c) / c) = floor(0.223776 / 0.013015) = floor(17.19) = 17
    inst = parse_instance(doc(resources=[{"budget": 15.0, "local_cost": C, "global_cost": B,
                                          "used": 14.5}]))
    sc = scan(inst)
    assert sc.tau_first_min == 66
    assert sc.last_round and sc.tau == 17
    res = solve(inst)
    assert res.solution == {"tau": 17} and res.status is Status.FEASIBLE
    assert "end of budget" in res.message
    # too little left even for one update: clipped up to 1
    late = scan(parse_instance(doc(resources=[{"budget": 15.0, "local_cost": C,
                                               "global_cost": B, "used": 14.9}])))
    assert late.last_round and late.tau == 1


def test_end_of_budget_rule_without_min_loss() -> None:
    # without use_min_loss the test is s + c tau + b >= R and tau = floor((R - s - b) / c):
    # s = 14.5: floor((0.5 - 0.131604) / 0.013015) = floor(28.31) = 28
    inst = parse_instance(doc(use_min_loss=False,
                              resources=[{"budget": 15.0, "local_cost": C, "global_cost": B,
                                          "used": 14.5}]))
    sc = scan(inst)
    assert sc.last_round and sc.tau == min(28, sc.tau_capped)
    assert sc.tau == 28


def test_not_the_end_of_budget_when_there_is_room() -> None:
    sc = scan(parse_instance(doc(resources=[{"budget": 15.0, "local_cost": C,
                                             "global_cost": B, "used": 10.0}])))
    # 10 + c * 67 + 2 b = 11.135 < 15: the rule does not fire
    assert not sc.last_round and sc.tau == sc.tau_first_min == 66


def test_several_resources_take_the_tightest() -> None:
    # T(tau) = tau min_m R'_m / (c_m tau + b_m). A second resource identical to the first but
    # with a 10x larger budget changes nothing; one with a smaller budget takes over.
    one = parse_instance(doc())
    loose = parse_instance(doc(resources=[{"budget": 15.0, "local_cost": C, "global_cost": B},
                                          {"budget": 150.0, "local_cost": C, "global_cost": B}]))
    assert np.array_equal(objective_values(np.arange(1.0, 101.0), one),
                          objective_values(np.arange(1.0, 101.0), loose))
    # energy-like resource: R = 20, c = 0.02, b = 0.1 (generate's two-resources preset)
    two = parse_instance(doc(resources=[{"budget": 15.0, "local_cost": C, "global_cost": B},
                                        {"budget": 20.0, "local_cost": 0.02, "global_cost": 0.1}]))
    taus = np.arange(1.0, 101.0)
    T1 = (15 - C - B) * taus / (C * taus + B)
    T2 = (20 - 0.02 - 0.1) * taus / (0.02 * taus + 0.1)
    T = np.minimum(T1, T2)
    assert (T2 < T1).any() and (T2 > T1).any()  # the binding resource changes with tau
    h = np.maximum(0.0, (0.1 / 1.0) * ((0.01 * 1.0 + 1) ** taus - 1) - 0.01 * 0.1 * taus)
    G = (1 + np.sqrt(1 + 4 * T**2 * 0.025 * 1.0 * 0.01 * h / taus)) / (2 * T * 0.01 * 0.025) + h
    assert np.allclose(objective_values(taus, two), G, rtol=1e-9)
    assert scan(two).tau_first_min == int(np.argmin(G)) + 1


def test_overflow_is_never_chosen() -> None:
    # eta beta = 0.01 * 1e4 = 100: (101)^tau overflows near tau = 154; range 1..1000
    inst = parse_instance(doc(beta=1e4, delta=1.0, rho=1.0, tau_current=100, tau_max=1000))
    sc = scan(inst)
    assert np.isinf(sc.G[-1]) and math.isfinite(sc.G_min)
    assert sc.tau_first_min == direct_tau(1e4, 1.0, 1.0, 0.01, 0.025, C, B, 15.0, 100, 1000,
                                          True)


def test_fixed_baseline_and_verifier() -> None:
    inst = parse_instance(doc())
    fixed = solve(inst, "fixed")
    best = solve(inst, "scan")
    assert fixed.solution == {"tau": 10} and best.solution == {"tau": 66}
    assert best.ok and fixed.ok
    assert best.objective < fixed.objective  # G(66) < G(10)
    assert best.objective == pytest.approx(best.metrics["G_min"], rel=1e-12)
    # verifier's T(66) = (15 - c - b) * 66 / (66 c + b)
    assert best.metrics["effective_iterations"] == pytest.approx(
        (15 - C - B) * 66 / (66 * C + B), rel=1e-12)
    forced = solve(inst, "fixed", options={"tau": 500})
    assert forced.solution == {"tau": 100}  # capped at tau_max
