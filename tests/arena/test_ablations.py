"""The two ablations of the allocation, by hand: ``fill`` and ``equal-data``."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.api import load_instance, parse_instance, solve
from mel_opt.arena.run import allocated_updates, arena, work_clock
from mel_opt.arena.runner import Run, rounds_run
from mel_opt.arena.settings import ArenaSettings
from mel_opt.problems import get_problem
from mel_opt.schemes import SCHEMES
from mel_opt.training import load_dataset
from mel_opt.training.mlp import init_params, layers_for
from mel_opt.training.partition import make_pools, parse_partition, proportional_sizes

# two learners, 200 samples of the data set's 400 each; u = 50 of the instance's 100 samples:
# a: 0.5 s a pass after 0.55 s of transfers, b: 1 s a pass after 1.1 s
TWO = {"problem": "mel-async", "schema_version": 1, "name": "two", "cycle_time_s": 10.0,
       "total_samples": 100, "min_samples": 10, "max_samples": 100,
       "learners": [{"name": "a", "c2": 0.01, "c1": 0.001, "c0": 0.5},
                    {"name": "b", "c2": 0.02, "c1": 0.002, "c0": 1.0}]}


def _run(doc: dict, s: ArenaSettings, allocated: np.ndarray | None = None) -> Run:
    inst = parse_instance(doc)
    ds = load_dataset("digits", max_train=400, max_test=100).astype(np.dtype("float32"))
    rng = np.random.default_rng([0, 7])
    pools = make_pools(ds.y_train, proportional_sizes(np.ones(inst.K), ds.y_train.size),
                       parse_partition("iid"), ds.classes, rng)
    init = init_params(layers_for("softmax", ds.features, ds.classes), 0, np.float32)
    clock = work_clock(inst)
    return Run(ds, init, pools, clock, s, rng, s.cycles * clock.budget_s, allocated=allocated)


def test_fill_takes_what_fits_each_learner() -> None:
    run = _run(TWO, ArenaSettings(cycles=1, model="softmax"))
    assert run.sizes.tolist() == [200, 200]
    rows = list(rounds_run(run, SCHEMES["fill"].policy(run)))
    # a pass over 200 samples is 7 minibatches (6 of 32 and one of 8). a fits
    # (10 - 0.55) / 0.5 = 18.9 passes: 18 whole ones and floor(0.9 x 200 / 32) = 5 minibatches
    # of a 19th, 18 x 200 + 160 sample-updates (18.8 passes charged: never more than fit)
    a_updates = 18 * 200 + 5 * 32
    # b fits (10 - 1.1) / 1 = 8.9 passes: 8 whole ones and 5 minibatches
    b_updates = 8 * 200 + 5 * 32
    assert rows[1]["updates"] == a_updates + b_updates
    a_time = 0.55 + 0.5 * a_updates / 200
    b_time = 1.1 + 1.0 * b_updates / 200
    assert max(a_time, b_time) < 10.0
    assert rows[1]["time_s"] == pytest.approx(max(a_time, b_time))
    assert rows[1]["dropped"] == 0


def test_equal_data_does_the_allocations_work() -> None:
    inst = parse_instance(TWO)
    res = solve(inst, "exact", seed=0)
    assert res.ok
    d, tau = np.asarray(res.solution["d"]), np.asarray(res.solution["tau"])
    cycle = get_problem("mel-async").learning
    assert cycle is not None
    # the allocation holds 400 d_k / 100 of the data set's samples and runs tau_k passes
    got = allocated_updates(inst, cycle, "exact", dict(res.solution), 400, 0, 64)
    sizes = proportional_sizes(d.astype(float), 400)
    np.testing.assert_array_equal(got, np.asarray(sizes) * tau)
    run = _run(TWO, ArenaSettings(cycles=1, model="softmax"), allocated=got)
    rows = list(rounds_run(run, SCHEMES["equal-data"].policy(run)))
    # the same sample-updates over 200 samples each (whole minibatch steps)
    passes = got / 200
    steps = np.floor(passes * 7 + 1e-9)
    full, rem = np.divmod(steps, 7)
    updates = full * 200 + np.minimum(rem * 32, 200)
    assert rows[1]["updates"] == updates.sum()
    times = np.array([0.55, 1.1]) + np.array([0.5, 1.0]) * updates / 200
    assert rows[1]["time_s"] == pytest.approx(times.max())  # waits for its last learner


def test_the_ablations_run_in_the_arena_and_need_an_allocation() -> None:
    inst = load_instance("instances/mel-async/k5_T15.json")
    run = arena(inst, ArenaSettings(schemes=("fill", "equal-data"), seeds=1, cycles=2,
                                    model="softmax"))
    assert {r["scheme"] for r in run.rows} == {"fill", "equal-data"} and not run.infeasible
    assert all(r["dropped"] == 0 for r in run.rows)
