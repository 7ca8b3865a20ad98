"""The ``melopt`` click group, error handling and the rich output shared by the commands.

Only the CLI imports click and rich. The commands live in the other modules of this package,
one per command family, and attach themselves to :data:`cli`, a :class:`LazyGroup` that imports
a module only when one of its commands is used. Every command runs inside
:func:`guarded`, which turns mel_opt's exceptions into one readable line on stderr and an
exit code (0 solved, 1 no solution, 2 invalid input or usage, 130 interrupted); ``--debug`` shows
the traceback instead.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import math
import os
import pkgutil
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from mel_opt.errors import InstanceError, MelOptError, SettingError, UsageError

if TYPE_CHECKING:
    from mel_opt.result import Result
    from mel_opt.settings import Setting


def _console(stderr: bool = False) -> Console:
    # piped output (CI logs, files) gets a wide fixed width instead of rich's 80 columns
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal else 160
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


out = _console()
err = _console(stderr=True)


class State:
    debug = False


def command_modules(path: Iterable[str]) -> list[str]:
    """Names of the command modules in the folders ``path``: all but ``app`` and ``_*``, sorted."""
    names = {m.name for m in pkgutil.iter_modules(list(path))}
    return sorted(n for n in names if n != "app" and not n.startswith("_"))


class LazyGroup(click.Group):
    """A click group whose commands are imported when first used (click's documented pattern,
    "Lazily Loading Subcommands": :meth:`get_command` and :meth:`list_commands`).

    The commands live in the modules of ``package`` (:func:`command_modules`) and attach
    themselves with ``@cli.command``. Looking up one command imports first the module named like
    it (``solve`` -> ``mel_opt.cli.solve``), every module only when the command is not there
    (``tau-scan`` is in ``tau.py``, an unknown name in none); listing them (``--help``, shell
    completion, the docs) imports every module. ``melopt --version`` looks up no command, so it
    imports neither the command modules nor the library behind them.
    """

    def __init__(self, *args: Any, package: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.package = package
        self._all_loaded = False

    def _modules(self) -> list[str]:
        return command_modules(importlib.import_module(self.package).__path__)

    def _load_all(self) -> None:
        if not self._all_loaded:
            for module in self._modules():
                importlib.import_module(f"{self.package}.{module}")
            self._all_loaded = True

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self._modules():
            importlib.import_module(f"{self.package}.{cmd_name}")
        if cmd_name not in self.commands:
            self._load_all()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_all()
        return super().list_commands(ctx)

    # click's usage errors (a bad option value, a missing argument, an unknown option or
    # command) become the one line every other error is; ``melopt`` alone still shows the help
    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            raise OneLineUsageError.of(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            raise OneLineUsageError.of(exc) from None


class OneLineUsageError(click.ClickException):
    """A click usage error shown as one line, ``error: MESSAGE (melopt CMD --help)``, exit
    code 2 (click itself prints the usage, a hint and the message on four lines)."""

    exit_code = 2

    @classmethod
    def of(cls, exc: click.UsageError) -> OneLineUsageError:
        hint = f" ({exc.ctx.command_path} --help)" if exc.ctx is not None else ""
        return cls(exc.format_message() + hint)

    def show(self, file: Any = None) -> None:
        err.print(f"error: {self.format_message()}", markup=False)


@click.group(cls=LazyGroup, package="mel_opt.cli",
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mel_opt", prog_name="melopt")
@click.option("--debug", is_flag=True, help="Show Python tracebacks instead of one-line errors.")
def cli(debug: bool) -> None:
    """mel_opt: resource allocation for Mobile Edge Learning.

    Exit codes: 0 solved, 1 no solution (infeasible, time limit, solver failure),
    2 invalid input or usage, 130 interrupted (Ctrl-C).
    """
    State.debug = debug


# The numeric option types of every command: ranges checked where click parses the value.
# click's FloatRange lets NaN through every bound (``nan < 0`` is false) and infinity through a
# one-sided range, so ``--time-limit nan`` would reach a solver. Every numeric option uses
# :func:`number` (finite, then its range) or an integer range; both are click range types, so
# the generated CLI reference shows their bounds and a bad value is click's usage error naming
# the option (exit code 2). tests/cli/test_numeric_options.py walks every option of every command.

#: Upper bound of ``--jobs``: more worker processes than this is a typo, not a machine.
MAX_JOBS = 4096
#: Seeds are non-negative integers (what numpy's generators accept), at most 2**63 - 1.
MAX_SEED = 2**63 - 1


class FiniteFloatRange(click.FloatRange):
    """A :class:`click.FloatRange` that refuses NaN and infinities, whatever its bounds."""

    name = "number"  # shown as NUMBER in --help: the CLI reference says it is finite

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        rv = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(rv, param, ctx)


def number(min: float | None = None, max: float | None = None, *, min_open: bool = False,
           max_open: bool = False) -> FiniteFloatRange:
    """A finite float option within ``[min, max]`` (open ends with ``min_open``/``max_open``)."""
    return FiniteFloatRange(min=min, max=max, min_open=min_open, max_open=max_open)


def positive() -> FiniteFloatRange:
    """A finite float option greater than 0 (times, rates, sizes)."""
    return number(min=0, min_open=True)


def count(min: int = 1, max: int | None = None) -> click.IntRange:
    """An integer option within ``[min, max]``."""
    return click.IntRange(min=min, max=max)


def seed_int() -> click.IntRange:
    """A seed: an integer in ``[0, 2**63 - 1]``."""
    return click.IntRange(min=0, max=MAX_SEED)


def job_count() -> click.IntRange:
    """A number of parallel workers: 1 to :data:`MAX_JOBS`."""
    return click.IntRange(min=1, max=MAX_JOBS)


def setting_type(s: Setting) -> click.ParamType:
    """The click type of a declared setting: its range for numbers (finite floats), its
    choices for text, text for a comma-separated list (the library parses it)."""
    if s.many or s.kind is str:
        return click.Choice(s.choices) if s.choices and not s.many else click.STRING
    if s.kind is int:
        low = None if s.minimum is None else int(s.minimum) + (1 if s.minimum_open else 0)
        return click.IntRange(min=low, max=None if s.maximum is None else int(s.maximum))
    return number(min=s.minimum, max=s.maximum, min_open=s.minimum_open)


def declared_options(*settings: Setting, short: dict[str, str] | None = None) -> Any:
    """Decorate a command with one click option per declared setting (:mod:`mel_opt.settings`):
    the flag, type, range, default and help come from the declaration, and the command
    receives each value under the setting's name (``short`` adds a one-letter flag to a
    setting by name). The library checks the values again when it makes its settings object,
    with the same declarations."""
    def decorate(func: Any) -> Any:
        for s in reversed(settings):
            flags = [f for f in ((short or {}).get(s.name), s.flag) if f]
            help_text = s.doc
            if s.default is None and s.nullable and s.default_doc:
                help_text += f" (default: {s.default_doc})"
            if s.kind is bool:
                func = click.option(*flags, s.name, is_flag=True, default=bool(s.default),
                                    help=help_text)(func)
                continue
            default = s.default_text if s.many and s.default is not None else s.default
            func = click.option(*flags, s.name, type=setting_type(s), default=default,
                                required=s.default is None and not s.nullable,
                                show_default=s.default is not None, help=help_text)(func)
        return func
    return decorate


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
    except SettingError as exc:  # the library names the setting, the command line its flag
        if State.debug:
            raise
        fail(exc.as_flag(), exc.exit_code)
    except MelOptError as exc:
        if State.debug:
            raise
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except OSError as exc:
        if State.debug:
            raise
        fail(io_error_text(exc), 2)
    except MemoryError:  # sizes are checked before the work (mel_opt.limits); this is the rest
        if State.debug:
            raise
        fail("out of memory: the instance and options need more memory than this process "
             "could get; try a smaller instance or fewer trials", 1)
    except Exception as exc:  # a bug: still one line, but say how to get the details
        if State.debug:
            raise
        fail(f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)", 1)


def io_error_text(exc: OSError) -> str:
    """A failed file operation as "PATH: reason" (a usage error: the path cannot be used).

    The path is the one the user gave, not the atomic writer's temporary name beside it.
    """
    from mel_opt.io.atomic import target_of_temp

    name = exc.filename2 if exc.filename2 is not None else exc.filename
    if name is None:  # a failed write or flush of a stream that names no file
        return f"{exc.strerror or exc} (errno {exc.errno}; rerun with --debug to see where)"
    path = target_of_temp(name) or name
    if isinstance(exc, FileExistsError):  # creating a folder where a file is
        return f"{path}: is a file, not a folder"
    return f"{path}: {exc.strerror or type(exc).__name__}"


def refuse_overwrite(output: str | None, *inputs: str | Path) -> None:
    """Raise UsageError if the output file ``output`` is one of the ``inputs`` (exit code 2).

    Compares the files themselves (``os.path.samefile``: symlinks and hard links too) when both
    exist, else the resolved paths.
    """
    if output is None:
        return
    out_path = Path(output)
    for inp in inputs:
        in_path = Path(inp)
        try:
            same = (os.path.samefile(out_path, in_path) if out_path.exists() and in_path.exists()
                    else out_path.resolve() == in_path.resolve())
        except OSError:
            continue
        if same:
            raise UsageError(f"output {output} is the input {inp}; writing it would replace the "
                             f"input: choose another output file")


SHOWN_ITEMS = 8  # elements of a list (or keys of a mapping) a table cell shows
SHOWN_FIELDS = 40  # rows of metrics and solution fields a result table shows


def fmt(value: Any, digits: int = 6) -> str:
    """One table cell: numbers to ``digits`` significant digits, sequences, arrays and mappings
    cut to their first :data:`SHOWN_ITEMS` entries with their length (the full values are in
    the result JSON), so a cell never grows with the instance."""
    import numpy as np  # loaded already by whatever made the value

    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        return f"{value:.{digits}g}"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return fmt(value.item(), digits)
    if isinstance(value, (list, tuple, np.ndarray)):
        shown = ", ".join(fmt(v, 4) for v in value[:SHOWN_ITEMS])
        more = f", ... ({len(value)} items)" if len(value) > SHOWN_ITEMS else ""
        return f"[{shown}{more}]"
    if isinstance(value, dict):
        items = list(itertools.islice(value.items(), SHOWN_ITEMS))
        shown = ", ".join(f"{k}: {fmt(v, 4)}" for k, v in items)
        more = f", ... ({len(value)} keys)" if len(value) > SHOWN_ITEMS else ""
        return f"{{{shown}{more}}}"
    return str(value)


STATUS_STYLE = {
    "optimal": "green",
    "locally_optimal": "green",
    "feasible": "yellow",
    "infeasible": "red",
    "time_limit": "yellow",
    "iteration_limit": "yellow",
    "error": "red",
}


def verification_text(res: Result) -> str:
    if res.verification is None:
        return "-"
    if res.verification.feasible:
        return f"[green]ok[/] ({res.verification.max_violation:.1e})"
    return f"[red]FAILED[/] ({res.verification.max_violation:.2e})"


def result_panel(res: Result, key_metrics: Sequence[str]) -> Table:
    """A two-column table of one result: status, objective, metrics, verification.

    Its size does not grow with the instance: per-learner metrics (lists, arrays) stay in the
    JSON, solution vectors show their first entries, and at most :data:`SHOWN_FIELDS` metric
    and solution rows are shown, then one row saying how many more the JSON holds.
    """
    import numpy as np

    t = Table(title=f"{res.instance}: {res.problem} / {res.method}", show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value")
    style = STATUS_STYLE.get(res.status.value, "white")
    t.add_row("status", f"[{style}]{res.status.value}[/]")
    t.add_row("objective", fmt(res.objective))
    fields = [(key, res.metrics[key]) for key in key_metrics if key in res.metrics]
    fields += [(key, value) for key, value in res.metrics.items()
               if key not in key_metrics and not isinstance(value, (list, dict, np.ndarray))]
    fields += [(f"solution.{key}", value) for key, value in res.solution.items()]
    for key, value in fields[:SHOWN_FIELDS]:
        t.add_row(key, fmt(value))
    if len(fields) > SHOWN_FIELDS:
        t.add_row("...", f"{len(fields) - SHOWN_FIELDS} more fields in the result JSON (--json)")
    t.add_row("verification", verification_text(res))
    t.add_row("solver", f"{res.solver.name} {res.solver.version}".strip())
    t.add_row("solve time", f"{res.solve_time_s:.4g} s")
    if res.timings:
        t.add_row("timings", ", ".join(f"{k} {v:.3g} s" for k, v in res.timings.items()))
    if res.message:
        t.add_row("note", res.message)
    return t


def info_table(title: str, rows: Sequence[tuple[str, str]]) -> Table:
    """A two-column table without header: field, value."""
    t = Table(title=title, show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value")
    for k, v in rows:
        t.add_row(k, v)
    return t


def method_list(text: str | None) -> list[str] | None:
    """The methods of a comma-separated option; None when it is not given or empty."""
    if not text:
        return None
    return [m.strip() for m in text.split(",") if m.strip()]


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(),
                    TimeRemainingColumn(), console=err, transient=False)


def run_with_progress(runner: Any, label: str, **kw: Any) -> Any:
    """Call ``runner(on_plan=..., on_result=..., **kw)`` under a progress bar on stderr.

    ``runner`` is a batch-like function of the library (:func:`mel_opt.batch.run_batch`,
    :func:`mel_opt.sweep.run_sweep`): it announces the number of jobs (and how many a resume
    skips) through ``on_plan`` and every finished result row through ``on_result``; failed rows
    are printed as they come.
    """
    from mel_opt.batch import is_failure

    with _progress() as progress:
        task = progress.add_task(label, total=None, failed=0)
        failed = 0

        def on_plan(total: int, skipped: int) -> None:
            progress.update(task, total=total, completed=skipped)
            if skipped:
                err.print(f"resuming: {skipped} of {total} already done", markup=False)

        def on_result(row: dict[str, Any]) -> None:
            nonlocal failed
            if is_failure(row):
                failed += 1
                progress.console.print(
                    f"[red]failed[/] {row['file'] or row['instance']} ({row['method'] or '-'}): "
                    f"{row['status']} {row['error']}".rstrip(), markup=True, highlight=False)
            progress.update(task, advance=1, failed=failed)

        try:
            return runner(on_plan=on_plan, on_result=on_result, **kw)
        except BaseException as stop:
            # Ctrl-C may land inside on_result, after the runner counted a row and before the
            # bar did: a stop that carries its report (BatchInterrupted, BatchStopped) sets the
            # bar's last frame to the results it kept
            report = getattr(stop, "report", None)
            if report is not None:
                progress.update(task, completed=len(report.rows))
            raise
