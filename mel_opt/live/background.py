"""A loop on a daemon thread that leaves nothing behind: the lifecycle that the live run's
wall-clock helpers share (:class:`~mel_opt.live.throttle.Throttle`'s duty cycle,
:class:`~mel_opt.live.availability.Pauser`'s schedule).

A subclass gives the loop (:meth:`BackgroundLoop._run`, which returns when ``_halt`` is set)
and what undoes its effects (:meth:`BackgroundLoop._release`: continue what it stopped).
Started and stopped as a context manager or by :meth:`~BackgroundLoop.start` and
:meth:`~BackgroundLoop.stop`; ``stop`` joins the thread, then releases, also when the loop
failed (its exception is kept in ``error`` for the owner), and is safe to call twice.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Self


class BackgroundLoop:
    """The shared lifecycle; ``name`` is the thread's (seen in ``py-spy`` and tracebacks)."""

    name = "melopt-loop"

    def __init__(self) -> None:
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.error: Exception | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the loop on its thread (:meth:`_starting` first)."""
        if self._thread is not None:
            raise RuntimeError(f"this {type(self).__name__.lower()} is already running")
        self._starting()
        self._halt.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the loop, wait for its thread, then undo what it left (:meth:`_release`)."""
        self._halt.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        self._release()

    def _starting(self) -> None:
        """Called by :meth:`start` before the thread starts (nothing by default)."""

    def _run(self) -> None:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def _release(self) -> None:  # pragma: no cover - every subclass has its own
        raise NotImplementedError
