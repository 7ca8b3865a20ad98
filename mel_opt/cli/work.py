"""The learning commands' units of work on the terminal: ``--jobs``, ``--cluster``, and a rich
display of the units (done, kept from an earlier run, the slowest one running, the time left).

``melopt train``, ``melopt arena`` and ``melopt reproduce`` run their work as units
(:mod:`mel_opt.units`) kept in ``OUTPUT/units/``: :func:`units_run` sets where they run and
draws them while the block runs. No command is defined here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn
from rich.text import Text

from mel_opt import units
from mel_opt.cli.app import err, job_count


def execution_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-j/--jobs`` and ``--cluster`` (what :func:`units_run` takes)."""
    f = click.option(
        "--cluster", default=None, metavar="auto|HOST:PORT",
        help="Run the units on a Ray cluster: auto (the one `ray start` runs on this "
             "machine) or its address (mel_opt installed on every node).")(f)
    return click.option(
        "-j", "--jobs", type=job_count(), default=None,
        help="Worker processes on this machine that run the units (default: one per CPU, "
             "at most one per unit).")(f)


class UnitsDisplay:
    """A :class:`mel_opt.units.Progress` drawn as a rich bar: units done of all, how many an
    earlier run kept, the slowest unit running and how long it has run, the time left."""

    def __init__(self, label: str, progress: Progress | None = None,
                 workers: int = 1) -> None:
        self.label, self.workers = label, max(1, workers)
        self.total = self.kept = self.done = 0
        self.running: dict[str, float] = {}
        self.seconds: list[float] = []
        self.progress = progress
        self.task: Any = None
        self.foreign = False
        #: Starts the display's own bar (once, when the first units are planned)
        self.start: Callable[[], Any] | None = None

    # the units.Progress protocol
    def planned(self, total: int, done: int) -> None:
        if self.start is not None:
            start, self.start = self.start, None
            start()
        self.total += total
        self.kept += done
        self.done += done
        self._draw()

    def started(self, label: str) -> None:
        self.running[label] = time.monotonic()
        self._draw()

    def finished(self, label: str, seconds: float) -> None:
        self.running.pop(label, None)
        self.seconds.append(seconds)
        self.done += 1
        self._draw()

    def slowest(self) -> str:
        """The unit running longest, and for how long."""
        if not self.running:
            return ""
        label, since = min(self.running.items(), key=lambda kv: kv[1])
        return f"slowest running: {label} ({units.fmt_seconds(time.monotonic() - since)})"

    def left(self) -> str:
        left = units.eta(self.seconds, self.total - self.done, self.workers)
        return "" if left is None else f"~{units.fmt_seconds(left)} left"

    def state(self) -> str:
        """Kept units, the time left and the slowest unit running, in a line."""
        parts = [f"{self.kept} kept" if self.kept else "", self.left(), self.slowest()]
        return " · ".join(p for p in parts if p)

    def _draw(self) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, total=self.total or None, completed=self.done)
            if self.foreign:  # another command's bar: the state in the description
                self.progress.update(self.task, description=f"{self.label} {self.state()}")


class _StateColumn(ProgressColumn):
    """Kept units, the slowest one running and the time left (redrawn at every refresh)."""

    def __init__(self, display: UnitsDisplay) -> None:
        super().__init__()
        self.display = display

    def render(self, task: Any) -> Text:
        return Text(self.display.state(), style="dim")


def resolved_jobs(jobs: int | None) -> int:
    """``--jobs``, else one per CPU this process may use."""
    from mel_opt.training.run import available_cpus

    return jobs if jobs is not None else available_cpus()


@contextlib.contextmanager
def units_run(out_dir: str | Path, label: str, jobs: int | None, cluster: str | None,
              bar: Progress | None = None) -> Iterator[UnitsDisplay]:
    """Inside the block, the library's units run on ``jobs`` processes or the ``cluster``, are
    kept in ``OUT_DIR/units``, and are drawn on stderr (as a line of ``bar`` where the command
    draws one already); after it, one line says how many an earlier run had kept."""
    if cluster is not None:  # nothing listening there: one line before any work
        units.check_address(cluster)
    display = UnitsDisplay(label, workers=resolved_jobs(jobs))
    store = Path(out_dir) / "units"
    ex = units.Execution(jobs=jobs, cluster=cluster, store=str(store), progress=display)
    with contextlib.ExitStack() as stack:
        display.foreign = bar is not None
        if bar is None:  # drawn from the first units planned: a refusal before any work
            own = Progress(  # prints its one line alone, with no bar's blank line before it
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                _StateColumn(display), console=err, transient=True)
            display.start = lambda: stack.enter_context(own)
            bar = own
        display.progress, display.task = bar, bar.add_task(label, total=None)
        stack.enter_context(units.using(ex))
        yield display
    if display.kept:
        err.print(f"resumed: {display.kept} of {display.total} units were already done "
                  f"(kept in {store})", markup=False)
