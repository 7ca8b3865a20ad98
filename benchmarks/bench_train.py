"""Training-emulator benchmarks: the papers' learning experiments beside the papers' numbers.

Usage::

    python benchmarks/bench_train.py [speed] [paper000] [table2] [gpu] [dab] [fashion]
        [--seeds N] [--out DIR]

With no section named, all run. Sections:

- ``speed``: the batched trainer against the plain per-learner loop (same minibatches, same
  numbers), K = 20 learners with ragged d_k and tau_k on the digits, per model.
- ``paper000``: paper 000, Fig. 3: cycles to 95% / 97% for K = 10, 15, 20, T = 15 s, schemes
  exact / kkt-sai / eta / sync, 20 cycles, with the paper's [F, 300, 124, 60, 10] network and
  with TwoNN; the wall time of each whole experiment.
- ``table2``: paper 004, Table II (K = 6 and 12, IID and non-IID): test accuracy and training
  speedup against individual learning.
- ``gpu``: paper 004, Figs. 4-5: the proposed allocation against online, full-batch and random
  batch sizes on GPU devices.
- ``dab``: thesis Ch. 3, Figs. 3.6-3.8: cycle time, truancy, loss and accuracy over deadlines
  5-105 s, DAB against CSA.
- ``fashion``: paper 000's experiment on a Fashion-MNIST subset (Debian's
  ``dataset-fashion-mnist``), skipped when it is not installed.

Timings are wall-clock on whatever else the machine is running: noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from mel_opt.benchmarking import blas_threads
from mel_opt.training import experiments as E
from mel_opt.training import load_dataset
from mel_opt.training.data import KNOWN_IDX_DIRS
from mel_opt.training.local import broadcast, local_sgd, local_sgd_loop, make_schedule
from mel_opt.training.mlp import init_params, layers_for

console = Console(width=160)


def cell(iv: Any, digits: int = 3) -> str:
    if not isinstance(iv, dict):
        return "-" if iv is None else (f"{iv:.{digits}g}" if isinstance(iv, float) else str(iv))
    if iv.get("mean") is None:
        return "never"
    if iv["n"] > 1 and iv["hi"] > iv["lo"]:
        return f"{iv['mean']:.{digits}g} [{iv['lo']:.{digits}g}, {iv['hi']:.{digits}g}]"
    return f"{iv['mean']:.{digits}g}"


def speed() -> None:
    ds = load_dataset("digits")
    table = Table(title="Batched trainer vs per-learner loop, K = 20, digits (1,438 samples), "
                        "ragged d_k (6-144) and tau_k (2-13), minibatch 32, float32; CPU "
                        "seconds of this process (steadier than wall time on a shared "
                        "machine), best of 5")
    for col in ("model", "batched [CPU s]", "loop [CPU s]", "speedup", "max |difference|"):
        table.add_column(col, justify="right")
    rng = np.random.default_rng(0)
    K = 20
    sizes = rng.integers(6, 145, K)
    tau = rng.integers(2, 14, K)
    x = ds.x_train.astype(np.float32)
    samples = [rng.choice(x.shape[0], int(n), replace=False) for n in sizes]
    sched = make_schedule(samples, tau, 32, np.random.default_rng(1), np.float32)
    for model in ("softmax", "twonn", "mlp000"):
        p = broadcast(init_params(layers_for(model, 64, 10), 0, np.float32), K)
        best = []
        for fn in (local_sgd, local_sgd_loop):
            times = []
            for _ in range(5):
                t = time.process_time()
                res = fn(p, x, ds.y_train, sched, 0.1)
                times.append(time.process_time() - t)
            best.append((min(times), res))
        diff = max(float(np.abs(a - b).max()) for a, b in zip(best[0][1], best[1][1],
                                                               strict=True))
        table.add_row(model, f"{best[0][0]:.4f}", f"{best[1][0]:.4f}",
                      f"{best[1][0] / best[0][0]:.1f}x", f"{diff:.1e}")
    console.print(table)


def paper000(out: Path, seeds: int, data: Any = None, label: str = "digits") -> None:
    for model in ("mlp000", "twonn"):
        o = E.paper000_fig3(out / f"paper000_{label}_{model}", seeds=seeds, model=model,
                            data=data)
        table = Table(title=f"Paper 000 Fig. 3 on {label}, model {model}: cycles to target "
                            f"(mean [95% CI] over {seeds} seeds) beside the paper; whole "
                            f"experiment {o.wall_s:.1f} s wall")
        for col in ("K", "target", "scheme", "max staleness", "ours: cycles", "reached",
                    "paper: cycles", "ours: accuracy after 20 cycles"):
            table.add_column(col, justify="right")
        for r in o.rows:
            paper = r["paper_cycles"]
            table.add_row(str(r["K"]), f"{r['target']:g}", r["scheme"],
                          cell(r["max_staleness"]), cell(r["cycles"]), r["reached"],
                          "never" if paper is None else str(paper),
                          cell(r["final_accuracy"]) if r["target"] == 0.95 else "")
        console.print(table)
        console.print(f"verdict ({model}): {o.verdict}")


def table2(out: Path, seeds: int, data: Any = None, label: str = "digits") -> None:
    o = E.paper004_table2(out / f"table2_{label}", seeds=seeds, data=data)
    table = Table(title=f"Paper 004 Table II on {label} (CPU, TwoNN): final test accuracy and "
                        f"speedup to 90% vs individual learning, {seeds} seeds; "
                        f"{o.wall_s:.1f} s wall")
    for col in ("K", "partition", "scheme", "ours: accuracy", "paper: accuracy",
                "ours: s to 90%", "reached", "ours: speedup", "paper: speedup"):
        table.add_column(col, justify="right")
    for r in o.rows:
        table.add_row(str(r["K"]), r["partition"], r["scheme"], cell(r["accuracy"]),
                      f"{r['paper_accuracy']:.4f}", cell(r["seconds_to_target"], 4),
                      r["reached"], cell(r["speedup"]), f"{r['paper_speedup']:g}x")
    console.print(table)
    console.print(f"verdict: {o.verdict}")


def gpu(out: Path, seeds: int) -> None:
    o = E.paper004_gpu(out / "gpu", seeds=seeds)
    table = Table(title=f"Paper 004 Figs. 4-5 (K = 6 GPU, TwoNN, digits): seconds to 90% and "
                        f"accuracy at a common time horizon, {seeds} seeds; {o.wall_s:.1f} s "
                        "wall. Paper: the proposed scheme converges fastest and most accurately")
    for col in ("partition", "scheme", "batches", "s to 90%", "reached", "accuracy at horizon",
                "horizon [s]"):
        table.add_column(col, justify="right")
    for r in o.rows:
        table.add_row(r["partition"], r["scheme"], str(r["batch"]),
                      cell(r["seconds_to_target"], 4), r["reached"],
                      f"{r['accuracy_at_horizon']:.3f}", f"{r['horizon_s']:.4g}")
    console.print(table)
    console.print(f"verdict: {o.verdict}")


def dab(out: Path, seeds: int) -> None:
    o = E.thesis_dab(out / "dab", seeds=seeds)
    table = Table(title=f"Thesis DAB deadline study (4 Jetson-Nano learners, TwoNN, digits, "
                        f"10% time noise, 5 cycles, {seeds} seeds; {o.wall_s:.1f} s wall). "
                        "Paper at D = 105 s: DAB 112 s / 7% / acc 0.91 / loss 1.53; "
                        "CSA 172 s / 63% / 0.95 / 1.50")
    for col in ("D [s]", "scheme", "cycle time [s]", "truancy %", "accuracy", "loss",
                "paper: time / truancy / acc / loss"):
        table.add_column(col, justify="right")
    for r in o.rows:
        if r["status"] != "trained":
            table.add_row(f"{r['deadline_s']:g}", r["scheme"], "infeasible", "", "", "", "")
            continue
        paper = "" if r["paper_time_s"] is None else (
            f"{r['paper_time_s']:g} / {r['paper_truancy']:g}% / {r['paper_accuracy']:g} / "
            f"{r['paper_loss']:g}")
        table.add_row(f"{r['deadline_s']:g}", r["scheme"], f"{r['cycle_time_s']:.4g}",
                      cell(r["truancy"]), cell(r["accuracy"]), cell(r["loss"]), paper)
    console.print(table)
    console.print(f"verdict: {o.verdict}")


def fashion(out: Path, seeds: int) -> None:
    if not Path(KNOWN_IDX_DIRS["fashion-mnist"]).is_dir():
        console.print("fashion: dataset-fashion-mnist is not installed; skipped")
        return
    data = load_dataset("fashion-mnist", max_train=3_000, max_test=1_000)
    o = E.paper000_fig3(out / "paper000_fashion", seeds=seeds, model="twonn", data=data)
    table = Table(title=f"Paper 000 Fig. 3 set-up on Fashion-MNIST (fixed subsets of 3,000 "
                        f"training / 1,000 test images, TwoNN [784, 50, 20, 10], {seeds} "
                        f"seeds): final validation accuracy after 20 cycles; {o.wall_s:.1f} s "
                        "wall")
    for col in ("K", "scheme", "max staleness", "final accuracy", "cycles to 95%"):
        table.add_column(col, justify="right")
    for r in o.rows:
        if r["target"] != 0.95:
            continue
        table.add_row(str(r["K"]), r["scheme"], cell(r["max_staleness"]),
                      cell(r["final_accuracy"]), cell(r["cycles"]))
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sections", nargs="*",
                    choices=[[], "speed", "paper000", "table2", "gpu", "dab", "fashion"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", default="results/bench_train")
    args = ap.parse_args()
    sections = args.sections or ["speed", "paper000", "table2", "gpu", "dab", "fashion"]
    out = Path(args.out)
    with blas_threads(1):  # small products: one BLAS thread is fastest on a shared machine
        for s in sections:
            start = time.perf_counter()
            if s == "speed":
                speed()
            elif s == "paper000":
                paper000(out, args.seeds)
            elif s == "table2":
                table2(out, min(args.seeds, 3))
            elif s == "gpu":
                gpu(out, min(args.seeds, 3))
            elif s == "dab":
                dab(out, args.seeds)
            else:
                fashion(out, min(args.seeds, 2))
            console.print(f"[{s}: {time.perf_counter() - start:.1f} s wall]\n")


if __name__ == "__main__":
    main()
