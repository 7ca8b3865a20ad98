"""One wall-clock deadline per solve, shared by every loop that can run long.

``api.solve`` opens a deadline for the method it calls (:func:`limit`); the loops of our own
algorithms, the IPOPT and HiGHS adapters and multi-start drivers read it through
:func:`current` (or call :func:`check` between steps), so a time limit needs no extra parameter
threaded through every function. Limits nest: an inner limit never extends an outer one (a dab
solve that calls the mel-async ``exact`` method keeps the dab limit).

:func:`check` raises :class:`TimeLimitReached`, which ``api.solve`` turns into the status
``time_limit`` (or into the incumbent the exception carries, if any). A loop that holds an
incumbent catches it, or tests :meth:`Deadline.expired`, and returns the incumbent itself.

As a last resort :func:`hard_stop` arms a timer (``SIGALRM``, main thread only) that raises
:class:`TimeLimitReached` shortly after the deadline in whatever Python code is running, so a
loop that forgot to check cannot overrun the limit by more than the grace period (it cannot
interrupt a long call into C; the solver adapters have their own limits for those).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from mel_opt.errors import MelOptError

__all__ = [
    "Deadline",
    "TimeLimitReached",
    "check",
    "current",
    "hard_stop",
    "keep_incumbent",
    "limit",
    "process_start",
]

# The first moment this module ran: the fallback for :func:`process_start`.
IMPORTED_AT = time.perf_counter()


class TimeLimitReached(MelOptError):
    """The wall-clock limit passed before the method finished.

    Attributes
    ----------
    incumbent : object or None
        The best answer found so far, as the raiser's caller expects it (``api.solve``
        accepts a ``MethodOutput``), or None.
    """

    exit_code = 1

    def __init__(self, message: str = "time limit reached", incumbent: Any = None) -> None:
        super().__init__(message)
        self.incumbent = incumbent


@dataclass(frozen=True)
class Deadline:
    """A wall-clock limit of ``time_limit`` seconds counted from ``start``.

    Attributes
    ----------
    time_limit : float or None
        Seconds; None means no limit (every query then answers "never expires").
    start : float
        ``time.perf_counter()`` reading the limit counts from (default: now).
    """

    time_limit: float | None = None
    start: float = field(default_factory=time.perf_counter)

    @property
    def end(self) -> float:
        """``time.perf_counter()`` reading at which the limit passes (inf without a limit)."""
        return math.inf if self.time_limit is None else self.start + self.time_limit

    def remaining(self) -> float:
        """Seconds left (inf without a limit; never negative)."""
        return max(0.0, self.end - time.perf_counter())

    def expired(self) -> bool:
        """True once the limit has passed."""
        return time.perf_counter() >= self.end

    def check(self, what: str = "") -> None:
        """Raise :class:`TimeLimitReached` once the limit has passed; ``what`` names the step."""
        if self.expired():
            where = f" during {what}" if what else ""
            raise TimeLimitReached(f"time limit of {self.time_limit:g} s reached{where}")

    def within(self, time_limit: float | None) -> Deadline:
        """The earlier of this deadline and ``time_limit`` seconds from now."""
        if time_limit is None:
            return self
        now = time.perf_counter()
        if now + time_limit < self.end:
            return Deadline(time_limit, now)
        return self

    def seconds(self) -> float | None:
        """Remaining seconds for a solver option (None without a limit)."""
        return None if self.time_limit is None else self.remaining()


def process_start() -> float:
    """``time.perf_counter()`` reading of when this process started.

    The command line counts ``--time-limit`` from here, so interpreter start-up, imports and
    loading the instance are inside the limit the user asked for. Read from Linux's
    ``/proc/self/stat`` (start in clock ticks after boot) against ``/proc/uptime``; elsewhere,
    or if the reading is implausible, the moment mel_opt was imported.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as fh:
            uptime = float(fh.read().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
    except (OSError, ValueError, IndexError):
        return IMPORTED_AT
    now = time.perf_counter()
    if not 0.0 <= age <= now - IMPORTED_AT + 60.0:
        return IMPORTED_AT
    return min(IMPORTED_AT, now - age)


_NONE = Deadline(None, 0.0)
_CURRENT: ContextVar[Deadline] = ContextVar("mel_opt_deadline", default=_NONE)


def current() -> Deadline:
    """The deadline of the solve in progress (one without a limit outside any)."""
    return _CURRENT.get()


def check(what: str = "") -> None:
    """:meth:`Deadline.check` of the current deadline."""
    _CURRENT.get().check(what)


@contextlib.contextmanager
def limit(time_limit: float | None, start: float | None = None) -> Iterator[Deadline]:
    """Make ``time_limit`` seconds (from ``start``, default now) the current deadline inside
    the block, unless an enclosing deadline ends earlier."""
    outer = _CURRENT.get()
    inner = outer
    if time_limit is not None:
        began = time.perf_counter() if start is None else start
        if began + time_limit < outer.end:
            inner = Deadline(float(time_limit), began)
    token = _CURRENT.set(inner)
    try:
        yield inner
    finally:
        _CURRENT.reset(token)


_ARMED = threading.local()


class _DropTimeLimitRecords(logging.Filter):
    """Pyomo logs an ERROR before re-raising any exception from a rule; the guard's stop is
    not an error, and the result says why the method stopped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "stopped by the guard timer" not in record.getMessage()


_QUIET = _DropTimeLimitRecords()


def _log_handlers() -> list[logging.Handler]:
    return [*logging.getLogger("pyomo").handlers, *logging.getLogger().handlers]


# How long the guard waits before trying again when it lands inside an import.
_IMPORT_RETRY_S = 0.02


def _importing(frame: Any) -> bool:
    """True when ``frame`` runs inside an import: stopping there could leave a module half
    initialised (and Pyomo's lazy imports would remember it as unavailable)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class _GuardStop(BaseException):
    """The guard timer's stop while the block runs. A BaseException, as KeyboardInterrupt, so
    that no ``except Exception`` on the way (Pyomo's rule wrappers, availability probes)
    swallows it; :func:`hard_stop` turns it into :class:`TimeLimitReached` at its boundary."""

    def __init__(self, message: str, incumbent: Any = None) -> None:
        super().__init__(message)
        self.incumbent = incumbent


# What a method that holds an incumbent registered (keep_incumbent) for the guard timer.
_KEEPER: ContextVar[Callable[[], Any] | None] = ContextVar("melopt_incumbent", default=None)


@contextlib.contextmanager
def keep_incumbent(snapshot: Callable[[], Any]) -> Iterator[None]:
    """While the block runs, a stop by the guard timer (:func:`hard_stop`) carries
    ``snapshot()`` (the best answer so far, as ``api.solve`` expects it, or None) instead of
    nothing: a method that overruns its limit in a step that forgot to check still returns
    its incumbent."""
    token = _KEEPER.set(snapshot)
    try:
        yield
    finally:
        _KEEPER.reset(token)


def _raise_on_alarm(signum: int, frame: Any) -> None:
    if _importing(frame):
        signal.setitimer(signal.ITIMER_REAL, _IMPORT_RETRY_S)
        return
    keeper, incumbent = _KEEPER.get(), None
    if keeper is not None:
        try:
            incumbent = keeper()
        except Exception:  # noqa: BLE001 - the stop must happen; its incumbent is optional
            incumbent = None
    raise _GuardStop(
        f"time limit of {current().time_limit:g} s reached (stopped by the guard timer)",
        incumbent)


@contextlib.contextmanager
def hard_stop(deadline: Deadline, grace: float) -> Iterator[None]:
    """Raise :class:`TimeLimitReached` in the running code ``grace`` seconds after ``deadline``.

    Only where it is safe to own ``SIGALRM``: the main thread, no other handler installed, not
    already inside an armed block, and a finite deadline. Elsewhere the block runs unguarded
    (the cooperative checks still hold the limit).
    """
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and not getattr(_ARMED, "on", False)
        and math.isfinite(deadline.end)
        and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, None)
    )
    if not usable:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _raise_on_alarm)
    _ARMED.on = True
    handlers = _log_handlers()
    for handler in handlers:
        handler.addFilter(_QUIET)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(1e-3, deadline.remaining() + grace))
        yield
    except _GuardStop as exc:
        raise TimeLimitReached(str(exc), exc.incumbent) from None
    finally:
        while True:  # an alarm landing while disarming is moot: the block already ended
            try:
                signal.setitimer(signal.ITIMER_REAL, 0.0)
                signal.signal(signal.SIGALRM, previous)
                _ARMED.on = False
                for handler in handlers:
                    handler.removeFilter(_QUIET)
                break
            except _GuardStop:
                continue
