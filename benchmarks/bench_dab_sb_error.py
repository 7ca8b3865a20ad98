"""Thesis benchmark-error experiment (Section 3.4.2.1, Fig. 3.2) reproduced on this machine.

For each trial: time a fresh numpy TwoNN training one pass over TARGET (60) generated
500-sample shards (the real time), benchmark fresh copies on n = 2, 4, 6, 8, 10 shards (SB) and
extrapolate to TARGET shards, and predict the same run from the FLOPS baseline (100 products
of two 512x512 matrices; FLOPs of the run / FLOP rate). The runs of a trial are done in a
seeded random order so that drift of the machine does not favour one benchmark size.
Error = |predicted - real| / real, averaged over trials (the thesis repeated 30 times; the
median is shown too, since on a shared machine a preempted 10 ms run is an outlier).

Thesis (Jetson Nano, 60-shard task): SB 6.8 / 4.7 / 4.5 / 4.6 / 4.1 % for 2 / 4 / 6 / 8 / 10
shards, FLOPS 51 %; "up to 83 % lower error".

    python benchmarks/bench_dab_sb_error.py [--trials 30] [--sizes 2 4 6 8 10] [--target 60]
"""

from __future__ import annotations

import argparse
import statistics
import time

from rich.console import Console
from rich.table import Table

from mel_opt.subset_benchmarking.error import sb_error_experiment

THESIS_SB = {2: 6.8, 4: 4.7, 6: 4.5, 8: 4.6, 10: 4.1}
THESIS_FLOPS = 51.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 6, 8, 10])
    ap.add_argument("--target", type=int, default=60, help="shards of the real run")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads (0: library default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    start = time.perf_counter()
    res = sb_error_experiment(args.trials, args.sizes, target=args.target,
                              batch_size=args.batch_size, threads=args.threads, seed=args.seed)
    sb_err, flops_err, real, gflops = res.sb, res.flops, res.real_s, res.gflops

    con = Console(width=120)
    table = Table(title=f"SB vs FLOPS benchmark error, TwoNN, {args.target}-shard run, "
                        f"{args.trials} trials (this machine)")
    for col in ("benchmark shards", "SB error % (mean)", "SB sd", "SB median",
                "FLOPS error %", "SB lower by %", "thesis SB %", "thesis FLOPS %"):
        table.add_column(col, justify="right")
    fmean = statistics.mean(flops_err)
    for n in args.sizes:
        m = statistics.mean(sb_err[n])
        sd = statistics.stdev(sb_err[n]) if len(sb_err[n]) > 1 else 0.0
        table.add_row(str(n), f"{m:.1f}", f"{sd:.1f}", f"{statistics.median(sb_err[n]):.1f}",
                      f"{fmean:.1f}",
                      f"{(1 - m / fmean) * 100:.0f}", f"{THESIS_SB.get(n, float('nan')):.1f}",
                      f"{THESIS_FLOPS:.0f}")
    con.print(table)
    con.print(f"real {args.target}-shard time: mean {statistics.mean(real):.3f} s "
              f"(min {min(real):.3f}, max {max(real):.3f}); FLOPS baseline "
              f"{statistics.mean(gflops):.1f} GFLOP/s; BLAS threads {args.threads or 'default'}; "
              f"wall {time.perf_counter() - start:.1f} s", highlight=False)


if __name__ == "__main__":
    main()
