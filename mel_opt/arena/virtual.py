"""The learners of an asynchronous scheme on the arena's virtual clock.

:class:`VirtualWorkers` is the third carrier of FedBuff's server loop
(:func:`mel_opt.schemes.fedbuff.run`, beside Flower's grid and the in-process learners of a
live run): a learner pushed work at virtual time ``t`` answers at ``t`` plus its busy time for
the passes its scheme's work plan gives it (:class:`~mel_opt.schemes.base.WorkPlan`: FedBuff's
fixed work, staggered's work to its slot) on the problem's work clock (with the run-to-run
noise of the clock), and each pull moves the clock to the next answer. Nothing is ever late
(the clock cannot lose a learner unless the run's availability takes it offline), so without
availability :meth:`VirtualWorkers.overdue` is always empty.

Learners started from the same global model are trained together, as one batched step of the
emulator's local SGD: when the first of them is pulled, or when the model changes
(:meth:`VirtualWorkers.stepped`), whichever comes first. The random draws follow one order
whatever happens: each push draws its busy time's noise, each training its minibatches, and
the loop's choice of the next learner (:meth:`VirtualWorkers.pick`: at random among the idle,
as FedBuff's server samples its clients) comes before the push it starts.

With the run's availability (:mod:`mel_opt.arena.availability`) the learners picked are
those online (when none of the idle is and nobody is at work, the clock moves to the first to
come back); a learner that goes offline before it answers is reported given up
(:meth:`VirtualWorkers.overdue`) at the moment it leaves, its work discarded, and it answers
nothing until it is back online, when it returns to the idle (as a late answer, whose update
the server does not take).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from mel_opt.arena.runner import Run, Tally, Work, model_bytes, train_from, work_for
from mel_opt.schemes.base import WorkPlan
from mel_opt.schemes.fedbuff import Model, Update

__all__ = ["VirtualWorkers"]

_ANSWER, _GONE, _BACK, _WAKE = range(4)
#: A learner that leaves at t is looked for online again from t + this [s] (its interval
#: includes its end).
_AFTER = 1e-6


class VirtualWorkers:
    """FedBuff's learners on the virtual clock of ``run`` (module docstring).

    Attributes
    ----------
    now : float
        The virtual time of the last answer pulled [s].
    tally : Tally
        What the run spent so far: model bytes moved (one copy down per push, one up per
        answer), and the busy learner-seconds and sample-updates of the answers pulled.
    """

    def __init__(self, run: Run, plan: WorkPlan) -> None:
        self.run = run
        self.plan = plan
        self.now = 0.0
        self.tally = Tally(model_bytes(run.init))
        # (time, seq, node, busy seconds, sample-updates, kind): kind ANSWER, or with the
        # run's availability GONE (left mid-work), BACK (online again), WAKE (a pick may start)
        self._events: list[tuple[float, int, int, float, float, int]] = []
        self._seq = 0
        # pushed, not trained: (node, start, its work)
        self._untrained: list[tuple[int, Model, Work]] = []
        self._version = 0  # the version of the model pushed since the last step
        self._trained: dict[int, Model] = {}
        self._first = True
        self._gone: list[int] = []

    def _event(self, at: float, node: int, busy: float, updates: float, kind: int) -> None:
        heapq.heappush(self._events, (at, self._seq, node, busy, updates, kind))
        self._seq += 1

    def pick(self, idle: Sequence[int], n: int) -> list[int]:
        """The ``n`` learners that start: the first time ``n`` of them at random without
        replacement, then one at a time, each uniformly among the idle (in learner order);
        with the run's availability, among those online (module docstring)."""
        pool = np.asarray(sorted(idle), dtype=np.int64)
        avail = self.run.availability
        if avail is not None:
            if not self._events:  # nobody at work: the clock moves to the first back online
                first = float(avail.next_online(pool, self.now).min(initial=np.inf))
                self.now = first if np.isfinite(first) else self.now
            online = pool[avail.online(pool, self.now)]
            if online.size < pool.size and self._events:  # the rest may start when back
                back = float(avail.next_online(pool, self.now).min(initial=np.inf))
                if self.now < back < np.inf:
                    self._event(back, -1, 0.0, 0.0, _WAKE)
            pool, n = online, min(n, online.size)
            if not n:
                return []
        if self._first:
            self._first = False
            return [int(k) for k in pool[self.run.rng.choice(pool.size, n, replace=False)]]
        return [int(self.run.rng.choice(pool)) for _ in range(n)]

    def push(self, node: int, model: Model, version: int) -> None:
        run = self.run
        ids = np.array([node])
        work = work_for(run, ids, self.plan.passes(node, self.now))
        busy = float(run.clock.noisy(ids, run.clock.seconds(ids, work.passes), run.rng)[0])
        left = np.inf if run.availability is None else float(run.availability.left(ids,
                                                                                    self.now)[0])
        if left < busy:  # offline before it answers
            self._event(self.now + left, node, left, 0.0, _GONE)
        else:
            self._event(self.now + busy, node, busy, float(work.updates[0]), _ANSWER)
        self.tally.moved += self.tally.model_bytes
        self._untrained.append((node, model, work))
        self._version = version

    def pull(self) -> list[tuple[int, Update]]:
        if not self._events:
            return []
        self.now, _, node, busy, updates, kind = heapq.heappop(self._events)
        t = self.tally
        if kind == _WAKE:
            return []
        if kind == _BACK:  # online again: a late answer returns it to the idle
            return [(node, None)]
        if kind == _GONE:  # its work is lost: counted busy until it left, then back later
            assert self.run.availability is not None
            t.busy_s += busy
            t.dropped += 1
            self._untrained = [u for u in self._untrained if u[0] != node]
            self._trained.pop(node, None)
            self._gone.append(node)
            back = float(self.run.availability.next_online([node], self.now + _AFTER)[0])
            if np.isfinite(back):
                self._event(back, node, 0.0, 0.0, _BACK)
            return []
        if node not in self._trained:
            self._train_started()
        t.moved += t.model_bytes
        t.busy_s += busy
        t.updates += updates
        return [(node, self._trained.pop(node))]

    def overdue(self) -> list[int]:
        """The learners that went offline at work since the last call (module docstring)."""
        out, self._gone = self._gone, []
        return out

    def stepped(self) -> None:
        """The global model changed: the learners started from the old one are trained now
        (their starting model is the one they were pushed)."""
        self._train_started()

    def _train_started(self) -> None:
        if not self._untrained:
            return
        ids = np.array([n for n, _, _ in self._untrained], dtype=np.int64)
        start = self._untrained[0][1]  # pushed since the last step: one global model
        work = Work(*(np.concatenate([getattr(w, f) for _, _, w in self._untrained])
                      for f in ("steps", "updates", "passes")))
        trained = train_from(self.run, start, ids, work)
        if self.run.attack is not None:  # its liars' updates join step version + 1
            trained = self.run.attack.lie(ids, trained, start, self._version + 1)
        for i, k in enumerate(ids):
            self._trained[int(k)] = [a[i] for a in trained]
        self._untrained.clear()
