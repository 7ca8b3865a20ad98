"""The numerical core of the training emulator: gradients, the batched trainer, partitions."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.training.local import (
    average,
    broadcast,
    local_sgd,
    local_sgd_loop,
    make_schedule,
)
from mel_opt.training.mlp import (
    MLP,
    init_params,
    layers_for,
    stacked_gradients,
    stacked_loss,
)
from mel_opt.training.partition import (
    draw,
    make_pools,
    parse_partition,
    proportional_sizes,
)

pytestmark = pytest.mark.timeout(120)


def _data(n: int = 120, f: int = 5, c: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, f)), rng.integers(0, c, n)


def test_stacked_gradients_match_finite_differences_with_ragged_weights() -> None:
    rng = np.random.default_rng(1)
    K, m = 3, 4
    p = broadcast(init_params((5, 4, 3, 3), seed=2), K)
    for a in p:  # different models per learner
        a += 0.1 * rng.normal(size=a.shape)
    x = rng.normal(size=(K, m, 5))
    y = rng.integers(0, 3, (K, m))
    w = np.array([[0.25] * 4, [0.5, 0.5, 0, 0], [1.0, 0, 0, 0]])  # 4, 2 and 1 real samples
    g = stacked_gradients(p, x, y, w)
    eps = 1e-6
    for a, ga in zip(p, g, strict=True):
        flat, gflat = a.reshape(-1), ga.reshape(-1)
        for i in range(0, flat.size, 3):
            k = np.unravel_index(i, a.shape)[0]  # the learner this entry belongs to
            old = flat[i]
            flat[i] = old + eps
            up = stacked_loss(p, x, y, w)[k]
            flat[i] = old - eps
            down = stacked_loss(p, x, y, w)[k]
            flat[i] = old
            assert gflat[i] == pytest.approx((up - down) / (2 * eps), abs=1e-7)


def test_softmax_regression_gradient_by_hand() -> None:
    # one sample, zero weights: p = 1/3 each; dL/dz = p - onehot(y); dL/dW = x^T (p - e_y)
    p = [np.zeros((1, 2, 3)), np.zeros((1, 3))]
    x = np.array([[[1.0, 2.0]]])
    y = np.array([[2]])
    g = stacked_gradients(p, x, y, np.ones((1, 1)))
    d = np.array([1 / 3, 1 / 3, -2 / 3])
    assert np.allclose(g[0][0], np.outer([1.0, 2.0], d), atol=1e-15)
    assert np.allclose(g[1][0], d, atol=1e-15)
    assert stacked_loss(p, x, y)[0] == pytest.approx(np.log(3.0))


@pytest.mark.parametrize("gather_bytes", [1, 1 << 25])  # a step per block, all in one
def test_batched_trainer_equals_per_learner_loop_with_ragged_data_and_passes(
        gather_bytes: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import mel_opt.training.local as local

    monkeypatch.setattr(local, "GATHER_BYTES", gather_bytes)
    x, y = _data()
    rng = np.random.default_rng(3)
    counts = [17, 5, 40, 1, 23, 9]  # ragged d_k, some below the minibatch size
    samples = [rng.choice(x.shape[0], c, replace=False) for c in counts]
    tau = np.array([3, 1, 2, 4, 0, 5])  # ragged tau_k, one learner idle
    sched = make_schedule(samples, tau, 8, np.random.default_rng(4))
    assert list(sched.steps) == [t * -(-c // 8) for c, t in zip(counts, tau, strict=True)]
    p = broadcast(init_params(layers_for("twonn", 5, 3), seed=5), len(counts))
    fast = local_sgd(p, x, y, sched, 0.3)
    slow = local_sgd_loop(p, x, y, sched, 0.3)
    for a, b in zip(fast, slow, strict=True):
        assert np.max(np.abs(a - b)) < 1e-10
    assert np.array_equal(fast[0][4], p[0][4])  # the idle learner did not move
    assert not np.allclose(fast[0][3], p[0][3])


def test_every_sample_is_seen_once_per_pass() -> None:
    samples = [np.arange(10, 23), np.arange(3)]
    sched = make_schedule(samples, np.array([2, 3]), 4, np.random.default_rng(0))
    for k, s in enumerate(samples):
        rows = sched.index[k][sched.weight[k] > 0]
        per_pass = rows.reshape(-1, s.size) if k == 1 else None
        assert np.array_equal(np.sort(rows), np.sort(np.tile(s, [2, 3][k])))
        if per_pass is not None:
            for r in per_pass:
                assert np.array_equal(np.sort(r), s)
    # each minibatch's weights sum to one (mean loss of that minibatch)
    sums = sched.weight.sum(axis=2)
    assert np.allclose(sums[0, :8], 1.0) and np.allclose(sums[1, :3], 1.0)


def test_one_learner_is_centralised_sgd() -> None:
    x, y = _data(50)
    sched = make_schedule([np.arange(50)], np.array([3]), 16, np.random.default_rng(7))
    p = init_params(layers_for("twonn", 5, 3), seed=1)
    got = local_sgd([a[None] for a in p], x, y, sched, 0.2)
    net = MLP(layers_for("twonn", 5, 3), seed=1, dtype=np.float64)
    order = sched.index[0][sched.weight[0] > 0].reshape(3, 50)  # the three shuffles
    for perm in order:
        net.sgd_pass(x[perm], y[perm], lr=0.2, batch_size=16)
    want = [a for w, b in zip(net.weights, net.biases, strict=True) for a in (w, b)]
    for a, b in zip(got, want, strict=True):
        assert np.max(np.abs(a[0] - b)) < 1e-12


def test_average_is_the_weighted_mean() -> None:
    p = [np.array([[1.0, 2.0], [3.0, 6.0]]), np.array([[0.0], [4.0]])]
    avg = average(p, np.array([1.0, 3.0]))
    assert np.allclose(avg[0], [2.5, 5.0]) and np.allclose(avg[1], [3.0])


@pytest.mark.parametrize("K", [2, 4, 5, 6, 12, 20])
def test_non_iid_gives_at_most_two_labels_per_learner(K: int) -> None:
    rng = np.random.default_rng(K)
    labels = rng.integers(0, 10, 1500)
    pools = make_pools(labels, proportional_sizes(np.ones(K), 1500),
                       parse_partition("non-iid"), 10, rng)
    assert len(pools) == K
    for p in pools:
        assert p.size > 0 and np.unique(labels[p]).size <= 2
    together = np.concatenate(pools)
    assert np.unique(together).size == together.size  # no sample in two pools
    if 2 * K >= 10:
        assert together.size == 1500


def test_iid_meets_the_sizes_and_dirichlet_skews_labels() -> None:
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 100)
    sizes = proportional_sizes(np.array([1.0, 2.0, 3.0, 4.0]), 1000)
    assert list(sizes) == [100, 200, 300, 400]
    pools = make_pools(labels, sizes, parse_partition("iid"), 10, rng)
    assert [p.size for p in pools] == [100, 200, 300, 400]
    assert np.unique(np.concatenate(pools)).size == 1000
    skew = make_pools(labels, sizes, parse_partition("dirichlet:0.05"), 10, rng)
    flat = make_pools(labels, sizes, parse_partition("dirichlet:1000"), 10, rng)
    assert sum(p.size for p in skew) == 1000

    def labels_seen(ps: list[np.ndarray]) -> float:
        return float(np.mean([np.unique(labels[p]).size for p in ps]))

    assert labels_seen(skew) < 5 < labels_seen(flat)


def test_proportional_sizes_and_draw() -> None:
    assert list(proportional_sizes(np.array([1.0, 1.0, 1.0]), 10)) == [4, 3, 3]
    assert list(proportional_sizes(np.array([1e-9, 1.0]), 5)) == [1, 4]
    rng = np.random.default_rng(0)
    pool = np.arange(5)
    assert np.array_equal(draw(pool, 5, rng), pool)
    small = draw(pool, 3, rng)
    assert small.size == 3 and np.unique(small).size == 3
    big = draw(pool, 12, rng)
    assert big.size == 12 and set(big) == set(pool)  # whole pool plus repeats


@pytest.mark.parametrize("bad", ["dirichlet:0", "dirichlet:x", "skewed"])
def test_bad_partition_names(bad: str) -> None:
    from mel_opt.errors import UsageError

    with pytest.raises(UsageError):
        parse_partition(bad)
