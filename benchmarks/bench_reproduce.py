"""The whole `melopt reproduce` catalogue (full mode): each entry's claims, paper beside ours.

Runs every entry that needs no optional extra (training entries are skipped) into ``--out``
(a temporary folder by default), prints per entry its claims (the paper's numbers, ours, the
rule, whether it holds), its verdict and its time, then the total wall time. Target: the whole
catalogue in under 5 minutes on 2 cores (timings are noisy on a shared machine).

    python benchmarks/bench_reproduce.py [--out DIR] [--quick] [--dataset NAME] [--jobs N]
        [--cluster ADDRESS] [IDS ...]

``--jobs`` and ``--cluster`` run the catalogue's units of work (its training runs) as
``melopt reproduce`` does; with ``--out``, finished units are kept in ``OUT/units`` and a rerun
reads them back (the second run's time is then what a resumed catalogue costs).

``--dataset`` sets the training entries' data (default: the catalogue's, Fashion-MNIST where it
can be read); the times it prints per entry are the ones ``melopt reproduce --list`` shows
(``EXPECTED_S`` in ``mel_opt/reproduce/catalogue.py``).
"""

from __future__ import annotations

import argparse
import tempfile
import time

from rich.console import Console
from rich.table import Table

from mel_opt import units
from mel_opt.reproduce.catalogue import Context, Entry, Outcome, missing_needs, select
from mel_opt.reproduce.report import run_entries

console = Console(width=170)


def show(entry: Entry, outcome: Outcome) -> None:
    t = Table(title=f"{entry.id}: {entry.title} ({outcome.seconds:.1f} s)")
    for col in ("claim", "paper", "ours", "holds"):
        t.add_column(col, overflow="fold")
    for c in outcome.claims:
        t.add_row(c.text, c.paper, c.ours, {"yes": "[green]yes[/]", "no": "[red]no[/]"}.get(
            c.holds, "[yellow]not evaluable[/]"))
    console.print(t)
    console.print(f"verdict: {outcome.verdict}", markup=False, highlight=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ids", nargs="*")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--dataset", default=None)
    ap.add_argument("--jobs", type=int, default=None,
                    help="worker processes (default: one per CPU)")
    ap.add_argument("--cluster", default=None, help="a Ray cluster's address, or auto")
    args = ap.parse_args()
    entries = [e for e in select(args.ids) if not [m for m in missing_needs(e) if m != "plot"]]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Context(quick=args.quick, dataset=args.dataset)
        out = args.out or tmp
        ex = units.Execution(jobs=args.jobs, cluster=args.cluster, store=f"{out}/units")
        with units.using(ex):
            done = run_entries(entries, out, ctx, on_done=show)
    total = time.perf_counter() - start
    summary = Table(title="summary")
    for col in ("id", "verdict", "claims held", "time (s)"):
        summary.add_column(col, overflow="fold")
    for e, o in done:
        held = sum(c.ok and c.evaluable for c in o.claims)
        summary.add_row(e.id, o.verdict.split(":")[0], f"{held}/{len(o.claims)}",
                        f"{o.seconds:.1f}")
    console.print(summary)
    where = f"cluster {args.cluster}" if args.cluster else f"{args.jobs or 'one per CPU'} jobs"
    console.print(f"whole catalogue ({len(done)} entries, {'quick' if args.quick else 'full'}, "
                  f"training data {ctx.training_data()}, {where}): {total:.1f} s wall",
                  highlight=False)


if __name__ == "__main__":
    main()
