"""The second stage of ``exact`` (least average staleness (13) at the proven maximum (6)).

The two-level stage (s* = 1) against a hand-worked instance, against brute force over subsets,
and against the general MILP stage on instances where that runs; the brute force over whole
allocations in test_mel_async_exact.py covers both stages on tiny instances.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mel_opt
from mel_opt.problems.mel_async import lexicographic as LX
from mel_opt.problems.mel_async import reduction as RD
from mel_opt.problems.mel_async import windows as W


def test_hand_worked_two_levels(make_doc):
    # four equal learners, t = 0.01 tau d, T = 10: tau(d) = floor(1000 / d), so tau = 10 on
    # d in [91, 100] and tau = 11 on [84, 90] (d_l = 84, d_u = 100). d = 362: all at 10 need
    # at least 364 samples, all at 11 hold at most 360, so s* = 1 in the window [10, 11].
    # With m learners at 10 the sums range over [91 m + 84 (4 - m), 100 m + 90 (4 - m)]:
    # m = 1 ([343, 370]), 2, 3 ([357, 390]) are feasible, m = 4 is not ([364, 400]) and
    # neither is m = 0 ([336, 360]). Pair sum m (4 - m): 3 at m = 1 or 3, 4 at m = 2.
    doc = make_doc(10.0, 362, 84, 100, [(0.01, 0.0, 0.0)] * 4)
    res = mel_opt.solve(mel_opt.parse_instance(doc), "exact")
    assert res.metrics["max_staleness"] == 1
    assert res.metrics["avg_staleness"] == pytest.approx(3 / 6)
    assert res.metrics["proven"] == ["max_staleness", "avg_staleness"]
    tau = np.array(res.solution["tau"])
    assert sorted(set(tau.tolist())) == [10, 11] and int((tau == 10).sum()) in (1, 3)
    assert sum(res.solution["d"]) == 362


def test_extreme_count_when_both_sums_bind():
    # fewest: the largest beta alone reaches need = 2 but its alpha 3 exceeds room = 2, so the
    # count bound 1 is not attained; {1, 2} (alpha 2, beta 2) is, so the fewest is 2. Most:
    # the two smallest alphas fit (2 <= 2) and their betas reach 2, so the most is 2 as well.
    alpha, beta = np.array([3.0, 1.0, 1.0]), np.array([3.0, 1.0, 1.0])
    few, ok1 = LX.extreme_count(alpha, beta, 2.0, 2.0, most=False)
    many, ok2 = LX.extreme_count(alpha, beta, 2.0, 2.0, most=True)
    assert ok1 and ok2
    assert few is not None and few.tolist() == [False, True, True]
    assert many is not None and int(many.sum()) == 2
    none, ok3 = LX.extreme_count(alpha, beta, 0.5, 2.0, most=False)  # nothing fits
    assert none is None and ok3


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9)), min_size=0, max_size=9),
       st.integers(-3, 40), st.integers(-3, 40), st.booleans())
def test_extreme_count_matches_brute_force(items, room, need, most):
    alpha = np.array([a for a, _ in items], dtype=float)
    beta = np.array([b for _, b in items], dtype=float)
    sizes = [len(S) for r in range(len(items) + 1)
             for S in itertools.combinations(range(len(items)), r)
             if alpha[list(S)].sum() <= room and beta[list(S)].sum() >= need]
    mask, proven = LX.extreme_count(alpha, beta, float(room), float(need), most)
    assert proven
    if not sizes:
        assert mask is None
        return
    assert mask is not None
    assert alpha[mask].sum() <= room and beta[mask].sum() >= need
    assert int(mask.sum()) == (max(sizes) if most else min(sizes))


def _s1_instances():
    from mel_opt.problems.mel_async.generate import generate

    out = []
    for K in (12, 40, 90, 150):
        for seed in range(12):
            inst = mel_opt.parse_instance(generate("random", learners=K, seed=seed))
            win = W.exact_integer(inst)
            if win is not None and win.hi - win.lo == 1:
                out.append(pytest.param(inst, win.optimal_los, id=f"random-k{K}-s{seed}"))
    return out


@pytest.mark.parametrize("inst,los", _s1_instances())
def test_two_levels_match_the_milp_stage(inst, los):
    fast = LX.least_average(inst, 1, los)
    milp = LX.milp_stage(inst, 1, los)
    assert fast is not None and milp is not None
    assert fast.proven and milp.proven
    assert fast.pair_sum == milp.pair_sum
    # the allocation is whole, adds up, and its taus stay inside one optimal window
    assert int(fast.d.sum()) == inst.total_samples
    assert int(np.ptp(fast.tau)) <= 1 and int(fast.tau.min()) in los
    ii, jj = np.triu_indices(inst.K, 1)
    assert int(np.abs(fast.tau[ii] - fast.tau[jj]).sum()) == fast.pair_sum


def test_enough_s1_instances_for_the_cross_check():
    assert len(_s1_instances()) >= 10


def _preset_windows(K: int, seed: int, T: str):
    from mel_opt.problems.mel_async.generate import generate

    inst = mel_opt.parse_instance(generate("mohammad2020", learners=K, seed=seed,
                                           params={"cycle_time_s": T}))
    win = W.exact_integer(inst)
    assert win is not None
    return inst, win.hi - win.lo, win.optimal_los


@pytest.mark.parametrize("K,seed,T", [(20, 0, "15"), (20, 1, "15"), (40, 0, "7.5"),
                                      (40, 1, "15"), (60, 2, "7.5"), (80, 0, "15")])
def test_bounded_stage_matches_the_full_milp(K, seed, T):
    inst, s, los = _preset_windows(K, seed, T)
    assert s >= 2  # the bounded path (s* = 1 has its own test above)
    fast = LX.least_average(inst, s, los)
    milp = LX.milp_stage(inst, s, los)
    assert fast is not None and milp is not None and fast.proven and milp.proven
    assert fast.pair_sum == milp.pair_sum == LX.pair_sum(fast.tau)
    assert int(fast.d.sum()) == inst.total_samples
    assert int(np.ptp(fast.tau)) == s and int(fast.tau.min()) in los


def _tiny_allocations(inst):
    """Every allocation (d, tau) of a tiny instance with sum d = total, by enumeration."""
    K, d_tot = inst.K, inst.total_samples
    rng = range(inst.min_samples, inst.max_samples + 1)
    for head in itertools.product(rng, repeat=K - 1):
        last = d_tot - sum(head)
        if inst.min_samples <= last <= inst.max_samples:
            d = np.array([*head, last], dtype=float)
            yield d, W.max_updates(inst, d).astype(int)


@pytest.mark.parametrize("seed", range(8))
def test_threshold_bounds_are_the_per_threshold_extremes(seed, make_doc):
    # by enumeration: for each threshold, the fewest and the most learners at or below it
    # over all allocations whose taus lie in the window
    rng = np.random.default_rng(seed)
    co = [(float(rng.uniform(0.002, 0.02)), float(rng.uniform(0, 0.02)),
           float(rng.uniform(0, 0.3))) for _ in range(4)]
    inst = mel_opt.parse_instance(make_doc(3.0, 60, 8, 22, co))
    win = W.exact_integer(inst)
    assert win is not None
    lo, hi = win.lo, win.hi
    lo, hi = max(1, lo - 1), hi + 1  # a wider window than the optimum: more thresholds
    counts = [[int((tau <= th).sum()) for th in range(lo, hi)]
              for _, tau in _tiny_allocations(inst) if tau.min() >= lo and tau.max() <= hi]
    assert counts
    m_min, m_max, proven = LX.threshold_bounds(inst, lo, hi)
    assert proven
    assert m_min.tolist() == np.min(counts, axis=0).tolist()
    assert m_max.tolist() == np.max(counts, axis=0).tolist()


# --------------------------------------------------------------------------------------------
# s* >= 2: the reduction DP, its fixing, its branch and bound and the reduced MILP
# --------------------------------------------------------------------------------------------
def _gap_windows():
    """Six-learner instances and windows (the optimal one and one two levels wider on each
    side) where the DP's root bound or its allocation misses the window's optimum, so that
    fixing, branching and the reduced MILP have work to do."""
    out = []
    for seed in (3, 4, 5, 10, 17, 22, 24, 33, 38, 40):
        rng = np.random.default_rng(seed)
        co = [(float(rng.uniform(0.001, 0.01)), float(rng.uniform(0, 0.02)),
               float(rng.uniform(0, 0.3))) for _ in range(6)]
        out.append(pytest.param(co, int(rng.integers(60, 110)), id=f"seed{seed}"))
    return out


def _window_optimum(inst, lo, hi):
    """Every allocation of a tiny instance with its taus in [lo, hi], and the least pair
    sum among them (vectorised enumeration of the first K - 1 samples)."""
    rng = range(inst.min_samples, inst.max_samples + 1)
    heads = np.array(list(itertools.product(rng, repeat=inst.K - 1)), dtype=float)
    last = inst.total_samples - heads.sum(axis=1)
    ok = (last >= inst.min_samples) & (last <= inst.max_samples)
    d = np.column_stack([heads[ok], last[ok]])
    tau = W.max_updates(inst, d).astype(int)
    inside = (tau.min(axis=1) >= lo) & (tau.max(axis=1) <= hi)
    tau = tau[inside]
    K = inst.K
    sums = ((2 * np.arange(K) - K + 1) * np.sort(tau, axis=1)).sum(axis=1)
    return tau, sums, int(sums.min())


@pytest.mark.parametrize("co,d_tot", _gap_windows())
@pytest.mark.parametrize("widen", [0, 2])
def test_window_dp_against_enumeration(co, d_tot, widen, make_doc):
    inst = mel_opt.parse_instance(make_doc(3.0, d_tot, 8, 20, co))
    win = W.exact_integer(inst)
    assert win is not None
    lo, hi = max(1, win.lo - widen), win.hi + widen
    if hi - lo < 2:
        pytest.skip("a two-level window: the two-level stage's case")
    tau, sums, opt = _window_optimum(inst, lo, hi)
    m_min, m_max, proven = LX.threshold_bounds(inst, lo, hi)
    assert proven
    w = RD.window_dp(inst, lo, hi, m_min, m_max, LX.MAX_DP_WORK)
    assert w is not None
    # the root: a valid bound and a real allocation of the window
    assert w.bound <= opt <= w.incumbent.pair_sum
    inc = w.incumbent
    assert int(inc.d.sum()) == inst.total_samples
    assert inc.tau.min() >= lo and inc.tau.max() <= hi
    assert inc.pair_sum == LX.pair_sum(W.max_updates(inst, inc.d.astype(float)))
    # fixing keeps every allocation that beats the target inside the surviving ranges
    for target in (opt + 1, inc.pair_sum, inc.pair_sum + 5):
        first, last = RD.surviving_levels(w, target)
        beat = sums < target
        assert np.all((tau[beat] >= first) & (tau[beat] <= last))
    # the branch and bound alone reaches the window's optimum and closes
    closed, best = RD.refine(inst, w, 10**12, 10_000)
    assert closed and best.pair_sum == opt
    assert best.tau.min() >= lo and best.tau.max() <= hi
    assert int(best.d.sum()) == inst.total_samples
    # so does the reduced MILP with nothing fixed, and the whole stage on this window
    first, last = RD.surviving_levels(w, 10**12)
    res, found, _ = RD.reduced_window(inst, w, first, last, m_min, m_max, None,
                                           LX.MAX_BINARIES)
    assert found is not None and found.pair_sum == opt
    assert res is None or res.is_optimal  # None: nobody could move, nothing to solve
    stage = LX._bounded_stage(inst, hi - lo, [lo], None)
    assert stage is not None and stage.proven and stage.pair_sum == opt


def test_enough_windows_with_a_root_gap(make_doc):
    # the cases above are only worth their time if the DP's root does not settle them
    gaps = 0
    for param in _gap_windows():
        co, d_tot = param.values
        inst = mel_opt.parse_instance(make_doc(3.0, d_tot, 8, 20, co))
        win = W.exact_integer(inst)
        assert win is not None
        for widen in (0, 2):
            lo, hi = max(1, win.lo - widen), win.hi + widen
            m_min, m_max, _ = LX.threshold_bounds(inst, lo, hi)
            w = RD.window_dp(inst, lo, hi, m_min, m_max, LX.MAX_DP_WORK)
            gaps += w is not None and w.bound < w.incumbent.pair_sum
    assert gaps >= 12


@pytest.mark.parametrize("K,seed,T", [(300, 0, "15"), (500, 0, "7.5"), (2000, 1, "15")])
def test_the_two_routes_of_the_bounded_stage_agree(K, seed, T, monkeypatch):
    # branch and bound first (every window) against fixing and the reduced MILP first
    # (never branching): two independent proofs of the same least pair sum
    inst, s, los = _preset_windows(K, seed, T)
    monkeypatch.setattr(LX, "SMALL_REDUCED", -1)
    branched = LX.least_average(inst, s, los)
    monkeypatch.setattr(LX, "SMALL_REDUCED", 10**9)
    monkeypatch.setattr(LX, "MAX_DP_NODES", 0)
    fixed = LX.least_average(inst, s, los)
    assert branched is not None and fixed is not None
    assert branched.proven and fixed.proven
    assert branched.pair_sum == fixed.pair_sum == LX.pair_sum(fixed.tau)
    for r in (branched, fixed):
        assert int(r.d.sum()) == inst.total_samples
        assert int(np.ptp(r.tau)) <= s and int(r.tau.min()) in los


def test_the_second_stage_is_proven_at_ten_thousand_learners():
    # K = 10,000, maximum staleness 678: the per-threshold bound alone left a MILP of
    # 19,000 binaries here, and the best it found was 9,904,166,706
    inst, s, los = _preset_windows(10_000, 1, "7.5")
    assert s == 678
    res = LX.least_average(inst, s, los)
    assert res is not None and res.proven
    assert res.pair_sum == LX.pair_sum(res.tau) <= 9_904_166_706
    assert int(res.d.sum()) == inst.total_samples and int(np.ptp(res.tau)) <= s


@pytest.mark.parametrize("K,seed,T", [(300, 0, "15"), (500, 0, "7.5")])
def test_an_unproven_second_stage_carries_a_bound_below_the_optimum(K, seed, T, monkeypatch):
    # the proven least pair sum first; then every window's MILP refused (no binaries allowed,
    # no branching): the stage is not proven, and the bound it reports must lie at or below
    # the proven optimum, which lies at or below what it returns
    inst, s, los = _preset_windows(K, seed, T)
    full = LX.least_average(inst, s, los)
    assert full is not None and full.proven and full.lower == full.pair_sum
    monkeypatch.setattr(LX, "MAX_BINARIES", 0)
    monkeypatch.setattr(LX, "MAX_DP_NODES", 0)
    monkeypatch.setattr(LX, "SMALL_REDUCED", 10**9)
    cut = LX.least_average(inst, s, los)
    assert cut is not None
    if cut.proven:  # every window settled by its bounds alone: nothing to report
        pytest.skip("settled without a MILP")
    assert cut.bound is not None and cut.lower == cut.bound
    assert cut.bound <= full.pair_sum <= cut.pair_sum == LX.pair_sum(cut.tau)


def test_the_result_names_the_unproven_objective_and_its_gap(monkeypatch):
    # through api.solve: proven is max_staleness alone, the bound is below the verified
    # average staleness and the gap is the relative distance between them
    inst, s, los = _preset_windows(300, 0, "15")
    want = mel_opt.solve(inst, "exact")
    assert want.metrics["proven"] == ["max_staleness", "avg_staleness"]
    assert "avg_staleness_gap" not in want.metrics
    monkeypatch.setattr(LX, "MAX_BINARIES", 0)
    monkeypatch.setattr(LX, "MAX_DP_NODES", 0)
    monkeypatch.setattr(LX, "SMALL_REDUCED", 10**9)
    res = mel_opt.solve(inst, "exact")
    assert res.ok and res.verification.feasible
    if res.metrics["proven"] == ["max_staleness", "avg_staleness"]:
        pytest.skip("settled without a MILP")
    assert res.metrics["proven"] == ["max_staleness"]
    avg, bound = res.metrics["avg_staleness"], res.metrics["avg_staleness_bound"]
    assert bound <= want.metrics["avg_staleness"] * (1 + 1e-12) and bound <= avg
    assert res.metrics["avg_staleness_gap"] == pytest.approx((avg - bound) / avg, rel=1e-9)
    assert "above its bound" in res.message
