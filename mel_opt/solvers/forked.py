"""Run one long call into C in a child process that can be stopped at a deadline.

Some solver calls spend seconds inside one C routine (a sparse factorisation in Ipopt, say)
where no option, callback or Python signal handler gets a chance to act, so a time limit
cannot be kept from inside the process. :func:`run_forked` runs such a call in a child started
with :mod:`multiprocessing`'s ``fork`` context and waits for its answer until the deadline
(plus a short grace); past it the child is killed. Either way the child is joined before
:func:`run_forked` returns, also when the wait is cut short by Ctrl-C, so no child and no
zombie is left behind. Work done so far survives through :class:`Progress`, a shared double
buffer the child publishes its latest iterate into, which the parent reads after the kill.

The child is a copy of the caller: nothing is re-imported and neither the function nor the
model is pickled (the compiled callbacks are simply there); only the answer is, sent back in
chunks over a one-way pipe so that a large one is still received under the deadline. The
child ignores Ctrl-C (the parent acts on it), flushes what it printed before answering and
leaves through multiprocessing's ``os._exit``, so the parent's atexit handlers never run in
it; the parent flushes its own Python and C output before the fork, so nothing buffered is
written twice.

Fork is offered only where it is available and safe enough: Linux, no other non-daemon thread
alive (a thread pool might hold a lock the child needs), no Ray in the process. Elsewhere the
caller runs the call in-process.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mel_opt.errors import SolverError, UsageError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = ["ChildOutcome", "Progress", "can_fork", "run_forked"]

# How long the parent waits past the deadline for the child to stop by itself (Ipopt's own
# limit and callback guard usually stop it at the next iteration) before killing it.
GRACE_S = 0.15

# The answer travels in messages of this many bytes; the deadline is checked between them.
_CHUNK = 1 << 20


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


def flush_stdio() -> None:
    """Flush Python's and C's standard streams (Ipopt prints through C's)."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # pragma: no cover - no libc symbols to reach
        pass


def _child(func: Callable[[], Any], sender: Connection) -> None:  # pragma: no cover - in the child
    """Body of the child: run ``func``, send ('ok', value) or the error back in chunks.

    Whatever goes wrong after ``func`` (a value that does not pickle, a closed pipe) ends the
    child with exit code 1 and no answer, which the parent reports as a crash.
    """
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills us
        try:
            payload: tuple[str, Any] = ("ok", func())
        except UsageError as exc:
            payload = ("usage", str(exc))
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            payload = ("error", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        with suppress(Exception):  # a stream that cannot be written must not lose the answer
            flush_stdio()
        data = memoryview(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
        for start in range(0, len(data), _CHUNK):
            sender.send_bytes(data[start:start + _CHUNK])
        sender.close()
    except BaseException:  # noqa: BLE001 - no traceback from multiprocessing, just the code
        raise SystemExit(1) from None


def _seconds_until(moment: float) -> float | None:
    """Seconds from now to the ``time.perf_counter()`` reading ``moment`` (None: never)."""
    return None if math.isinf(moment) else max(0.0, moment - time.perf_counter())


def _receive(receiver: Connection, until: float) -> tuple[bytes, bool]:
    """Everything the child sends until it closes its end (True) or until ``until`` (False)."""
    chunks: list[bytes] = []
    while True:
        if time.perf_counter() >= until:
            return b"".join(chunks), False
        if not receiver.poll(_seconds_until(until)):
            continue  # the clock is read again above
        try:
            chunks.append(receiver.recv_bytes())
        except (EOFError, OSError):  # closed, after the whole answer or mid-way (a crash)
            return b"".join(chunks), True


@contextmanager
def _children_allowed() -> Iterator[None]:
    """Let a daemonic process (a worker of the batch process pool) start the child.

    multiprocessing refuses a daemonic process children, lest they outlive it when it is
    ended with its parent; :func:`run_forked` kills and joins its child itself before it
    returns, so the refusal is lifted while the child starts.
    """
    import multiprocessing

    me = multiprocessing.current_process()
    if not me.daemon:
        yield
        return
    me.daemon = False
    try:
        yield
    finally:
        me.daemon = True


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

    Returns
    -------
    ChildOutcome
        The value, or ``killed`` when no complete answer arrived in time. The child has
        ended and been reaped either way.

    Raises
    ------
    UsageError
        ``func`` raised one in the child (bad options, say).
    SolverError
        ``func`` raised anything else, or the child ended without an answer (a crash; the
        message names the exit code or the signal).
    """
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    flush_stdio()  # else the child would inherit the unwritten output and write it again
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(func, sender), daemon=False)
    until = end + grace
    data, done, code = b"", False, None
    began = time.perf_counter()
    try:
        with _children_allowed():
            child.start()
        sender.close()  # the child's copy is then the only writer: its closing is our EOF
        data, done = _receive(receiver, until)
        if done:  # it has answered (or died) and leaves now; never waited for past the limit
            child.join(_seconds_until(max(until, time.perf_counter() + grace)))
    finally:
        sender.close()
        receiver.close()
        if child.pid is not None:  # started (Ctrl-C may cut the start short before the fork)
            if child.is_alive():
                child.kill()
            child.join()
            code = child.exitcode
            child.close()
    seconds = time.perf_counter() - began
    if not done:
        return ChildOutcome(None, False, True, seconds)
    try:
        kind, value = pickle.loads(data)
    except Exception:  # noqa: BLE001 - no (complete) answer: the child died
        raise SolverError(f"the solver's process ended without an answer "
                          f"({_describe_exit(code)})") from None
    if kind == "usage":
        raise UsageError(value)
    if kind == "error":
        raise SolverError(f"the solver failed in its process: {value}")
    return ChildOutcome(value, True, False, seconds)


def _describe_exit(code: int | None) -> str:
    """A child's exit code in words: multiprocessing gives -N for the end by signal N."""
    if code is None:  # pragma: no cover - never after join
        return "unknown end"
    if code >= 0:
        return f"exit code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:  # pragma: no cover - a signal without a name
        name = str(-code)
    return f"killed by {name}"
