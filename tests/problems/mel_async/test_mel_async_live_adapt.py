"""What the learners of a live mel-async round do when the file's job no longer fits them
(``MelAsyncCycle.live_adapt``), with numbers worked out by hand on the time model of Eq. (5),
t_k = C2_k tau_k d_k + C1_k d_k + C0_k <= T, and checked by the problem's own verifier.

The hand instance (powers of two, so every product is exact), T = 10 s, d_l = 50, d_u = 300:

====  ======  ======  =====  =======================================
k     C2      C1      C0     most samples with tau = 1: (T - C0) / (C2 + C1)
====  ======  ======  =====  =======================================
0     1/64    1/64    1      9 x 32 = 288
1     1/32    0       2      8 x 32 = 256
2     1/16    1/16    0.3    9.7 x 8 = 77.6, floored: 77
====  ======  ======  =====  =======================================

so with one update each they take at most 288 + 256 + 77 = 621 samples: d = 700 does not fit.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from mel_opt import api
from mel_opt.examples import load_example
from mel_opt.problems import get_problem
from mel_opt.problems.mel_async.learning import CYCLE, data_they_can_take, least_clock
from mel_opt.problems.mel_async.verify import verify

COEFFS = [(1 / 64, 1 / 64, 1.0), (1 / 32, 0.0, 2.0), (1 / 16, 1 / 16, 0.3)]


def hand(make_doc: Any, d: int = 700, du: int = 300) -> Any:
    return api.parse_instance(make_doc(10.0, d, 50, du, COEFFS))


def test_the_data_they_can_take_is_the_sum_of_their_one_update_caps(make_doc: Any) -> None:
    inst = hand(make_doc)
    res = api.solve(inst, "exact")
    assert not res.ok and "at most 621 samples" in res.message  # the file's job: no fit
    adapted = CYCLE.live_adapt(inst, "data")
    assert adapted is not None
    assert adapted.instance.total_samples == 621
    assert adapted.instance.cycle_time == 10.0  # the clock stays
    assert adapted.changes == {"total_samples": (700, 621)}
    assert adapted.data_fraction == pytest.approx(621 / 700)
    assert adapted.text == ("total_samples 700 -> 621: what the 3 learners can take in "
                            "T = 10 s with one update each")
    # the method solves the adapted job; every learner takes all it can, once
    again = api.solve(adapted.instance, "exact")
    assert again.ok
    assert again.solution["d"] == [288, 256, 77] and again.solution["tau"] == [1, 1, 1]
    assert verify(adapted.instance, again.solution).verification.feasible
    # and it is the most: one sample more overruns T for each of them (Eq. 5 by hand)
    for (c2, c1, c0), d in zip(COEFFS, (288, 256, 77), strict=True):
        assert (c2 + c1) * d + c0 <= 10.0 < (c2 + c1) * (d + 1) + c0


def test_the_data_they_can_take_stops_at_d_u(make_doc: Any) -> None:
    inst = hand(make_doc, d=700, du=240)  # learners 0 and 1 could take more than d_u
    adapted = data_they_can_take(inst)
    assert adapted is not None and adapted.instance.total_samples == 240 + 240 + 77
    assert adapted.text.endswith("with one update each (at most d_u = 240 each)")


def test_the_least_clock_keeps_the_data(make_doc: Any) -> None:
    # d = 700 with d_u = 300: learners 0 and 1 reach d_u first (at T = 300/32 + 1 = 10.375 and
    # 300/32 + 2 = 11.375 s), so learner 2 must take the last 100 samples; by Eq. (5) that
    # takes (1/16 + 1/16) x 100 + 0.3 = 12.8 s, and no shorter clock gives them 700
    inst = hand(make_doc)
    adapted = least_clock(inst)
    assert adapted is not None
    T = adapted.instance.cycle_time
    assert T == pytest.approx(12.8, rel=1e-9)
    assert adapted.instance.total_samples == 700 and adapted.data_fraction == 1.0
    assert adapted.text.startswith("cycle_time_s 10 -> 12.8: the least clock")
    again = api.solve(adapted.instance, "exact")
    assert again.ok and verify(adapted.instance, again.solution).verification.feasible
    shorter = api.parse_instance(make_doc(12.8 * (1 - 1e-6), 700, 50, 300, COEFFS))
    assert not api.solve(shorter, "exact").ok  # any shorter clock does not fit


def test_no_adaptation_where_none_helps(make_doc: Any) -> None:
    fits = hand(make_doc, d=600)
    assert CYCLE.live_adapt(fits, "data") is None  # the job fits: nothing to adapt
    assert CYCLE.live_adapt(fits, "clock") is None
    assert CYCLE.live_adapt(hand(make_doc), "none") is None
    # two learners left of three: K d_u = 2 x 300 < 700 breaks (7f), no clock places the data
    inst = hand(make_doc)
    two = dataclasses.replace(inst, c2=inst.c2[:2], c1=inst.c1[:2], c0=inst.c0[:2],
                              learner_names=inst.learner_names[:2])
    assert least_clock(two) is None
    # a learner that cannot take d_l samples once in T: the data rule cannot help
    slow = dataclasses.replace(hand(make_doc), c2=np.array([1 / 64, 1 / 32, 0.5]))
    assert data_they_can_take(slow) is None


def test_problems_without_a_rule_do_not_adapt() -> None:
    for name in ("med", "feel", "dab", "adaptive-tau"):
        cycle = get_problem(name).learning
        assert cycle is not None
        assert cycle.live_adapt(load_example(name), "data") is None, name
