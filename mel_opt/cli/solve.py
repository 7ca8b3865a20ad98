"""``melopt solve``, ``validate`` and ``methods``: one instance (or many) at a time."""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from mel_opt import api as _api
from mel_opt import deadline
from mel_opt.api import load_instance, solve
from mel_opt.cli.app import (
    STATUS_STYLE,
    cli,
    err,
    fmt,
    guarded,
    out,
    positive,
    refuse_overwrite,
    result_panel,
    seed_int,
    verification_text,
)
from mel_opt.errors import MelOptError, UsageError
from mel_opt.io.atomic import atomic_write
from mel_opt.problems import all_problems, get_problem
from mel_opt.result import Result, SolverInfo, dumps
from mel_opt.status import SolutionStatus, TerminationCondition

# standard output carries the answer alone (--json): Pyomo logs on standard error
_api.PYOMO_LOG_TO_STDERR = True


def instance_files(paths: tuple[str, ...]) -> list[Path]:
    """Expand files and directories (recursively, ``*.json``) into a sorted list of files."""
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*.json") if q.is_file()))
        else:
            files.append(p)
    return files


def method_options(items: tuple[str, ...]) -> dict[str, Any]:
    """``--option KEY=VALUE`` items as a dict; VALUE is read as JSON when it parses (numbers,
    true/false), else kept as a string. Bad items raise ``UsageError`` (exit code 2)."""
    opts: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--option expects KEY=VALUE, got {item!r}")
        try:
            opts[key] = json.loads(raw)
        except ValueError:
            opts[key] = raw
    return opts


OPTION = click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
                      help="Method option (repeatable), e.g. rounding=paper; `melopt methods "
                           "PROBLEM` lists each method's options.")


def exit_code_of(res: Result) -> int:
    return res.exit_code


@cli.command("solve")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("-m", "--method", default=None,
              help="Method name (default: the problem's recommended).")
@click.option("--json", "as_json", is_flag=True, help="Print the result JSON instead of a table.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the result JSON to this file (atomically).")
@click.option("--time-limit", type=positive(), default=None,
              help="Wall-clock limit per solve, seconds.")
@click.option("--seed", type=seed_int(), default=0, show_default=True,
              help="Seed for randomised methods.")
@OPTION
def solve_cmd(paths: tuple[str, ...], method: str | None, as_json: bool, output: str | None,
              time_limit: float | None, seed: int, options: tuple[str, ...]) -> None:
    """Solve instance FILE(s); directories are searched for *.json.

    One file prints a result table (or JSON); several print one summary row each and carry on
    past invalid files.
    """
    with guarded():
        opts = method_options(options)
        files = instance_files(paths)
        if not files:
            raise UsageError("no instance files found")
        refuse_overwrite(output, *files)
        if len(files) == 1:
            # One file: the limit counts from the process start (start-up and loading included).
            with deadline.limit(time_limit, start=deadline.process_start()) as until:
                res = _solve_one(files[0], method, time_limit, seed, opts, until)
            if output or as_json:
                res, data = res.to_json_timed()
                if output:
                    atomic_write(output, data + b"\n")
                if as_json:
                    click.echo(data)
            if not as_json:
                keys = get_problem(res.problem).key_metrics if res.problem in all_problems() \
                    else ()
                out.print(result_panel(res, keys))
            raise SystemExit(exit_code_of(res))
        _solve_many(files, method, as_json, output, time_limit, seed, opts)


#: Seconds loading may run past the limit before its guard stops it: a load that ends a little
#: late still gives a result (``time_limit``, the method not started) in the usual document.
LOAD_GRACE_S = 1.0


def _solve_one(path: Path, method: str | None, time_limit: float | None, seed: int,
               opts: dict[str, Any], until: deadline.Deadline | None = None) -> Result:
    """Load, validate, solve and verify one file; the result's timings hold every phase.

    With ``until``, loading runs under its guard timer too (a huge file cannot outlast the
    limit by more than :data:`LOAD_GRACE_S`); a load it stops gives a ``time_limit`` result
    without a solution, like a method stopped before it started."""
    timings: dict[str, float] = {}
    guard = (deadline.hard_stop(until, LOAD_GRACE_S) if until is not None
             else contextlib.nullcontext())
    try:
        with guard:
            inst = load_instance(path, timings=timings)
    except deadline.TimeLimitReached as exc:
        return _not_loaded(path, method, f"{exc} while loading the instance", timings)
    res = solve(inst, method, time_limit=time_limit, seed=seed, options=opts)
    return replace(res, timings={**timings, **res.timings})


def _not_loaded(path: Path, method: str | None, why: str, timings: dict[str, float]) -> Result:
    """The result of a solve whose instance could not be loaded within the time limit: the
    problem as the file names it near its start (``unknown`` if not there), no solution."""
    try:
        with path.open("rb") as fh:
            head = fh.read(65536).decode("utf-8", "replace")
        named = json.loads(head[head.index('"problem"'):].split(",")[0].split(":", 1)[1]
                           .strip().rstrip("}").strip())
        spec = get_problem(str(named))
        problem, method = spec.name, method or spec.default_method
    except (OSError, ValueError, IndexError, MelOptError):
        problem = "unknown"
    return Result(instance=path.stem, problem=problem, method=method or "default",
                  termination=TerminationCondition.TIME_LIMIT,
                  solution_status=SolutionStatus.NONE, objective=None, solution={},
                  metrics={}, verification=None, solve_time_s=0.0,
                  solver=SolverInfo("none"), message=why, timings=timings)


def _solve_many(files: list[Path], method: str | None, as_json: bool, output: str | None,
                time_limit: float | None, seed: int, opts: dict[str, Any]) -> None:
    table = Table(title=f"{len(files)} instances")
    for col in ("instance", "problem", "method", "status", "objective", "key metrics",
                "verified", "time (s)"):
        table.add_column(col)
    results: list[dict[str, Any]] = []
    code = 0
    for f in files:
        try:
            res = _solve_one(f, method, time_limit, seed, opts)
        except MelOptError as exc:
            code = max(code, exc.exit_code)
            err.print(f"error: {exc}", markup=False)
            table.add_row(str(f), "-", method or "-", "[red]invalid[/]", "-", "-", "-", "-")
            results.append({"instance": str(f), "status": "invalid", "message": str(exc)})
            continue
        code = max(code, exit_code_of(res))
        spec = get_problem(res.problem)
        metrics = ", ".join(
            f"{k}={fmt(res.metrics[k], 4)}" for k in spec.key_metrics if k in res.metrics
        )
        style = STATUS_STYLE.get(res.status.value, "white")
        table.add_row(str(f), res.problem, res.method, f"[{style}]{res.status.value}[/]",
                      fmt(res.objective), metrics, verification_text(res),
                      f"{res.solve_time_s:.3g}")
        results.append(res.document())
    if output or as_json:
        data = dumps(results)
        if output:
            atomic_write(output, data + b"\n")
        if as_json:
            click.echo(data)
    else:
        out.print(table)
    raise SystemExit(code)


@cli.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
def validate_cmd(paths: tuple[str, ...]) -> None:
    """Check instance FILE(s) without solving; every problem is listed with its JSON path."""
    with guarded():
        files = instance_files(paths)
        if not files:
            raise UsageError("no instance files found")
        code = 0
        for f in files:
            try:
                inst = load_instance(f)
            except MelOptError as exc:
                code = max(code, exc.exit_code)
                err.print(f"error: {exc}", markup=False)
                continue
            out.print(f"{f}: valid {inst.problem} instance", markup=False)
        raise SystemExit(code)


@cli.command("methods")
@click.argument("problem", required=False)
@click.option("--options", "show_options", is_flag=True,
              help="Also list every method's options (shown anyway for one PROBLEM).")
def methods_cmd(problem: str | None, show_options: bool) -> None:
    """List the problems and their methods (the default one is marked *) and the options each
    method accepts (``--option KEY=VALUE``)."""
    with guarded():
        specs = [get_problem(problem)] if problem else list(all_problems().values())
        table = Table(title="mel_opt methods")
        for col in ("problem", "method", "kind", "proves optimality", "needs", "options",
                    "what it does"):
            table.add_column(col)
        for spec in specs:
            for m in spec.methods.values():
                mark = " *" if m.name == spec.default_method else ""
                table.add_row(spec.name, m.name + mark, m.kind, fmt(m.proves_optimality),
                              ", ".join(m.backends) or "-",
                              ", ".join(o.name for o in m.options) or "-", m.summary)
        out.print(table)
        out.print(presets_table(specs))
        if problem or show_options:
            out.print(options_table(specs))


def presets_table(specs: list[Any]) -> Table:
    """The generator presets of ``specs``: what ``melopt generate PROBLEM --preset`` takes."""
    table = Table(title="generator presets (melopt generate PROBLEM --preset NAME)")
    for col in ("problem", "preset", "what it draws"):
        table.add_column(col)
    for spec in specs:
        for i, name in enumerate(spec.presets):
            mark = " *" if i == 0 else ""
            table.add_row(spec.name, name + mark, spec.preset_docs.get(name, "-"))
    return table


def options_table(specs: list[Any]) -> Table:
    """Every declared option of the methods of ``specs``: what ``--option`` accepts."""
    table = Table(title="method options (--option KEY=VALUE)")
    for col in ("problem", "method", "option", "accepts", "default", "what it changes"):
        table.add_column(col)
    for spec in specs:
        for m in spec.methods.values():
            for o in m.options:
                table.add_row(spec.name, m.name, o.name, o.allowed, o.default_text, o.doc)
    if not table.rows:
        table.add_row("-", "-", "(no method of these problems has options)", "", "", "")
    return table
