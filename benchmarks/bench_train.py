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
  5-105 s, DAB against the thesis' CSA rule (csa-thesis) and the exact CSA (csa).
- ``fashion``: paper 000's experiment on a Fashion-MNIST subset (Debian's
  ``dataset-fashion-mnist``), skipped when it is not installed.

Experiment timings are wall-clock on whatever else the machine runs: noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from mel_opt.reproduce import learning as L
from mel_opt.reproduce.catalogue import Claim, verdict_of
from mel_opt.subset_benchmarking import blas_threads
from mel_opt.training import experiments as E
from mel_opt.training import load_dataset
from mel_opt.training.data import KNOWN_IDX_DIRS
from mel_opt.training.local import broadcast, local_sgd, local_sgd_loop, make_schedule
from mel_opt.training.mlp import MLP, init_params, layers_for

console = Console(width=160)


def cell(row: dict[str, Any], key: str, digits: int = 3) -> str:
    """A row's value; a mean with its ``_lo`` / ``_hi`` columns as "mean [lo, hi]"."""
    v = row.get(key)
    if v is None:
        return "never" if f"{key}_lo" in row else "-"
    if not isinstance(v, float):
        return str(v)
    lo, hi = row.get(f"{key}_lo"), row.get(f"{key}_hi")
    if lo is not None and hi is not None and hi > lo:
        return f"{v:.{digits}g} [{lo:.{digits}g}, {hi:.{digits}g}]"
    return f"{v:.{digits}g}"


def show(title: str, o: E.ExperimentOutcome, columns: tuple[str, ...],
         judge: Callable[[Any], list[Claim]]) -> None:
    """Our rows beside the paper's columns, then the catalogue's claims and verdict on them."""
    table = Table(title=f"{title}; {o.wall_s:.1f} s wall (busy machine)")
    for col in columns:
        table.add_column(col, justify="right")
    for r in o.rows:
        table.add_row(*(cell(r, c) for c in columns))
    console.print(table)
    claims = judge(o.rows)
    for c in claims:
        console.print(f"  [{'ok' if c.ok else 'NO'}] {c.text}: paper {c.paper}; ours {c.ours}",
                      markup=False)
    console.print(f"verdict: {verdict_of(claims)}", markup=False)


def speed(repeats: int = 15) -> None:
    ds = load_dataset("digits")
    table = Table(title="Batched trainer vs per-learner loop, K = 20, digits (1,438 samples), "
                        "ragged d_k (6-144) and tau_k (2-13), minibatch 32, float32; CPU "
                        f"seconds of this process (steadier than wall time on a shared "
                        f"machine), best of {repeats}, the two trainers alternating")
    for col in ("model", "batched [CPU s]", "loop [CPU s]", "speedup", "max |difference|",
                "steps batched / loop", "us per step batched / loop", "GFLOP",
                "batched GFLOP/s", "loop GFLOP/s"):
        table.add_column(col, justify="right")
    rng = np.random.default_rng(0)
    K = 20
    sizes = rng.integers(6, 145, K)
    tau = rng.integers(2, 14, K)
    x = ds.x_train.astype(np.float32)
    samples = [rng.choice(x.shape[0], int(n), replace=False) for n in sizes]
    sched = make_schedule(samples, tau, 32, np.random.default_rng(1), np.float32)
    # the batched trainer takes max_k S_k steps (each over the learners still training), the
    # loop sum_k S_k single-learner steps: their ratio is the speedup if a batched step cost
    # no more than a single-learner one
    n_batched, n_loop = int(sched.steps.max()), int(sched.steps.sum())
    for model in ("softmax", "twonn", "mlp000"):
        p = broadcast(init_params(layers_for(model, 64, 10), 0, np.float32), K)
        times: dict[Callable[..., Any], list[float]] = {local_sgd: [], local_sgd_loop: []}
        res = {}
        for _ in range(repeats):
            for fn, spent in times.items():
                t = time.process_time()
                res[fn] = fn(p, x, ds.y_train, sched, 0.1)
                spent.append(time.process_time() - t)
        fast, slow = min(times[local_sgd]), min(times[local_sgd_loop])
        diff = max(float(np.abs(a - b).max())
                   for a, b in zip(res[local_sgd], res[local_sgd_loop], strict=True))
        # the matrix-product FLOPs of every real sample's SGD step (padding excluded): the
        # same for both trainers, so where they are most of the time no batching can help
        gflop = MLP(layers_for(model, 64, 10)).train_flops_per_sample() * float(
            (sched.weight > 0).sum()) / 1e9
        table.add_row(model, f"{fast:.4f}", f"{slow:.4f}", f"{slow / fast:.1f}x",
                      f"{diff:.1e}", f"{n_batched} / {n_loop}",
                      f"{fast / n_batched * 1e6:.0f} / {slow / n_loop * 1e6:.0f}",
                      f"{gflop:.3f}", f"{gflop / fast:.1f}", f"{gflop / slow:.1f}")
    console.print(table)


def paper000(out: Path, seeds: int, data: Any = None, label: str = "digits") -> None:
    for model in ("mlp000", "twonn"):
        o = E.paper000_fig3(out / f"paper000_{label}_{model}", seeds=seeds, model=model,
                            data=data)
        show(f"Paper 000 Fig. 3 on {label}, model {model}: cycles to target, mean [95% CI] "
             f"over {seeds} seeds, beside the paper", o,
             ("K", "target", "scheme", "max_staleness", "cycles", "reached", "paper_cycles",
              "final_accuracy"), L.judge_000)


def table2(out: Path, seeds: int) -> None:
    o = E.paper004_table2(out / "table2", seeds=seeds)
    show(f"Paper 004 Table II on digits (CPU, TwoNN): final test accuracy and speedup to 90% "
         f"vs individual learning, {seeds} seeds", o,
         ("K", "partition", "scheme", "accuracy", "paper_accuracy", "seconds_to_target",
          "reached", "speedup", "paper_speedup"), L.judge_table2)


def gpu(out: Path, seeds: int) -> None:
    o = E.paper004_gpu(out / "gpu", seeds=seeds)
    show(f"Paper 004 Figs. 4-5 (K = 6 GPU, TwoNN, digits), {seeds} seeds. Paper: the "
         "proposed scheme converges fastest and most accurately", o,
         ("partition", "scheme", "batch", "seconds_to_target", "reached",
          "accuracy_at_horizon", "horizon_s"), L.judge_gpu)


def dab(out: Path, seeds: int) -> None:
    o = E.thesis_dab(out / "dab", seeds=seeds)
    show(f"Thesis DAB deadline study (4 Jetson-Nano learners, time_cv 0.06, TwoNN, digits, "
         f"5 cycles, {seeds} seeds). Thesis at D = 105 s: DAB 112 s / 7% / 0.91 / 1.53; "
         "CSA 172 s / 63% / 0.95 / 1.50", o,
         ("deadline_s", "scheme", "status", "shards", "cycle_time_s", "truancy_pct",
          "accuracy", "loss", "paper_time_s", "paper_truancy_pct", "paper_accuracy"),
         L.judge_dab)


def fashion(out: Path, seeds: int) -> None:
    if not Path(KNOWN_IDX_DIRS["fashion-mnist"]).is_dir():
        console.print("fashion: dataset-fashion-mnist is not installed; skipped")
        return
    data = load_dataset("fashion-mnist", max_train=3_000, max_test=1_000)
    o = E.paper000_fig3(out / "paper000_fashion", seeds=seeds, model="twonn", data=data)
    show(f"Paper 000 Fig. 3 set-up on Fashion-MNIST (fixed subsets of 3,000 training / 1,000 "
         f"test images, TwoNN [784, 50, 20, 10], {seeds} seeds)", o,
         ("K", "target", "scheme", "max_staleness", "cycles", "reached", "final_accuracy"),
         L.judge_000)


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
