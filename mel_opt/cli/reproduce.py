"""``melopt reproduce``: regenerate the papers' figures and tables, with verdicts."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mel_opt import activity
from mel_opt.cli.app import cli, err, guarded, out, seed_int
from mel_opt.cli.work import execution_options, units_run
from mel_opt.reproduce.catalogue import (
    REPRODUCED,
    Context,
    Entry,
    Outcome,
    all_entries,
    install_hint,
    missing_needs,
    select,
)
from mel_opt.reproduce.report import run_entries

#: mel_opt.training.device.DEVICES (not imported here: that loads the emulator for --list too)
DEVICES = ("cpu", "cuda")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"~{value:g} s"


def _catalogue_table(entries: list[Entry]) -> Table:
    t = Table(title="melopt reproduce: catalogue")
    for col in ("id", "paper", "title", "needs", "time (full), digits",
                "time (full), Fashion-MNIST"):
        t.add_column(col, overflow="fold")
    for e in entries:
        needs = ", ".join(e.needs) or "-"
        missing = missing_needs(e)
        if missing:
            needs += f" [yellow](missing: {', '.join(missing)})[/]"
        t.add_row(e.id, e.paper, e.title, needs, _seconds(e.expected_s),
                  _seconds(e.expected("fashion-mnist")))
    total = sum(e.expected_s or 0 for e in entries)
    fashion = [e.expected("fashion-mnist") for e in entries]
    on_fashion = "Fashion-MNIST: not measured for every entry"
    if all(v is not None for v in fashion):
        seconds = sum(v or 0 for v in fashion)
        on_fashion = (f"about {seconds:.0f} s ({seconds / 60:.0f} min) with Fashion-MNIST, "
                      "the default where it can be read")
    t.caption = (f"full run of these on 2 cores: about {total:.0f} s with the digits data, "
                 f"{on_fashion}; --quick: about 1 s each on the digits")
    return t


def _verdict_cell(verdict: str) -> str:
    if verdict == REPRODUCED:
        return "[green]reproduced[/]"
    if verdict.startswith(REPRODUCED + ";"):
        return f"[green]reproduced[/][dim]{verdict[len(REPRODUCED):].replace('[', '(')}[/]"
    return f"[yellow]{verdict.replace('[', '(').replace(']', ')')}[/]"


def _summary(done: list[tuple[Entry, Outcome]], skipped: list[tuple[Entry, list[str]]],
             total_s: float) -> Table:
    t = Table(title=f"verdicts ({total_s:.1f} s in all)")
    t.add_column("id")
    t.add_column("verdict", overflow="fold")
    t.add_column("claims", justify="right")
    t.add_column("time (s)", justify="right")
    for e, o in done:
        held = sum(c.ok and c.evaluable for c in o.claims)
        judged = sum(c.evaluable for c in o.claims)
        t.add_row(e.id, _verdict_cell(o.verdict), f"{held}/{judged}", f"{o.seconds:.1f}")
    for e, missing in skipped:
        t.add_row(e.id, f"[dim]skipped: needs the {', '.join(missing)} extra ("
                        f"{escape(install_hint(missing))})[/]", "-", "-")
    return t


@cli.command("reproduce")
@click.argument("ids", nargs=-1)
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), default="reproduce-out",
              show_default=True, help="Folder for <id>/table.csv, figure.png, outcome.json "
              "and report.md.")
@click.option("--list", "list_only", is_flag=True, help="Show the catalogue and exit.")
@click.option("--quick", is_flag=True, help="Fewer trials and points (a smoke run; verdicts "
              "are then indicative).")
@click.option("--seeds", type=click.IntRange(min=1), default=None,
              help="Seeds (or trials) per point, overriding each entry's default.")
@click.option("--seed", type=seed_int(), default=0, show_default=True,
              help="First seed.")
@click.option("--dataset", default=None,
              help="Data set of the training entries: digits, fashion-mnist, mnist or "
                   "idx:DIR (default: Fashion-MNIST where installed, else digits).")
@click.option("--device", type=click.Choice(DEVICES), default="cpu", show_default=True,
              help="Where the training entries train: cpu (numpy) or cuda (a GPU through "
                   "CuPy, the gpu extra); the other entries run on the CPU.")
@execution_options
def reproduce_cmd(ids: tuple[str, ...], out_dir: str, list_only: bool, quick: bool,
                  seeds: int | None, seed: int, dataset: str | None, device: str,
                  jobs: int | None, cluster: str | None) -> None:
    """Regenerate figures and tables of the papers (all when no ID is given).

    Each entry writes its table with the paper's numbers beside ours, its figure (with the
    plot extra) and a verdict: "reproduced", or "differs: " and the claims that do not hold,
    with the numbers. DIR/report.md gathers them.
    """
    with guarded():
        entries = select(ids)
        if list_only:
            out.print(_catalogue_table(entries if ids else list(all_entries().values())))
            return
        runnable, skipped = [], []
        for e in entries:
            missing = [m for m in missing_needs(e) if m != "plot"]
            (skipped.append((e, missing)) if missing else runnable.append(e))
        if dataset is not None:
            from mel_opt.training.data import load_dataset

            load_dataset(dataset, max_train=1, max_test=1)  # a bad name: exit 2 before work
        if device != "cpu":
            from mel_opt.training.device import get_device

            get_device(device)  # no CuPy or no GPU: exit 2 before work
        ctx = Context(quick=quick, seeds=seeds, seed=seed, dataset=dataset, device=device)
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), console=err) as progress:
            task = progress.add_task("reproducing", total=len(runnable))
            current = [""]

            def on_start(entry: Entry) -> None:
                current[0] = entry.id
                progress.update(task, description=f"{entry.id}")

            def on_step(what: str) -> None:  # inside an entry: its point, seed, cycle
                progress.update(task, description=f"{current[0]}: {escape(what)}")

            def on_done(entry: Entry, outcome: Outcome) -> None:
                progress.update(task, advance=1, description=f"done {entry.id}")

            with units_run(out_dir, "units", jobs, cluster, bar=progress), \
                    activity.reporting(on_step):
                done = run_entries(runnable, Path(out_dir), ctx, on_done=on_done,
                                   skipped=[(e, m) for e, m in skipped], on_start=on_start)
        out.print(_summary(done, skipped, sum(o.seconds for _, o in done)))
        out.print(f"report: {Path(out_dir) / 'report.md'}", markup=False)
