"""Batch, compare, export, sweep and plot commands."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from mel_opt.api import load_instance
from mel_opt.cli.app import STATUS_STYLE, cli, err, fmt, guarded, out, verification_text
from mel_opt.cli.cmd_core import OPTION, method_options
from mel_opt.errors import UsageError
from mel_opt.problems import get_problem


def _methods(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [m.strip() for m in text.split(",") if m.strip()]


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=err, transient=False)


def _run_with_progress(runner: Any, label: str, **kw: Any) -> Any:
    with _progress() as progress:
        task = progress.add_task(label, total=None, failed=0)
        failed = 0

        def on_plan(total: int, skipped: int) -> None:
            progress.update(task, total=total, completed=skipped)
            if skipped:
                err.print(f"resuming: {skipped} of {total} already done", markup=False)

        def on_result(row: dict[str, Any]) -> None:
            nonlocal failed
            from mel_opt.batch import is_failure

            if is_failure(row):
                failed += 1
                progress.console.print(
                    f"[red]failed[/] {row['file'] or row['instance']} ({row['method'] or '-'}): "
                    f"{row['status']} {row['error']}".rstrip(), markup=True, highlight=False)
            progress.update(task, advance=1, failed=failed)

        return runner(on_plan=on_plan, on_result=on_result, **kw)


def _summary_table(rows: list[dict[str, Any]], title: str) -> Table:
    counts: dict[tuple[str, str], dict[str, int]] = {}
    times: dict[tuple[str, str], float] = {}
    for r in rows:
        key = (r["problem"] or "?", r["method"] or "default")
        c = counts.setdefault(key, {})
        c[r["status"]] = c.get(r["status"], 0) + 1
        times[key] = times.get(key, 0.0) + float(r["solve_time_s"] or 0.0)
    t = Table(title=title)
    for col in ("problem", "method", "results", "statuses", "verified", "total solve s"):
        t.add_column(col)
    for key in sorted(counts):
        c = counts[key]
        n = sum(c.values())
        verified = sum(1 for r in rows if (r["problem"] or "?", r["method"] or "default") == key
                       and r["feasible"] is True)
        statuses = ", ".join(f"[{STATUS_STYLE.get(s, 'white')}]{s}[/] {v}"
                             for s, v in sorted(c.items()))
        t.add_row(key[0], key[1], str(n), statuses, f"{verified}/{n}", f"{times[key]:.3f}")
    return t


@cli.command("batch")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for result JSONs and summary.csv.")
@click.option("--methods", default=None, help="Comma-separated methods (default: recommended).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
              show_default=True)
@click.option("--address", default=None, help="Ray cluster address (default: a local Ray).")
@click.option("--resume", is_flag=True, help="Skip (instance, method) pairs already done.")
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--seed", type=int, default=0, show_default=True)
def batch_cmd(directory: str, out_dir: str, methods: str | None, jobs: int, executor: str,
              address: str | None, resume: bool, time_limit: float | None, seed: int) -> None:
    """Solve every instance file under DIRECTORY (recursively), in parallel.

    Writes one result JSON per (instance, method) under OUTPUT/results and OUTPUT/summary.csv.
    Bad files and failed solves are reported and the batch goes on; exit code 1 if anything
    failed.
    """
    from mel_opt.batch import run_batch

    with guarded():
        report = _run_with_progress(
            lambda **kw: run_batch(directory, out_dir, methods=_methods(methods), jobs=jobs,
                                   executor=executor, address=address, resume=resume,
                                   time_limit=time_limit, seed=seed, **kw),
            f"batch ({executor}, {jobs} job{'s' if jobs > 1 else ''})")
        out.print(_summary_table(report.rows, f"{len(report.rows)} results in "
                                 f"{report.wall_time_s:.2f} s -> {report.summary_file}"))
        if report.failures:
            err.print(f"{len(report.failures)} of {len(report.rows)} failed "
                      f"(see {report.summary_file})", markup=False)
        raise SystemExit(1 if report.failures else 0)


@cli.command("compare")
@click.argument("path", type=click.Path())
@click.option("--methods", default=None, help="Comma-separated methods (default: all).")
@click.option("--json", "as_json", is_flag=True)
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--seed", type=int, default=0, show_default=True)
@OPTION
def compare_cmd(path: str, methods: str | None, as_json: bool, time_limit: float | None,
                seed: int, options: tuple[str, ...]) -> None:
    """Every method of the instance's problem side by side, with gaps to the best proven answer.

    A method that answers a different question shows "not comparable" in place of a gap, and
    its reason under the table."""
    from mel_opt.compare import compare

    with guarded():
        inst = load_instance(path)
        cmp = compare(inst, _methods(methods), time_limit=time_limit, seed=seed,
                      options=method_options(options))
        if as_json:
            click.echo(json.dumps(cmp.to_dict(), indent=2, allow_nan=False))
            return
        spec = get_problem(inst.problem)
        ref = cmp.reference
        t = Table(title=f"{inst.name}: {spec.name} ({spec.sense}imise); reference: "
                  f"{ref.method if ref else 'none'}"
                  f"{' (proven optimal)' if cmp.reference_is_proven else ''}")
        cols = ["method", "kind", "status", "objective", "gap", "gap %", *spec.key_metrics,
                "verified", "time (s)"]
        for c in cols:
            t.add_column(c, justify="right" if c not in ("method", "kind", "status") else "left")
        for r in cmp.results:
            g, rel = cmp.gaps[r.method]
            style = STATUS_STYLE.get(r.status.value, "white")
            best = " [bold](best)[/]" if ref is not None and r is ref else ""
            apart = cmp.not_comparable.get(r.method)
            t.add_row(r.method + best, spec.methods[r.method].kind,
                      f"[{style}]{r.status.value}[/]", fmt(r.objective),
                      "not comparable" if apart else fmt(g),
                      "-" if rel is None else f"{100 * rel:.3g}",
                      *(fmt(r.metrics.get(k)) for k in spec.key_metrics),
                      verification_text(r), f"{r.solve_time_s:.4g}")
        out.print(t)
        for name, why in cmp.not_comparable.items():
            out.print(f"{name}: not comparable: {why}", markup=False)


# CLI name -> (file suffix, Pyomo ProblemFormat name)
EXPORT_FORMATS = {"lp": ("lp", "cpxlp"), "mps": ("mps", "mps"), "nl": ("nl", "nl"),
                  "gms": ("gms", "gams")}


@cli.command("export")
@click.argument("path", type=click.Path())
@click.option("--format", "fmt_", type=click.Choice(sorted(EXPORT_FORMATS)), required=True)
@click.option("-m", "--method", default=None,
              help="Method whose formulation to export (default: the problem's default).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
def export_cmd(path: str, fmt_: str, method: str | None, output: str) -> None:
    """Write the Pyomo model of an instance as LP, MPS, NL (AMPL) or GMS (GAMS)."""
    with guarded():
        inst = load_instance(path)
        spec = get_problem(inst.problem)
        mname = spec.method(method).name
        if spec.build_model is None:
            raise UsageError(f"problem {spec.name!r} has no Pyomo formulation to export")
        model = spec.build_model(inst, mname)
        if model is None:
            raise UsageError(f"method {mname!r} of {spec.name} has no Pyomo formulation")
        target = Path(output)
        target.parent.mkdir(parents=True, exist_ok=True)
        # write into a private folder beside the target, then rename: a reader never sees a
        # half-written model (NL also writes .row/.col label files, moved alongside)
        tmpdir = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            try:
                model.write(str(tmpdir / target.name), format=EXPORT_FORMATS[fmt_][1],
                            io_options={"symbolic_solver_labels": True})
            except (ValueError, RuntimeError, TypeError) as exc:
                raise UsageError(f"cannot write {spec.name}/{mname} as {fmt_}: {exc}") from None
            for produced in sorted(tmpdir.iterdir(), key=lambda p: p.name == target.name):
                os.replace(produced, target.parent / produced.name)
        finally:
            for left in tmpdir.iterdir():
                left.unlink()
            tmpdir.rmdir()
        err.print(f"wrote {target} ({fmt_}, {spec.name}/{mname})", markup=False)


@cli.command("sweep")
@click.argument("problem")
@click.option("--preset", default=None)
@click.option("--learners", "--devices", "learners", default=None,
              help="Values of the number of learners: 5:20, 5:20:5 or 5,10,20.")
@click.option("--tasks", default=None, help="Values of the number of tasks (med).")
@click.option("--param", "params", multiple=True, metavar="KEY=V1,V2",
              help="Generator parameter and its values (repeatable; forms a grid).")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--methods", default=None, help="Comma-separated methods (default: all).")
@click.option("--metric", "metrics", multiple=True, help="Metric(s) to plot (repeatable).")
@click.option("--x", "x_axis", default=None, help="Plot axis (default: the varied size).")
@click.option("--facet", default=None,
              help="Column giving one panel per value (default: the first --param).")
@click.option("--plot", "plot_file", default=None, type=click.Path(dir_okay=False),
              help="Plot file (.png/.svg/.pdf); default OUT/<metric>.png when --metric is given.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--evaluate", is_flag=True,
              help="Run the problem's Monte-Carlo evaluation (med: the simulator) instead of "
                   "the solvers; writes evaluation.csv, bands over trials.")
@click.option("--trials", type=click.IntRange(min=1), default=40, show_default=True,
              help="Trials per instance with --evaluate.")
@click.option("--cycles", type=click.IntRange(min=1), default=5, show_default=True,
              help="Cycles per trial with --evaluate.")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False))
def sweep_cmd(problem: str, preset: str | None, learners: str | None, tasks: str | None,
              params: tuple[str, ...], seeds: int, methods: str | None, metrics: tuple[str, ...],
              x_axis: str | None, facet: str | None, plot_file: str | None, jobs: int,
              time_limit: float | None, evaluate: bool, trials: int, cycles: int,
              out_dir: str) -> None:
    """Generate a parameter grid of PROBLEM, solve it with every method, tabulate and plot.

    Example (paper 000 Fig. 2): melopt sweep mel-async --preset mohammad2020 --learners 5:20
    --param cycle_time_s=7.5,15 --seeds 5 --metric max_staleness --metric avg_staleness -o fig2

    Thesis 4.3 (MED vs learners): melopt sweep med --preset mays2023 --learners 4:10 --tasks 3
    --evaluate --metric training_time_s --metric drop_rate -o med_learners
    """
    from mel_opt.plot import plot_sweep
    from mel_opt.sweep import parse_values, run_evaluation, run_sweep

    with guarded():
        spec = get_problem(problem)
        grid: dict[str, list[str]] = {}
        for item in params:
            key, sep, values = item.partition("=")
            if not sep or not key:
                raise UsageError(f"--param expects KEY=V1,V2, got {item!r}")
            grid[key] = parse_values(values)
        ns = [int(v) for v in parse_values(learners)] if learners else None
        ms = [int(v) for v in parse_values(tasks)] if tasks else None
        if evaluate:
            opts = {"trials": trials, "cycles": cycles, "time_limit": time_limit,
                    "schemes": _methods(methods)}
            rows, table = _run_with_progress(
                lambda **kw: run_evaluation(problem, out_dir, preset=preset, learners=ns,
                                            tasks=ms, params=grid, seeds=seeds, options=opts,
                                            **kw),
                f"evaluate {problem}")
        else:
            chosen = _methods(methods) or list(spec.methods)
            rows, table = _run_with_progress(
                lambda **kw: run_sweep(problem, out_dir, preset=preset, learners=ns, tasks=ms,
                                       params=grid, seeds=seeds, methods=chosen, jobs=jobs,
                                       time_limit=time_limit, **kw),
                f"sweep {problem}")
        err.print(f"wrote {table} ({len(rows)} rows)", markup=False)
        x = x_axis or ("learners" if ns and len(ns) > 1 else "tasks" if ms and len(ms) > 1
                       else "learners" if ns else "tasks" if ms else None)
        if metrics and x:
            fac = facet or (next(iter(grid)) if grid else None)
            target = plot_file or str(Path(out_dir) / f"{'_'.join(metrics)}.png")
            from mel_opt.plot import read_rows

            plot_sweep(read_rows(table), x, list(metrics), target, facet=fac,
                       title=f"{problem} ({preset or 'default preset'}), {seeds} seeds")
            err.print(f"wrote {target}", markup=False)


@cli.command("plot")
@click.argument("table", type=click.Path())
@click.option("--x", "x_axis", required=True, help="Column on the x axis.")
@click.option("--y", "ys", required=True, multiple=True, help="Metric column(s) (repeatable).")
@click.option("--by", default="method", show_default=True, help="Column naming the series.")
@click.option("--facet", default=None, help="Column giving one panel per value.")
@click.option("--title", default="")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
def plot_cmd(table: str, x_axis: str, ys: tuple[str, ...], by: str, facet: str | None,
             title: str, output: str) -> None:
    """Plot metric(s) of a sweep.csv against a column, mean and 95% band over seeds."""
    from mel_opt.plot import plot_sweep, read_rows

    with guarded():
        plot_sweep(read_rows(table), x_axis, list(ys), output, by=by, facet=facet, title=title)
        err.print(f"wrote {output}", markup=False)
