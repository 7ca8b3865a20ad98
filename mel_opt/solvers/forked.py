"""Run one long call into C in a child process that can be stopped at a deadline.

Some solver calls spend seconds inside one C routine (a sparse factorisation in Ipopt, say)
where no option, callback or Python signal handler gets a chance to act, so a time limit
cannot be kept from inside the process. :func:`run_forked` runs such a call in a forked child:
the parent waits for the child's answer until the deadline (plus a short grace) and, past it,
kills the child. Work done so far survives through :class:`Progress`, a shared double buffer
the child publishes its latest iterate into, which the parent reads after the kill.

The child is a ``fork`` of the caller (no re-import, no pickling of the model: the compiled
callbacks are simply there), so this is offered only where fork is available and safe enough:
Linux, no other non-daemon thread alive (a thread pool might hold a lock the child needs),
no Ray in the process. Elsewhere the caller runs the call in-process.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.errors import SolverError, UsageError

__all__ = ["ChildOutcome", "Progress", "can_fork", "run_forked"]

# How long the parent waits past the deadline for the child to stop by itself (Ipopt's own
# limit and callback guard usually stop it at the next iteration) before killing it.
GRACE_S = 0.15

_READ_CHUNK = 1 << 20


def can_fork() -> bool:
    """True where :func:`run_forked` may be used: Linux (macOS forbids much of its system
    libraries in a forked child that does not exec), every thread but the calling one is a
    daemon (no thread pool whose locks a child could inherit held), and Ray is not loaded (its
    workers' gRPC threads do not survive a fork)."""
    if not sys.platform.startswith("linux") or "ray" in sys.modules:
        return False
    me = threading.current_thread()
    return all(t is me or t.daemon for t in threading.enumerate())


class Progress:
    """A vector of ``n`` floats the child publishes and the parent reads after the child ends.

    Two buffers alternate: the child writes the one not marked latest, then marks it, so a
    kill in the middle of a write leaves the previous complete vector readable.
    """

    def __init__(self, n: int) -> None:
        self.n = int(n)
        self._mem = mmap.mmap(-1, 8 * (2 * self.n + 2))  # anonymous and shared across fork
        header = np.frombuffer(self._mem, dtype=np.int64, count=2)
        header[:] = (-1, 0)  # index of the latest complete buffer, number of publications
        self._header = header
        self._bufs = np.frombuffer(self._mem, dtype=np.float64, offset=16).reshape(2, self.n)

    def publish(self, x: np.ndarray) -> None:
        """Store ``x`` as the latest vector (child side)."""
        slot = 1 if self._header[0] == 0 else 0
        self._bufs[slot] = x
        self._header[0] = slot
        self._header[1] += 1

    def latest(self) -> np.ndarray | None:
        """A copy of the latest complete vector, or None if none was published."""
        slot = int(self._header[0])
        return None if slot < 0 else self._bufs[slot].copy()

    @property
    def count(self) -> int:
        """How many vectors were published."""
        return int(self._header[1])


@dataclass(frozen=True)
class ChildOutcome:
    """How a forked call ended.

    Attributes
    ----------
    value : object
        What the call returned (None unless ``finished``).
    finished : bool
        The call returned within the deadline (plus grace) and its value arrived.
    killed : bool
        The parent stopped the child at the deadline.
    seconds : float
        Wall time from fork to the end of the wait.
    """

    value: Any
    finished: bool
    killed: bool
    seconds: float


def _flush_c_stdio() -> None:
    """Flush C's stdio buffers (Ipopt prints through them), as ``os._exit`` will not."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # pragma: no cover - no libc symbols to reach
        pass


def _child(func: Callable[[], Any], write_fd: int) -> None:  # pragma: no cover - in the child
    """Body of the child: run ``func``, send ('ok', value) or the error, leave at once."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills us
        try:
            payload: tuple[str, Any] = ("ok", func())
        except UsageError as exc:
            payload = ("usage", str(exc))
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            payload = ("error", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view):]
    except BaseException:  # noqa: BLE001 - nothing may escape a forked child
        code = 1
    finally:
        _flush_c_stdio()
        os._exit(code)


def _read_until(fd: int, end: float) -> tuple[bytes, bool]:
    """Everything written to ``fd`` until EOF (True) or until ``end`` (False)."""
    chunks: list[bytes] = []
    while True:
        wait = end - time.perf_counter()
        if wait <= 0:
            return b"".join(chunks), False
        ready, _, _ = select.select([fd], [], [], min(wait, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)


def _reap(pid: int, kill: bool) -> int:
    """Wait for the child (killing it first when asked); its wait status."""
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # pragma: no cover - ended on its own meanwhile
            pass
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:  # pragma: no cover - already reaped
            return 0
        except InterruptedError:  # pragma: no cover - retried by Python since 3.5
            continue


def run_forked(func: Callable[[], Any], end: float, grace: float = GRACE_S) -> ChildOutcome:
    """Call ``func()`` in a forked child; wait for its value until ``end`` + ``grace``.

    Parameters
    ----------
    func : callable
        Runs in the child; its return value must pickle. It sees a copy of this process
        (changes it makes to Python objects do not come back; publish progress through
        :class:`Progress`).
    end : float
        ``time.perf_counter()`` reading of the deadline (``math.inf``: wait as long as it
        takes).
    grace : float
        Seconds past ``end`` the child may still take to answer before it is killed.

    Raises
    ------
    UsageError
        ``func`` raised one in the child (bad options, say).
    SolverError
        ``func`` raised anything else, or the child ended without an answer (a crash).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    _flush_c_stdio()
    read_fd, write_fd = os.pipe()
    began = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - in the child
        os.close(read_fd)
        _child(func, write_fd)
    os.close(write_fd)
    done = killed = False
    status = 0
    try:
        data, done = _read_until(read_fd, end + grace if math.isfinite(end) else math.inf)
    finally:
        os.close(read_fd)
        killed = not done
        status = _reap(pid, kill=killed)
    seconds = time.perf_counter() - began
    if killed:
        return ChildOutcome(None, False, True, seconds)
    try:
        kind, value = pickle.loads(data)
    except Exception:  # noqa: BLE001 - no (complete) answer: the child died
        raise SolverError(f"the solver's process ended without an answer "
                          f"({_describe_status(status)})") from None
    if kind == "usage":
        raise UsageError(value)
    if kind == "error":
        raise SolverError(f"the solver failed in its process: {value}")
    return ChildOutcome(value, True, False, seconds)


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:  # pragma: no cover - a signal without a name
            name = str(sig)
        return f"killed by {name}"
    return f"exit code {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else "unknown end"
