"""Known answers for mel-async worked out by hand (K = 2 and 3)."""

from __future__ import annotations

import pytest

import mel_opt
from mel_opt.problems.mel_async import windows as W


def _solve(doc, method):
    return mel_opt.solve(mel_opt.parse_instance(doc), method)


def test_k2_balanced_zero_staleness(make_doc):
    # tau_1(d) = floor(10 / (0.01 d)) = floor(1000/d), tau_2(d) = floor(500/d); d1 + d2 = 30.
    # Equal taus need 1000/d1 = 500/d2, so d = (20, 10) and tau = (50, 50): staleness 0, and no
    # larger common tau exists (tau >= 51 needs d1 <= 19, d2 <= 9: sum 28 < 30).
    doc = make_doc(10.0, 30, 1, 30, [(0.01, 0, 0), (0.02, 0, 0)])
    res = _solve(doc, "exact")
    assert res.status.value == "optimal"
    assert res.solution == {"d": [20, 10], "tau": [50, 50]}
    assert res.objective == 0
    assert res.metrics["relaxed_optimum"] == pytest.approx(0.0, abs=1e-9)
    assert res.verification.feasible


def test_k2_integer_staleness_31(make_doc):
    # tau_1 = floor(1000/d1), tau_2 = floor(333.33/d2), d1 + d2 = 10:
    # d1 = 7: (142, 111) -> 31;  d1 = 8: (125, 166) -> 41;  d1 = 6: (166, 83) -> 83.
    # The relaxation balances at d1 = 7.5 (tau = 133.3 both): z* = 0.
    doc = make_doc(10.0, 10, 1, 10, [(0.01, 0, 0), (0.03, 0, 0)])
    res = _solve(doc, "exact")
    assert res.solution == {"d": [7, 3], "tau": [142, 111]}
    assert res.metrics["max_staleness"] == 31
    assert res.metrics["avg_staleness"] == 31
    assert res.metrics["relaxed_optimum"] == pytest.approx(0.0, abs=1e-9)
    inst = mel_opt.parse_instance(doc)
    rel = W.relaxed_optimum(inst)
    assert rel.d[0] == pytest.approx(7.5, rel=1e-9)
    assert rel.tau[0] == pytest.approx(400 / 3, rel=1e-9)


K3 = [(0.1, 0, 2.0), (0.2, 0, 2.0), (0.5, 0, 2.0)]  # tau_k = floor(10 / (c2 d))


def test_k3_exact_sync_eta(make_doc):
    # tau = floor(100/d1), floor(50/d2), floor(20/d3); d = 17.
    # Relaxed balance: d_k = 100/t, 50/t, 20/t sum 170/t = 17 -> t = 10, d = (10, 5, 2),
    # integer taus (10, 10, 10); tau >= 11 would need d <= (9, 4, 1), sum 14 < 17.
    doc = make_doc(12.0, 17, 1, 17, K3)
    exact = _solve(doc, "exact")
    assert exact.solution == {"d": [10, 5, 2], "tau": [10, 10, 10]}
    sync = _solve(doc, "sync")  # largest common tau is 10 as well
    assert sync.solution["tau"] == [10, 10, 10] and sync.solution["d"] == [10, 5, 2]
    # ETA: d = (6, 6, 5) -> tau = (16, 8, 4): max staleness 12, avg (8 + 12 + 4) / 3 = 8.
    eta = _solve(doc, "eta")
    assert eta.solution == {"d": [6, 6, 5], "tau": [16, 8, 4]}
    assert eta.metrics["max_staleness"] == 12
    assert eta.metrics["avg_staleness"] == pytest.approx(8.0)
    kkt = _solve(doc, "kkt-sai")
    assert kkt.metrics["max_staleness"] == 0
    for r in (exact, sync, eta, kkt):
        assert r.verification.feasible


def test_k3_idle_times(make_doc):
    # exact on K3: t_k = c2 tau d + c0 = 0.1*10*10 + 2 = 12, 0.2*10*5 + 2 = 12, 0.5*10*2 + 2 = 12.
    res = _solve(make_doc(12.0, 17, 1, 17, K3), "exact")
    assert res.metrics["idle_s"] == pytest.approx([0.0, 0.0, 0.0], abs=1e-12)
    assert res.metrics["learners_not_busy"] == 0


def test_sync_leaves_idle_time(make_doc):
    # K = 2 staleness-31 case: the common tau is the largest t with
    # floor(1000/t) + floor(333.33/t) >= 10 -> t = 133: 7 + 2 = 9 < 10; t = 125: 8 + 2 = 10.
    # t = 126..132: floor(1000/t) = 7, floor(333.3/t) = 2 -> 9. So tau = 125 with d = (8, 2).
    res = _solve(make_doc(10.0, 10, 1, 10, [(0.01, 0, 0), (0.03, 0, 0)]), "sync")
    assert res.solution == {"d": [8, 2], "tau": [125, 125]}
    # learner 2 idles: 10 - 0.03 * 125 * 2 = 2.5 s
    assert res.metrics["idle_s"][1] == pytest.approx(2.5)
    assert res.metrics["learners_not_busy"] == 1


def test_infeasible_but_well_formed(make_doc):
    # each learner can do one update on d_l = 1 sample, but with one update each they can
    # take at most floor(1/0.3) + floor(1/0.3) = 6 < 10 samples.
    doc = make_doc(1.0, 10, 1, 10, [(0.2, 0.1, 0.0), (0.2, 0.1, 0.0)])
    for method in ("exact", "kkt-sai", "sync"):
        res = _solve(doc, method)
        assert res.status.value == "infeasible", method
        assert "at most 6 samples" in res.message
