"""``melopt simulate``: Monte-Carlo evaluation of med allocation schemes (thesis 4.3)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table

from mel_opt.api import load_instance
from mel_opt.cli.app import cli, err, guarded, out, positive, refuse_overwrite, seed_int
from mel_opt.errors import UsageError
from mel_opt.io.atomic import atomic_write
from mel_opt.limits import check_simulation
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.simulate import METRICS, SCHEMES, SimulationResult, simulate

LABELS = {
    "training_time_s": "training time (s)",
    "satisfaction": "satisfaction ratio",
    "fulfilment": "task fulfilment",
    "drop_rate": "data drop rate",
    "occupancy": "occupancy",
    "learner_satisfaction": "learner satisfaction",
}


def _cell(stat: dict[str, Any], percent: bool) -> str:
    if stat["mean"] is None:
        return "-"
    scale, unit = (100.0, "%") if percent else (1.0, "")
    text = f"{stat['mean'] * scale:.2f}{unit}"
    if stat["half_width"] is not None:
        text += f" ± {stat['half_width'] * scale:.2f}"
    return text


def _tables(res: SimulationResult) -> list[Table]:
    redrawn = ", learners redrawn per trial" if res.redraw else ""
    head = (f"{res.instance}: {res.trials} trials x {res.cycles} cycles, seed {res.seed}"
            f"{redrawn}, allocations by {res.method} (mean ± 95% CI half-width)")
    metrics = Table(title=head)
    metrics.add_column("metric", style="bold")
    for s in res.schemes:
        metrics.add_column(s.name, justify="right")
    for key in METRICS:
        metrics.add_row(LABELS[key], *[_cell(s.summary()[key], key != "training_time_s")
                                       for s in res.schemes])
    solves = Table(title="solves")
    for col in ("scheme", "solves", "failed", "cycles without allocation", "solve time (s)",
                "first messages"):
        solves.add_column(col)
    for s in res.schemes:
        style = "red" if s.failed_solves else "green"
        solves.add_row(s.name, str(s.solves), f"[{style}]{s.failed_solves}[/]",
                       str(s.cycles_without_allocation), f"{s.solve_time_s:.3g}",
                       "; ".join(s.messages) or "-")
    tables = [metrics, solves]
    if len(res.schemes) > 1:
        paired = Table(title=f"paired difference: scheme - {res.schemes[0].name} (same draws)")
        paired.add_column("metric", style="bold")
        diffs = res.paired()
        for name in diffs:
            paired.add_column(name, justify="right")
        for key in METRICS:
            paired.add_row(LABELS[key], *[_cell(diffs[name][key], key != "training_time_s")
                                          for name in diffs])
        tables.append(paired)
    return tables


@cli.command("simulate")
@click.argument("path", type=click.Path())
@click.option("--schemes", default=",".join(SCHEMES), show_default=True,
              help="Comma-separated schemes; the first is the reference of paired differences.")
@click.option("--cycles", type=click.IntRange(min=1), default=5, show_default=True,
              help="Global update cycles per trial.")
@click.option("--trials", type=click.IntRange(min=1), default=40, show_default=True,
              help="Independent trials (the thesis ran 40).")
@click.option("--seed", type=seed_int(), default=0, show_default=True,
              help="Seeds every state draw (the same draws for every scheme).")
@click.option("--method", type=click.Choice(["exact", "highs"]), default="exact",
              show_default=True, help="Solver of every allocation.")
@click.option("--time-limit", type=positive(), default=None,
              help="Wall-clock limit per solve, seconds.")
@click.option("--redraw", is_flag=True,
              help="Draw every learner's state distribution and price again for each trial "
                   "(thesis 4.3.1: softmax(one_hot / 0.5) on a uniform peak state, price "
                   "N(1, 0.5) clipped to [0.1, 1.5]).")
@click.option("--json", "as_json", is_flag=True, help="Print the result JSON instead of tables.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the result JSON to this file (atomically).")
def simulate_cmd(path: str, schemes: str, cycles: int, trials: int, seed: int, method: str,
                 time_limit: float | None, redraw: bool, as_json: bool,
                 output: str | None) -> None:
    """Evaluate med allocation schemes on FILE under random learner states.

    Every trial draws each learner's state per cycle from its distribution; the MED and
    MMTT-Uncertain allocations are made once per trial and reused, MMTT-Ideal re-solves each
    cycle knowing the states. Each learner's times vary from cycle to cycle around its state's
    times (lognormal, mean 1, its ``time_cv``). Learners halt at the deadline. Reports the
    five metrics of thesis 4.3 with 95% confidence intervals. Exit code 1 if a scheme got no
    allocation at all.
    """
    with guarded():
        refuse_overwrite(output, path)
        inst = load_instance(path)
        if not isinstance(inst, MedInstance):
            raise UsageError(f"{path}: simulate works on med instances, this is {inst.problem}")
        names = [s.strip() for s in schemes.split(",") if s.strip()]
        check_simulation(trials, cycles, inst.n_learners, inst.n_states, len(names))
        res = simulate(inst, schemes=names, cycles=cycles, trials=trials, seed=seed,
                       method=method, time_limit=time_limit, redraw=redraw)
        text = json.dumps(res.to_dict(), indent=2, allow_nan=False)
        if output:
            atomic_write(output, text + "\n")
            err.print(f"wrote {output}", markup=False)
        if as_json:
            click.echo(text)
        else:
            for table in _tables(res):
                out.print(table)
        empty = [s.name for s in res.schemes if s.cycles_without_allocation == trials * cycles]
        if empty:
            err.print(f"error: no allocation at all for {', '.join(empty)}", markup=False)
            raise SystemExit(1)
