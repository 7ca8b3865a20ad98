"""FedProx: the work that fits a budget, the proximal gradient, and proximal SGD."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mel_opt.schemes.fedprox import completed, fitting_work, prox_gradient, prox_sgd
from mel_opt.training.local import broadcast, local_sgd, make_schedule
from mel_opt.training.mlp import init_params, stacked_gradients


def test_fitting_work_by_hand() -> None:
    # budget 6 s, E = 3: (6 - 1) / 1 = 5 -> 3; (6 - 1) / 2 = 2.5; (6 - 11) < 0 -> 0;
    # (6 - 2) / 4 = 1
    got = fitting_work(3, np.array([1.0, 2.0, 4.0, 4.0]), np.array([1.0, 1.0, 11.0, 2.0]), 6.0)
    assert got.tolist() == [3.0, 2.5, 0.0, 1.0]


def test_prox_gradient_by_hand() -> None:
    g = prox_gradient([np.array([1.0, -1.0])], [np.array([3.0, 0.0])], [np.array([1.0, 2.0])],
                      0.5)
    # g + 0.5 (w - w_t) = (1 + 1, -1 - 1)
    np.testing.assert_allclose(g[0], [2.0, -2.0])


def _setup() -> tuple:
    rng = np.random.default_rng(3)
    x = rng.random((40, 5))
    y = rng.integers(0, 3, 40)
    params = broadcast(init_params([5, 4, 3], seed=1), 3)
    samples = [np.arange(0, 10), np.arange(10, 16), np.arange(16, 40)]
    sched = make_schedule(samples, np.array([2, 1, 1]), 4, np.random.default_rng(0))
    return x, y, params, sched


def test_mu_zero_is_plain_local_sgd() -> None:
    x, y, params, sched = _setup()
    got = prox_sgd(params, x, y, sched, 0.3, 0.0)
    want = local_sgd(params, x, y, sched, 0.3)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_proximal_steps_by_hand() -> None:
    # learner 0's first two steps computed one by one: the first is plain SGD (w = w_t), the
    # second adds mu (w - w_t)
    x, y, params, sched = _setup()
    lr, mu = 0.3, 2.0
    w0 = [a[0:1].copy() for a in params]
    w = [a.copy() for a in w0]
    for j in range(2):
        rows = sched.index[0:1, j]
        g = stacked_gradients(w, x[rows], y[rows], sched.weight[0:1, j])
        w = [a - lr * (ga + mu * (a - a0)) if a.size else a
             for a, ga, a0 in zip(w, g, w0, strict=True)]
    two = sched.__class__(index=sched.index[:, :2], weight=sched.weight[:, :2],
                          steps=np.minimum(sched.steps, 2))
    got = prox_sgd(params, x, y, two, lr, mu)
    for a, b in zip(got, w, strict=True):
        np.testing.assert_allclose(a[0:1], b, rtol=1e-10, atol=1e-12)
    # and it differs from plain SGD's second step
    plain = prox_sgd(params, x, y, two, lr, 0.0)
    assert not np.allclose(plain[0][0], got[0][0])


def test_completed_work_under_noise_by_hand() -> None:
    # budget 6 s; learner 0 predicted 1 + 2 x 2 = 5 s, ran 10 s (2x slower): (6 / 2 - 1) / 2 = 1
    # pass; learner 1 ran 5.5 s, within the budget: its 2 passes; learner 2's transfers alone
    # take 6 / 1.5 = 4 s > 3 s slowed down: 0
    got = completed(np.array([2.0, 2.0, 1.0]), np.array([5.0, 5.0, 4.0]),
                    np.array([10.0, 5.5, 6.0 * 1.5]), np.array([2.0, 2.0, 1.0]),
                    np.array([1.0, 1.0, 5.0]), 6.0)
    assert got.tolist() == [1.0, 2.0, 0.0]


def _run(doc: dict, s: Any) -> Any:
    from mel_opt.api import parse_instance
    from mel_opt.arena.run import noisy_clock
    from mel_opt.arena.runner import Run
    from mel_opt.training import load_dataset
    from mel_opt.training.partition import make_pools, parse_partition, proportional_sizes

    inst = parse_instance(doc)
    ds = load_dataset("digits", max_train=400, max_test=100).astype(np.dtype("float32"))
    rng = np.random.default_rng([0, 7])
    pools = make_pools(ds.y_train, proportional_sizes(np.ones(inst.K), ds.y_train.size),
                       parse_partition("iid"), ds.classes, rng)
    init = init_params([ds.features, ds.classes], 0, np.float32)
    clock = noisy_clock(inst, s)
    return Run(ds, init, pools, clock, s, rng, s.cycles * clock.budget_s)


# two learners, 200 samples each (u = 200): a does 1 pass in 2 s after 1 s of transfers and
# fits floor((10 - 1) / 2) = 4 whole passes, b's transfers take 9 s and it fits 0 whole ones,
# so E = the median fit = 2; b does (10 - 9) / 2 = 0.5 pass: 200 / 32 -> 7 minibatches a pass,
# floor(3.5) = 3 of them
TWO = {"problem": "mel-async", "schema_version": 1, "name": "two", "cycle_time_s": 10.0,
       "total_samples": 400, "min_samples": 10, "max_samples": 400,
       "learners": [{"name": "a", "c2": 0.01, "c1": 0.0, "c0": 1.0},
                    {"name": "b", "c2": 0.01, "c1": 0.0, "c0": 9.0}]}


def test_models_are_averaged_by_data_size_not_by_work(monkeypatch: Any) -> None:
    """FedAvg's weights are the learners' data sizes n_k (McMahan et al.; FedProx keeps
    them): a learner that did a partial pass weighs as much as its data, not as its work."""
    from mel_opt.arena import runner
    from mel_opt.arena.settings import ArenaSettings
    from mel_opt.schemes import SCHEMES

    seen: list[np.ndarray] = []
    real = runner.combine
    monkeypatch.setattr(runner, "combine",
                        lambda models, w, *a: seen.append(np.array(w)) or real(models, w, *a))
    run = _run(TWO, ArenaSettings(cycles=1, model="softmax", time_cv=0.0, mu=0.01))
    assert run.sizes.tolist() == [200, 200]
    rows = list(runner.rounds_run(run, SCHEMES["fedprox"].policy(run)))
    assert seen and all(w.tolist() == [200.0, 200.0] for w in seen)
    # a: E = 2 passes (400 samples); b: 3 x 32 = 96 samples (0.48 of a pass charged)
    assert rows[1]["updates"] == 2 * 200 + 96
    # the round lasts b's 9 + 2 x 0.48 = 9.96 s (a's 1 + 2 x 2 = 5 s)
    assert rows[1]["time_s"] == pytest.approx(9.96)
    assert rows[1]["idle_s"] == pytest.approx(4.96) and rows[1]["busy_s"] == pytest.approx(
        14.96)


def test_the_last_round_within_the_horizon_counts() -> None:
    """Rounds cut at the budget (noisy learners stop at T) last T exactly; with a horizon of
    four budgets the fourth such round ends at the horizon and is compared, not dropped for a
    rounding error."""
    from mel_opt.api import parse_instance
    from mel_opt.arena.run import arena
    from mel_opt.arena.settings import ArenaSettings

    doc = {**TWO, "learners": [{**TWO["learners"][1], "name": f"b{i}"} for i in range(4)]}
    got = arena(parse_instance(doc), ArenaSettings(schemes=("fedprox",), seeds=1, cycles=4,
                                                   model="softmax", time_cv=0.5,
                                                   max_train=400, max_test=100))
    times = [r["time_s"] for r in got.rows]
    assert times[-1] <= got.horizon_s * (1 + 1e-9)
    assert len(times) >= 5 and max(np.diff(times)) <= 10.0 + 1e-9
