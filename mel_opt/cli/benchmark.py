"""Learner-side commands of DAB (thesis Ch. 3): ``benchmark`` and ``dab-learner``.

``melopt benchmark`` measures this machine (subset benchmarking, FLOPS baseline, a timed
download); ``melopt dab-learner`` is what a DAB learner device runs: benchmark, then print the
a_k of Eq. (3.5) that it would send to the orchestrator.
"""

from __future__ import annotations

import json
from typing import Any

import click

from mel_opt.cli.app import cli, err, guarded, info_table, out, positive, seed_int
from mel_opt.errors import UsageError
from mel_opt.problems.dab import eta, shard_bound
from mel_opt.subset_benchmarking import (
    MODELS,
    SHARD_BYTES,
    DownloadBenchmark,
    blas_control_available,
    expand_urls,
    flops_benchmark,
    model_for,
    subset_benchmark,
    time_download,
)

_TWONN_BYTES = 4 * sum(a * b + b for a, b in zip(MODELS["twonn"][:-1], MODELS["twonn"][1:],
                                                  strict=True))


def _measure_bandwidth(url: str | None, bandwidth: float | None, shards: int,
                       timeout: float) -> tuple[float | None, DownloadBenchmark | None]:
    if url is not None and bandwidth is not None:
        raise UsageError("give either --download URL or --bandwidth-Bps, not both")
    if url is None:
        return bandwidth, None
    dl = time_download(expand_urls(url, shards), timeout=timeout)
    return dl.bandwidth, dl


# ------------------------------------------------------------------------------------------
# melopt benchmark
# ------------------------------------------------------------------------------------------
@cli.command("benchmark")
@click.option("--model", type=click.Choice(sorted(MODELS)), default="twonn", show_default=True,
              help="Model whose small copy is trained.")
@click.option("--shards", type=click.IntRange(min=1, max=10_000), default=8, show_default=True,
              help="Benchmark size n: 500-sample shards trained (and downloaded with {i}).")
@click.option("--passes", type=click.IntRange(min=1, max=1000), default=1, show_default=True,
              help="Passes over the shards.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Minibatch of the timed training passes.")
@click.option("--lr", type=positive(), default=0.1,
              show_default=True, help="SGD learning rate.")
@click.option("--flops/--no-flops", default=True, show_default=True,
              help="Also run the FLOPS baseline (100 products of two 512x512 matrices).")
@click.option("--download", "url", default=None, metavar="URL",
              help="Time a real HTTP(S) transfer for b_k; '{i}' in the URL becomes 0..n-1.")
@click.option("--timeout", type=positive(), default=30.0,
              show_default=True,
              help="Deadline of the whole --download (every shard's connection and bytes) [s].")
@click.option("--shard-bytes", type=positive(),
              default=float(SHARD_BYTES), show_default=True,
              help="Bytes per shard, to express the bandwidth in shards/s.")
@click.option("--predict", type=positive(), default=None,
              metavar="M", help="Also predict the time to train M shards (SB and FLOPS).")
@click.option("--seed", type=seed_int(), default=0, show_default=True,
              help="Seed of the benchmark's data and initial model.")
@click.option("--threads", type=click.IntRange(min=0, max=256), default=1, show_default=True,
              help="BLAS threads while measuring (0: the library's default).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def benchmark_cmd(model: str, shards: int, passes: int, batch_size: int, lr: float,
                  flops: bool, url: str | None, timeout: float, shard_bytes: float,
                  predict: float | None, seed: int, threads: int, as_json: bool) -> None:
    """Subset benchmarking on this machine: train a small copy of the model on N shards.

    Prints the training rate c_k (shards/s) extrapolated from the timed run, the FLOPS
    baseline, and with --download the measured bandwidth b_k.
    """
    with guarded():
        urls = expand_urls(url, shards) if url else None  # reject a bad URL before training
        sb = subset_benchmark(shards, model=model, passes=passes, lr=lr, batch_size=batch_size,
                              seed=seed, threads=threads)
        net = model_for(model, seed=seed)
        result: dict[str, Any] = {
            "model": model,
            "parameters": net.parameter_count,
            "model_bytes": net.parameter_bytes,
            "shards": shards,
            "passes": passes,
            "train_seconds": sb.seconds,
            "train_rate_shards_per_s": sb.rate,
            "blas_threads": threads if (threads and blas_control_available()) else "default",
        }
        fl = flops_benchmark(seed=seed, threads=threads) if flops else None
        if fl is not None:
            result.update(flops_seconds=fl.seconds, flops=fl.flops,
                          flops_predicted_train_seconds=fl.predict_seconds(net, shards, passes))
        if predict is not None:
            result["predict_shards"] = predict
            result["sb_predicted_seconds"] = sb.predict_seconds(predict, passes)
            if fl is not None:
                result["flops_predicted_seconds"] = fl.predict_seconds(net, predict, passes)
        if urls is not None:
            dl = time_download(urls, timeout=timeout)
            result.update(download_bytes=dl.bytes, download_seconds=dl.seconds,
                          bandwidth_Bps=dl.bandwidth,
                          bandwidth_shards_per_s=dl.shards_per_second(shard_bytes))
        if as_json:
            click.echo(json.dumps(result, indent=2))
            return
        out.print(info_table("subset benchmark (this machine)",
                             _benchmark_rows(result, batch_size, lr, len(urls or ()))))


def _benchmark_rows(result: dict[str, Any], batch_size: int, lr: float,
                    transfers: int) -> list[tuple[str, str]]:
    """The table of ``melopt benchmark`` from its JSON result."""
    model = result["model"]
    rows = [
        ("model", f"{model} {list(MODELS[model])}, {result['parameters']} parameters "
                  f"({result['model_bytes']} bytes)"),
        ("trained", f"{result['shards']} shards x {result['passes']} pass(es), batch "
                    f"{batch_size}, lr {lr:g}, BLAS threads: {result['blas_threads']}"),
        ("training time", f"{result['train_seconds']:.4g} s"),
        ("c_k (SB)", f"{result['train_rate_shards_per_s']:.4g} shards/s"),
    ]
    if "flops" in result:
        rows += [("FLOPS baseline", f"{result['flops'] / 1e9:.4g} GFLOP/s "
                                    f"(100 x 512x512 products in {result['flops_seconds']:.4g} s)"),
                 ("FLOPS-predicted time", f"{result['flops_predicted_train_seconds']:.4g} s "
                                          "for the same run")]
    if "predict_shards" in result:
        rows.append((f"predicted, {result['predict_shards']:g} shards",
                     f"SB {result['sb_predicted_seconds']:.4g} s"
                     + (f", FLOPS {result['flops_predicted_seconds']:.4g} s"
                        if "flops" in result else "")))
    if "download_bytes" in result:
        rows += [("download", f"{result['download_bytes']} bytes in "
                              f"{result['download_seconds']:.4g} s "
                              f"({transfers} transfer(s))"),
                 ("b_k", f"{result['bandwidth_Bps']:.6g} bytes/s = "
                         f"{result['bandwidth_shards_per_s']:.4g} shards/s")]
    return rows


# ------------------------------------------------------------------------------------------
# melopt dab-learner
# ------------------------------------------------------------------------------------------
@cli.command("dab-learner")
@click.option("--deadline", type=positive(), required=True,
              help="Training deadline D sent by the orchestrator, seconds.")
@click.option("--iterations", type=click.IntRange(min=1), required=True,
              help="mu: passes over the allocated shards per global cycle.")
@click.option("--model", type=click.Choice(sorted(MODELS)), default="twonn", show_default=True,
              help="Network whose training this learner benchmarks.")
@click.option("--model-bytes", type=positive(), default=None,
              help=f"Omega_m, bytes (default: the model's parameters, {_TWONN_BYTES} for twonn).")
@click.option("--shard-bytes", type=positive(),
              default=float(SHARD_BYTES), show_default=True, help="Omega_d, bytes per shard.")
@click.option("--shards", type=click.IntRange(min=1, max=10_000), default=8, show_default=True,
              help="Benchmark size n.")
@click.option("--download", "url", default=None, metavar="URL",
              help="Measure b_k by downloading from URL ('{i}' becomes 0..n-1).")
@click.option("--bandwidth-Bps", "bandwidth", type=positive(),
              default=None, help="Known bandwidth b_k in bytes/s instead of --download.")
@click.option("--timeout", type=positive(), default=30.0,
              show_default=True,
              help="Deadline of the whole --download (every shard's connection and bytes) [s].")
@click.option("--seed", type=seed_int(), default=0, show_default=True,
              help="Seed of the benchmark's data and initial model.")
@click.option("--threads", type=click.IntRange(min=0, max=256), default=1, show_default=True,
              help="BLAS threads while measuring (0: the library's default).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def dab_learner_cmd(deadline: float, iterations: int, model: str, model_bytes: float | None,
                    shard_bytes: float, shards: int, url: str | None, bandwidth: float | None,
                    timeout: float, seed: int, threads: int, as_json: bool) -> None:
    """What a DAB learner runs: benchmark this device, then compute a_k (Eq. 3.5).

    c_k comes from training a fresh copy of the model on N generated MNIST-shaped shards; b_k
    from timing the download of URL (the bytes only time the link) or from --bandwidth-Bps.
    Only a_k would be sent to the orchestrator; c_k and b_k stay on this device. Exit code 1
    when not even one shard fits before the deadline (the learner halts, Algorithm 10).
    """
    with guarded():
        if url is None and bandwidth is None:
            raise UsageError("give --download URL (measured b_k) or --bandwidth-Bps (known b_k)")
        if url is not None:
            expand_urls(url, shards)  # reject a bad URL before benchmarking
        b_k, dl = _measure_bandwidth(url, bandwidth, shards, timeout)
        assert b_k is not None
        sb = subset_benchmark(shards, model=model, seed=seed, threads=threads)
        c_k = sb.rate
        om = float(model_bytes) if model_bytes is not None else float(
            model_for(model).parameter_bytes)
        a_k = int(shard_bound(deadline, iterations, om, shard_bytes, c_k, b_k)[0])
        parts = {
            "download_s": (om + shard_bytes * a_k) / b_k,  # Eq. (3.1)
            "train_s": iterations * a_k / c_k,  # Eq. (3.2)
            "upload_s": om / b_k,  # Eq. (3.3)
        }
        eta_k = float(eta(a_k, iterations=iterations, model_bytes=om, shard_bytes=shard_bytes,
                          train_rate=c_k, bandwidth=b_k))
        result: dict[str, Any] = {
            "a_k": a_k,
            "predicted_eta_s": eta_k if a_k > 0 else None,
            "deadline_s": deadline,
            "iterations": iterations,
            "private": {"train_rate_shards_per_s": c_k, "bandwidth_Bps": b_k,
                        "bandwidth_measured": dl is not None, "benchmark_shards": shards,
                        "benchmark_seconds": sb.seconds, **(parts if a_k > 0 else {})},
            "sent_to_orchestrator": {"a_k": a_k},
        }
        if as_json:
            click.echo(json.dumps(result, indent=2))
        else:
            out.print(info_table("DAB learner", _learner_rows(result, dl, om, shard_bytes)))
            out.print("privacy: only a_k leaves this device; c_k and b_k stay here.",
                      markup=False)
        if a_k < 1:
            err.print("this learner cannot train one shard before the deadline and halts "
                      "(Algorithm 10, lines 18-19)", markup=False)
            raise SystemExit(1)


def _learner_rows(result: dict[str, Any], dl: DownloadBenchmark | None, model_bytes: float,
                  shard_bytes: float) -> list[tuple[str, str]]:
    """The table of ``melopt dab-learner`` from its JSON result."""
    private = result["private"]
    a_k = result["a_k"]
    rows = [
        ("c_k (private)", f"{private['train_rate_shards_per_s']:.4g} shards/s "
                          f"({private['benchmark_shards']} shards in "
                          f"{private['benchmark_seconds']:.4g} s)"),
        ("b_k (private)", f"{private['bandwidth_Bps']:.6g} bytes/s"
                          + (f" (measured: {dl.bytes} bytes in {dl.seconds:.4g} s)"
                             if dl is not None else " (given)")),
        ("model / shard", f"{model_bytes:.6g} / {shard_bytes:.6g} bytes"),
        ("deadline, mu", f"{result['deadline_s']:g} s, {result['iterations']} pass(es)"),
    ]
    if a_k > 0:
        rows += [
            ("predicted eta_k", f"{result['predicted_eta_s']:.4g} s = download "
                                f"{private['download_s']:.4g} + train {private['train_s']:.4g} "
                                f"+ upload {private['upload_s']:.4g} (< D)"),
            ("a_k -> orchestrator", f"[bold]{a_k}[/] shards"),
        ]
    else:
        rows.append(("a_k", "0: not even one shard fits before the deadline"))
    return rows
