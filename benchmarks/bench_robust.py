"""Lying learners in the arena: each aggregation rule under each attack, the plain mean as
reference.

Usage::

    python benchmarks/bench_robust.py [--learners 100] [--dataset digits] [--seeds 3]
        [--cycles 20] [--schemes exact] [--rules mean,norm,median,trimmed,krum]
        [--attacks scale:1000,sign,noise:1,stale] [--liars 0.01,0.1,0.2] [--target 0.8]
        [--attack-from 1] [--max-train N] [--max-test N] [--jobs N] [--out DIR]

For the mel-async population of ``--learners`` learners (``melopt generate mel-async --preset
random --learners K --seed 1``) and each scheme, it runs :func:`mel_opt.arena.run.arena` once
with no liar and once per (attack, fraction of liars) for every rule, on seeds 0 ..
seeds-1 (the liars drawn per seed), and prints one Markdown table per scheme: a row per
(attack, liars), a column per rule, each cell the mean final accuracy over the seeds and the
median virtual time to the target accuracy (``-`` where fewer than half the seeds reach it;
``(k/n)`` where only k of n do). The first row (no liar) is what each rule costs when no one
lies.

Each arena run's seeds are units (``melopt arena``'s, on ``--jobs`` processes, one thread
each), kept in ``OUT/SCHEME_DATASET/units``: a stopped benchmark run again with the same
``--out`` reads the finished ones back (only from the same sources: a unit's key holds them).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from mel_opt.api import load_instance
from mel_opt.arena.run import arena
from mel_opt.arena.settings import ArenaSettings
from mel_opt.cli.work import units_run
from mel_opt.training import load_dataset


def _population(K: int, out: Path) -> Path:
    path = out / f"mel-async_k{K}.json"
    if not path.exists():
        melopt = str(Path(sys.executable).parent / "melopt")
        subprocess.run([melopt, "generate", "mel-async", "--preset", "random", "--learners",
                        str(K), "--seed", "1", "-o", str(path)], check=True, capture_output=True)
    return path


def _cell(rows: list[dict[str, Any]], seeds: int, target: float) -> tuple[str, dict[str, Any]]:
    """The cell's text and its numbers: mean final accuracy, median time to target."""
    by_seed: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_seed.setdefault(int(r["seed"]), []).append(r)
    final = [runs[-1]["accuracy"] for runs in by_seed.values()]
    times = [next((r["time_s"] for r in runs if r["step"] > 0 and r["accuracy"] >= target),
                  None) for runs in by_seed.values()]
    hit = sorted(t for t in times if t is not None)
    # the median over every seed (one that never reaches the target counts as the longest)
    med = float(np.median(hit + [np.inf] * (len(times) - len(hit)))) if times else np.inf
    clipped = sum(runs[-1].get("clipped", 0) for runs in by_seed.values())
    kept = sum(runs[-1].get("kept", 0) for runs in by_seed.values())
    when = "-" if not np.isfinite(med) else f"{med:,.0f} s"
    if len(hit) < len(times):
        when += f" ({len(hit)}/{len(times)})"
    return f"{np.mean(final):.3f}, {when}", {"final": float(np.mean(final)), "median_s": med,
                                             "reached": len(hit), "clipped": clipped,
                                             "kept": kept}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", type=int, default=100)
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--schemes", default="exact")
    ap.add_argument("--rules", default="mean,norm,median,trimmed,krum")
    ap.add_argument("--attacks", default="scale:1000,sign,noise:1,stale")
    ap.add_argument("--liars", default="0.01,0.1,0.2")
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument("--attack-from", type=int, default=1)
    ap.add_argument("--max-train", type=int, default=None,
                    help="use at most this many training samples (Fashion-MNIST has 60,000)")
    ap.add_argument("--max-test", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=None,
                    help="worker processes (default: one per CPU)")
    ap.add_argument("--out", default="bench_robust_out")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    inst = load_instance(str(_population(a.learners, out)))
    data = load_dataset(a.dataset, max_train=a.max_train, max_test=a.max_test)
    rules = a.rules.split(",")
    cases: list[tuple[str | None, float]] = [(None, 0.0)] + [
        (att, float(f)) for att in a.attacks.split(",") for f in a.liars.split(",")]
    started = time.perf_counter()
    for scheme in a.schemes.split(","):
        print(f"\n{scheme}, K = {a.learners}, {a.dataset}"
              f"{f' ({a.max_train:,} training samples)' if a.max_train else ''}, {a.seeds} "
              f"seeds, horizon {a.cycles} budgets: final accuracy (mean), median time to "
              f"{a.target:g}\n")
        print("| attack | liars | " + " | ".join(rules) + " |")
        print("|---|---|" + "---|" * len(rules))
        for attack, fraction in cases:
            cells = []
            for rule in rules:
                s = ArenaSettings(schemes=(scheme,), seeds=a.seeds, cycles=a.cycles,
                                  dataset=a.dataset, aggregation=rule, attack=attack,
                                  liars=fraction, attack_from=a.attack_from, threads=1,
                                  targets=(a.target,), max_train=a.max_train,
                                  max_test=a.max_test)
                with units_run(out / f"{scheme}_{a.dataset}", "robust", a.jobs, None):
                    rows = arena(inst, s, data=data).rows
                text, _ = _cell(rows, a.seeds, a.target)
                cells.append(text)
            name = attack or "none"
            print(f"| {name} | {fraction:.0%} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nwall time {time.perf_counter() - started:,.0f} s")


if __name__ == "__main__":
    main()
