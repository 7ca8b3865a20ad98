"""The second core's share of med's branch and bound: the primal search beside the branching.

On a machine where this process may use two or more cores, the branch and bound does not stop
branching for its iterated local search. Right after the greedy start (before the root bound,
which takes seconds on large instances and would leave the second core idle) it forks a
companion process that runs the primal heuristics (the local search from the greedy start,
then rounds of iterated local search, each from the best allocation either process knows)
while the parent computes the root bound and then branches. Once the root bound is there the
parent hands over the root master's rounding and the root's cover (their own mailboxes), which
the companion polishes first. The two exchange incumbents
through two shared-memory mailboxes (a task per learner and the value); each side values what
it receives again with its own evaluator, so nothing the other side sends is taken on trust.
The parent stops and reaps the companion when branching ends (proof or deadline), also on an
error or Ctrl-C; the companion ends by itself at the deadline.

A mailbox is a sequence lock over an anonymous shared mapping: the writer makes the sequence
odd, writes, makes it even; the reader copies between two equal even readings. One writer per
mailbox.

The companion is not used where forking is unsafe (:func:`mel_opt.solvers.forked.can_fork`),
in a daemonic process (a worker of the batch pool, whose jobs already fill the cores) or
where only one core is available; the search then runs its primal heuristics first and
branches after, as on one core.
"""

from __future__ import annotations

import math
import mmap
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from mel_opt.solvers import forked

__all__ = ["Companion", "Mailbox", "available"]

# How long ``stop`` waits for the companion to end by itself after being told to, before
# killing it.
STOP_GRACE_S = 0.2


def available() -> bool:
    """Whether a companion may be started here (see the module docstring)."""
    if not forked.can_fork() or multiprocessing.current_process().daemon:
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux, where can_fork is False anyway
        cores = os.cpu_count() or 1
    return cores >= 2


class Mailbox:
    """An allocation (task per learner) and its value, shared across a fork."""

    def __init__(self, n: int) -> None:
        self._mem = mmap.mmap(-1, 8 * (n + 2))
        self._seq = np.frombuffer(self._mem, dtype=np.int64, count=1)
        self._data = np.frombuffer(self._mem, dtype=np.float64, offset=8, count=n + 1)
        self._seq[0] = 0
        self._data[0] = math.inf

    def put(self, value: float, assign: np.ndarray) -> None:
        """Store an allocation and its value (the mailbox's one writer)."""
        self._seq[0] += 1  # odd: a write is under way
        self._data[0] = value
        self._data[1:] = assign
        self._seq[0] += 1

    @property
    def version(self) -> int:
        """How many allocations were stored."""
        return int(self._seq[0]) // 2

    def get(self) -> tuple[int, float, np.ndarray] | None:
        """(version, value, allocation) of the latest complete write; None before the first."""
        while True:
            before = int(self._seq[0])
            if before == 0:
                return None
            if before % 2:
                time.sleep(0)  # the writer is mid-way; it takes microseconds
                continue
            copy = self._data.copy()
            if int(self._seq[0]) == before:
                return before // 2, float(copy[0]), copy[1:].astype(np.int64)


class Companion:
    """A forked process running ``work(companion)`` until it returns or the parent stops it.

    In the companion, :meth:`publish` sends an allocation to the parent and :meth:`incoming`
    reads the parent's latest; in the parent, :meth:`offer` sends one and :meth:`received`
    reads the companion's latest (each once per new version). The parent also
    :meth:`suggest` s starting points (not valued) that the companion polishes
    (:meth:`suggestion`).
    """

    def __init__(self, n: int) -> None:
        self.to_parent, self.to_child, self.starts = Mailbox(n), Mailbox(n), Mailbox(n)
        # the root's hand-over: its master's rounding, then its cover's (written last: the
        # signal), each with the root bound as its value
        self.root_rounding, self.root_cover = Mailbox(n), Mailbox(n)
        self._read = {box: 0 for box in (self.to_parent, self.to_child, self.starts,
                                         self.root_rounding, self.root_cover)}  # versions seen
        self._process: Any = None

    # -- the companion's side -----------------------------------------------------------------
    def publish(self, value: float, assign: np.ndarray) -> None:
        self.to_parent.put(value, assign)

    def incoming(self) -> tuple[float, np.ndarray] | None:
        """The parent's allocation, if it sent a new one since the last call."""
        return self._fresh(self.to_child)

    def suggestion(self) -> np.ndarray | None:
        """The parent's starting point, if it suggested a new one since the last call."""
        got = self._fresh(self.starts)
        return None if got is None else got[1]

    def root_starts(self) -> tuple[float, list[np.ndarray]] | None:
        """The root bound and the root's starting points (its master's rounding, if any, then
        its cover's), once the parent has handed them over (None before, and after the first
        call that returned them)."""
        cover = self._fresh(self.root_cover)
        if cover is None:
            return None
        rounding = self._fresh(self.root_rounding)
        return cover[0], ([] if rounding is None else [rounding[1]]) + [cover[1]]

    # -- the parent's side --------------------------------------------------------------------
    def offer(self, value: float, assign: np.ndarray) -> None:
        self.to_child.put(value, assign)

    def hand_root(self, bound: float, rounding: np.ndarray | None, cover: np.ndarray) -> None:
        """Hand the root's starting points to a companion started before the root bound."""
        if rounding is not None:
            self.root_rounding.put(bound, rounding)
        self.root_cover.put(bound, cover)  # last: the companion reads both once this is there

    def suggest(self, assign: np.ndarray) -> None:
        self.starts.put(math.nan, assign)

    def received(self) -> tuple[float, np.ndarray] | None:
        """The companion's allocation, if it published a new one since the last call."""
        return self._fresh(self.to_parent)

    def _fresh(self, box: Mailbox) -> tuple[float, np.ndarray] | None:
        got = box.get()
        if got is None or got[0] <= self._read[box]:
            return None
        self._read[box] = got[0]
        return got[1], got[2]

    def start(self, work: Callable[[Companion], None]) -> None:
        """Fork the companion; it runs ``work(self)`` and leaves without the parent's atexit
        handlers (multiprocessing ends a forked child with ``os._exit``)."""
        ctx = multiprocessing.get_context("fork")
        forked.flush_stdio()  # else the child would write the parent's buffered output again
        self._process = ctx.Process(target=_run, args=(work, self), daemon=True)
        self._process.start()

    def stop(self) -> None:
        """End the companion (killed if it does not end at once) and reap it; idempotent."""
        proc, self._process = self._process, None
        if proc is None:
            return
        if proc.is_alive():
            proc.terminate()
            proc.join(STOP_GRACE_S)
            if proc.is_alive():
                proc.kill()
        proc.join()
        proc.close()


def _run(work: Callable[[Companion], None], box: Companion) -> None:  # pragma: no cover - child
    """The companion's body: Ctrl-C is the parent's to handle; any error just ends it (the
    parent goes on without its help)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        work(box)
    except BaseException:  # noqa: BLE001 - the parent's answer does not depend on ours
        raise SystemExit(1) from None
