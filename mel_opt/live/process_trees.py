"""Processes started in sessions of their own, and every descendant of theirs ended with them.

:class:`ProcessTrees` is the supervisor under mel_opt's Flower deployments
(:class:`~mel_opt.live.federation.LocalFederation`: a SuperLink and its SuperNodes;
:class:`~mel_opt.live.device.DeviceNode`: ``melopt node``'s SuperNode), and of any set of
processes that start processes of their own and must all be gone when it ends.

Why a monitor: a Flower process starts others (a SuperLink its SuperExec, which starts a
``flwr-serverapp`` per run; a SuperNode its SuperExec, which starts a ClientApp per message),
some of them in new sessions of their own, and a process whose parent was killed is adopted by
init: it can no longer be found from the tree it came from. So while the trees are intact a
daemon thread records every descendant of every process started here (its pid and start time,
:mod:`mel_opt.processes`, so that a reused pid is never signalled) with the root it came from,
every 0.25 s.

Ends: :meth:`ProcessTrees.close` (the context's exit, also on an exception or Ctrl-C, which
does not cut the clean-up short) stops the throttle if any (a stopped process would not act on
SIGTERM), stops the monitor, sends every recorded process still alive SIGTERM, then SIGKILL
after ``grace`` seconds (children born meanwhile are recorded and signalled too), ends the
process groups of the roots and removes the working directory ``home`` (their logs).

A subclass starts its processes in :meth:`ProcessTrees.start`: it opens ``home``
(:meth:`ProcessTrees.open_home`), starts each root (:meth:`ProcessTrees.spawn`, or its own
``Popen`` followed by :meth:`ProcessTrees.track`), starts the monitor
(:meth:`ProcessTrees.start_monitor`) and, to run trees at fractions of a core,
:meth:`ProcessTrees.throttle`; it lists its roots in :meth:`ProcessTrees._roots`.

Pauses: :meth:`ProcessTrees.pause` stops a root's whole recorded tree (SIGSTOP; the throttle
holds it meanwhile, :meth:`~mel_opt.live.throttle.Throttle.hold`), the monitor stops again
whatever is found running under a paused root, and :meth:`ProcessTrees.resume` continues it.
:meth:`ProcessTrees.close` continues every paused tree before it ends the processes.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self, TypeVar

from mel_opt.live.throttle import Throttle
from mel_opt.processes import (
    descendants,
    end_process_group,
    is_alive,
    listening_sockets,
    process_table,
    send,
    start_time,
)

__all__ = ["MONITOR_PERIOD_S", "Closable", "ProcessTrees"]

#: Seconds between two records of the descendants (a process that starts and ends within one
#: period is never seen, and needs no ending).
MONITOR_PERIOD_S = 0.25


class Closable(Protocol):
    """Something held for the processes and closed once they have ended."""

    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class ProcessTrees:
    """Processes started in their own sessions, every descendant recorded while the trees are
    intact, all of them ended by :meth:`close` (SIGTERM, then SIGKILL after ``grace``), and
    the working directory ``home`` removed. A context manager: :meth:`start` on entry,
    :meth:`close` on exit.

    Parameters
    ----------
    grace
        Seconds between SIGTERM and SIGKILL when the trees end.

    Attributes
    ----------
    home
        The working directory of the processes (``None`` while nothing runs).
    env
        The environment :meth:`spawn` starts processes with.
    """

    def __init__(self, grace: float = 5.0) -> None:
        self.grace = float(grace)
        self.home: Path | None = None
        self.env = dict[str, str]()
        self._seen: dict[int, tuple[float | None, int]] = {}  # pid -> (start time, its root)
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._monitor: threading.Thread | None = None
        self._throttle: Throttle | None = None
        self._paused: set[int] = set()  # roots whose trees are paused
        self._pausing = threading.Lock()  # one pause, resume or re-stop at a time
        self._held: list[Closable] = []  # what the processes need until they end (ports)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- what a subclass provides ----------------------------------------------------------------
    def start(self) -> None:
        """Start the processes (each subclass its own; :meth:`close` on failure)."""
        raise NotImplementedError

    def _roots(self) -> list[subprocess.Popen[bytes]]:
        """The processes started directly (each the root of its tree)."""
        return []

    def _forget(self) -> None:
        """Reset what lived in ``home`` once it is removed."""

    # -- what a subclass uses to start -----------------------------------------------------------
    def open_home(self, prefix: str) -> Path:
        """A fresh working directory ``home`` (a temporary one named ``prefix...``).

        Raises
        ------
        RuntimeError
            The processes are already running.
        """
        if self.home is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        self.home = Path(tempfile.mkdtemp(prefix=prefix))
        self._halt.clear()
        return self.home

    def spawn(self, argv: list[str], log: str | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` in ``home`` with ``env``, in a session of its own, and track it.

        ``log``: its output goes to ``home/LOG.log``; ``None``: to this process's own.
        """
        if self.home is None:
            raise RuntimeError("open_home() before spawn()")
        if log is None:
            proc = subprocess.Popen(argv, env=self.env, cwd=self.home,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        else:
            with open(self.home / f"{log}.log", "wb") as out:
                proc = subprocess.Popen(argv, env=self.env, cwd=self.home,
                                        stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self.track(proc.pid)
        return proc

    def hold(self, resource: C) -> C:
        """Keep ``resource`` (the ports its processes will bind, :class:`~mel_opt.live.
        federation.HeldPorts`) until the processes have ended, then close it."""
        self._held.append(resource)
        return resource

    def track(self, pid: int) -> None:
        """Record ``pid`` (a process started elsewhere) as the root of a tree to end."""
        with self._lock:
            self._seen[pid] = (start_time(pid), pid)

    def start_monitor(self) -> None:
        """Start the thread that records every descendant while the trees are intact."""
        self._monitor = threading.Thread(target=self._watch, name="melopt-process-trees",
                                         daemon=True)
        self._monitor.start()

    def throttle(self, fractions: Mapping[int, float], period: float) -> None:
        """Run each root's tree (root pid -> fraction of a core in (0, 1]) at its fraction
        (:class:`~mel_opt.live.throttle.Throttle`) until :meth:`close`."""
        self._throttle = Throttle(dict(fractions), period)
        self._throttle.start()

    def pause(self, root: int) -> None:
        """Stop ``root``'s whole tree (SIGSTOP) until :meth:`resume` (or :meth:`close`)."""
        with self._pausing:
            if self._throttle is not None:
                self._throttle.hold(root)  # first: the duty cycle never continues it after
            self._paused.add(root)
            self._signal_tree(root, signal.SIGSTOP)

    def resume(self, root: int) -> None:
        """Continue ``root``'s tree paused by :meth:`pause` (SIGCONT)."""
        with self._pausing:
            self._paused.discard(root)
            self._signal_tree(root, signal.SIGCONT)
            if self._throttle is not None:
                self._throttle.release(root)

    def paused(self) -> set[int]:
        """The roots paused now."""
        with self._pausing:
            return set(self._paused)

    def _signal_tree(self, root: int, sig: int) -> None:
        for pid, start in self.tree(root).items():
            if is_alive(pid, start):
                send(pid, sig)

    def _stop_paused(self) -> None:
        """Stop again what runs under a paused root (a child born as its tree was paused)."""
        with self._pausing:
            for root in self._paused:
                self._signal_tree(root, signal.SIGSTOP)

    # -- the end ---------------------------------------------------------------------------------
    def close(self) -> None:
        """End every process started (and its descendants) and remove ``home``.

        Idempotent. A Ctrl-C during the clean-up does not cut it short: it is finished, then
        the interrupt is raised again.
        """
        try:
            self._close()
        except KeyboardInterrupt:
            self._close()
            raise

    def _close(self) -> None:
        for root in self.paused():  # a stopped process would not see SIGTERM
            self.resume(root)
        if self._throttle is not None:  # first: a stopped process would not see SIGTERM
            self._throttle.stop()
            self._throttle = None
        self._halt.set()
        if self._monitor is not None:
            self._monitor.join()
            self._monitor = None
        try:
            self.terminate(self.scan(), self.grace)
        finally:  # whatever failed above, the processes we started ourselves end
            for proc in self._roots():
                if proc.poll() is None:
                    end_process_group(proc, grace=1.0)
            held, self._held = self._held, []
            for resource in held:  # their processes have ended
                resource.close()
            if self.home is not None:
                shutil.rmtree(self.home, ignore_errors=True)
                self.home = None
                self._forget()

    # -- processes -------------------------------------------------------------------------------
    def _watch(self) -> None:
        """Record every descendant while the trees are intact (detached ones included)."""
        while not self._halt.wait(MONITOR_PERIOD_S):
            self.scan()
            self._stop_paused()

    def scan(self) -> dict[int, float | None]:
        """Record the current descendants; return every recorded process still alive (pid ->
        start time)."""
        with self._lock:
            recorded = list(self._seen)
        table = process_table(recorded)  # the trees under every recorded process
        with self._lock:
            alive = {pid: (start, root) for pid, (start, root) in self._seen.items()
                     if pid in table and not table[pid].ended
                     and (start is None or table[pid].start == start)}
            for pid, (_, root) in list(alive.items()):
                for child in descendants([pid], table):
                    if child not in self._seen:
                        self._seen[child] = (table[child].start, root)
                        alive[child] = self._seen[child]
        return {pid: start for pid, (start, _) in alive.items()}

    def tree(self, root: int) -> dict[int, float | None]:
        """The live processes recorded under the root ``root`` (itself included)."""
        alive = self.scan()
        with self._lock:
            return {p: s for p, s in alive.items() if self._seen[p][1] == root}

    def terminate(self, victims: Mapping[int, float | None], grace: float,
                  signals: Sequence[int] = (signal.SIGTERM, signal.SIGKILL)) -> None:
        """Send each signal to every victim still alive (pid -> start time), waiting up to
        ``grace`` seconds after each; descendants born meanwhile are signalled too."""
        victims = dict(victims)
        for sig in signals:
            for pid, start in victims.items():
                if is_alive(pid, start):
                    send(pid, sig)
                    send(pid, signal.SIGCONT)  # a stopped process acts on SIGTERM only then
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                for proc in self._roots():
                    proc.poll()  # reap our children, so they do not linger as zombies
                # children born during the shutdown are recorded and signalled too
                victims = {**victims, **{p: s for p, s in self.scan().items()
                                         if p not in victims}}
                victims = {p: s for p, s in victims.items() if is_alive(p, s)}
                if not victims:
                    return
                time.sleep(0.05)

    def processes(self) -> dict[int, float | None]:
        """Every process started or seen as a descendant: pid -> start time."""
        with self._lock:
            return {pid: start for pid, (start, _) in self._seen.items()}

    def pids(self) -> list[int]:
        """The pids of :meth:`processes`."""
        return sorted(self.processes())

    def listening(self) -> list[tuple[int, str, str, int]]:
        """Listening sockets of the live processes (see :func:`listening_sockets`)."""
        return listening_sockets(self.scan())
