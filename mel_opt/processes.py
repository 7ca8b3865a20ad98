"""The process table: who is whose child, whether a process still lives, signals and sockets.

The local Flower deployment (:mod:`mel_opt.live.federation`), the throttle of its nodes
(:mod:`mel_opt.live.throttle`) and the clean-up of a local Ray (:mod:`mel_opt.ray_local`) end
or pause the processes they started and everything those started in turn. This module reads
the table they need through psutil, on Linux and macOS alike.

Identity: a process is its pid *and* its start time (:attr:`ProcInfo.start`, psutil's
``create_time()``). A pid reused by a new process gets a new start time, so a caller that
recorded a process with its start time never signals a stranger that later got the same pid:
it checks :func:`is_alive` (or :func:`start_time`) against the record first. The start time is
psutil's, seconds since the epoch on the system clock: should the clock be stepped (not slewed)
while a process is recorded, the process no longer matches its record and is left alone, the
safe side of the rule.

Cost: :func:`process_table` with ``roots`` reads the parent of every process in one pass (the
pass psutil's own ``Process.children`` makes) and the full entry only for the processes of the
trees asked for; the throttle reads it every 0.1 s, so the pass stays cheap.
``benchmarks/bench_process_table.py`` measures it against other ways of reading the table.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import psutil

__all__ = ["ProcInfo", "Sampler", "command_line", "descendants", "end_process_group", "is_alive",
           "listening_sockets", "parent_map", "pool_worker_init", "process_table", "send",
           "start_time", "tree_rss"]


@dataclass(frozen=True)
class ProcInfo:
    """One process as the table sees it.

    Attributes
    ----------
    ppid : int
        Parent pid.
    status : str
        psutil's status word: ``"running"``, ``"sleeping"``, ``"stopped"`` (by SIGSTOP),
        ``"zombie"``, ... (the ``psutil.STATUS_*`` constants).
    start : float | None
        Start time, seconds since the epoch (psutil's ``create_time()``); with the pid the
        identity of a process. ``None`` where the system does not tell it (then identity checks
        are skipped for that process).
    """

    ppid: int
    status: str
    start: float | None

    @property
    def stopped(self) -> bool:
        """Whether the process is stopped by a signal (SIGSTOP, SIGTSTP...)."""
        return self.status == psutil.STATUS_STOPPED

    @property
    def ended(self) -> bool:
        """Whether the process has exited (a zombie waiting for its parent, or dead)."""
        return self.status in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def _info(pid: int) -> ProcInfo | None:
    """A fresh :class:`ProcInfo` of ``pid``, or ``None`` if there is no such process."""
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            ppid, status = proc.ppid(), proc.status()
            try:
                start: float | None = proc.create_time()
            except psutil.AccessDenied:
                start = None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None  # gone (a zombie still answers: its status says so), or not readable
    return ProcInfo(ppid=int(ppid), status=str(status), start=start)


def _public_parent_map() -> dict[int, int]:
    """pid -> ppid through psutil's public ``process_iter``: about four times slower."""
    out = {}
    for proc in psutil.process_iter(["ppid"]):
        ppid = proc.info.get("ppid")
        if isinstance(ppid, int):
            out[proc.pid] = ppid
    return out


def _fast_parent_map() -> Callable[[], dict[int, int]] | None:
    # psutil's own one-pass reader behind Process.children (private, present since psutil
    # 5.3); with 530 processes it takes 4 ms against 14 ms for process_iter, which matters
    # at one read every 0.1 s. A psutil without it gets the public reader.
    reader = getattr(psutil, "_ppid_map", None)
    return reader if callable(reader) else None


def parent_map() -> dict[int, int]:
    """The parent of every visible process: pid -> ppid, read in one pass."""
    reader = _fast_parent_map()
    return dict(reader()) if reader is not None else _public_parent_map()


def _tree(roots: Iterable[int], parents: Mapping[int, int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        if pid != ppid:  # pid 0 is its own parent on some systems
            children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    stack = [pid for pid in roots if pid in parents]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(children.get(pid, ()))
    return found


def process_table(roots: Iterable[int] | None = None) -> dict[int, ProcInfo]:
    """The visible processes: pid -> :class:`ProcInfo`.

    Parameters
    ----------
    roots
        When given, only the processes of the trees under these pids (roots included), read
        after one pass over every process's parent: what :func:`descendants` needs, at a
        fraction of the cost of the whole table. ``None`` reads every process.

    Notes
    -----
    A process seen in the first pass and gone before its entry is read is left out; so is a
    descendant whose parent changed in between (it was orphaned, or its pid reused), so the
    trees are never joined through a stranger.
    """
    if roots is None:
        return {pid: info for pid in psutil.pids() if (info := _info(pid)) is not None}
    roots = set(roots)
    parents = parent_map()
    table = {}
    for pid in _tree(roots, parents):
        info = _info(pid)
        if info is not None and (pid in roots or info.ppid == parents[pid]):
            table[pid] = info
    return table


def descendants(roots: Iterable[int], table: Mapping[int, ProcInfo] | None = None
                ) -> set[int]:
    """The live processes of the trees under ``roots``, roots included.

    Parameters
    ----------
    roots
        Root pids; those no longer in the table are left out (their orphaned children have a
        new parent and are no longer found from them: callers that must end those too record
        the trees while they are intact, as the local federation does).
    table
        A :func:`process_table` to reuse (one read with these roots, or the whole table); read
        afresh when ``None``.

    Returns
    -------
    set of int
        The pids found, zombies included (:attr:`ProcInfo.ended` tells them apart).
    """
    roots = list(roots)
    if table is None:
        table = process_table(roots)
    return _tree(roots, {pid: info.ppid for pid, info in table.items()})


def start_time(pid: int) -> float | None:
    """The start time of ``pid`` in seconds since the epoch (``None`` if it is gone or unknown)."""
    info = _info(pid)
    return None if info is None else info.start


def command_line(pid: int) -> list[str] | None:
    """The command line of ``pid`` (program and arguments); ``None`` if gone or not readable."""
    try:
        return [str(part) for part in psutil.Process(pid).cmdline()]
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def tree_rss(root: int) -> int:
    """The resident memory of the tree under ``root`` (root included), in bytes: the sum of
    each live process's RSS (pages shared between them counted once a process, so an upper
    bound of what the tree holds)."""
    total = 0
    for pid in descendants([root]):
        try:
            total += int(psutil.Process(pid).memory_info().rss)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # ended since the table was read, or not ours to read
    return total


class Sampler:
    """Calls :meth:`sample` every ``every`` seconds in a daemon thread while its ``with``
    block runs: a watch on the process table (a peak, what was ever seen) kept beside the
    work it watches. A subclass provides :meth:`sample`; the first call comes at once and the
    thread is joined when the block ends (an exception in it included)."""

    every = 0.2  # seconds between two samples

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        """Look once (what a subclass watches)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.every):
                return


def is_alive(pid: int, start: float | None = None) -> bool:
    """Whether ``pid`` exists, has not exited and (with ``start``) is the same process.

    Parameters
    ----------
    pid
        The process id.
    start
        Its start time as recorded (:attr:`ProcInfo.start`); ``None`` checks the pid only.
    """
    info = _info(pid)
    if info is None or info.ended:
        return False
    return start is None or info.start == start  # a start no longer readable: not proven ours


def send(pid: int, sig: int) -> bool:
    """``os.kill`` that ignores processes that are gone or not ours; True if delivered.

    Never signals pid 0 or 1 (a process group, the init process) nor this process itself.
    Callers that recorded a start time check :func:`is_alive` first.
    """
    if pid <= 1 or pid == os.getpid():
        return False
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def end_process_group(proc: subprocess.Popen[Any], grace: float = 3.0) -> None:
    """End ``proc`` (started with ``start_new_session``) and its process group.

    SIGTERM, then SIGKILL after ``grace`` seconds; nothing once it has ended (it is reaped
    then, and only after that could its pid, the group's id, be reused).
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)  # a session leader: its group id is its pid
        except (ProcessLookupError, PermissionError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue


_PROTOCOLS = {(socket.AF_INET, socket.SOCK_STREAM): "tcp",
              (socket.AF_INET6, socket.SOCK_STREAM): "tcp6",
              (socket.AF_INET, socket.SOCK_DGRAM): "udp",
              (socket.AF_INET6, socket.SOCK_DGRAM): "udp6"}


def _connections(pid: int) -> list[Any]:
    proc = psutil.Process(pid)
    # net_connections since psutil 6.0; connections before (deprecated since)
    method = getattr(proc, "net_connections", None) or proc.connections
    return list(method(kind="inet"))


def listening_sockets(pids: Iterable[int]) -> list[tuple[int, str, str, int]]:
    """Listening sockets of ``pids``: ``(pid, protocol, address, port)``.

    ``protocol`` is ``tcp``, ``tcp6``, ``udp`` or ``udp6``. TCP sockets in LISTEN and bound
    UDP sockets with no peer count; a socket shared by several processes is reported once, for
    one of them. Processes that are gone or not readable are skipped.
    """
    found: dict[tuple[str, str, int], int] = {}
    for pid in pids:
        try:
            conns = _connections(pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for conn in conns:
            name = _PROTOCOLS.get((conn.family, conn.type))
            if name is None or not conn.laddr:
                continue
            # a UDP socket has no LISTEN state: bound with no peer is the listening kind
            listening = (conn.status == psutil.CONN_LISTEN if name.startswith("tcp")
                         else not conn.raddr)
            if listening:
                found.setdefault((name, str(conn.laddr[0]), int(conn.laddr[1])), pid)
    return [(pid, name, host, port) for (name, host, port), pid in found.items()]


# -- the workers of a process pool ------------------------------------------------------------
class _SigtermWaits:
    """A lock whose holder blocks SIGTERM until it has let the lock go (then a SIGTERM that
    came meanwhile acts)."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock

    def __enter__(self) -> Any:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            return self._lock.__enter__()
        except BaseException:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            raise

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._lock.__exit__(*exc)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lock, name)


def pool_worker_init() -> None:
    """Initializer of the workers of a :class:`multiprocessing.pool.Pool` that may be
    terminated: Ctrl-C is left to the parent (SIGINT ignored, no traceback per worker), and
    SIGTERM waits while the worker sends a result.

    ``Pool.terminate`` sends SIGTERM to every worker, then joins its task handler, which puts
    a sentinel through the result queue under the write lock the workers share with it. A
    worker ended while it held that lock (sending its result, or half of it) leaves the lock
    taken for good and ``terminate`` waits for ever: a parallel ``melopt batch`` stopped by a
    full disk hung so, now and then, when the second worker's result was on its way as the
    first one's stopped the batch. Here the worker blocks SIGTERM while it holds that lock,
    and the signal acts as soon as it lets the lock go, its result sent whole; a worker
    running a job or waiting for one still ends at once. Where the worker's queue cannot be
    found (another multiprocessing) or signals cannot be blocked, only SIGINT is ignored.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not hasattr(signal, "pthread_sigmask"):
        return
    import multiprocessing.pool

    code = getattr(getattr(multiprocessing.pool, "worker", None), "__code__", None)
    frame: Any = sys._getframe(1)  # the pool's worker loop called this initializer
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    queue: Any = None if frame is None else frame.f_locals.get("outqueue")
    lock = getattr(queue, "_wlock", None)
    if lock is not None:
        queue._wlock = _SigtermWaits(lock)
