"""``melopt export``: the Pyomo model of an instance as LP, MPS, NL or GMS.

A thin layer over :func:`mel_opt.export.export`.
"""

from __future__ import annotations

import os

import click

from mel_opt.api import load_instance
from mel_opt.cli.app import cli, err, guarded, refuse_overwrite
from mel_opt.export import FORMATS, export


@cli.command("export")
@click.argument("path", type=click.Path())
@click.option("--format", "fmt_", type=click.Choice(sorted(FORMATS)), required=True,
              help="lp, mps, nl (AMPL) or gms (GAMS).")
@click.option("-m", "--method", default=None,
              help="Method whose formulation to export (default: the problem's default).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="File to write (atomically).")
def export_cmd(path: str, fmt_: str, method: str | None, output: str) -> None:
    """Write the Pyomo model of an instance as LP, MPS, NL (AMPL) or GMS (GAMS)."""
    with guarded():
        stem = os.path.splitext(output)[0]
        # NL also writes its label files <stem>.row and <stem>.col beside the model
        for target in [output] + ([stem + ".row", stem + ".col"] if fmt_ == "nl" else []):
            refuse_overwrite(target, path)
        done = export(load_instance(path), fmt_, output, method)
        err.print(f"wrote {done.path} ({fmt_}, {done.problem}/{done.method})", markup=False)
