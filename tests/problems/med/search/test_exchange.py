"""The incumbent exchange of med's branch and bound on known values: what each side sends,
and what it keeps of what it receives (valued again here, never taken on trust)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from mel_opt.problems.med.search.exchange import Exchange, Incumbent
from mel_opt.problems.med.search.types import parts_of

A = np.array([0, 1, 1])
B = np.array([1, 0, 1])
C = np.array([1, 1, 0])
CROWD = np.array([0, 0, 0])  # over the budget here


class _Values:
    """An evaluator with a table of values: 2 tasks, 3 learners."""

    m = 2
    inst = SimpleNamespace(n_learners=3)
    table = {tuple(A): 5.0, tuple(B): 4.0, tuple(C): 3.0}

    def value(self, parts):
        for assign, value in self.table.items():
            if parts_of(np.array(assign), self.m) == parts:
                return 0.0, value, None
        return 1.0, math.inf, None  # anything else breaks the budget


class _Box:
    """Both sides' mailboxes in one object: queues of what arrives, lists of what is sent."""

    def __init__(self):
        self.from_companion, self.from_parent, self.starts = [], [], []
        self.published, self.offered, self.suggested = [], [], []

    def publish(self, value, assign):
        self.published.append((value, assign.tolist()))

    def incoming(self):
        return self.from_parent.pop(0) if self.from_parent else None

    def suggestion(self):
        return self.starts.pop(0) if self.starts else None

    def offer(self, value, assign):
        self.offered.append((value, assign.tolist()))

    def received(self):
        return self.from_companion.pop(0) if self.from_companion else None

    def suggest(self, assign):
        self.suggested.append(assign.tolist())


def test_incumbent_keeps_only_better_and_tells_its_listener():
    told = []
    best = Incumbent(listener=lambda v, a: told.append((v, a.tolist())))
    assert best.offer(5.0, A) and best.value == 5.0
    assert not best.offer(5.0, B)  # not better
    assert not best.offer(5.0 - 1e-12, B)  # within the tolerance: not better either
    assert best.offer(4.0, B) and best.assign.tolist() == B.tolist()
    assert told == [(5.0, A.tolist()), (4.0, B.tolist())]


def test_take_values_what_it_receives_here():
    box, best = _Box(), Incumbent()
    swap = Exchange(box, best, _Values())
    published = []
    best.listener = lambda v, a: published.append(v)
    # B claimed at 1.0 is worth 4.0 here: kept at 4.0, not sent back to its sender
    assert swap.take((1.0, B)) and best.value == 4.0 and published == []
    assert best.listener is not None  # the listener is back for later improvements
    assert not swap.take((4.0, A))  # a claim no better than 4.0
    assert not swap.take((2.0, A))  # A is 5.0 here: no better
    assert not swap.take((1.0, CROWD))  # infeasible here
    assert not swap.take((1.0, np.array([0, 2, 1])))  # task 2 of 2
    assert not swap.take((1.0, np.array([0, -2, 1])))  # below -1
    assert not swap.take((1.0, np.array([0, 1])))  # wrong length
    assert not swap.take(None)
    assert best.value == 4.0 and best.assign.tolist() == B.tolist()


def test_the_parents_sync_takes_then_sends_once():
    box, best = _Box(), Incumbent()
    swap = Exchange(box, best, _Values())
    assert not swap.sync() and box.offered == []  # nothing either way
    best.offer(5.0, A)
    assert not swap.sync() and box.offered == [(5.0, A.tolist())]
    assert not swap.sync() and len(box.offered) == 1  # the companion has heard of 5.0
    box.from_companion.append((4.0, B))  # the companion's B: kept, not sent back
    assert swap.sync() and best.value == 4.0 and len(box.offered) == 1
    best.offer(3.0, C)  # found here: sent once
    assert not swap.sync() and box.offered[-1] == (3.0, C.tolist()) and len(box.offered) == 2
    box.from_companion.append((2.0, A))  # claimed 2.0 but 5.0 here: not kept
    assert not swap.sync() and best.value == 3.0 and len(box.offered) == 2
    swap.suggest(B)
    assert box.suggested == [B.tolist()]


def test_the_companions_side_publishes_and_pulls():
    box, best = _Box(), Incumbent()
    swap = Exchange(box, best, _Values())
    swap.listen()
    best.offer(5.0, A)  # every improvement published at once
    assert box.published == [(5.0, A.tolist())]
    box.from_parent.append((4.0, B))
    box.starts.append(C)
    start = swap.pull()  # the parent's B kept (not published back), its suggestion handed on
    assert best.value == 4.0 and box.published == [(5.0, A.tolist())]
    assert start is not None and start.tolist() == C.tolist()
    assert swap.pull() is None  # nothing new
    best.offer(3.0, C)
    assert box.published[-1] == (3.0, C.tolist())
