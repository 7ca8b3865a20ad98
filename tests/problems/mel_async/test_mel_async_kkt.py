"""Multipliers of the Lagrangian (9) at kkt-sai's point, checked on cases worked by hand.

Notation of kkt.py: lambda (8c), omega (8d), nu' (d_k <= d_u), mu (tau_k - tau_l <= z).
"""

from __future__ import annotations

import numpy as np
import pytest

import mel_opt
from mel_opt.problems.mel_async import kkt
from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.generate import generate


def _kkt_of(make_doc, *args):
    inst = mel_opt.parse_instance(make_doc(*args))
    res = mel_opt.solve(inst, "kkt-sai")
    return inst, res.metrics["kkt"]


def test_k2_zero_staleness_multipliers_vanish(make_doc):
    # tau_k = 1000/d1 = 500/d2 balance at d = (20, 10), tau = 50, z = 0. Stationarity in d_k:
    # 0.5 lambda_1 + omega = 0, lambda_2 + omega = 0; in tau_k: 0.2 lambda_1 = mu' - mu =
    # -0.2 lambda_2, so lambda_1 = -lambda_2 -> omega = 0, lambda = 0 and mu = mu' = 1/2.
    # Theorem 1 is then 0/0 for both learners.
    _, r = _kkt_of(make_doc, 10.0, 30, 1, 30, [(0.01, 0, 0), (0.02, 0, 0)])
    assert r["lambda"] == pytest.approx([0, 0], abs=1e-12)
    assert r["omega"] == pytest.approx(0, abs=1e-12)
    assert r["u"] == pytest.approx([0.5, -0.5]) and r["u_prime"] == pytest.approx([-0.5, 0.5])
    assert r["mu_total"] == pytest.approx(1.0)
    assert r["is_kkt_point"] and r["stationarity"] < 1e-12
    assert r["theorem1_defined"] == 0 and r["eq11_residual"] is None
    assert r["eq11_rhs"] == [None, None]


def test_k2_upper_bound_active(make_doc):
    # d_u = 18: learner 1 is clipped, d = (18, 12), tau = (500/9, 125/3), z = 125/9.
    # Only mu (tau_1 - tau_2 <= z) is active: mu = 1; tau rows: 0.18 lambda_1 + 1 = 0 and
    # 0.24 lambda_2 - 1 = 0 -> lambda = (-50/9, 25/6); d_2 row: (5/6) lambda_2 + omega = 0 ->
    # omega = -125/36; d_1 row: (5/9) lambda_1 + omega + nu'_1 = 0 -> nu'_1 = 2125/324.
    inst, r = _kkt_of(make_doc, 10.0, 30, 1, 18, [(0.01, 0, 0), (0.02, 0, 0)])
    assert r["lambda"] == pytest.approx([-50 / 9, 25 / 6], rel=1e-9)
    assert r["omega"] == pytest.approx(-125 / 36, rel=1e-9)
    assert r["nu_prime"] == pytest.approx([2125 / 324, 0], rel=1e-9, abs=1e-12)
    assert r["nu"] == pytest.approx([0, 0], abs=1e-12)
    assert r["u"] == pytest.approx([1, -1], rel=1e-9)
    assert r["active_pairs"] == 1 and r["is_kkt_point"]
    # Theorem 1 recovers the point: (11) gives tau, (12) gives d
    assert r["theorem1_defined"] == 2
    assert r["eq11_rhs"] == pytest.approx([500 / 9, 125 / 3], rel=1e-9)
    assert r["eq12_rhs"] == pytest.approx([18, 12], rel=1e-9)
    assert r["eq11_residual"] < 1e-9 and r["eq12_residual"] < 1e-9
    assert r["complementarity"] < 1e-9


def test_k3_two_learners_at_the_bottom(make_doc):
    # tau_k = (1000, 500, 250)/d_k, d = 35, bounds [5, 15]: d_1 = 15 (clipped), the others share
    # a common tau: 750/t = 20 -> t = 37.5, d = (15, 40/3, 20/3), tau = (200/3, 37.5, 37.5).
    # Active: mu_12, mu_13 with mu_12 + mu_13 = 1; tau rows give lambda_1 = -1/0.15,
    # lambda_2 = 3.75 mu_12, lambda_3 = 3.75 mu_13; d rows 0.75 lambda_2 = 1.5 lambda_3 = -omega
    # -> mu = (2/3, 1/3), lambda = (-20/3, 2.5, 1.25), omega = -1.875, nu'_1 = 40/9 + 1.875.
    _, r = _kkt_of(make_doc, 10.0, 35, 5, 15, [(0.01, 0, 0), (0.02, 0, 0), (0.04, 0, 0)])
    assert r["lambda"] == pytest.approx([-20 / 3, 2.5, 1.25], rel=1e-9)
    assert r["omega"] == pytest.approx(-1.875, rel=1e-9)
    assert r["nu_prime"][0] == pytest.approx(40 / 9 + 1.875, rel=1e-9)
    assert r["u"] == pytest.approx([1, -2 / 3, -1 / 3], rel=1e-9)
    assert r["eq11_rhs"] == pytest.approx([200 / 3, 37.5, 37.5], rel=1e-9)
    assert r["eq12_rhs"] == pytest.approx([15, 40 / 3, 20 / 3], rel=1e-9)
    assert r["is_kkt_point"]


def test_k3_zero_staleness(make_doc):
    # tau = 10 for d = (10, 5, 2) (test_mel_async_known): d rows lambda_k = -omega/(10 C2_k),
    # tau rows lambda_k + net_k = 0 with sum_k net_k = 0 -> omega = 0 and lambda = 0.
    _, r = _kkt_of(make_doc, 12.0, 17, 1, 17, [(0.1, 0, 2.0), (0.2, 0, 2.0), (0.5, 0, 2.0)])
    assert r["lambda"] == pytest.approx([0, 0, 0], abs=1e-12)
    assert r["active_pairs"] == 6 and r["mu_total"] == pytest.approx(1.0)
    assert np.add(r["u"], r["u_prime"]) == pytest.approx([0, 0, 0], abs=1e-12)


def test_a_non_kkt_point_is_reported_as_such(make_doc):
    # the equal split d = (15, 15) of the first case: tau = (66.7, 33.3), z > 0, no bound active.
    # mu = 1 forces lambda_1 < 0 < lambda_2, and the d rows then need omega of both signs.
    inst = mel_opt.parse_instance(make_doc(10.0, 30, 1, 30, [(0.01, 0, 0), (0.02, 0, 0)]))
    d = np.array([15.0, 15.0])
    r = kkt.analyse(inst, W.relaxed_tau(inst, d), d)
    assert not r["is_kkt_point"]
    assert r["stationarity"] > 1e-3


@pytest.mark.parametrize(("K", "seed", "T"), [(10, 0, 7.5), (20, 1, 15.0)])
def test_ipopt_multipliers_match(K, seed, T):
    # IPOPT solves the same relaxation; where its point is kkt-sai's, its multipliers of (8c)
    # and (8d) (same sign convention as (9)) must be ours.
    inst = mel_opt.parse_instance(generate("mohammad2020", learners=K, seed=seed,
                                           params={"cycle_time_s": str(T)}))
    ours = mel_opt.solve(inst, "kkt-sai").metrics
    ip = mel_opt.solve(inst, "ipopt").metrics
    assert ip["relaxed_objective"] == pytest.approx(W.relaxed_optimum(inst).z, abs=1e-6)
    assert ours["kkt"]["is_kkt_point"] and ip["kkt"]["is_kkt_point"]
    scale = max(abs(x) for x in ours["kkt"]["lambda"])
    assert np.allclose(ip["ipopt_lambda"], ours["kkt"]["lambda"], atol=1e-4 * scale)
    assert ip["ipopt_omega"] == pytest.approx(ours["kkt"]["omega"], abs=1e-4 * scale)
