"""Prediction-error experiments of subset benchmarking (thesis Section 3.4.2.1), on this machine.

- :func:`sb_error_experiment` (Fig. 3.2): per trial, time a fresh TwoNN training one pass over
  ``target`` generated shards (the real time), benchmark fresh copies on each of ``sizes``
  shards and extrapolate to ``target`` (SB, c_k = n / T_t), and predict the same run from the
  FLOPS baseline (100 products of two 512 x 512 matrices). Error = |predicted - real| / real.
- :func:`download_error_experiment` (Fig. 3.3): a stdlib HTTP server on 127.0.0.1 serves
  ``target`` shards; per trial the real time to download all of them is measured and SB predicts
  it from the timed download of n random consecutive shards (b_k = n / T_d). Loopback is not a
  network: this exercises the measurement, it cannot reproduce WiFi or Ethernet figures.

The runs of a trial are done in a seeded random order, so that drift of a shared machine does
not favour one benchmark size. Errors are returned per trial, in percent.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from mel_opt.blas import blas_threads
from mel_opt.subset_benchmarking.data import encode_shard, make_shards
from mel_opt.subset_benchmarking.download import time_download
from mel_opt.subset_benchmarking.measure import flops_benchmark, model_for, time_training


@dataclass
class ErrorTrials:
    """Per-trial prediction errors of one experiment.

    Attributes
    ----------
    sb : dict of int to list of float
        Benchmark size n [shards] -> SB error of each trial [%].
    real_s : list of float
        The measured time of the real run (training or download) of each trial [s].
    flops : list of float
        FLOPS-baseline error of each trial [%] (empty for downloads).
    gflops : list of float
        The FLOPS baseline's measured rate of each trial [GFLOP/s] (empty for downloads).
    """

    sb: dict[int, list[float]]
    real_s: list[float] = field(default_factory=list)
    flops: list[float] = field(default_factory=list)
    gflops: list[float] = field(default_factory=list)


def _error_pct(predicted: float, real: float) -> float:
    return abs(predicted - real) / real * 100.0


def sb_error_experiment(trials: int, sizes: Sequence[int] = (2, 4, 6, 8, 10), *,
                        target: int = 60, batch_size: int = 32, threads: int = 1,
                        seed: int = 0) -> ErrorTrials:
    """SB and FLOPS training-time prediction errors over ``trials`` trials (thesis Fig. 3.2).

    Parameters
    ----------
    trials : int
        Repetitions (the thesis used 30).
    sizes : sequence of int
        Benchmark sizes n [shards], each below ``target``.
    target : int
        Shards of the real run.
    batch_size : int
        Mini-batch of the SGD pass [samples].
    threads : int
        BLAS threads during training (0: the library default).
    seed : int
        Seeds the data, the models and the run order.
    """
    rng = np.random.default_rng(seed)
    out = ErrorTrials(sb={n: [] for n in sizes})
    for trial in range(trials):
        x, y = make_shards(target, seed=seed + trial)
        fl = flops_benchmark(seed=trial, threads=threads)
        out.gflops.append(fl.flops / 1e9)
        runs: list[int | None] = [None, *sizes]  # None: the real run
        seconds: dict[int | None, float] = {}
        with blas_threads(threads):
            for i in rng.permutation(len(runs)):
                key = runs[i]
                n = target if key is None else key
                net = model_for("twonn", seed=trial)
                seconds[key] = time_training(net, x[:n], y[:n], batch_size=batch_size)
        real = seconds[None]
        out.real_s.append(real)
        for n in sizes:
            out.sb[n].append(_error_pct(seconds[n] * target / n, real))
        out.flops.append(_error_pct(fl.predict_seconds(model_for("twonn"), target), real))
    return out


@contextmanager
def serve_shards(blobs: Sequence[bytes]) -> Iterator[str]:
    """Serve ``blobs`` at ``http://127.0.0.1:PORT/shard/<i>`` (ephemeral port) while open.

    Yields the URL prefix; the server is shut down and its thread joined on exit.
    """

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (stdlib name)
            try:
                body = blobs[int(self.path.rsplit("/", 1)[1])]
            except (ValueError, IndexError):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/shard/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def download_error_experiment(trials: int, sizes: Sequence[int] = (2, 4, 6, 8, 10), *,
                              target: int = 60, seed: int = 0) -> ErrorTrials:
    """SB download-time prediction errors over loopback HTTP (thesis Fig. 3.3).

    Parameters as :func:`sb_error_experiment`; each benchmark downloads n consecutive shards
    from a random start (thesis Algorithm 10), the real run all ``target`` of them.
    """
    x, y = make_shards(target, seed=seed)
    blobs = [encode_shard(x[i], y[i]) for i in range(target)]
    del x, y
    rng = np.random.default_rng(seed)
    out = ErrorTrials(sb={n: [] for n in sizes})
    with serve_shards(blobs) as base:
        for _ in range(trials):
            runs: list[int | None] = [None, *sizes]
            seconds: dict[int | None, float] = {}
            for i in rng.permutation(len(runs)):
                key = runs[i]
                n = target if key is None else key
                start = int(rng.integers(0, target - n + 1))
                urls = [f"{base}{j}" for j in range(start, start + n)]
                seconds[key] = time_download(urls, timeout=30).seconds
            real = seconds[None]
            out.real_s.append(real)
            for n in sizes:
                out.sb[n].append(_error_pct(seconds[n] * target / n, real))
    return out
