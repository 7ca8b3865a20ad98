"""FedProx: the work that fits a budget, the proximal gradient, and proximal SGD."""

from __future__ import annotations

import numpy as np

from mel_opt.schemes.fedprox import fitting_work, prox_gradient, prox_sgd
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
