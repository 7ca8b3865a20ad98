"""``melopt examples``: copy (or list) the example instances shipped with mel_opt."""

from __future__ import annotations

import click
from rich.table import Table

from mel_opt.cli.app import cli, err, guarded, out
from mel_opt.errors import UsageError
from mel_opt.examples import copy_examples, list_examples


@cli.command("examples")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("-p", "--problem", default=None,
              help="Only this problem's examples (the problems are listed by --list).")
@click.option("--force", is_flag=True, help="Overwrite example files that exist in DIRECTORY.")
@click.option("--list", "list_only", is_flag=True,
              help="List the shipped examples instead of copying them.")
def examples_cmd(directory: str | None, problem: str | None, force: bool,
                 list_only: bool) -> None:
    """Copy the shipped example instances to DIRECTORY/<problem>/<file>.json.

    Nothing is written if any target file exists, unless --force is given.
    """
    with guarded():
        if list_only:
            if directory is not None:
                raise UsageError("give either DIRECTORY (to copy) or --list, not both")
            items = list_examples(problem)
            table = Table(title=f"{len(items)} example instances")
            table.add_column("problem")
            table.add_column("file")
            for item in items:
                table.add_row(item.problem, item.name)
            out.print(table)
            return
        if directory is None:
            raise UsageError("missing DIRECTORY to copy the examples into (or use --list)")
        written = copy_examples(directory, problem, force=force)
        problems = sorted({p.parent.name for p in written})
        err.print(f"copied {len(written)} example instances ({', '.join(problems)}) "
                  f"to {directory}", markup=False)
