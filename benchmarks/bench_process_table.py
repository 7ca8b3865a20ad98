"""What one read of the process table costs (the throttle reads it every 0.1 s).

The machine gets ``--extra`` idle processes (``sleep``, children of one holder process, so they
are not in the throttled trees), and this process starts ``--nodes`` stand-ins for SuperNodes,
each with one child (its ClientApp). Each row is the median and the minimum of ``--repeat``
reads:

- ``processes.process_table(roots)``: what the throttle and the local federation read: the
  parent of every process in one pass, then the full entry of the trees' processes only;
- ``processes.process_table()``: every process's full entry (fresh ``psutil.Process``);
- ``process_iter(["ppid", "status", "create_time"])``: psutil's iterator with attributes
  limited, its cache kept between reads (cheaper, but a cached entry keeps the start time of a
  pid's previous owner: unfit for the identity rule) and cleared before each read;
- ``parent_map``: the one pass alone, psutil's reader behind ``Process.children`` and the public
  ``process_iter(["ppid"])`` it falls back to;
- ``/proc by hand`` (Linux): ``/proc/<pid>/stat`` read and split, the reader before psutil.

    python benchmarks/bench_process_table.py [--extra 450] [--nodes 4] [--repeat 21]

Timings are wall-clock: run it on a quiet machine, alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import psutil
from rich.console import Console
from rich.table import Table

from mel_opt import processes

# a holder that starts N sleepers and waits; killing its group ends them all
HOLDER = ("import subprocess, sys, time\n"
          "procs = [subprocess.Popen(['sleep', '600']) for _ in range(int(sys.argv[1]))]\n"
          "print('ready', flush=True)\n"
          "time.sleep(600)\n")
NODE = ("import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "time.sleep(600)\n")


def by_hand() -> dict[int, tuple[int, str, str]]:
    """pid -> (ppid, state, start ticks) from ``/proc/<pid>/stat``: the reader before psutil."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                raw = fh.read().decode("ascii", "replace")
        except OSError:
            continue
        rest = raw.rpartition(")")[2].split()
        if len(rest) >= 20:
            table[int(name)] = (int(rest[1]), rest[0], rest[19])
    return table


def iter_cached() -> dict[int, dict[str, object]]:
    return {p.pid: p.info for p in psutil.process_iter(["ppid", "status", "create_time"])}


def iter_cleared() -> dict[int, dict[str, object]]:
    psutil.process_iter.cache_clear()
    return iter_cached()


def timed(read: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and minimum milliseconds of ``repeat`` calls (after one warm-up call)."""
    read()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        read()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, min(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--extra", type=int, default=450, help="idle processes to add")
    ap.add_argument("--nodes", type=int, default=4, help="throttled trees (2 processes each)")
    ap.add_argument("--repeat", type=int, default=21)
    args = ap.parse_args()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(args.extra)],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    nodes = [subprocess.Popen([sys.executable, "-c", NODE], start_new_session=True)
             for _ in range(args.nodes)]
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        roots = [p.pid for p in nodes]
        rows: list[tuple[str, Callable[[], object]]] = [
            ("processes.process_table(roots)", lambda: processes.process_table(roots)),
            ("processes.process_table()", processes.process_table),
            ('process_iter(3 attrs), cache kept', iter_cached),
            ('process_iter(3 attrs), cache cleared', iter_cleared),
            ("parent_map, psutil's one pass", processes.parent_map),
            ('parent_map, process_iter(["ppid"])', processes._public_parent_map),
        ]
        if os.path.exists("/proc/self/stat"):
            rows.append(("/proc by hand", by_hand))
        table = Table(title=f"one read of the process table: {len(psutil.pids())} processes, "
                            f"{len(processes.descendants(roots))} in the throttled trees")
        for col in ("read", "median ms", "min ms", "share of a core at 0.1 s"):
            table.add_column(col, justify="left" if col == "read" else "right")
        for label, read in rows:
            median, low = timed(read, args.repeat)
            table.add_row(label, f"{median:.2f}", f"{low:.2f}", f"{median / 100:.1%}")
        Console(width=110).print(table)
    finally:
        for proc in [holder, *nodes]:
            processes.end_process_group(proc, grace=2.0)


if __name__ == "__main__":
    main()
