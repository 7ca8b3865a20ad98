"""Training-emulator benchmarks: the papers' learning experiments beside the papers' numbers.

Usage::

    python benchmarks/bench_train.py [speed] [mlp000] [paper000] [precision] [fullsize]
        [table2] [gpu] [dab] [fashion] [--seeds N] [--out DIR]

With no section named, all run. Sections:

- ``speed``: the batched trainer against the plain per-learner loop (same minibatches, same
  numbers), K = 20 learners with ragged d_k and tau_k on the digits, per model.
- ``mlp000``: where a step of the batched trainer spends its time with paper 000's network,
  K = 20 learners, minibatch 32, on the digits' 64 features and on MNIST's 784 (synthetic
  images), float64 and float32; and a round with one and with two learner threads.
- ``precision``: paper 000's experiment (mlp000, 5 seeds) in float32 and in float64: final
  accuracies per (K, scheme) side by side, and the wall time of each.
- ``fullsize``: paper 000's mel-async cycle at Fashion-MNIST's full size (60,000 training images
  of 784 pixels; synthetic images of that shape where Debian's dataset-fashion-mnist is not
  installed), mlp000, K = 20, 20 cycles, scheme ``exact``, one seed: wall time.
- ``paper000``: paper 000, Fig. 3: cycles to 95% / 97% for K = 10, 15, 20, T = 15 s, schemes
  exact / kkt-sai / eta / sync, 20 cycles, with the paper's [F, 300, 124, 60, 10] network and
  with TwoNN; the wall time of each whole experiment (float32, the learners shared among the
  CPUs this process may use, as ``melopt reproduce 000-fig3`` runs it).
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

from mel_opt.reproduce.catalogue import Claim, verdict_of
from mel_opt.reproduce.learning import ExperimentOutcome, generated_instance
from mel_opt.reproduce.paper000_training import judge_000, paper000_fig3
from mel_opt.reproduce.paper004_training import (
    judge_gpu,
    judge_table2,
    paper004_gpu,
    paper004_table2,
)
from mel_opt.reproduce.thesis001_ch3_training import judge_dab, thesis_dab
from mel_opt.subset_benchmarking import blas_threads
from mel_opt.training import load_dataset
from mel_opt.training.data import KNOWN_IDX_DIRS, Dataset
from mel_opt.training.local import broadcast, local_sgd, local_sgd_loop, make_schedule
from mel_opt.training.mlp import (
    MLP,
    StepBuffers,
    forward_terms,
    init_params,
    layers_for,
    stacked_gradients,
    stacked_sgd_step,
)
from mel_opt.training.run import TrainSettings, available_cpus, train

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


def show(title: str, o: ExperimentOutcome, columns: tuple[str, ...],
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


def synthetic_images(n_train: int, n_test: int, features: int = 784, classes: int = 10,
                     seed: int = 0) -> Dataset:
    """MNIST-shaped stand-in data: each class a random prototype image in [0, 1], each sample
    its class's prototype plus uniform noise, clipped to [0, 1] (learnable, not MNIST)."""
    rng = np.random.default_rng(seed)
    proto = rng.random((classes, features))
    parts = []
    for n in (n_train, n_test):
        y = rng.integers(0, classes, n)
        x = np.clip(proto[y] + rng.uniform(-0.6, 0.6, (n, features)), 0.0, 1.0)
        parts.append((x.astype(np.float32), y.astype(np.int64)))
    return Dataset(f"synthetic {features}-pixel images", parts[0][0], parts[0][1], parts[1][0],
                   parts[1][1], classes)


def _best(fn: Callable[[], Any], repeats: int) -> float:
    """Least wall time of ``repeats`` calls [s] (the least disturbed by other processes)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _step_times(F: int, dt: np.dtype, K: int, bs: int,
                repeats: int) -> tuple[float, float, float, float, float]:
    """Least wall times [s] of one mlp000 step of the trainer (stacked_sgd_step into its
    reused buffers): its forward pass, the whole step, the minibatch gather, its matrix
    products alone (in the trainer's layouts), and the step as fresh arrays (the gradients,
    then the update)."""
    rng = np.random.default_rng(0)
    layers = layers_for("mlp000", F, 10)
    p = broadcast(init_params(layers, 0, dt), K)
    data = rng.random((4096, F)).astype(dt)
    rows = rng.integers(0, 4096, (K, bs))
    x = data[rows]
    # a tiny learning rate folded into the weights: the timed steps update p in place
    w = np.full((K, bs), 1e-6 / bs, dtype=dt)
    y = rng.integers(0, 10, (K, bs))
    target = np.zeros((K, 10, bs), dtype=dt)
    np.put_along_axis(target, y[:, None, :], w[:, None, :], axis=1)
    work = StepBuffers(layers, K, bs, dt)
    acts = [x, *(np.ones((K, bs, n), dtype=dt) for n in layers[1:])]

    def products() -> None:
        for i, W in enumerate(p[0::2]):
            acts[i] @ W  # forward
            acts[i].transpose(0, 2, 1) @ acts[i + 1]  # weight gradient
            if i:
                acts[i + 1] @ W.transpose(0, 2, 1)  # input gradient

    def fresh() -> None:
        for a, da in zip(p, stacked_gradients(p, x, None, w, target), strict=True):
            a -= da

    return (_best(lambda: forward_terms(p, x, work), repeats),
            _best(lambda: stacked_sgd_step(p, x, w, target, work), repeats),
            _best(lambda: data[rows], repeats), _best(products, repeats),
            _best(fresh, repeats))


def mlp000_profile(repeats: int = 20) -> None:
    """Where a step goes at paper 000's network, and what float32 and threads change."""
    K, bs = 20, 32
    table = Table(title="mlp000 [F, 300, 124, 60, 10], K = 20 learners x minibatch 32, one "
                        "BLAS thread: one step of the batched trainer in microseconds (least "
                        f"wall time of {repeats}; busy machine), its products alone, and the "
                        "step as fresh arrays (gradients, then update) instead of reused buffers")
    for col in ("F", "dtype", "forward", "backward + update", "gather", "step",
                "products alone", "step GFLOP/s", "step, fresh arrays"):
        table.add_column(col, justify="right")
    for F in (64, 784):
        step_flop = MLP(layers_for("mlp000", F, 10)).train_flops_per_sample() * K * bs
        for dt in (np.float64, np.float32):
            fwd, inplace, gather, prod, fresh = _step_times(F, np.dtype(dt), K, bs, repeats)
            step = inplace + gather
            table.add_row(str(F), np.dtype(dt).name, f"{fwd * 1e6:.0f}",
                          f"{(inplace - fwd) * 1e6:.0f}", f"{gather * 1e6:.0f}",
                          f"{step * 1e6:.0f}", f"{prod * 1e6:.0f}",
                          f"{step_flop / step / 1e9:.1f}", f"{(fresh + gather) * 1e6:.0f}")
    console.print(table)
    rng = np.random.default_rng(0)
    rounds = Table(title="One round of the batched trainer with mlp000, K = 20 learners, 8-10 "
                         "passes over 72 (digits-sized) or 300 samples each, float32: seconds "
                         "(least wall time of 3), one and two learner threads")
    for col in ("F", "samples / learner", "1 thread [s]", "2 threads [s]", "speedup",
                "identical"):
        rounds.add_column(col, justify="right")
    for F, per in ((64, 72), (784, 300)):
        x = rng.random((K * per, F)).astype(np.float32)
        y = rng.integers(0, 10, K * per)
        samples = list(np.array_split(rng.permutation(K * per), K))
        sched = make_schedule(samples, rng.integers(8, 11, K), bs, rng, np.float32)
        p = broadcast(init_params(layers_for("mlp000", F, 10), 0, np.float32), K)
        res = {}
        times: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(3):
            for n in (1, 2):  # alternating, so both see the same neighbours
                t = time.perf_counter()
                res[n] = local_sgd(p, x, y, sched, 0.1, workers=n)
                times[n].append(time.perf_counter() - t)
        same = all(np.array_equal(a, b) for a, b in zip(res[1], res[2], strict=True))
        rounds.add_row(str(F), str(per), f"{min(times[1]):.3f}", f"{min(times[2]):.3f}",
                       f"{min(times[1]) / min(times[2]):.2f}x", str(same))
    console.print(rounds)


def precision(seeds: int) -> None:
    """Paper 000's experiment in float32 and float64: final accuracies side by side."""
    outs = {dt: paper000_fig3(None, seeds=seeds, model="mlp000", dtype=dt)
            for dt in ("float32", "float64")}
    table = Table(title=f"Paper 000 Fig. 3 experiment (mlp000, digits, {seeds} seeds, 20 cycles) "
                        "in float32 and float64: final validation accuracy, mean [95% CI] "
                        "over seeds; wall: float32 "
                        f"{outs['float32'].wall_s:.1f} s, float64 "
                        f"{outs['float64'].wall_s:.1f} s (busy machine)")
    for col in ("K", "scheme", "float32", "float64", "difference", "cycles to ceiling - 3 "
                "points, float32 / float64"):
        table.add_column(col, justify="right")
    pick = {dt: [r for r in o.rows if r.get("part") == "to target"
                 and r["target"] == min(q["target"] for q in o.rows
                                        if q.get("part") == "to target")]
            for dt, o in outs.items()}
    for a, b in zip(pick["float32"], pick["float64"], strict=True):
        table.add_row(str(a["K"]), a["scheme"], cell(a, "final_accuracy"),
                      cell(b, "final_accuracy"),
                      f"{a['final_accuracy'] - b['final_accuracy']:+.4f}",
                      f"{cell(a, 'cycles')} / {cell(b, 'cycles')}")
    console.print(table)


def blas_kernels() -> str:
    """The BLAS numpy's products run on, the kernels that ran, and whether the environment
    (``OPENBLAS_CORETYPE``) chose them."""
    from mel_opt.blas import describe

    b = describe()
    return (f"{b['library']} {b['version']}, {b['architecture']} kernels"
            + (f" ({b['forced_by']})" if b["forced_by"] else ""))


def fullsize() -> None:
    """Paper 000's cycle at Fashion-MNIST's full size: mlp000, K = 20, 20 cycles, one run."""
    if Path(KNOWN_IDX_DIRS["fashion-mnist"]).is_dir():
        data = load_dataset("fashion-mnist")
        what = "Fashion-MNIST"
    else:
        data = synthetic_images(60_000, 10_000)
        what = "synthetic 28 x 28 images (Fashion-MNIST is not installed)"
    inst = generated_instance("mel-async", "mohammad2020", 20, 2020)
    table = Table(title=f"mel-async mohammad2020 K = 20, scheme exact, mlp000, 20 cycles, one "
                        f"seed, {data.y_train.size:,} training images: {what}; wall time "
                        f"({blas_kernels()})")
    for col in ("dtype", "threads", "wall [s]", "final accuracy"):
        table.add_column(col, justify="right")
    for dtype, threads in (("float32", available_cpus()), ("float32", 1)):
        t = time.perf_counter()
        run = train(inst, TrainSettings(schemes=("exact",), cycles=20, seeds=1,
                                        model="mlp000", dtype=dtype, threads=threads),
                    data=data)
        table.add_row(dtype, str(threads), f"{time.perf_counter() - t:.1f}",
                      f"{run.rows[-1]['accuracy']:.3f}")
    console.print(table)


def paper000(out: Path, seeds: int, data: Any = None, label: str = "digits") -> None:
    for model in ("mlp000", "twonn"):
        o = paper000_fig3(out / f"paper000_{label}_{model}", seeds=seeds, model=model,
                          data=data)
        show(f"Paper 000 Fig. 3 on {label}, model {model}: cycles to target, mean [95% CI] "
             f"over {seeds} seeds, beside the paper", o,
             ("K", "target", "scheme", "max_staleness", "cycles", "reached", "paper_cycles",
              "final_accuracy"), judge_000)


def table2(out: Path, seeds: int) -> None:
    o = paper004_table2(out / "table2", seeds=seeds)
    show(f"Paper 004 Table II on digits (CPU, TwoNN): final test accuracy and speedup to 90% "
         f"vs individual learning, {seeds} seeds", o,
         ("K", "partition", "scheme", "accuracy", "paper_accuracy", "seconds_to_target",
          "reached", "speedup", "paper_speedup"), judge_table2)


def gpu(out: Path, seeds: int) -> None:
    o = paper004_gpu(out / "gpu", seeds=seeds)
    show(f"Paper 004 Figs. 4-5 (K = 6 GPU, TwoNN, digits), {seeds} seeds. Paper: the "
         "proposed scheme converges fastest and most accurately", o,
         ("partition", "scheme", "batch", "seconds_to_target", "reached",
          "accuracy_at_horizon", "horizon_s"), judge_gpu)


def dab(out: Path, seeds: int) -> None:
    o = thesis_dab(out / "dab", seeds=seeds)
    show(f"Thesis DAB deadline study (4 Jetson-Nano learners, time_cv 0.06, TwoNN, digits, "
         f"5 cycles, {seeds} seeds). Thesis at D = 105 s: DAB 112 s / 7% / 0.91 / 1.53; "
         "CSA 172 s / 63% / 0.95 / 1.50", o,
         ("deadline_s", "scheme", "status", "shards", "cycle_time_s", "truancy_pct",
          "accuracy", "loss", "paper_time_s", "paper_truancy_pct", "paper_accuracy"),
         judge_dab)


def fashion(out: Path, seeds: int) -> None:
    if not Path(KNOWN_IDX_DIRS["fashion-mnist"]).is_dir():
        console.print("fashion: dataset-fashion-mnist is not installed; skipped")
        return
    data = load_dataset("fashion-mnist", max_train=3_000, max_test=1_000)
    o = paper000_fig3(out / "paper000_fashion", seeds=seeds, model="twonn", data=data)
    show(f"Paper 000 Fig. 3 set-up on Fashion-MNIST (fixed subsets of 3,000 training / 1,000 "
         f"test images, TwoNN [784, 50, 20, 10], {seeds} seeds)", o,
         ("K", "target", "scheme", "max_staleness", "cycles", "reached", "final_accuracy"),
         judge_000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sections", nargs="*",
                    choices=[[], "speed", "mlp000", "paper000", "precision", "fullsize",
                             "table2", "gpu", "dab", "fashion"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--out", default="results/bench_train")
    args = ap.parse_args()
    sections = args.sections or ["speed", "mlp000", "paper000", "precision", "fullsize",
                                 "table2", "gpu", "dab", "fashion"]
    out = Path(args.out)
    with blas_threads(1):  # small products: one BLAS thread is fastest on a shared machine
        for s in sections:
            start = time.perf_counter()
            if s == "speed":
                speed()
            elif s == "mlp000":
                mlp000_profile()
            elif s == "precision":
                precision(args.seeds)
            elif s == "fullsize":
                fullsize()
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
