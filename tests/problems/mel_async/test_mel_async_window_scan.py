"""The fast parts of the exact window algorithm against direct, slow computations.

``_last_at_least`` (interpolation search) against a linear scan, ``_envelope`` (M(lo) from each
learner's reachable levels) against m_k(lo) evaluated lo by lo, and ``exact_integer`` against a
scan of every lo in 1..q on instances with tau in the hundreds (each extra sample moves tau by
many updates: the regime of the envelope path), besides the brute force of
test_mel_async_exact.py.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mel_opt
from mel_opt.problems.mel_async import windows as W


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=60), st.integers(-5, 3000),
       st.booleans())
def test_last_at_least_matches_a_linear_scan(drops, target, hyperbolic):
    # a non-increasing function on 0..n-1: cumulative drops (flat stretches included), either
    # as it is or bent into a hyperbola-like shape, the shape the search interpolates for
    values = 3000 - np.cumsum(drops)
    if hyperbolic:
        values = np.floor(3e6 / (np.arange(len(values)) + 1000.0 - values / 10)).astype(int)
        values = np.minimum.accumulate(values)
    calls = []

    def f(x: int) -> float:
        calls.append(x)
        return float(values[x])

    n = len(values)
    expected = max((x for x in range(n) if values[x] >= target), default=-1)
    assert W._last_at_least(f, target, 0, n - 1) == expected
    assert len(calls) <= 2 + 2 * max(1, n).bit_length() + 2


def _large_tau_doc(K: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"problem": "mel-async", "schema_version": 1, "cycle_time_s": 10.0,
            "total_samples": 40 * K, "min_samples": 10, "max_samples": 200,
            "learners": [{"name": f"n{k}", "c2": float(rng.uniform(2e-5, 8e-5)),
                          "c1": float(rng.uniform(1e-4, 5e-4)),
                          "c0": float(rng.uniform(0.05, 0.3))} for k in range(K)]}


def _m_direct(inst, lo: int) -> np.ndarray:
    """m_k(lo), the smallest tau >= lo learner k reaches: tau at the most samples with tau >= lo."""
    b = W.upper_d(inst, np.full(inst.K, float(lo)))
    return W.max_updates(inst, b)


@pytest.mark.parametrize("seed", range(4))
def test_envelope_matches_lo_by_lo(seed):
    inst = mel_opt.parse_instance(_large_tau_doc(60, seed))
    q = int(W.max_updates(inst, np.full(inst.K, float(inst.min_samples))).min())
    lo_min, lo_max = q - 400, q
    env = W._envelope(inst, lo_min, lo_max)
    direct = np.array([_m_direct(inst, lo).max() for lo in range(lo_min, lo_max + 1)])
    assert np.array_equal(env, direct)
    # reachable levels are far apart here: M(lo) - lo reaches well above 1
    assert (direct - np.arange(lo_min, lo_max + 1)).max() > 20


def _exact_by_scanning_every_lo(inst):
    """(s*, every optimal lo descending) by evaluating s(lo) = max(M(lo), H) - lo for all lo."""
    K, d = inst.K, inst.total_samples
    q = int(W.max_updates(inst, np.full(K, float(inst.min_samples))).min())
    top = int(W.max_updates(inst, np.full(K, float(inst.min_samples))).max())
    feasible_lo = [lo for lo in range(1, q + 1)
                   if W.upper_d(inst, np.full(K, float(lo))).sum() >= d]
    H = min(hi for hi in range(0, top + 1)
            if np.all((a := W.lower_d(inst, np.full(K, float(hi)))) <= inst.max_samples)
            and a.sum() <= d)
    s = {lo: max(_m_direct(inst, lo).max(), H) - lo for lo in feasible_lo}
    best = min(s.values())
    return best, tuple(sorted((lo for lo, v in s.items() if v == best), reverse=True))


@functools.cache
def _scanned(kind: str, K: int, seed: int):
    """The scan of every lo of one instance, made once for the three ways of computing M(lo)
    (the scan is the slow part; each way is checked against the same answer)."""
    if kind == "large-tau":
        inst = mel_opt.parse_instance(_large_tau_doc(K, seed))
    else:
        from mel_opt.problems.mel_async.generate import generate

        inst = mel_opt.parse_instance(generate("random", learners=K, seed=seed))
    return _exact_by_scanning_every_lo(inst)


@pytest.fixture(params=["chosen", "envelope", "blocks"])
def scan_path(request, monkeypatch):
    """exact_integer as shipped, or forced onto one of its two ways of computing M(lo)."""
    if request.param == "envelope":
        monkeypatch.setattr(W, "_piece_count", lambda sub, lo_min, lo_max: 0)
    elif request.param == "blocks":
        monkeypatch.setattr(W, "_piece_count", lambda sub, lo_min, lo_max: 1 << 62)
    return request.param


@pytest.mark.parametrize("K,seed", [(5, 0), (5, 1), (12, 2), (40, 3), (40, 4), (150, 5)])
def test_exact_integer_matches_a_scan_of_every_lo_at_large_tau(K, seed, scan_path):
    inst = mel_opt.parse_instance(_large_tau_doc(K, seed))
    win = W.exact_integer(inst)
    best, los = _scanned("large-tau", K, seed)
    assert win is not None
    assert win.hi - win.lo == best
    assert win.optimal_los == los and win.lo == los[0]
    assert int(win.d.sum()) == inst.total_samples
    assert int(np.ptp(win.tau)) == best and win.tau.min() >= win.lo


@pytest.mark.parametrize("seed", range(3))
def test_exact_integer_matches_a_scan_of_every_lo_on_the_preset(seed, scan_path):
    # the paper's regime (tau of a few updates, many samples per level)
    from mel_opt.problems.mel_async.generate import generate

    inst = mel_opt.parse_instance(generate("random", learners=30, seed=seed))
    win = W.exact_integer(inst)
    best, los = _scanned("random", 30, seed)
    assert win is not None and win.hi - win.lo == best and win.optimal_los == los


def test_large_tau_preset_is_the_documented_regime():
    from mel_opt.errors import UsageError
    from mel_opt.problems.mel_async.generate import generate

    doc = generate("large-tau", learners=500, seed=0)
    inst = mel_opt.parse_instance(doc)
    assert inst.total_samples == 40 * 500 and (inst.min_samples, inst.max_samples) == (10, 200)
    assert inst.cycle_time == 10.0
    assert 2e-5 <= inst.c2.min() and inst.c2.max() <= 8e-5
    assert 1e-4 <= inst.c1.min() and inst.c1.max() <= 5e-4
    assert 0.05 <= inst.c0.min() and inst.c0.max() <= 0.3
    # tau in the thousands, and one sample more moves it by more than ten updates
    d = np.full(inst.K, 40.0)
    assert W.max_updates(inst, d).min() > 1000
    assert np.all(W.max_updates(inst, d) - W.max_updates(inst, d + 1) > 10)
    assert generate("large-tau", learners=5, seed=1, params={"samples_per_learner": "50"})[
        "total_samples"] == 250
    with pytest.raises(UsageError):
        generate("large-tau", learners=5, params={"min_samples": "60"})
