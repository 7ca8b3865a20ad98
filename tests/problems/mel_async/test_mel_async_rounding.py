"""The paper's rounding (floor tau and d, then suggest-and-improve) against hand-worked cases,
and the preset's bound parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mel_opt
from mel_opt.errors import UsageError
from mel_opt.problems.mel_async.generate import generate
from mel_opt.problems.mel_async.rounding import paper_round


def test_paper_round_keeps_floored_taus(make_doc):
    # tau_k = 10/(0.001 d) and 10/(0.002 d), d = 290: (8) balances at t = 15000/290 = 51.72,
    # d* = (193.3, 96.7). Floors: tau = (51, 51), d = (193, 96), one sample short. At tau = 51
    # learner 1 fits d <= 10000/51 = 196.1, learner 2 d <= 98.04: room (3, 2), the missing
    # sample goes by largest remainder of (3/5, 2/5) to learner 1 -> d = (194, 96).
    # Improve: learner 2 fits 52 updates on 96 samples (9.984 s), but 52 is above the window
    # top 51, so the taus stay (51, 51) and learner 2 idles.
    doc = make_doc(10.0, 290, 1, 290, [(0.001, 0, 0), (0.002, 0, 0)])
    inst = mel_opt.parse_instance(doc)
    tau, d = paper_round(inst, np.array([15000 / 290] * 2), np.array([5800 / 30, 2900 / 30]))
    assert tau.tolist() == [51, 51] and d.tolist() == [194, 96]
    res = mel_opt.solve(inst, "kkt-sai", options={"rounding": "paper"})
    assert res.solution == {"d": [194, 96], "tau": [51, 51]}
    assert res.metrics["paper_rounding_fallback"] is False
    assert res.metrics["learners_not_busy"] == 1 and res.verification.feasible
    # our repair recomputes every tau as the most updates that fit: (51, 52) on the same d
    ours = mel_opt.solve(inst, "kkt-sai")
    assert ours.metrics["rounding"] == "repair" and ours.metrics["learners_not_busy"] == 0


def test_paper_round_improve_raises_taus_within_the_window(make_doc):
    # three equal learners (10 / (0.001 d) updates), d = 300, d_u = 150; a point with taus
    # (40.5, 33.9, 33.2) and d (100.5, 100.2, 99.3). Floors: (40, 33, 33), (100, 100, 99);
    # every learner fits 40 updates on up to 250 > d_u samples, so the missing sample goes to
    # the largest remainder of widths (50, 50, 51)/151 -> learner 3: d = (100, 100, 100).
    # Improve: each learner fits 100 updates; raising the 33s one by one never increases
    # sum |tau_k - tau_l| (14, 14, 12, ...) and stops at the window top 40.
    inst = mel_opt.parse_instance(make_doc(10.0, 300, 1, 150, [(0.001, 0, 0)] * 3))
    tau, d = paper_round(inst, np.array([40.5, 33.9, 33.2]), np.array([100.5, 100.2, 99.3]))
    assert d.tolist() == [100, 100, 100]
    assert tau.tolist() == [40, 40, 40]


def test_paper_round_falls_back_when_floored_taus_cannot_hold_the_data(make_doc):
    # (8) balances at d* = (7.5, 2.5), tau* = 133.3 (test_mel_async_known). Floors (133, 133)
    # hold at most floor(10/1.33) + floor(10/3.99) = 7 + 2 = 9 < 10 samples: our repair is used.
    inst = mel_opt.parse_instance(make_doc(10.0, 10, 1, 10, [(0.01, 0, 0), (0.03, 0, 0)]))
    assert paper_round(inst, np.array([400 / 3] * 2), np.array([7.5, 2.5])) is None
    for method in ("kkt-sai", "ipopt"):
        res = mel_opt.solve(inst, method, options={"rounding": "paper"})
        assert res.metrics["paper_rounding_fallback"] is True, method
        assert res.solution == {"d": [7, 3], "tau": [142, 111]}, method


def test_bad_rounding_option_is_usage_error(make_doc):
    inst = mel_opt.parse_instance(make_doc(10.0, 10, 1, 10, [(0.01, 0, 0), (0.03, 0, 0)]))
    with pytest.raises(UsageError, match="option rounding"):
        mel_opt.solve(inst, "kkt-sai", options={"rounding": "ceil"})


def test_preset_bound_factors():
    doc = generate("mohammad2020", learners=7, seed=0)
    assert doc["min_samples"] == math.floor(0.6 * 60000 / 7)  # 5142
    assert doc["max_samples"] == math.ceil(1.25 * 60000 / 7)  # 10715
    doc = generate("mohammad2020", learners=7, seed=0,
                   params={"min_samples_factor": "0.8", "max_samples_factor": "1.5"})
    assert (doc["min_samples"], doc["max_samples"]) == (6857, 12858)
    doc = generate("mohammad2020", learners=7, seed=0,
                   params={"min_samples": "500", "max_samples_factor": "1.5"})
    assert (doc["min_samples"], doc["max_samples"]) == (500, 12858)  # absolute wins
    with pytest.raises(UsageError, match="min_samples_factor"):
        generate("mohammad2020", learners=7, params={"min_samples_factor": "1.2"})


def test_wide_bounds_give_the_synchronous_answer():
    # the zero-staleness regime: with d_l = 500, d_u = 30,000 every learner takes its balanced
    # share, exact's maximum staleness is 0 and its tau is sync's common tau
    inst = mel_opt.parse_instance(generate("mohammad2020", learners=10, seed=0, params={
        "cycle_time_s": "7.5", "min_samples": "500", "max_samples": "30000"}))
    ex, sy = mel_opt.solve(inst, "exact"), mel_opt.solve(inst, "sync")
    assert ex.metrics["max_staleness"] == 0
    assert ex.solution["tau"] == sy.solution["tau"]
    # the default bounds: the fast learners hit d_u and the optimum is no longer synchronous
    inst = mel_opt.parse_instance(generate("mohammad2020", learners=10, seed=0,
                                           params={"cycle_time_s": "7.5"}))
    assert mel_opt.solve(inst, "exact").metrics["max_staleness"] >= 1
