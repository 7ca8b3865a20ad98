"""``melopt arena``: mel_opt's allocations beside the field's alternatives, on one population."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from mel_opt.api import load_instance
from mel_opt.arena.report import write_outputs
from mel_opt.arena.run import arena
from mel_opt.arena.settings import ARENA_SETTINGS, ArenaSettings
from mel_opt.cli.app import (
    cli,
    counted_progress,
    declared_options,
    err,
    fail,
    guarded,
    out,
    refuse_overwrite,
)


def _cell(iv: dict[str, Any], digits: int = 3) -> str:
    if iv["mean"] is None:
        return "-"
    if iv["n"] > 1 and iv["hi"] - iv["lo"] > 1e-9 * max(1.0, abs(iv["mean"])):
        return f"{iv['mean']:.{digits}g} [{iv['lo']:.{digits}g}, {iv['hi']:.{digits}g}]"
    return f"{iv['mean']:.{digits}g}"


def arena_table(summary: dict[str, Any]) -> Table:
    """Per scheme: time to each target (mean [95 % interval] over the seeds that reached it,
    and how many did), final accuracy, bytes moved, learner-seconds idle."""
    table = Table(title=f"{summary['instance']} ({summary['problem']}): virtual seconds to "
                        f"target, mean [95% t-interval] over the seeds that reached it; "
                        f"horizon {summary['horizon_s']:g} s")
    targets = list(next(iter(summary["schemes"].values()))["targets"]) if summary[
        "schemes"] else []
    table.add_column("scheme")
    for t in targets:
        table.add_column(f"to {t}", justify="right")
    for name in ("final accuracy", "MB moved", "learner-s idle"):
        table.add_column(name, justify="right")
    for scheme, e in summary["schemes"].items():
        cells = [f"{_cell(e['targets'][t]['seconds'], 4)} ({e['targets'][t]['reached']})"
                 for t in targets]
        mb = dict(e["bytes"])
        mb.update({k: None if mb[k] is None else mb[k] / 1e6 for k in ("mean", "lo", "hi")})
        table.add_row(scheme, *cells, _cell(e["final_accuracy"]), _cell(mb),
                      _cell(e["idle_s"], 4))
    for scheme, why in summary["infeasible"].items():
        table.add_row(scheme, *(["infeasible"] + [""] * len(targets))[:len(targets)],
                      why[:50], "", "")
    return table


@cli.command("arena")
@click.argument("path", type=click.Path(dir_okay=False))
@declared_options(*ARENA_SETTINGS)
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for arena.csv, summary.json and arena.png.")
def arena_cmd(path: str, out_dir: str, **values: Any) -> None:
    """Train PATH's population under mel_opt's allocations and the field's alternatives.

    Every scheme runs on the same learners (their times from the instance's model), data,
    partition, model start and seeds, for the same virtual time: the instance's method
    (default: its default method) beside deadline dropping, Oort, FedBuff and FedProx.
    Writes arena.csv, summary.json and arena.png.
    """
    with guarded():
        for name in ("arena.csv", "summary.json", "arena.png"):
            refuse_overwrite(str(Path(out_dir) / name), path)
        settings = ArenaSettings(**values)
        inst = load_instance(path)
        with counted_progress("arena") as progress:
            run = arena(inst, settings, progress=progress)
        summary = write_outputs(run, out_dir)
        for scheme, why in run.infeasible.items():
            err.print(f"warning: scheme {scheme} has no allocation ({why}); not run",
                      markup=False)
        out.print(arena_table(summary))
        for target, who in summary["winners"].items():
            out.print(f"target {target}: " + (f"{who} wins" if who else "no scheme reaches it"),
                      markup=False)
        out.print(f"wrote arena.csv, summary.json{', arena.png' if summary['figure'] else ''}"
                  f" to {out_dir}", markup=False)
        if not run.ran:
            fail("no scheme ran", 1)
