"""Download-time prediction error of SB (thesis Fig. 3.3) over loopback HTTP on this machine.

A stdlib HTTP server on 127.0.0.1 (ephemeral port, stopped at the end) serves TARGET (60)
generated 500-sample shards. For each trial the real time to download TARGET shards is
measured, and SB predicts it from the timed download of n = 2, 4, 6, 8, 10 shards
(b_k = n / T_d, prediction TARGET / b_k), in a seeded random order. Loopback is not a
network: this exercises the measurement (connection set-up per shard included), it cannot
reproduce WiFi or Ethernet figures.

Thesis (60 shards, 45 trials): Ethernet 15.9 / 13.6 / 12.9 / 11.7 / 10.4 %,
WiFi 32 % at 2 shards down to 8 % at 10.

    python benchmarks/bench_dab_download_error.py [--trials 20] [--target 60]
"""

from __future__ import annotations

import argparse
import statistics

from rich.console import Console
from rich.table import Table

from mel_opt.subset_benchmarking import SHARD_BYTES
from mel_opt.subset_benchmarking.error import download_error_experiment

THESIS_ETHERNET = {2: 15.9, 4: 13.6, 6: 12.9, 8: 11.7, 10: 10.4}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 6, 8, 10])
    ap.add_argument("--target", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    res = download_error_experiment(args.trials, args.sizes, target=args.target,
                                    seed=args.seed)
    err, real = res.sb, res.real_s

    con = Console(width=120)
    table = Table(title=f"SB download-time error, {args.target} shards over loopback HTTP, "
                        f"{args.trials} trials (this machine)")
    for col in ("benchmark shards", "error % (mean)", "sd", "median", "thesis Ethernet %"):
        table.add_column(col, justify="right")
    for n in args.sizes:
        sd = statistics.stdev(err[n]) if len(err[n]) > 1 else 0.0
        table.add_row(str(n), f"{statistics.mean(err[n]):.1f}", f"{sd:.1f}",
                      f"{statistics.median(err[n]):.1f}",
                      f"{THESIS_ETHERNET.get(n, float('nan')):.1f}")
    con.print(table)
    mb = SHARD_BYTES * args.target / 1e6
    con.print(f"real download of {args.target} shards ({mb:.0f} MB of features): mean "
              f"{statistics.mean(real):.3f} s = {mb / statistics.mean(real):.0f} MB/s",
              highlight=False)


if __name__ == "__main__":
    main()
