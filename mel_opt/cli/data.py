"""``melopt data``: the data sets mel_opt trains on, where each is found, and their fetch.

``melopt data list`` (or ``melopt data`` alone) shows each known data set and where it is
read from; ``melopt data fetch NAME`` downloads one from its canonical source into the cache,
checked by SHA-256 (:mod:`mel_opt.training.fetch`), with a progress bar.
"""

from __future__ import annotations

import json
import sys

import click
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from mel_opt.cli.app import cli, err, guarded, out, positive
from mel_opt.training.data import DATA_DIR_ENV, cache_dir
from mel_opt.training.fetch import (
    DEFAULT_TIMEOUT,
    SOURCES,
    Fetched,
    fetch_dataset,
    known_datasets,
)


@cli.group("data", invoke_without_command=True)
@click.pass_context
def data_cmd(ctx: click.Context) -> None:
    """The data sets for training: where each is found (list), and their download (fetch).

    Without a subcommand: the same as 'melopt data list'. Subcommands: 'list [--json]';
    'fetch NAME [--timeout SECONDS]' with NAME one of fashion-mnist, mnist (see
    'melopt data fetch --help').
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_cmd)


@data_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_cmd(as_json: bool = False) -> None:
    """Each known data set, where it is read from (the cache, Debian's folder, scikit-learn or
    nowhere) and how to get it."""
    with guarded():
        rows = known_datasets()
        if as_json:
            click.echo(json.dumps([{
                "name": r.name, "found": r.found,
                "where": None if r.where is None else str(r.where), "how": r.how or None,
                "title": r.title, "licence": r.licence} for r in rows], indent=2))
            return
        table = Table(title="data sets (--dataset NAME)")
        for column in ("name", "found", "where", "how to get it", "licence"):
            # a path or a command is shown whole, folded if it must be, never cut short
            table.add_column(column, overflow="fold")
        for row in rows:
            where = str(row.where) if row.where is not None else "-"
            table.add_row(row.name, row.found, where, row.how or "-", row.licence)
        out.print(table)
        out.print(f"cache: {cache_dir('NAME')} (set {DATA_DIR_ENV} to move it)", markup=False)


@data_cmd.command("fetch")
@click.argument("name", type=click.Choice(sorted(SOURCES)), metavar="NAME")
@click.option("--timeout", type=positive(), default=DEFAULT_TIMEOUT, show_default=True,
              help="Deadline of the whole fetch (every file, mirror, connection and byte) [s]; "
                   "a fetch stopped by it resumes where it stopped when run again.")
def fetch_cmd(name: str, timeout: float) -> None:
    """Download the data set NAME from its canonical source into the cache, each file checked
    by SHA-256; files already there are not fetched again.

    A partial file (FILE.part) is kept when the fetch is stopped (deadline, broken connection,
    Ctrl-C) and continued by the next fetch. The base URLs in the environment variable
    MELOPT_DATA_MIRROR (comma-separated) replace the canonical mirrors. Exit codes: 0 fetched,
    1 failed (no mirror gave a file, a SHA-256 mismatch, the deadline), 2 usage, 130
    interrupted.
    """
    with guarded():
        try:
            fetched = _fetch_with_bar(name, timeout)
        except KeyboardInterrupt:
            parts = sorted(p.name for p in cache_dir(name).glob("*.part"))
            kept = f"; kept {', '.join(parts)} for the next fetch" if parts else ""
            err.print(f"error: interrupted{kept}", markup=False)
            sys.exit(130)
        for file, how in fetched.files:
            err.print(f"{file}: {how}", markup=False)
        out.print(f"{name}: {fetched.directory}", markup=False)


def _fetch_with_bar(name: str, timeout: float) -> Fetched:
    """:func:`fetch_dataset` under a rich progress bar on stderr, one line per file."""
    progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                        TransferSpeedColumn(), TimeRemainingColumn(), console=err,
                        transient=False)
    tasks: dict[str, TaskID] = {}

    def on_progress(file: str, done: int, total: int) -> None:
        if file not in tasks:
            tasks[file] = progress.add_task(file, total=total)
        progress.update(tasks[file], completed=done)

    with progress:
        return fetch_dataset(name, timeout=timeout, on_progress=on_progress)
