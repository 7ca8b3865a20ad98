"""Learners that go offline and come back in a live run: ``--availability fedscale:PATH``.

Each learner follows one client of a FedScale behaviour trace, matched as the arena matches
them (:mod:`mel_opt.arena.availability`: by name, else by FedScale's modulo rule), on the
run's own clock: wall seconds since the run's learners started (a deployment), or the virtual
seconds of the in-process engine (:mod:`mel_opt.live.inprocess`). A learner offline does not
answer: nothing reaches the server from it, so the server treats it as any missing learner
(a synchronous round closes without it at its wait; FedBuff gives its work up when it is
overdue; a missing learner is probed again before each round and rejoins once it answers).
Nothing on the server's side knows the trace.

How a learner does not answer depends on the engine:

- the in-process engine (:class:`~mel_opt.live.inprocess.ClockExchange`): a learner offline at
  a message's virtual time, or one that goes offline before its training ends
  (:meth:`Schedule.answers`), sends nothing, as the engine's fault hooks lose a reply;
- a loopback deployment (``--engine local``, ``netns``): the node's whole process tree is
  paused (SIGSTOP) while its learner is offline and continued (SIGCONT) when it is back, by a
  :class:`Pauser` thread polling the schedule; the throttle's duty cycle leaves a paused node
  stopped (:meth:`mel_opt.live.throttle.Throttle.hold`), and every paused process is continued
  when the pauser stops, before the processes are ended (also on error and Ctrl-C).

:meth:`Schedule.changes` is the one rule that turns the trace and a time into decisions
(which learners to pause, which to resume); the rest only carries them out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.arena.availability import Availability, availability_for
from mel_opt.live.background import BackgroundLoop

__all__ = ["POLL_S", "Pauser", "Schedule", "learner_names", "schedule_for"]

#: Seconds between two looks of a :class:`Pauser` at its schedule (a learner is paused or
#: resumed at most this late).
POLL_S = 0.05


def learner_names(inst: Any, learners: int) -> tuple[str, ...]:
    """The names of a live run's ``learners`` (as its rows show them): the instance's learner
    or device names, else the learner indices as text."""
    names = getattr(inst, "learner_names", None) or getattr(inst, "device_names", None)
    if names is not None and len(names) >= learners:
        return tuple(str(n) for n in names[:learners])
    return tuple(str(k) for k in range(learners))


@dataclass(frozen=True)
class Schedule:
    """When each learner of a live run is online, on the run's clock [s].

    Attributes
    ----------
    availability : Availability
        The learners' intervals (learner k is row k).
    learners : int
    """

    availability: Availability
    learners: int

    @property
    def matched(self) -> str:
        """How the learners were matched to the trace's clients."""
        return self.availability.matched

    def offline(self, t: float) -> frozenset[int]:
        """The learners offline at time ``t``."""
        online = self.availability.online(range(self.learners), t)
        return frozenset(k for k in range(self.learners) if not online[k])

    def answers(self, k: int, t: float, seconds: float = 0.0) -> bool:
        """Whether learner ``k``, sent a message at ``t`` that takes it ``seconds``, answers:
        online at ``t`` and until ``t + seconds``."""
        if not 0 <= k < self.learners:
            return True  # a node of no learner: not the trace's
        return bool(self.availability.online([k], t)[0]) and \
            not bool(self.availability.lost([k], t, np.array([float(seconds)]))[0])

    def changes(self, paused: Collection[int], t: float) -> tuple[list[int], list[int]]:
        """At time ``t``, with ``paused`` learners paused now: (learners to pause, learners to
        resume), each in learner order."""
        off = self.offline(t)
        return sorted(off - set(paused)), sorted(set(paused) - off)


def schedule_for(spec: str, names: Sequence[str]) -> Schedule:
    """The :class:`Schedule` of learners ``names`` from ``spec`` (``fedscale:PATH``).

    Raises
    ------
    UsageError
        The trace cannot be read (one line naming the file, the client and the field).
    """
    return Schedule(availability_for(spec, names), len(names))


class Pauser(BackgroundLoop):
    """Pause and resume learners as a :class:`Schedule` says, on the wall clock.

    A :class:`~mel_opt.live.background.BackgroundLoop` (a daemon thread, started and stopped
    as a context manager or by ``start`` and ``stop``): every :data:`POLL_S` it applies
    :meth:`Schedule.changes` at the seconds since ``start`` (:meth:`step`). ``stop`` resumes
    every learner still paused, also when the thread failed (its exception is kept in
    ``error``).

    Parameters
    ----------
    schedule
    pause, resume
        ``(learner) -> None``: stop and continue that learner's node.
    clock
        Seconds, monotonic (``time.monotonic``; a test's own).
    """

    name = "melopt-pauser"

    def __init__(self, schedule: Schedule, pause: Callable[[int], None],
                 resume: Callable[[int], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.schedule = schedule
        self._pause, self._resume, self._clock = pause, resume, clock
        self.paused: set[int] = set()
        self._start = 0.0

    def _starting(self) -> None:
        self._start = self._clock()  # the run's time 0

    def step(self, t: float) -> None:
        """Apply the schedule at time ``t`` of the run: pause who went offline, resume who
        came back."""
        with self._lock:
            if self._halt.is_set() and self._thread is not None:
                return  # stopping: nothing is paused any more
            pause, resume = self.schedule.changes(self.paused, t)
            for k in resume:
                self._resume(k)
                self.paused.discard(k)
            for k in pause:
                self.paused.add(k)  # recorded first: stop() resumes it whatever happens
                self._pause(k)

    def _run(self) -> None:
        try:
            while not self._halt.is_set():
                self.step(self._clock() - self._start)
                self._halt.wait(POLL_S)
        except Exception as exc:  # kept for the owner; stop() resumes every learner
            self.error = exc

    def _release(self) -> None:
        """Resume every learner still paused (all are tried; the first failure is raised)."""
        with self._lock:
            paused, self.paused = sorted(self.paused), set()
        failed: Exception | None = None
        for k in paused:
            try:
                self._resume(k)
            except Exception as exc:  # the others are resumed all the same
                failed = failed or exc
        if failed is not None:
            raise failed
