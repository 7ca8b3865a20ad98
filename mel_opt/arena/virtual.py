"""The learners of an asynchronous scheme on the arena's virtual clock.

:class:`VirtualWorkers` is the third carrier of FedBuff's server loop
(:func:`mel_opt.schemes.fedbuff.run`, beside Flower's grid and the in-process learners of a
live run): a learner pushed work at virtual time ``t`` answers at ``t`` plus its busy time for
the scheme's passes on the problem's work clock (with the run-to-run noise of the clock), and
each pull moves the clock to the next answer. Nothing is ever late (the clock cannot lose a
learner), so :meth:`VirtualWorkers.overdue` is always empty.

Learners started from the same global model are trained together, as one batched step of the
emulator's local SGD: when the first of them is pulled, or when the model changes
(:meth:`VirtualWorkers.stepped`), whichever comes first. The random draws follow one order
whatever happens: each push draws its busy time's noise, each training its minibatches, and
the loop's choice of the next learner (:meth:`VirtualWorkers.pick`: at random among the idle,
as FedBuff's server samples its clients) comes before the push it starts.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from mel_opt.arena.runner import Run, Tally, model_bytes, train_from, work_for
from mel_opt.schemes.fedbuff import Model, Update

__all__ = ["VirtualWorkers"]


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

    def __init__(self, run: Run) -> None:
        self.run = run
        self.now = 0.0
        self.tally = Tally(model_bytes(run.init))
        # (answer time, seq, node, busy seconds, sample-updates)
        self._events: list[tuple[float, int, int, float, float]] = []
        self._seq = 0
        self._untrained: list[tuple[int, Model]] = []  # pushed, not trained: (node, start)
        self._version = 0  # the version of the model pushed since the last step
        self._trained: dict[int, Model] = {}
        self._first = True

    def pick(self, idle: Sequence[int], n: int) -> list[int]:
        """The ``n`` learners that start: the first time ``n`` of them at random without
        replacement, then one at a time, each uniformly among the idle (in learner order)."""
        pool = np.asarray(sorted(idle), dtype=np.int64)
        if self._first:
            self._first = False
            return [int(k) for k in pool[self.run.rng.choice(pool.size, n, replace=False)]]
        return [int(self.run.rng.choice(pool)) for _ in range(n)]

    def push(self, node: int, model: Model, version: int) -> None:
        run = self.run
        ids = np.array([node])
        work = work_for(run, ids, run.fixed_work(ids))
        busy = float(run.clock.noisy(ids, run.clock.seconds(ids, work.passes), run.rng)[0])
        heapq.heappush(self._events, (self.now + busy, self._seq, node, busy,
                                      float(work.updates[0])))
        self._seq += 1
        self.tally.moved += self.tally.model_bytes
        self._untrained.append((node, model))
        self._version = version

    def pull(self) -> list[tuple[int, Update]]:
        if not self._events:
            return []
        self.now, _, node, busy, updates = heapq.heappop(self._events)
        if node not in self._trained:
            self._train_started()
        t = self.tally
        t.moved += t.model_bytes
        t.busy_s += busy
        t.updates += updates
        return [(node, self._trained.pop(node))]

    def overdue(self) -> list[int]:
        return []

    def stepped(self) -> None:
        """The global model changed: the learners started from the old one are trained now
        (their starting model is the one they were pushed)."""
        self._train_started()

    def _train_started(self) -> None:
        if not self._untrained:
            return
        ids = np.array([n for n, _ in self._untrained], dtype=np.int64)
        start = self._untrained[0][1]  # pushed since the last step: one global model
        trained = train_from(self.run, start, ids, work_for(self.run, ids,
                                                            self.run.fixed_work(ids)))
        if self.run.attack is not None:  # its liars' updates join step version + 1
            trained = self.run.attack.lie(ids, trained, start, self._version + 1)
        for i, k in enumerate(ids):
            self._trained[int(k)] = [a[i] for a in trained]
        self._untrained.clear()
