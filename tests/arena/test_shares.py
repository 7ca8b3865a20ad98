"""Unequal data sizes for the schemes that do not allocate data (``--shares``)."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.api import load_instance
from mel_opt.arena.run import arena, work_clock
from mel_opt.arena.settings import ArenaSettings
from mel_opt.errors import SettingError
from mel_opt.training.partition import parse_shares, proportional_sizes

INSTANCE = "instances/mel-async/k10_T15.json"


def test_shares_parse_and_draw() -> None:
    assert str(parse_shares("equal")) == "equal"
    s = parse_shares("lognormal:1.5")
    assert str(s) == "lognormal:1.5"
    a, b = s.draw(50, 3), s.draw(50, 3)
    assert np.array_equal(a, b) and not np.array_equal(a, s.draw(50, 4))
    # log-spread 1.5: the shares' logs have standard deviation about 1.5
    assert 1.0 < np.std(np.log(s.draw(2000, 0))) < 2.0
    assert np.array_equal(parse_shares("lognormal:0").draw(4, 0), np.ones(4))
    for bad in ("zipf:1", "lognormal:-1", "lognormal:x"):
        with pytest.raises(SettingError, match="shares: "):
            ArenaSettings(shares=bad)


def test_unequal_shares_cost_time_in_proportion() -> None:
    """A learner holding twice the mean data takes twice the mean time per pass: deadline
    with one fixed pass and no noise lasts the slowest learner's transfers plus its pass."""
    inst = load_instance(INSTANCE)
    base = dict(schemes=("deadline", "exact"), seeds=1, cycles=2, model="softmax",
                time_cv=0.0, passes=1.0, max_train=600, max_test=100)
    equal = arena(inst, ArenaSettings(**base))
    skewed = arena(inst, ArenaSettings(**base, shares="lognormal:1"))
    eq_rows = [r for r in equal.rows if r["scheme"] == "deadline"]
    sk_rows = [r for r in skewed.rows if r["scheme"] == "deadline"]
    # equal shares of 60: every learner fits its pass in T, all 600 samples are trained
    assert eq_rows[1]["updates"] == 600 and eq_rows[1]["dropped"] == 0
    # skewed: learner k holds n_k of the 600 and its pass costs per_pass_k x n_k / 60, so
    # exactly those whose transfers plus that pass fit T = 15 s are kept (m = K: nobody else
    # is waited for), and only their samples count
    sizes = proportional_sizes(parse_shares("lognormal:1").draw(10, 0), 600)
    clock = work_clock(inst)
    times = clock.fixed_s + clock.per_pass_s * sizes / 60.0
    kept = times <= clock.budget_s
    assert 0 < kept.sum() < 10
    assert sk_rows[1]["updates"] == sizes[kept].sum()
    assert sk_rows[1]["dropped"] == int((~kept).sum())
    assert sk_rows[1]["time_s"] == pytest.approx(15.0)  # the deadline: someone was late
    # the allocation's own data sizes are its allocation's, whatever --shares says
    assert [r for r in equal.rows if r["scheme"] == "exact"] == [
        r for r in skewed.rows if r["scheme"] == "exact"]


def test_the_ablations_keep_equal_shares() -> None:
    inst = load_instance(INSTANCE)
    base = dict(schemes=("fill",), seeds=1, cycles=2, model="softmax", max_train=600,
                max_test=100)
    assert arena(inst, ArenaSettings(**base)).rows == arena(
        inst, ArenaSettings(**base, shares="lognormal:1")).rows


def test_a_dirichlet_split_charges_each_learner_for_the_data_it_holds() -> None:
    """dirichlet:0.1 meets the equal shares only in expectation: one fixed pass costs each
    learner its own n_k / mean(n) of an equal share's pass (no noise: busy time exactly)."""
    from mel_opt.training import load_dataset
    from mel_opt.training.partition import make_pools, parse_partition

    inst = load_instance(INSTANCE)
    s = ArenaSettings(schemes=("fill",), seeds=1, cycles=1, model="softmax", time_cv=0.0,
                      partition="dirichlet:0.1", max_train=600, max_test=100)
    got = arena(inst, s)
    ds = load_dataset("digits", max_train=600, max_test=100).astype(np.dtype("float32"))
    rng = np.random.default_rng([0, 7])
    pools = make_pools(ds.y_train, proportional_sizes(np.ones(10), 600),
                       parse_partition("dirichlet:0.1"), ds.classes, rng)
    n = np.array([p.size for p in pools], dtype=float)
    assert np.ptp(n) > 10  # the split is far from equal
    clock = work_clock(inst)
    per_pass = clock.per_pass_s * n / n.mean()
    fit = (clock.budget_s - clock.fixed_s) / per_pass  # fill: what fits T, whole minibatches
    full = np.floor(fit + 1e-9)
    part = np.floor((fit - full) * n / 32 + 1e-9)
    updates = full * n + part * 32
    assert got.rows[1]["updates"] == updates.sum()
    times = clock.fixed_s + per_pass * updates / n
    assert got.rows[1]["time_s"] == pytest.approx(times.max())
