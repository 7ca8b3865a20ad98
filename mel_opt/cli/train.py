"""``melopt train``: train a real model under each scheme's allocation on a virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from mel_opt.api import load_instance
from mel_opt.cli.app import (
    cli,
    declared_options,
    err,
    fail,
    guarded,
    out,
    refuse_overwrite,
)
from mel_opt.cli.work import execution_options, units_run
from mel_opt.training import TrainSettings, train, write_outputs


def _cell(iv: dict[str, Any], digits: int = 3) -> str:
    if iv["mean"] is None:
        return "-"
    if iv["n"] > 1 and iv["hi"] > iv["lo"]:
        return f"{iv['mean']:.{digits}g} [{iv['lo']:.{digits}g}, {iv['hi']:.{digits}g}]"
    return f"{iv['mean']:.{digits}g}"


def summary_table(summary: dict[str, Any]) -> Table:
    """The rich table of a training summary: per scheme and target, cycles and seconds."""
    table = Table(title=f"{summary['instance']} ({summary['problem']}): training under each "
                        f"allocation, mean [95% interval] over seeds; speedup vs "
                        f"{summary['reference']}")
    table.add_column("scheme")
    table.add_column("target")
    table.add_column("reached", justify="right")
    table.add_column("cycles", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("final accuracy", justify="right")
    has_truancy = any("truancy_percent" in e for e in summary["schemes"].values())
    if has_truancy:
        table.add_column("truancy %", justify="right")
    for scheme, e in summary["schemes"].items():
        for target, t in e["targets"].items():
            row = [scheme, target, t["reached"], _cell(t["cycles"]), _cell(t["seconds"], 4),
                   "-" if t["speedup"] is None else f"{t['speedup']:.3g}x",
                   _cell(e["final_accuracy"])]
            if has_truancy:
                row.append(_cell(e["truancy_percent"]) if "truancy_percent" in e else "-")
            table.add_row(*row)
    for scheme, why in summary["infeasible"].items():
        table.add_row(scheme, "-", "infeasible", why[:60], "", "", "")
    return table


_FLAGS = ("schemes", "cycles", "seeds", "dataset", "partition", "model", "targets", "lr",
          "batch_size", "dtype", "threads", "processes", "device", "reference", "max_train",
          "time_limit", "patience", "tolerance", "until_targets", "aggregation", "attack",
          "liars", "liar_ids", "attack_from")


@cli.command("train")
@click.argument("path", type=click.Path(dir_okay=False))
@declared_options(*(TrainSettings.setting(name) for name in _FLAGS))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for train.csv, summary.json and train.png (and units/, the "
                   "finished runs a rerun reads back).")
@execution_options
def train_cmd(path: str, out_dir: str, jobs: int | None, cluster: str | None,
              **values: Any) -> None:
    """Solve PATH with each scheme, then train a model under every allocation.

    The clock is virtual: a cycle lasts what the instance's latency model says (dab: plus each
    learner's run-to-run noise, its ``time_cv`` in the instance). Writes
    train.csv, summary.json and a figure of accuracy against time and cycles.
    """
    with guarded():
        for name in ("train.csv", "summary.json", "train.png"):  # before any work
            refuse_overwrite(str(Path(out_dir) / name), path)
        settings = TrainSettings(**values)
        inst = load_instance(path)
        with units_run(out_dir, "training", jobs, cluster):
            run = train(inst, settings)
        summary = write_outputs(run, out_dir)
        for scheme, why in run.infeasible.items():
            err.print(f"warning: scheme {scheme} has no allocation ({why}); not trained",
                      markup=False)
        out.print(summary_table(summary))
        blas = summary["blas"]
        err.print(f"BLAS: {blas['library']} {blas['version']}, {blas['architecture']} kernels"
                  + (f" (set by {blas['forced_by']} in the environment)"
                     if blas["forced_by"] else ""), markup=False)
        files = "train.csv, summary.json" + (f", {summary['figure']}" if summary["figure"]
                                             else " (no figure: matplotlib is missing)")
        out.print(f"wrote {files} to {out_dir}", markup=False)
        if not run.schemes:
            fail("no scheme has an allocation: nothing was trained", 1)
