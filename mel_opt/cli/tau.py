"""``melopt tau-scan``: the adaptive-tau objective G(tau) over its range, as a chart or PNG."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from mel_opt.api import load_instance
from mel_opt.cli.app import cli, err, fmt, guarded, info_table, out
from mel_opt.errors import UsageError
from mel_opt.plot import plot_tau_scan, terminal_chart
from mel_opt.problems.adaptive_tau import AdaptiveTauInstance, scan


@cli.command("tau-scan")
@click.argument("path", type=click.Path())
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Also write G(tau) as a PNG to this file.")
@click.option("--json", "as_json", is_flag=True,
              help="Print tau*, the cap and budget outcome and the whole curve as JSON.")
@click.option("--width", type=click.IntRange(min=10, max=400), default=72, show_default=True,
              help="Columns of the terminal chart.")
@click.option("--height", type=click.IntRange(min=4, max=100), default=14, show_default=True,
              help="Rows of the terminal chart.")
def tau_scan_cmd(path: str, plot_path: str | None, as_json: bool, width: int,
                 height: int) -> None:
    """Show the adaptive-tau objective G(tau) over its search range and the tau chosen.

    FILE is an adaptive-tau instance. The chart shows the trade-off: few local updates waste
    the budget on aggregations, many let the local models drift apart (h grows).
    """
    with guarded():
        inst = load_instance(path)
        if not isinstance(inst, AdaptiveTauInstance):
            raise UsageError(f"{path}: tau-scan needs an adaptive-tau instance, got "
                             f"{inst.problem!r}")
        sc = scan(inst)
        summary: dict[str, Any] = {
            "instance": inst.name,
            "tau": sc.tau,
            "tau_unconstrained": sc.tau_first_min,
            "tau_capped": sc.tau_capped,
            "tau_best_within_cap": sc.tau_best_within_cap,
            "last_round": sc.last_round,
            "G_min": sc.G_min,
            "G_at_tau": float(sc.G[sc.tau - 1]),
            "search_max": inst.search_max,
        }
        if plot_path:
            if Path(plot_path).suffix.lower() != ".png":
                raise UsageError(f"--plot writes a PNG; give a .png file name, got {plot_path!r}")
            plot_tau_scan(sc, plot_path, name=inst.name, tau_max=inst.tau_max)
            err.print(f"wrote {plot_path}", markup=False)
        if as_json:
            curve = [None if not math.isfinite(g) else float(g) for g in sc.G]
            click.echo(json.dumps({**summary, "curve": {"tau": sc.taus.tolist(), "G": curve}},
                                  indent=2))
            return
        rows = [(k, fmt(v)) for k, v in summary.items() if k != "instance"]
        out.print(info_table(f"{inst.name}: adaptive tau", rows))
        out.print(terminal_chart(sc.taus, sc.G, sc.tau, width=width, height=height),
                  markup=False)
