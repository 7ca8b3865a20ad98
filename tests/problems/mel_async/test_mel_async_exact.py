"""exact against brute-force enumeration, SCIP's global MINLP, and the relaxation certificate."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mel_opt
from mel_opt.errors import InstanceError
from mel_opt.problems.mel_async import windows as W


def brute_force(doc):
    """(max staleness (6), pair sum of (13)) of the lexicographic best allocation, by
    enumerating every composition of d.

    Independent of mel_opt: the largest whole tau that fits is found by counting up from just
    below the real-valued bound.
    """
    T, d, dl, du = doc["cycle_time_s"], doc["total_samples"], doc["min_samples"], doc["max_samples"]
    co = [(x["c2"], x["c1"], x["c0"]) for x in doc["learners"]]
    K = len(co)

    def tau_of(k, dk):
        a, b, c = co[k]
        t = max(0, int((T - c - b * dk) / (a * dk)) - 2)  # start just below, then count up
        while a * (t + 1) * dk + b * dk + c <= T * (1 + 1e-12):
            t += 1
        return t

    best = None
    for head in itertools.product(range(dl, du + 1), repeat=K - 1):
        last = d - sum(head)
        if not dl <= last <= du:
            continue
        alloc = (*head, last)
        taus = [tau_of(k, alloc[k]) for k in range(K)]
        if min(taus) < 1:
            continue
        pair_sum = sum(abs(a - b) for a, b in itertools.combinations(taus, 2))
        key = (max(taus) - min(taus), pair_sum)
        if best is None or key < best:
            best = key
    return best


@st.composite
def tiny_docs(draw):
    K = draw(st.integers(2, 4))
    d = draw(st.integers(K, 14 if K < 4 else 10))
    T = draw(st.floats(1.0, 6.0))
    learners = []
    for i in range(K):
        learners.append({
            "name": f"l{i}",
            "c2": draw(st.floats(0.005, 0.4)),
            "c1": draw(st.floats(0.0, 0.2)),
            "c0": draw(st.floats(0.0, 0.8)),
        })
    dl = draw(st.integers(1, max(1, d // K)))
    du = draw(st.integers(max(dl, math.ceil(d / K)), d))
    return {"problem": "mel-async", "schema_version": 1, "cycle_time_s": T, "total_samples": d,
            "min_samples": dl, "max_samples": du, "learners": learners}


REGRESSION_TAU0 = {  # kkt-sai's improve step once moved a learner to tau = 0 (found by CI)
    "problem": "mel-async", "schema_version": 1, "cycle_time_s": 1.0, "total_samples": 3,
    "min_samples": 1, "max_samples": 2,
    "learners": [{"name": "l0", "c2": 0.015625, "c1": 0.125, "c0": 0.75},
                 {"name": "l1", "c2": 0.25, "c1": 0.0, "c0": 0.0}]}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_docs())
@example(REGRESSION_TAU0)
def test_exact_matches_brute_force(doc):
    try:
        inst = mel_opt.parse_instance(doc)
    except InstanceError:
        return  # a learner that cannot do one update on d_l: rejected at load (tested elsewhere)
    res = mel_opt.solve(inst, "exact")
    expected = brute_force(doc)
    if expected is None:
        assert res.status.value == "infeasible"
        return
    assert res.status.value == "optimal"
    assert res.verification.feasible
    N = inst.K * (inst.K - 1) / 2
    assert res.metrics["max_staleness"] == expected[0]
    assert res.metrics["avg_staleness"] == pytest.approx(expected[1] / N, abs=1e-12)
    assert res.metrics["proven_levels"] == ["max_staleness", "avg_staleness"]
    # the asynchronous heuristics can never beat the proof (sync is not "busy": its common tau
    # leaves learners idle, so its zero staleness is outside the integer problem (7))
    for method in ("kkt-sai", "eta"):
        other = mel_opt.solve(inst, method)
        if other.status.has_solution:
            assert other.verification.feasible, method
            assert other.metrics["max_staleness"] >= expected[0], method
            if other.metrics["max_staleness"] == expected[0]:  # lexicographic: (13) next
                assert other.metrics["avg_staleness"] >= expected[1] / N - 1e-12, method


@settings(max_examples=100, deadline=None)
@given(tiny_docs())
def test_relaxed_certificate_is_attained(doc):
    try:
        inst = mel_opt.parse_instance(doc)
    except InstanceError:
        return
    rel = W.relaxed_optimum(inst)
    if rel is None:
        return
    # the returned point is feasible for (8) and attains z*
    assert rel.d.sum() == pytest.approx(inst.total_samples, rel=1e-9)
    assert np.all(rel.d >= inst.min_samples - 1e-9) and np.all(rel.d <= inst.max_samples + 1e-9)
    t = inst.c2 * rel.tau * rel.d + inst.c1 * rel.d + inst.c0
    assert np.allclose(t, inst.cycle_time, rtol=1e-9)
    assert np.ptp(rel.tau) == pytest.approx(rel.z, abs=1e-7)
    # and no point of a fine grid over the feasible set does better (K = 2: one free variable)
    if inst.K == 2:
        d_tot = inst.total_samples
        lo = max(inst.min_samples, d_tot - inst.max_samples)
        hi = min(inst.max_samples, d_tot - inst.min_samples)
        grid = np.linspace(lo, hi, 2001)
        d = np.stack([grid, d_tot - grid], axis=1)
        tau = (inst.cycle_time - inst.c0 - inst.c1 * d) / (inst.c2 * d)
        ok = np.all(tau >= 0, axis=1)
        if ok.any():
            assert rel.z <= np.ptp(tau[ok], axis=1).min() + 1e-9


def test_exact_large_k_is_feasible():
    # its solve time against K is measured by `benchmarks/bench_mel_async.py timing`, not here
    from mel_opt.problems.mel_async.generate import generate

    inst = mel_opt.parse_instance(generate("random", learners=2000, seed=3))
    res = mel_opt.solve(inst, "exact")
    assert res.status.value == "optimal" and res.verification.feasible
    # s* = 1 here: the two-level second stage proves the least average staleness at this K
    assert res.metrics["max_staleness"] == 1
    assert res.metrics["proven_levels"] == ["max_staleness", "avg_staleness"]
    tau = np.array(res.solution["tau"])
    m = int((tau == tau.min()).sum())  # (13) = m (K - m) / N with two levels
    N = inst.K * (inst.K - 1) / 2
    assert res.metrics["avg_staleness"] == pytest.approx(m * (inst.K - m) / N, abs=1e-12)


pyscipopt = pytest.importorskip  # keep the name for readability below


@pytest.mark.parametrize("seed", range(6))
def test_exact_matches_scip_minlp(seed):
    scip = pytest.importorskip("pyscipopt")
    rng = np.random.default_rng(seed)
    K, d_tot = 3, 12
    co = [(float(rng.uniform(0.01, 0.2)), float(rng.uniform(0, 0.1)), float(rng.uniform(0, 0.5)))
          for _ in range(K)]
    doc = {"problem": "mel-async", "schema_version": 1, "cycle_time_s": 4.0,
           "total_samples": d_tot, "min_samples": 1, "max_samples": d_tot,
           "learners": [{"name": f"l{i}", "c2": a, "c1": b, "c0": c}
                        for i, (a, b, c) in enumerate(co)]}
    try:
        inst = mel_opt.parse_instance(doc)
    except InstanceError:
        pytest.skip("drawn learner cannot do one update")
    res = mel_opt.solve(inst, "exact")

    m = scip.Model()
    m.hideOutput()
    T = 4.0
    d = [m.addVar(vtype="I", lb=1, ub=d_tot) for _ in range(K)]
    tau = [m.addVar(vtype="I", lb=1, ub=10_000) for _ in range(K)]
    lo = m.addVar(lb=0, ub=10_000)
    hi = m.addVar(lb=0, ub=10_000)
    for k, (a, b, c) in enumerate(co):
        m.addCons(a * tau[k] * d[k] + b * d[k] + c <= T)
        # busy: one more update would not fit (strict, with a margin above SCIP's tolerance)
        m.addCons(a * (tau[k] + 1) * d[k] + b * d[k] + c >= T + 1e-5)
        m.addCons(tau[k] <= hi)
        m.addCons(tau[k] >= lo)
    m.addCons(sum(d) == d_tot)
    m.setObjective(hi - lo, "minimize")
    m.optimize()
    if m.getStatus() == "infeasible":
        assert res.status.value == "infeasible"
        return
    assert m.getStatus() == "optimal"
    assert res.metrics["max_staleness"] == pytest.approx(m.getObjVal(), abs=1e-6)
