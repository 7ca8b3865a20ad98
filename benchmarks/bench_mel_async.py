"""mel-async benchmarks: (a) staleness vs K as in paper 000 Fig. 2, (b) solve time vs K.

Usage::

    python benchmarks/bench_mel_async.py staleness [--seeds 5]
    python benchmarks/bench_mel_async.py timing [--max-k 10000] [--ipopt-budget 60]

(a) generates the paper's Section V set-up (preset ``mohammad2020``) for K = 5..20 at
T = 7.5 s and 15 s, solves with every method and prints the mean max / average staleness over
seeds beside the paper's statements. (b) times ``exact`` (and ``kkt-sai``) on K up to 10,000 and
``ipopt`` (O(K) form) on growing K until one solve exceeds the budget.
"""

from __future__ import annotations

import argparse
import statistics
import time

from rich.console import Console
from rich.table import Table

import mel_opt
from mel_opt.problems.mel_async.experiments import staleness_vs_k
from mel_opt.problems.mel_async.generate import generate

METHODS = ("exact", "ipopt", "kkt-sai", "eta", "sync")
console = Console()


def staleness(seeds: int) -> None:
    for T in (7.5, 15.0):
        table = Table(title=f"Max / average staleness vs K, T = {T} s "
                            f"(mean over {seeds} seeds; infeasible counted apart)")
        table.add_column("K", justify="right")
        for m in METHODS:
            table.add_column(m, justify="right")
        points = staleness_vs_k(range(5, 21), T, METHODS, seeds)
        for K in range(5, 21):
            row = [str(K)]
            for m in METHODS:
                p = points[(K, m)]
                cell = (f"{statistics.mean(p.max_staleness):.2f} / "
                        f"{statistics.mean(p.avg_staleness):.2f}" if p.max_staleness else "-")
                if p.no_answer:
                    cell += f" ({p.no_answer} inf.)"
                row.append(cell)
            table.add_row(*row)
        console.print(table)
    console.print(
        "Paper 000 Fig. 2 (T = 7.5 s): optimised max staleness about 1, average 0.4-0.6; "
        "ETA at K = 20: max 4, average 1.5 (our ETA column is the same scheme)."
    )


def timing(max_k: int, budget: float) -> None:
    table = Table(title="Solve time vs K (preset 'random', one seed; seconds)")
    for col in ("K", "exact", "kkt-sai", "ipopt (minmax)", "ipopt relaxed z", "certified z*"):
        table.add_column(col, justify="right")
    ks = [10, 20, 50, 100, 200, 400, 800, 1600, 3200, 6400, 10000]
    ipopt_alive = True
    for K in [k for k in ks if k <= max_k]:
        inst = mel_opt.parse_instance(generate("random", learners=K, seed=1))
        ex = mel_opt.solve(inst, "exact")
        kk = mel_opt.solve(inst, "kkt-sai")
        ip_t, ip_z = "-", "-"
        if ipopt_alive:
            t0 = time.perf_counter()
            ip = mel_opt.solve(inst, "ipopt", options={"form": "minmax"}, time_limit=budget)
            wall = time.perf_counter() - t0
            ip_t = f"{wall:.3f}"
            z = ip.metrics.get("relaxed_objective")
            ip_z = "-" if z is None else f"{z:.4g}"
            if wall > budget:
                ipopt_alive = False
        table.add_row(str(K), f"{ex.solve_time_s:.4f}", f"{kk.solve_time_s:.4f}", ip_t, ip_z,
                      f"{ex.metrics['relaxed_optimum']:.4g}")
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what")
    a = sub.add_parser("staleness")
    a.add_argument("--seeds", type=int, default=5)
    b = sub.add_parser("timing")
    b.add_argument("--max-k", type=int, default=10000)
    b.add_argument("--ipopt-budget", type=float, default=60.0)
    args = ap.parse_args()
    if args.what == "timing":
        timing(args.max_k, args.ipopt_budget)
    else:
        staleness(getattr(args, "seeds", 5))


if __name__ == "__main__":
    main()
