"""The ``melopt`` click group, error handling and the rich output shared by the commands.

Only the CLI imports click and rich. Every command runs inside :func:`guarded`, which turns
mel_opt's exceptions into one readable line on stderr and the exit code of the design brief
(0 solved, 1 no solution, 2 invalid input or usage); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from mel_opt.errors import InstanceError, MelOptError
from mel_opt.result import Result


def _console(stderr: bool = False) -> Console:
    # piped output (CI logs, files) gets a wide fixed width instead of rich's 80 columns
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal else 160
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


out = _console()
err = _console(stderr=True)


class State:
    debug = False


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mel_opt", prog_name="melopt")
@click.option("--debug", is_flag=True, help="Show Python tracebacks instead of one-line errors.")
def cli(debug: bool) -> None:
    """mel_opt: resource allocation for Mobile Edge Learning.

    Exit codes: 0 solved, 1 no solution (infeasible, time limit, solver failure),
    2 invalid input or usage.
    """
    State.debug = debug


def fail(message: str, code: int = 2) -> None:
    err.print(f"error: {message}", markup=False)
    sys.exit(code)


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """Map exceptions to one stderr line and an exit code (no traceback unless --debug)."""
    try:
        yield
    except (click.exceptions.Exit, click.ClickException, SystemExit):
        raise
    except InstanceError as exc:
        if State.debug:
            raise
        err.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except MelOptError as exc:
        if State.debug:
            raise
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as exc:  # a bug: still one line, but say how to get the details
        if State.debug:
            raise
        fail(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)", 1)


def fmt(value: Any, digits: int = 6) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    if isinstance(value, (list, tuple)):
        shown = ", ".join(fmt(v, 4) for v in value[:8])
        return f"[{shown}{', ...' if len(value) > 8 else ''}]"
    return str(value)


STATUS_STYLE = {
    "optimal": "green",
    "locally_optimal": "green",
    "feasible": "yellow",
    "infeasible": "red",
    "time_limit": "yellow",
    "error": "red",
}


def verification_text(res: Result) -> str:
    if res.verification is None:
        return "-"
    if res.verification.feasible:
        return f"[green]ok[/] ({res.verification.max_violation:.1e})"
    return f"[red]FAILED[/] ({res.verification.max_violation:.2e})"


def result_panel(res: Result, key_metrics: Sequence[str]) -> Table:
    """A two-column table of one result: status, objective, metrics, verification."""
    t = Table(title=f"{res.instance}: {res.problem} / {res.method}", show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value")
    style = STATUS_STYLE.get(res.status.value, "white")
    t.add_row("status", f"[{style}]{res.status.value}[/]")
    t.add_row("objective", fmt(res.objective))
    for key in key_metrics:
        if key in res.metrics:
            t.add_row(key, fmt(res.metrics[key]))
    for key, value in res.metrics.items():
        if key not in key_metrics and not isinstance(value, (list, dict)):
            t.add_row(key, fmt(value))
    for key, value in res.solution.items():
        t.add_row(f"solution.{key}", fmt(value))
    t.add_row("verification", verification_text(res))
    t.add_row("solver", f"{res.solver.name} {res.solver.version}".strip())
    t.add_row("solve time", f"{res.solve_time_s:.4g} s")
    if res.message:
        t.add_row("note", res.message)
    return t
