"""Subset benchmarking: the numpy TwoNN, generated shards, FLOPS baseline, timed downloads.

The HTTP tests serve shards from a stdlib ``http.server`` bound to 127.0.0.1 only, on a port
the OS picks, in a daemon thread that is shut down after each test; every request has a
timeout and every test a pytest-timeout bound.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from threadpoolctl import threadpool_info, threadpool_limits

from mel_opt.cli import cli
from mel_opt.errors import UsageError
from mel_opt.problems.dab import shard_bound
from mel_opt.subset_benchmarking import (
    MLP,
    SHARD_BYTES,
    BenchmarkError,
    blas_control_available,
    blas_threads,
    decode_shard,
    encode_shard,
    expand_urls,
    flops_benchmark,
    make_shards,
    subset_benchmark,
    time_download,
    twonn,
)

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------
def test_twonn_shape_and_size() -> None:
    net = twonn()
    # 784*50 + 50 + 50*20 + 20 + 20*10 + 10 = 39,200 + 50 + 1,000 + 20 + 200 + 10 = 40,480
    assert net.parameter_count == 40_480
    assert net.parameter_bytes == 161_920
    # matrix-product FLOPs per sample: forward 2*40,400, weight gradients 2*40,400,
    # input gradients of layers 2 and 3: 2*(1,000 + 200) -> 80,800 + 80,800 + 2,400
    assert net.train_flops_per_sample() == 164_000


def test_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(0)
    net = MLP((6, 5, 4, 3), seed=1, dtype=np.float64)
    x = rng.normal(size=(7, 6))
    y = rng.integers(0, 3, 7)
    gw, gb = net.gradients(x, y)
    eps = 1e-6
    for params, grads in ((net.weights, gw), (net.biases, gb)):
        for p, g in zip(params, grads, strict=True):
            flat, gflat = p.reshape(-1), g.reshape(-1)
            for i in range(flat.size):
                old = flat[i]
                flat[i] = old + eps
                up = net.loss(x, y)
                flat[i] = old - eps
                down = net.loss(x, y)
                flat[i] = old
                assert gflat[i] == pytest.approx((up - down) / (2 * eps), abs=1e-6)


def test_sgd_learns_the_generated_classes() -> None:
    x, y = make_shards(3, seed=3)
    net = twonn(seed=2)
    before = net.loss(x[2], y[2])
    with blas_threads(1):  # small products: one thread is fastest on a shared machine
        for _ in range(4):
            net.sgd_pass(x[:2].reshape(-1, 784), y[:2].reshape(-1), lr=0.1, batch_size=32)
    held_out = net.forward(x[2])[-1]
    assert before > 2.0  # ~ ln 10 at the start
    assert net.loss(x[2], y[2]) < 0.25 * before
    assert (held_out.argmax(axis=1) == y[2]).mean() > 0.8


def test_shards_are_mnist_shaped_and_round_trip_as_bytes() -> None:
    x, y = make_shards(2, seed=0)
    assert x.shape == (2, 500, 784) and x.dtype == np.float32 and y.shape == (2, 500)
    assert 0.0 <= float(x.min()) and float(x.max()) <= 1.0 and set(np.unique(y)) <= set(range(10))
    assert SHARD_BYTES == 1_568_000
    blob = encode_shard(x[0], y[0])
    assert len(blob) == SHARD_BYTES + 500
    x0, y0 = decode_shard(blob)
    assert np.array_equal(x0, x[0]) and np.array_equal(y0, y[0])
    with pytest.raises(ValueError):
        decode_shard(blob[:-1])


# ------------------------------------------------------------------------------------------
# SB and FLOPS measurements
# ------------------------------------------------------------------------------------------
def test_subset_benchmark_measures_a_rate_and_extrapolates_linearly() -> None:
    sb = subset_benchmark(2, seed=0)
    assert sb.shards == 2 and sb.passes == 1 and sb.seconds > 0
    assert sb.rate == pytest.approx(2 / sb.seconds)
    assert sb.predict_seconds(60) == pytest.approx(30 * sb.seconds)
    assert sb.predict_seconds(60, passes=5) == pytest.approx(150 * sb.seconds)


def test_flops_benchmark_counts_2n3_per_product() -> None:
    fl = flops_benchmark(size=64, repeats=5)
    assert fl.flops == pytest.approx(5 * 2 * 64**3 / fl.seconds)
    # FLOPS prediction = FLOPs of the run / rate: 60 shards x 500 samples x 164,000 FLOP
    assert fl.predict_seconds(twonn(), 60) == pytest.approx(60 * 500 * 164_000 / fl.flops)


def _blas_counts() -> dict[str, int]:
    """Thread count of every BLAS threadpoolctl finds in this process, by library file."""
    return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info()
            if lib["user_api"] == "blas"}


def test_blas_threads_sets_every_blas_to_one_and_restores_it() -> None:
    import scipy.linalg  # noqa: F401  (scipy's wheels bring a second OpenBLAS: limit both)

    if not blas_control_available():
        assert _blas_counts() == {}
        pytest.skip("threadpoolctl finds no BLAS in this process")
    original = _blas_counts()
    # start from 2 threads (where the machine allows 2), so that a block that forgot to
    # restore the count would show
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_counts()
        with blas_threads(1) as done:
            assert done is True
            inside = _blas_counts()
        assert inside.keys() == before.keys() and set(inside.values()) == {1}
        assert _blas_counts() == before
        with pytest.raises(RuntimeError), blas_threads(1):  # restored on an exception too
            raise RuntimeError
        assert _blas_counts() == before
        for n in (0, None):  # leave the library's count as is
            with blas_threads(n) as done:
                assert done is False and _blas_counts() == before
    assert _blas_counts() == original


def test_blas_threads_without_a_blas_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from mel_opt import blas

    monkeypatch.setattr(blas, "threadpool_info", lambda: [])
    before = _blas_counts()
    assert blas.blas_control_available() is False
    with blas_threads(1) as done:
        assert done is False and _blas_counts() == before


# ------------------------------------------------------------------------------------------
# HTTP on loopback
# ------------------------------------------------------------------------------------------
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 (ephemeral port) for the block; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture()
def shard_dir(tmp_path: Path) -> Path:
    x, y = make_shards(3, seed=4)
    for i in range(3):
        (tmp_path / f"shard{i}.bin").write_bytes(encode_shard(x[i], y[i]))
    return tmp_path


def test_expand_urls() -> None:
    assert expand_urls("http://h/s{i}.bin", 3) == ["http://h/s0.bin", "http://h/s1.bin",
                                                   "http://h/s2.bin"]
    assert expand_urls("https://h/all.bin", 3) == ["https://h/all.bin"]
    for bad in ("ftp://h/x", "file:///etc/passwd", "h/x", "http://"):
        with pytest.raises(UsageError, match="http:// or https://"):
            expand_urls(bad, 2)


def test_time_download_counts_every_byte(shard_dir: Path) -> None:
    with serve(shard_dir) as base:
        dl = time_download(expand_urls(base + "/shard{i}.bin", 3), timeout=5)
    assert dl.transfers == 3 and dl.bytes == 3 * (SHARD_BYTES + 500)
    assert dl.bandwidth == pytest.approx(dl.bytes / dl.seconds)
    assert dl.shards_per_second(SHARD_BYTES + 500) == pytest.approx(3 / dl.seconds)


def test_download_failures_are_clear(shard_dir: Path) -> None:
    with serve(shard_dir) as base:
        with pytest.raises(BenchmarkError, match="HTTP 404"):
            time_download([base + "/missing.bin"], timeout=5)
    # a port held bound and not listening refuses every connection (a port merely freed could
    # be listened on by another process meanwhile)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        port = held.getsockname()[1]
        with pytest.raises(BenchmarkError, match="failed"):
            time_download([f"http://127.0.0.1:{port}/shard0.bin"], timeout=2)
    (shard_dir / "empty.bin").write_bytes(b"")
    with serve(shard_dir) as base, pytest.raises(BenchmarkError, match="no data"):
        time_download([base + "/empty.bin"], timeout=5)


def test_cli_benchmark_with_download(shard_dir: Path) -> None:
    runner = CliRunner()
    with serve(shard_dir) as base:
        res = runner.invoke(cli, ["benchmark", "--shards", "3", "--download",
                                  base + "/shard{i}.bin", "--timeout", "5", "--predict", "60",
                                  "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["download_bytes"] == 3 * (SHARD_BYTES + 500)
    assert out["train_rate_shards_per_s"] == pytest.approx(3 / out["train_seconds"])
    assert out["sb_predicted_seconds"] == pytest.approx(20 * out["train_seconds"])
    assert out["flops_predicted_seconds"] > 0 and out["model_bytes"] == 161_920


def test_cli_dab_learner_reports_the_bound_of_its_own_measurements(shard_dir: Path) -> None:
    runner = CliRunner()
    with serve(shard_dir) as base:
        res = runner.invoke(cli, ["dab-learner", "--deadline", "15", "--iterations", "5",
                                  "--shards", "3", "--download", base + "/shard{i}.bin",
                                  "--timeout", "5", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    private = out["private"]
    assert private["bandwidth_measured"] is True
    expect = shard_bound(15.0, 5, 161_920.0, float(SHARD_BYTES),
                         [private["train_rate_shards_per_s"]], [private["bandwidth_Bps"]])[0]
    assert out["a_k"] == int(expect) >= 1
    assert out["sent_to_orchestrator"] == {"a_k": out["a_k"]}
    assert out["predicted_eta_s"] < 15.0


def test_cli_dab_learner_given_bandwidth_and_halting() -> None:
    runner = CliRunner()
    res = runner.invoke(cli, ["dab-learner", "--deadline", "15", "--iterations", "1",
                              "--shards", "2", "--bandwidth-Bps", "1.568e6"])
    assert res.exit_code == 0, res.output
    assert "a_k -> orchestrator" in res.output and "only a_k leaves this device" in res.output
    # the upload and download of a 10 MB model at 1 MB/s alone take 20 s > D = 15 s
    res = runner.invoke(cli, ["dab-learner", "--deadline", "15", "--iterations", "1",
                              "--shards", "2", "--bandwidth-Bps", "1e6", "--model-bytes", "1e7"])
    assert res.exit_code == 1
    assert "halts" in res.output


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["dab-learner", "--deadline", "15", "--iterations", "1"], "give --download URL"),
        (["dab-learner", "--deadline", "15", "--iterations", "1", "--bandwidth-Bps", "5",
          "--download", "http://127.0.0.1:9/x"], "not both"),
        (["dab-learner", "--deadline", "-1", "--iterations", "1", "--bandwidth-Bps", "5"],
         "deadline"),
        (["benchmark", "--download", "ftp://x/y"], "http:// or https://"),
        (["benchmark", "--model", "resnet"], "resnet"),
        (["benchmark", "--shards", "0"], "shards"),
    ],
)
def test_cli_bad_usage_exits_2(args: list[str], match: str) -> None:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2
    assert match in res.output
    assert "Traceback" not in res.output


def test_cli_unreachable_download_exits_1(shard_dir: Path) -> None:
    with serve(shard_dir) as base:
        port = int(base.rsplit(":", 1)[1])
    res = CliRunner().invoke(cli, ["benchmark", "--shards", "1", "--no-flops", "--download",
                                   f"http://127.0.0.1:{port}/shard0.bin", "--timeout", "2"])
    assert res.exit_code == 1
    assert "download of" in res.output and "Traceback" not in res.output
