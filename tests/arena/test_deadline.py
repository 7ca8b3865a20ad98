"""Deadline dropping: who is invited, who is dropped and how long a round lasts, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.schemes.deadline import close_round, invited


def test_invited_overcommits() -> None:
    rng = np.random.default_rng(0)
    # m = 4 of K = 10 with FedScale's 1.3: ceil(5.2) = 6 invited, all distinct, sorted
    ids = invited(rng, 10, 4, 1.3)
    assert ids.size == 6 and np.unique(ids).size == 6 and np.all(np.diff(ids) > 0)
    assert invited(rng, 10, 5, 1.0).size == 5  # no over-commitment: m
    assert invited(rng, 10, 10, 1.3).size == 10  # never more than K
    assert invited(rng, 10, 10, 1.0).tolist() == list(range(10))
    with pytest.raises(ValueError, match="m <= K"):
        invited(rng, 3, 4)


def test_round_times_and_drops() -> None:
    t = np.array([4.0, 1.0, 9.0, 3.0, 6.0])
    # keep 2: the 2nd finish (3 s) is within D = 5 s: the round lasts 3 s, keeps 1 s and 3 s
    r = close_round(t, 5.0, 2)
    assert r.duration_s == 3.0 and r.kept.tolist() == [False, True, False, True, False]
    # keep 3: the 3rd finish (4 s) still in time
    r = close_round(t, 5.0, 3)
    assert r.duration_s == 4.0 and r.kept.tolist() == [True, True, False, True, False]
    # keep 4: the 4th (6 s) is late: the round waits until D = 5 s and keeps the three in time
    r = close_round(t, 5.0, 4)
    assert r.duration_s == 5.0 and r.kept.tolist() == [True, True, False, True, False]
    # no one in time: the round lasts D and keeps nobody
    r = close_round(t, 0.5, 2)
    assert r.duration_s == 0.5 and not r.kept.any()
    # keep more than invited, all in time: the round ends with the last of them
    r = close_round(np.array([2.0, 1.0]), 5.0, 4)
    assert r.duration_s == 2.0 and r.kept.all()
