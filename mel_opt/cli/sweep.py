"""``melopt sweep`` (a parameter grid, solved or evaluated, tabulated and plotted) and ``plot``."""

from __future__ import annotations

from pathlib import Path

import click

from mel_opt.cli.app import (
    cli,
    err,
    guarded,
    job_count,
    method_list,
    positive,
    refuse_overwrite,
    run_with_progress,
)
from mel_opt.errors import UsageError
from mel_opt.problems import get_problem


def _param_grid(params: tuple[str, ...]) -> dict[str, list[str]]:
    """``--param KEY=V1,V2`` options as {KEY: [V1, V2]}."""
    from mel_opt.sweep import parse_values

    grid: dict[str, list[str]] = {}
    for item in params:
        key, sep, values = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param expects KEY=V1,V2, got {item!r}")
        if key in grid:
            raise UsageError(f"--param {key} is given twice; list its values once "
                             f"({key}=V1,V2)")
        grid[key] = parse_values(values, f"--param {key}")
    return grid


@cli.command("sweep")
@click.argument("problem")
@click.option("--preset", default=None,
              help="Generator preset (default: the problem's first; `melopt methods PROBLEM`).")
@click.option("--learners", "--devices", "learners", default=None,
              help="Values of the number of learners: 5:20, 5:20:5 or 5,10,20.")
@click.option("--tasks", default=None, help="Values of the number of tasks (med).")
@click.option("--param", "params", multiple=True, metavar="KEY=V1,V2",
              help="Generator parameter and its values (repeatable; forms a grid).")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True,
              help="Instances drawn per grid point (seeds 0..N-1).")
@click.option("--methods", default=None, help="Comma-separated methods (default: all).")
@click.option("--metric", "metrics", multiple=True, help="Metric(s) to plot (repeatable).")
@click.option("--x", "x_axis", default=None, help="Plot axis (default: the varied size).")
@click.option("--facet", default=None,
              help="Column giving one panel per value (default: the first --param).")
@click.option("--plot", "plot_file", default=None, type=click.Path(dir_okay=False),
              help="Plot file (.png/.svg/.pdf); default OUT/<metric>.png when --metric is given.")
@click.option("-j", "--jobs", type=job_count(), default=1, show_default=True,
              help="Solves in parallel (worker processes).")
@click.option("--time-limit", type=positive(), default=None,
              help="Seconds each solve may take (default: no limit).")
@click.option("--evaluate", is_flag=True,
              help="Run the problem's Monte-Carlo evaluation (med: the simulator) instead of "
                   "the solvers; writes evaluation.csv, bands over trials.")
@click.option("--trials", type=click.IntRange(min=1), default=40, show_default=True,
              help="Trials per instance with --evaluate.")
@click.option("--cycles", type=click.IntRange(min=1), default=5, show_default=True,
              help="Cycles per trial with --evaluate.")
@click.option("--resume", is_flag=True,
              help="Continue in a non-empty OUTPUT: keep finished results of unchanged points.")
@click.option("--force", is_flag=True,
              help="Use a non-empty OUTPUT anyway and solve every point again.")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for the instances, results, table.csv and the figure.")
def sweep_cmd(problem: str, preset: str | None, learners: str | None, tasks: str | None,
              params: tuple[str, ...], seeds: int, methods: str | None, metrics: tuple[str, ...],
              x_axis: str | None, facet: str | None, plot_file: str | None, jobs: int,
              time_limit: float | None, evaluate: bool, trials: int, cycles: int,
              resume: bool, force: bool, out_dir: str) -> None:
    """Generate a parameter grid of PROBLEM, solve it with every method, tabulate and plot.

    OUTPUT must be new or empty unless --resume or --force says how to reuse it; only the new
    grid is solved and tabulated.

    Example (paper 000 Fig. 2): melopt sweep mel-async --preset mohammad2020 --learners 5:20
    --param cycle_time_s=7.5,15 --seeds 5 --metric max_staleness --metric avg_staleness -o fig2

    Thesis 4.3 (MED vs learners): melopt sweep med --preset mays2023 --learners 4:10 --tasks 3
    --evaluate --metric training_time_s --metric drop_rate -o med_learners
    """
    from mel_opt.plot import plot_sweep, read_rows
    from mel_opt.sweep import run_evaluation, run_sweep, size_values

    with guarded():
        spec = get_problem(problem)
        grid = _param_grid(params)
        ns = size_values(learners, "--learners") if learners else None
        ms = size_values(tasks, "--tasks") if tasks else None
        if facet is not None and facet not in grid and facet not in ("learners", "tasks"):
            raise UsageError(f"--facet {facet!r} is neither a --param key nor learners/tasks"
                             + (f"; choose one of {', '.join(grid)}" if grid else ""))
        if plot_file is not None and Path(plot_file).suffix.lower() not in (
                ".png", ".pdf", ".svg"):
            raise UsageError(f"--plot {plot_file!r}: the figure's format comes from its suffix"
                             ": .png, .pdf or .svg")
        if evaluate:
            opts = {"trials": trials, "cycles": cycles, "time_limit": time_limit,
                    "schemes": method_list(methods)}
            rows, table = run_with_progress(
                lambda **kw: run_evaluation(problem, out_dir, preset=preset, learners=ns,
                                            tasks=ms, params=grid, seeds=seeds, options=opts,
                                            reuse=resume or force, **kw),
                f"evaluate {problem}")
        else:
            chosen = method_list(methods) or list(spec.methods)
            rows, table = run_with_progress(
                lambda **kw: run_sweep(problem, out_dir, preset=preset, learners=ns, tasks=ms,
                                       params=grid, seeds=seeds, methods=chosen, jobs=jobs,
                                       time_limit=time_limit, resume=resume, force=force,
                                       **kw),
                f"sweep {problem}")
        err.print(f"wrote {table} ({len(rows)} rows)", markup=False)
        x = x_axis or ("learners" if ns and len(ns) > 1 else "tasks" if ms and len(ms) > 1
                       else "learners" if ns else "tasks" if ms else None)
        if metrics and x:
            fac = facet or (next(iter(grid)) if grid else None)
            target = plot_file or str(Path(out_dir) / f"{'_'.join(metrics)}.png")
            plot_sweep(read_rows(table), x, list(metrics), target, facet=fac,
                       title=f"{problem} ({preset or 'default preset'}), {seeds} seeds")
            err.print(f"wrote {target}", markup=False)


@cli.command("plot")
@click.argument("table", type=click.Path())
@click.option("--x", "x_axis", required=True, help="Column on the x axis.")
@click.option("--y", "ys", required=True, multiple=True, help="Metric column(s) (repeatable).")
@click.option("--by", default="method", show_default=True, help="Column naming the series.")
@click.option("--facet", default=None, help="Column giving one panel per value.")
@click.option("--title", default="", help="Figure title (default: none).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="PNG file to write.")
def plot_cmd(table: str, x_axis: str, ys: tuple[str, ...], by: str, facet: str | None,
             title: str, output: str) -> None:
    """Plot metric(s) of a sweep.csv against a column, mean and 95% band over seeds."""
    from mel_opt.plot import plot_sweep, read_rows

    with guarded():
        refuse_overwrite(output, table)
        plot_sweep(read_rows(table), x_axis, list(ys), output, by=by, facet=facet, title=title)
        err.print(f"wrote {output}", markup=False)
