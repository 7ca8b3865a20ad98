"""Run local learner processes at a fraction of a core, and the process-tree helpers behind it.

A live run on one machine has every learner on the same cores, so they would all run at the
same speed; the papers' learners differ. :class:`Throttle` gives each node's process tree a
fraction ``speed`` of a core by a duty cycle of POSIX job-control signals: in every period
(0.1 s by default) the tree runs for ``speed * period`` and is stopped (``SIGSTOP``) for the
rest, then continued (``SIGCONT``). This needs no privileges and no cgroups, works on any
POSIX system, and slows everything the node does (its polling, its ClientApp, the SuperExec
between them) alike, which is what a slower device would do.

The tree is read again every period because a SuperNode starts a fresh ``flwr-clientapp``
process for every message. Only descendants of the given root pids are ever signalled (the
roots included), processes that exit between two periods are skipped, and every process the
throttle stopped is continued when it stops, also when its thread fails.

The process helpers (:func:`process_table`, :func:`descendants`, :func:`start_time`,
:func:`is_alive`) read ``/proc`` on Linux and fall back to ``ps`` elsewhere; the local
launcher (:mod:`mel_opt.live.launcher`) uses them to end every process it started, and
:func:`listening_sockets` (Linux only) to show that its processes listen on loopback only.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

__all__ = ["ProcInfo", "Throttle", "descendants", "end_process_group", "is_alive",
           "listening_sockets", "process_table", "send", "start_time"]

_PROC = "/proc"


@dataclass(frozen=True)
class ProcInfo:
    """One process as the table sees it.

    Attributes
    ----------
    ppid : int
        Parent pid.
    state : str
        One-letter state (``R``, ``S``, ``T`` stopped, ``Z`` zombie, ...).
    start : str | None
        Start time (clock ticks since boot on Linux), with the pid the identity of a process:
        a pid reused by a new process gets a new start time. ``None`` where it is unknown.
    """

    ppid: int
    state: str
    start: str | None


def _read_stat(pid: int) -> ProcInfo | None:
    """``/proc/<pid>/stat`` as a :class:`ProcInfo`, or ``None`` if the process is gone."""
    try:
        fd = os.open(f"{_PROC}/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    # the command name (field 2) is in parentheses and may itself contain spaces and ')'
    rest = raw.rpartition(")")[2].split()
    if len(rest) < 20:
        return None
    # fields after the name: state (3), ppid (4), ..., starttime (22), counted from 1
    return ProcInfo(ppid=int(rest[1]), state=rest[0], start=rest[19])


def _has_proc() -> bool:
    return os.path.exists(f"{_PROC}/self/stat")


def process_table() -> dict[int, ProcInfo]:
    """Every visible process: pid -> :class:`ProcInfo`.

    Reads ``/proc`` where it exists (Linux), otherwise asks ``ps`` (BSD, macOS), whose table
    has no start time (identity checks are then skipped).
    """
    table: dict[int, ProcInfo] = {}
    if _has_proc():
        for name in os.listdir(_PROC):
            if name.isdigit():
                info = _read_stat(int(name))
                if info is not None:
                    table[int(name)] = info
        return table
    out = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid=", "-o", "stat="],
                         capture_output=True, text=True, check=False, timeout=10).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            table[int(parts[0])] = ProcInfo(ppid=int(parts[1]), state=parts[2][:1], start=None)
    return table


def descendants(roots: Iterable[int], table: Mapping[int, ProcInfo] | None = None
                ) -> set[int]:
    """The live processes of the trees under ``roots``, roots included.

    Parameters
    ----------
    roots
        Root pids; those no longer in the table are left out (their orphaned children have a
        new parent and are no longer found from them: callers that must end those too record
        the trees while they are intact, as the launcher does).
    table
        A :func:`process_table` to reuse; read afresh when ``None``.
    """
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, info in table.items():
        children.setdefault(info.ppid, []).append(pid)
    found: set[int] = set()
    stack = [pid for pid in roots if pid in table]
    while stack:
        pid = stack.pop()
        if pid in found:
            continue
        found.add(pid)
        stack.extend(children.get(pid, ()))
    return found


def start_time(pid: int) -> str | None:
    """The start time of ``pid`` (``None`` if it is gone or unknown on this system)."""
    if not _has_proc():
        return None
    info = _read_stat(pid)
    return None if info is None else info.start


def is_alive(pid: int, start: str | None = None) -> bool:
    """Whether ``pid`` exists, is not a zombie and (with ``start``) is the same process."""
    if _has_proc():
        info = _read_stat(pid)
        if info is None or info.state in ("Z", "X"):
            return False
        return start is None or info.start == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, but belongs to someone else: not one of ours
        return False
    return True


def send(pid: int, sig: int) -> bool:
    """``os.kill`` that ignores processes that are gone or not ours; True if delivered."""
    if pid <= 1 or pid == os.getpid():  # never the init process or ourselves
        return False
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def end_process_group(proc: subprocess.Popen[bytes], grace: float = 3.0) -> None:
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


# -- sockets -----------------------------------------------------------------------------------
def _address(hex_addr: str, family: socket.AddressFamily) -> tuple[str, int]:
    host_hex, _, port_hex = hex_addr.partition(":")
    raw = bytes.fromhex(host_hex)
    # /proc/net prints the address as 32-bit words in host (little-endian) order
    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(family, raw), int(port_hex, 16)


def listening_sockets(pids: Iterable[int]) -> list[tuple[int, str, str, int]]:
    """Listening sockets of ``pids``: ``(pid, protocol, address, port)`` (Linux ``/proc``).

    TCP sockets in LISTEN and unconnected bound UDP sockets count; a socket shared by several
    processes is reported once, for one of them.
    """
    owner: dict[str, int] = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                owner[target[8:-1]] = pid
    found = []
    tables = (("tcp", socket.AF_INET, "0A"), ("tcp6", socket.AF_INET6, "0A"),
              ("udp", socket.AF_INET, "07"), ("udp6", socket.AF_INET6, "07"))
    for name, family, listening in tables:
        try:
            rows = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == listening and f[9] in owner:
                host, port = _address(f[1], family)
                found.append((owner[f[9]], name, host, port))
    return found


def _check_speeds(speeds: Mapping[int, float], period: float) -> dict[int, float]:
    if not (math.isfinite(period) and period > 0):
        raise ValueError(f"the throttle period must be a positive number of seconds, got {period}")
    out: dict[int, float] = {}
    for pid, speed in speeds.items():
        s = float(speed)
        if not (math.isfinite(s) and 0 < s <= 1):
            raise ValueError(f"a speed is a fraction of a core in (0, 1], got {speed!r} "
                             f"for pid {pid}")
        out[int(pid)] = s
    return out


class Throttle:
    """Run each root's process tree at a fraction of a core by a SIGSTOP/SIGCONT duty cycle.

    A daemon thread, started and stopped as a context manager (or by :meth:`start` and
    :meth:`stop`). In every ``period`` the tree of a root with speed ``s`` runs for
    ``s * period`` seconds and is stopped for the rest; speed 1 is never stopped. The share is
    a wall-clock one: a tree gets at most ``s`` of a core, less when the machine is busy.

    Parameters
    ----------
    speeds
        Root pid -> speed in (0, 1]. The root and every descendant it has at the moment the
        tree is stopped are throttled together.
    period
        Seconds of one duty cycle. Shorter periods track the share more smoothly but signal
        more often; 0.1 s keeps the pauses far below any network timeout of Flower.

    Raises
    ------
    ValueError
        A speed outside (0, 1] or a period that is not positive.
    """

    def __init__(self, speeds: Mapping[int, float], period: float = 0.1) -> None:
        self.speeds = _check_speeds(speeds, period)
        self.period = float(period)
        # a root's identity, so that a pid reused after the root exits is never signalled
        self._root_start = {pid: start_time(pid) for pid in self.speeds}
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # pid -> start time of every process stopped and not continued yet
        self._stopped: dict[int, str | None] = {}
        self.error: Exception | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> Throttle:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        """Start the duty cycle (nothing to do when every speed is 1)."""
        if self._thread is not None:
            raise RuntimeError("this throttle is already running")
        self._halt.clear()
        self._thread = threading.Thread(target=self._run, name="melopt-throttle", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the duty cycle and continue every process it stopped; safe to call twice."""
        self._halt.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        # the thread continues everything on its way out; again here in case it never ran
        self._continue_all()

    # -- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        throttled = sorted((s, pid) for pid, s in self.speeds.items() if s < 1)
        try:
            while throttled and not self._halt.is_set():
                t0 = time.monotonic()
                self._continue_stopped()
                table: Mapping[int, ProcInfo] | None = None
                for speed, root in throttled:
                    if self._halt.wait(max(0.0, t0 + speed * self.period - time.monotonic())):
                        return
                    # one table per period is enough: a process born later in the period runs
                    # free until the next one
                    table = process_table() if table is None else table
                    self._stop_tree(root, table)
                self._halt.wait(max(0.0, t0 + self.period - time.monotonic()))
        except Exception as exc:  # kept for the owner; the finally leaves nothing stopped
            self.error = exc
        finally:
            self._continue_all()

    def _stop_tree(self, root: int, table: Mapping[int, ProcInfo]) -> None:
        info = table.get(root)
        expected = self._root_start[root]
        if info is None or (expected is not None and info.start != expected):
            return  # the root has exited (and its pid may belong to someone else by now)
        pids = descendants([root], table)
        # recorded before they are signalled, so that a failure between the two never leaves
        # a process stopped without a record to continue it
        with self._lock:
            for pid in pids:
                self._stopped[pid] = table[pid].start
        for pid in pids:
            send(pid, signal.SIGSTOP)

    def _continue_stopped(self) -> None:
        with self._lock:
            stopped, self._stopped = self._stopped, {}
        for pid, start in stopped.items():
            if start is None or start_time(pid) == start:  # never a reused pid
                send(pid, signal.SIGCONT)

    def _continue_all(self) -> None:
        """Continue what was stopped, then every current descendant of the roots."""
        self._continue_stopped()
        try:
            table = process_table()
        except (OSError, subprocess.SubprocessError):
            return
        roots = [pid for pid, start in self._root_start.items()
                 if pid in table and (start is None or table[pid].start == start)]
        for pid in descendants(roots, table):
            if table[pid].state == "T" or not _has_proc():
                send(pid, signal.SIGCONT)
