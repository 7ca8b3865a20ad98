"""What a long computation is doing now, for whoever shows progress.

Long work deep inside the library (a training run's cycles, a simulation's trials) says what
it is doing with :func:`report`; a command line that shows progress installs a hook with
:func:`reporting` for the duration of the work and shows the latest message (``melopt
reproduce`` shows it beside the entry being run). Without a hook a report costs one lookup.
The hook is held in a context variable, so concurrent work in other threads or contexts keeps
its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_HOOK: ContextVar[Callable[[str], None] | None] = ContextVar("melopt_activity", default=None)


@contextmanager
def reporting(hook: Callable[[str], None]) -> Iterator[None]:
    """Send every :func:`report` made inside the ``with`` block to ``hook``."""
    token = _HOOK.set(hook)
    try:
        yield
    finally:
        _HOOK.reset(token)


def report(what: str) -> None:
    """Say what the current computation is doing (a no-op when nobody listens)."""
    hook = _HOOK.get()
    if hook is not None:
        hook(what)


def listening() -> bool:
    """Whether a hook is installed (skip building a message nobody reads)."""
    return _HOOK.get() is not None
