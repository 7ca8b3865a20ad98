"""Run learners at a fraction of a core: the :class:`Throttle` and :func:`run_at_speed`.

A live run on one machine has every learner on the same cores, so they would all run at the
same speed; the papers' learners differ. :class:`Throttle` gives each node's process tree a
fraction ``speed`` of a core by a duty cycle of POSIX job-control signals: in every period
(0.1 s by default) the tree runs for ``speed * period`` and is stopped (``SIGSTOP``) for the
rest, then continued (``SIGCONT``). This needs no privileges and no cgroups, works on any
POSIX system, and slows everything the node does (its polling, its ClientApp, the SuperExec
between them) alike, which is what a slower device would do.

The tree is read again every period because a SuperNode starts a fresh ``flwr-clientapp``
process for every message. A tree held (:meth:`Throttle.hold`: its node is paused while its
learner is offline, :mod:`mel_opt.live.availability`) is left to its holder: the duty cycle
neither stops nor continues it until it is released, and :meth:`Throttle.stop` continues it
with the rest. Only descendants of the given root pids are ever signalled (the
roots included), processes that exit between two periods are skipped, and every process the
throttle stopped is continued when it stops, also when its thread fails. The process table
(trees, start times, signals) is :mod:`mel_opt.processes`.

In the simulation engine there is no process per learner to throttle (learners take turns in
a few Ray workers): :func:`run_at_speed` runs one learner's work in a forked child and
throttles that child alone (``tree=False``: no table is read), so the work's measured wall
time is that of the learner at its fraction of a core.
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from mel_opt.live.background import BackgroundLoop
from mel_opt.processes import ProcInfo, descendants, process_table, send, start_time

__all__ = ["CHILD_PERIOD_S", "Throttle", "ThrottledChildError", "run_at_speed"]

T = TypeVar("T")

#: Duty-cycle period of a throttled child of :func:`run_at_speed` [s]: short, so that a
#: learner's work of a few tenths of a second spans several periods.
CHILD_PERIOD_S = 0.02


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


class Throttle(BackgroundLoop):
    """Run each root's process tree at a fraction of a core by a SIGSTOP/SIGCONT duty cycle.

    A :class:`~mel_opt.live.background.BackgroundLoop` (a daemon thread, started and stopped
    as a context manager or by ``start`` and ``stop``; ``stop`` continues every process it
    stopped). In every ``period`` the tree of a root with speed ``s`` runs for
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
    tree
        True: each root with its descendants (read from the process table every period);
        False: the roots alone (a child that starts none: :func:`run_at_speed`).

    Raises
    ------
    ValueError
        A speed outside (0, 1] or a period that is not positive.
    """

    name = "melopt-throttle"

    def __init__(self, speeds: Mapping[int, float], period: float = 0.1,
                 tree: bool = True) -> None:
        super().__init__()
        self.speeds = _check_speeds(speeds, period)
        self.period = float(period)
        self.tree = tree
        # a root's identity, so that a pid reused after the root exits is never signalled
        self._root_start = {pid: start_time(pid) for pid in self.speeds}
        # pid -> (start time, its root) of every process stopped and not continued yet
        self._stopped: dict[int, tuple[float | None, int]] = {}
        self._held: set[int] = set()  # roots paused by their holder

    # -- lifecycle: start and stop are BackgroundLoop's ------------------------------------------
    def _release(self) -> None:
        # the thread continues everything on its way out; again here in case it never ran
        self._continue_all()

    def hold(self, root: int) -> None:
        """Leave ``root``'s tree to the caller, who stops it: the duty cycle no longer
        continues (nor stops) it, until :meth:`release`. Once this returns, no continue of the
        duty cycle is under way."""
        with self._lock:
            self._held.add(int(root))

    def release(self, root: int) -> None:
        """Give ``root``'s tree back to the duty cycle (the caller continued it)."""
        with self._lock:
            self._held.discard(int(root))

    # -- the loop ------------------------------------------------------------------------------
    def _run(self) -> None:
        throttled = sorted((s, pid) for pid, s in self.speeds.items() if s < 1)
        roots = [pid for _, pid in throttled]
        try:
            while throttled and not self._halt.is_set():
                t0 = time.monotonic()
                self._continue_stopped()
                table: Mapping[int, ProcInfo] | None = None
                for speed, root in throttled:
                    if self._halt.wait(max(0.0, t0 + speed * self.period - time.monotonic())):
                        return
                    with self._lock:
                        held = root in self._held
                    if held:
                        continue
                    if not self.tree:
                        self._stop_root(root)
                        continue
                    # one table per period is enough: a process born later in the period runs
                    # free until the next one
                    table = process_table(roots) if table is None else table
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
                self._stopped[pid] = (table[pid].start, root)
        for pid in pids:
            send(pid, signal.SIGSTOP)

    def _stop_root(self, root: int) -> None:
        start = start_time(root)
        expected = self._root_start[root]
        if start is None or (expected is not None and start != expected):
            return  # it has exited
        with self._lock:
            self._stopped[root] = (start, root)
        send(root, signal.SIGSTOP)

    def _continue_stopped(self, held_too: bool = False) -> None:
        """Continue what the duty cycle stopped, but the held trees (unless ``held_too``);
        under the lock, so that a tree held meanwhile is never continued after its holder
        stopped it."""
        with self._lock:
            keep = set() if held_too else self._held
            stopped = {p: v for p, v in self._stopped.items() if v[1] not in keep}
            self._stopped = {p: v for p, v in self._stopped.items() if v[1] in keep}
            for pid, (start, _) in stopped.items():
                if start is None or start_time(pid) == start:  # never a reused pid
                    send(pid, signal.SIGCONT)

    def _continue_all(self) -> None:
        """Continue what was stopped (held trees too), then every current descendant of the
        roots."""
        self._continue_stopped(held_too=True)
        try:
            table = process_table(self._root_start)
        except OSError:
            return
        roots = [pid for pid, start in self._root_start.items()
                 if pid in table and (start is None or table[pid].start == start)]
        for pid in descendants(roots, table):
            if table[pid].stopped:
                send(pid, signal.SIGCONT)


class ThrottledChildError(RuntimeError):
    """The work of :func:`run_at_speed` failed in its child (the message says how)."""


def run_at_speed(work: Callable[[], T], speed: float, period: float = CHILD_PERIOD_S) -> T:
    """``work()`` run at ``speed`` of a core: in a forked child that a :class:`Throttle`
    (``tree=False``) stops and continues, its result pickled back through a pipe.

    The child is a copy of this process (its data and imports come along), so ``work`` needs
    nothing sent; whatever it times with a wall clock (``time.perf_counter``) runs at the
    learner's speed, the stopped parts of each period included. Speed 1 runs ``work`` here.
    What ``work`` changes in its own process's memory stays in the child: it returns what the
    caller keeps. POSIX only (``os.fork``).

    Raises
    ------
    ThrottledChildError
        ``work`` raised in the child (its type and message), or the child died.
    ValueError
        ``speed`` outside (0, 1].
    """
    _check_speeds({0: speed}, period)
    if speed >= 1.0:
        return work()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the work, send the result, leave without cleaning up
        code = 0
        try:
            os.close(read_fd)
            try:
                payload = pickle.dumps((True, work()), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # the parent raises it
                payload = pickle.dumps((False, f"{type(exc).__name__}: {exc}"))
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    data = b""
    try:
        with Throttle({pid: speed}, period, tree=False) as throttle, \
                os.fdopen(read_fd, "rb") as pipe:
            data = pipe.read()
        if throttle.error is not None:
            raise ThrottledChildError(f"the throttle failed: {throttle.error}")
    finally:
        if not data:  # the parent was interrupted or the child died: no child outlives it
            send(pid, signal.SIGCONT)
            send(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if not data:
        raise ThrottledChildError("the throttled child ended without a result")
    ok, value = pickle.loads(data)
    if not ok:
        raise ThrottledChildError(str(value))
    return value  # type: ignore[no-any-return]
