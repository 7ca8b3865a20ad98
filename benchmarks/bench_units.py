"""What a kept run's units of work cost, and what they would cost on more workers.

Reads the units a ``melopt reproduce`` (or ``bench_reproduce.py --out``) run kept in
``OUT/units`` and prints, per catalogue entry, its units, their summed seconds, the longest one,
and the wall time the entry's training would take on N workers: each unit, in the order they
finished here, goes to the worker that is free first (what the worker pool does), so the
projection for N workers is that schedule's length. It leaves out what N workers cannot
shorten: the entry's work outside its units (solving, judging, plotting: the entry's own time
minus its units' sum over the workers it had) is added as measured.

    python benchmarks/bench_units.py OUT/units [--jobs 16] [--had 2]

Units are grouped by entry by their files' times: an entry's training units are written before
its own ``entry ...`` unit, which is written when the entry ends. Entries whose runs were made
in several separate calls (one after the other) are scheduled as one pool, so their projection
is a lower bound for them.
"""

from __future__ import annotations

import argparse
import heapq
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table


def schedule(seconds: list[float], workers: int) -> float:
    """The length of the in-order schedule of ``seconds`` on ``workers`` (each unit to the
    worker free first)."""
    free = [0.0] * max(1, workers)
    for s in seconds:
        t = heapq.heappop(free)
        heapq.heappush(free, t + s)
    return max(free)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("units", type=Path)
    ap.add_argument("--jobs", type=int, nargs="*", default=[1, 2, 8, 16])
    ap.add_argument("--had", type=int, default=2, help="workers the kept run had")
    args = ap.parse_args()
    files = sorted(args.units.glob("*.json"), key=lambda p: p.stat().st_mtime)
    groups: list[tuple[str, float, list[float]]] = []
    pending: list[float] = []
    for f in files:
        doc = json.loads(f.read_text())
        label, seconds = str(doc.get("label", "")), float(doc.get("seconds") or 0.0)
        if label.startswith("entry "):
            groups.append((label[6:], seconds, pending))
            pending = []
        else:
            pending.append(seconds)
    if pending:
        groups.append(("(unfinished entry)", 0.0, pending))
    table = Table(title=f"units kept in {args.units}")
    for col in ("entry", "units", "sum [s]", "longest [s]", "entry here [s]",
                *(f"{n} jobs [s]" for n in args.jobs)):
        table.add_column(col, justify="right")
    totals = [0.0] * len(args.jobs)
    here_total = 0.0
    for name, entry_s, secs in groups:
        outside = max(0.0, entry_s - schedule(secs, args.had)) if secs else entry_s
        row = [outside + schedule(secs, n) for n in args.jobs]
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        here_total += entry_s
        table.add_row(name, str(len(secs)), f"{sum(secs):.0f}",
                      f"{max(secs, default=0):.0f}", f"{entry_s:.0f}",
                      *(f"{v:.0f}" for v in row))
    table.add_row("all", str(sum(len(g[2]) for g in groups)),
                  f"{sum(sum(g[2]) for g in groups):.0f}", "", f"{here_total:.0f}",
                  *(f"{v:.0f}" for v in totals))
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
