"""The batched kernel's layout choices: the class-major softmax and the trainer's step-major
gathering, checked on numbers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.training import gemm, mlp
from mel_opt.training.local import broadcast, local_sgd, local_sgd_loop, make_schedule
from mel_opt.training.mlp import (
    StepBuffers,
    init_params,
    layers_for,
    stacked_forward,
    stacked_gradients,
    stacked_sgd_step,
)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_is_shifted_so_huge_logits_stay_finite(dtype: type) -> None:
    # zero weights, biases (1000, 1001, -1000): p = (1, e, e^-2000 ~ 0) / (1 + e); without
    # the shift by the class maximum exp(1000) overflows in either precision
    p = [np.zeros((1, 2, 3), dtype=dtype), np.array([[1000.0, 1001.0, -1000.0]], dtype=dtype)]
    x = np.ones((1, 4, 2), dtype=dtype)
    out = stacked_forward(p, x)[-1]
    assert out.shape == (1, 4, 3) and out.dtype == dtype
    tol = 1e-6 if dtype == np.float32 else 1e-13
    assert np.allclose(out, np.array([1.0, np.e, 0.0]) / (1 + np.e), atol=tol, rtol=0)


def test_one_hot_target_gives_the_same_gradients_as_labels() -> None:
    # the batched trainer hands weight * one-hot in (K, classes, m) layout instead of labels
    rng = np.random.default_rng(0)
    p = broadcast(init_params(layers_for("twonn", 4, 3), seed=1), 2)
    x = rng.normal(size=(2, 5, 4))
    y = np.array([[0, 2, 1, 1, 0], [2, 2, 0, 1, 1]])
    w = np.array([[0.2] * 5, [1 / 3, 1 / 3, 1 / 3, 0.0, 0.0]])
    target = np.zeros((2, 3, 5))
    for k in range(2):
        for i in range(5):
            target[k, y[k, i], i] = w[k, i]
    want = stacked_gradients(p, x, y, w)
    got = stacked_gradients(p, x, None, w, target)
    for a, b in zip(got, want, strict=True):
        assert np.max(np.abs(a - b)) < 1e-15


def test_no_learner_training_leaves_every_model_as_it_was() -> None:
    x = np.random.default_rng(2).normal(size=(30, 4))
    y = np.arange(30) % 3
    sched = make_schedule([np.arange(10), np.arange(10, 30)], np.array([0, 0]), 8,
                          np.random.default_rng(3))
    p = broadcast(init_params(layers_for("softmax", 4, 3), seed=4), 2)
    for got in (local_sgd(p, x, y, sched, 0.5), local_sgd_loop(p, x, y, sched, 0.5)):
        for a, b in zip(got, p, strict=True):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("model", ["softmax", "mlp000"])
@pytest.mark.parametrize("per_learner_bytes", [0, 1 << 40])  # every matrix / none by learner
@pytest.mark.parametrize("one_pass", [True, False])  # gemm with beta = 1, or product then -=
def test_sgd_step_is_the_gradients_then_the_update(
        dtype: type, model: str, per_learner_bytes: int, one_pass: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the trainer's in-place step against stacked_gradients followed by params -= grads, with
    # ragged loss weights (learner 1 has 5 real samples, learner 2 none) and the learning
    # rate folded into them
    monkeypatch.setattr(mlp, "PER_LEARNER_BYTES", per_learner_bytes)
    monkeypatch.setattr(gemm, "one_pass", gemm.blas_subtract if one_pass else lambda dt: None)
    rng = np.random.default_rng(7)
    K, m = 3, 8
    p = broadcast(init_params(layers_for(model, 6, 4), seed=2, dtype=dtype), K)
    p = [a + rng.normal(scale=0.1, size=a.shape).astype(dtype) for a in p]
    x = rng.normal(size=(K, m, 6)).astype(dtype)
    y = rng.integers(0, 4, (K, m))
    w = np.full((K, m), 0.3 / m, dtype=dtype)
    w[1] = np.where(np.arange(m) < 5, 0.3 / 5, 0.0)
    w[2] = 0.0
    target = np.zeros((K, 4, m), dtype=dtype)
    np.put_along_axis(target, y[:, None, :], w[:, None, :], axis=1)
    want = [a - g for a, g in zip(p, stacked_gradients(p, x, None, w, target), strict=True)]
    # buffers for more learners than step (the trainer's prefix of learners still training),
    # full of NaN (what a step reads before writing would show)
    work = StepBuffers(layers_for(model, 6, 4), K + 2, m, dtype)
    for buf in [*work.hidden, *work.down, work.e, *work.grad, *work.bias]:
        buf.fill(np.nan)
    for buf in work.active:
        buf.fill(True)
    for buffers in (None, work, work):  # fresh arrays, then the same buffers twice
        got = [a.copy() for a in p]
        stacked_sgd_step(got, x, w, target, buffers)
        for i, (a, b, start) in enumerate(zip(got, want, p, strict=True)):
            assert a.dtype == dtype
            if one_pass and per_learner_bytes == 0 and i % 2 == 0:
                # learner by learner, BLAS's gemm subtracts the product in one pass: the same
                # sum of m products, whose order of accumulation may differ between numpy's
                # and scipy's BLAS builds, so within a few roundings of the step's size
                u = np.finfo(dtype).eps
                tol = 4 * m * u * np.abs(b - start).max() + 2 * u * np.abs(b)
                assert np.all(np.abs(a - b) <= tol)
            else:
                np.testing.assert_array_equal(a, b)
            assert np.array_equal(a[2], start[2])  # no real sample: no change
            assert not np.array_equal(a[0], start[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_layer_update_in_one_blas_pass_matches_the_gradient(
        dtype: type, monkeypatch: pytest.MonkeyPatch) -> None:
    # mlp000's first layer on 784 pixels, updated learner by learner by gemm (alpha = -1,
    # beta = 1) against w - a^T g formed in float64 from the same float inputs; a learner
    # whose weights are not contiguous (every other row) takes numpy's path, same numbers
    rng = np.random.default_rng(11)
    K, m, n_in, n_out = 3, 32, 784, 300
    w = rng.normal(scale=0.05, size=(K, n_in, n_out)).astype(dtype)
    a = rng.random((K, m, n_in)).astype(dtype)
    g = rng.normal(scale=1e-3, size=(K, m, n_out)).astype(dtype)
    exact = w.astype(np.float64) - np.matmul(a.astype(np.float64).transpose(0, 2, 1),
                                             g.astype(np.float64))
    monkeypatch.setattr(gemm, "one_pass", gemm.blas_subtract)
    got = w.copy()
    mlp._subtract_product(got, a, g, np.empty((n_in, n_out), dtype=dtype))
    u = np.finfo(dtype).eps
    bound = m * u * np.matmul(np.abs(a.astype(np.float64)).transpose(0, 2, 1),
                              np.abs(g.astype(np.float64))) + u * np.abs(exact)
    assert np.all(np.abs(got - exact) <= bound)
    assert np.abs(got - w).max() > 100 * bound.max()  # the update is far above the rounding
    strided = np.zeros((K, 2 * n_in, n_out), dtype=dtype)[:, ::2]
    strided[...] = w
    mlp._subtract_product(strided, a, g, np.empty((n_in, n_out), dtype=dtype))
    assert np.all(np.abs(strided - exact) <= bound)


@pytest.mark.parametrize(("libs", "one_pass"), [
    ([("openblas", "SkylakeX"), ("openblas", "SkylakeX")], True),
    ([("openblas", "SkylakeX"), ("openblas", "Haswell")], False),  # scipy's build differs
    ([("openblas", "Haswell")], False),
    ([("mkl", None)], False),
    ([], False),
])
def test_one_pass_update_only_with_avx512_openblas(
        libs: list[tuple[str, str | None]], one_pass: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threadpoolctl

    info = [{"user_api": "blas", "internal_api": api, "architecture": arch}
            for api, arch in libs]
    info.append({"user_api": "openmp", "internal_api": "openmp", "architecture": None})
    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: info)
    gemm.one_pass.cache_clear()
    try:
        assert (gemm.one_pass(np.dtype(np.float32)) is not None) is one_pass
        assert gemm.one_pass(np.dtype(np.int64)) is None
    finally:
        gemm.one_pass.cache_clear()


def test_one_pass_refuses_operands_it_cannot_take_as_they_lie() -> None:
    sub = gemm.blas_subtract(np.dtype(np.float32))
    assert sub is not None and gemm.blas_subtract(np.dtype(np.int32)) is None
    rng = np.random.default_rng(3)
    w = rng.random((6, 4), dtype=np.float32)
    a = rng.random((5, 6), dtype=np.float32)
    g = rng.random((5, 4), dtype=np.float32)
    want = w - a.T @ g
    for bad in ((w.T.copy().T, a, g), (w, a.astype(np.float64), g),  # Fortran w, mixed types
                (w, np.asfortranarray(a), g), (w, a, g[:, ::-1]), (w, a[:4], g)):
        before = bad[0].copy()
        assert sub(*bad) is False and np.array_equal(bad[0], before)
    rows = np.zeros((5, 9), dtype=np.float32)
    rows[:, :6] = a  # rows of a wider array: a leading dimension above its width
    assert sub(w, rows[:, :6], g) is True
    assert np.allclose(w, want, rtol=1e-6, atol=1e-6)


def test_one_pass_releases_the_gil_while_blas_runs() -> None:
    # a thread runs one large product through the one pass (about 0.2-0.5 s); meanwhile this
    # thread counts. Holding the GIL for the call (as scipy's Python wrappers do) would leave
    # this thread at most an OS time slice of counting (measured: 700-24,000 against 556,000
    # with the GIL released); required: 50 ms of counting at this thread's own rate
    import sys
    import threading
    import time

    from mel_opt.subset_benchmarking import blas_threads

    sub = gemm.blas_subtract(np.dtype(np.float64))
    assert sub is not None
    n = 2000
    rng = np.random.default_rng(0)
    w, a, g = (rng.random((n, n)) for _ in range(3))
    want = w - a.T @ g
    started = threading.Event()

    def work() -> None:
        started.set()
        assert sub(w, a, g)

    done = threading.Thread(target=int)  # this thread's rate at the same loop, alone
    done.start()
    done.join()
    t0, count = time.perf_counter(), 0
    while count < 200_000 and not done.is_alive():
        count += 1
    rate = count / (time.perf_counter() - t0)
    count = 0
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        with blas_threads(1):
            t = threading.Thread(target=work)
            t.start()
            started.wait()
            while t.is_alive():
                count += 1
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert np.allclose(w, want, rtol=1e-10, atol=1e-8)
    assert count > 0.05 * rate


def test_one_blas_thread_covers_scipys_blas_loaded_later() -> None:
    # a fresh process: scipy's BLAS is not loaded when the trainer's limit starts; the
    # one-pass update loads and uses it inside the block, where it must run one thread too
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from threadpoolctl import threadpool_info\n"
        "from mel_opt.subset_benchmarking import blas_threads\n"
        "import sys\n"
        "assert 'scipy.linalg' not in sys.modules\n"
        "with blas_threads(1):\n"
        "    from mel_opt.training import gemm\n"
        "    assert gemm.blas_subtract(np.dtype(np.float32)) is not None\n"
        "    libs = [lib for lib in threadpool_info() if lib['user_api'] == 'blas']\n"
        "    print(len(libs), sorted({lib['num_threads'] for lib in libs}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert int(out[0]) >= 1 and out[1:] == ["[1]"]
