"""The incumbent of med's branch and bound and its exchange with the companion process.

:class:`Incumbent` is the best allocation a process knows, valued by its own evaluator.
:class:`Exchange` is the logic on top of the companion's mailboxes
(:class:`~mel_opt.problems.med.search.companion.Companion`): what each side sends, and what it
keeps of what it receives. Nothing received is taken on trust: an allocation from the other
side is valued again here and kept only when it is feasible and better.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.types import REL_GAP, better, parts_of

__all__ = ["Exchange", "Incumbent", "Mailboxes"]


@dataclass
class Incumbent:
    """The best allocation known here (task per learner, -1 unused) and its value [s]."""

    value: float = math.inf
    assign: np.ndarray | None = None
    listener: Callable[[float, np.ndarray], None] | None = None  # told of each improvement

    def offer(self, value: float, assign: np.ndarray) -> bool:
        """Keep the allocation if it is better; True if it was."""
        if not better(value, self.value):
            return False
        self.value, self.assign = value, assign.copy()
        if self.listener is not None:
            self.listener(value, self.assign)
        return True

    def proven_by(self, bound: float) -> bool:
        """Whether a lower bound [s] proves this allocation optimal (within ``REL_GAP``)."""
        return bound >= self.value - REL_GAP * max(1.0, abs(self.value))


class Mailboxes(Protocol):
    """The companion's mailboxes as the exchange uses them (``companion.Companion``)."""

    def publish(self, value: float, assign: np.ndarray) -> None: ...

    def incoming(self) -> tuple[float, np.ndarray] | None: ...

    def suggestion(self) -> np.ndarray | None: ...

    def offer(self, value: float, assign: np.ndarray) -> None: ...

    def received(self) -> tuple[float, np.ndarray] | None: ...

    def suggest(self, assign: np.ndarray) -> None: ...

    def hand_root(self, bound: float, rounding: np.ndarray | None,
                  cover: np.ndarray) -> None: ...

    def root_starts(self) -> tuple[float, list[np.ndarray]] | None: ...


class Exchange:
    """One side's share of the incumbent exchange with the other process.

    The parent (branching) calls :meth:`sync` before each node and :meth:`suggest` with
    starting points for the companion to polish. The companion calls :meth:`listen` once, so
    that every improvement of its incumbent is published at once, and :meth:`pull` between
    rounds of its search.

    Parameters
    ----------
    box : Mailboxes
        The shared mailboxes (a ``companion.Companion``).
    best : Incumbent
        This process's incumbent, which the exchange reads and improves.
    ev : Evaluator
        This process's evaluator: what is received is valued with it.
    """

    def __init__(self, box: Mailboxes, best: Incumbent, ev: Evaluator) -> None:
        self.box, self.best, self.ev = box, best, ev
        self.sent = math.inf  # the best value the other side has been sent or sent us

    def take(self, got: tuple[float, np.ndarray] | None) -> bool:
        """Keep an allocation the other process sent if, valued here, it is feasible and
        better (not passed back: the sender knows it). True if it was kept."""
        if got is None or not better(got[0], self.best.value):
            return False
        assign = got[1]
        m, n = self.ev.m, self.ev.inst.n_learners
        if assign.shape != (n,) or assign.min() < -1 or assign.max() >= m:
            return False
        excess, value, _ = self.ev.value(parts_of(assign, m))
        listener, self.best.listener = self.best.listener, None
        try:
            return excess == 0 and self.best.offer(value, assign)
        finally:
            self.best.listener = listener

    # -- the parent's side --------------------------------------------------------------------
    def sync(self) -> bool:
        """Take the companion's latest allocation, send ours when it is better than what the
        companion has heard of. True when the companion's allocation was kept."""
        kept = self.take(self.box.received())
        if kept:
            self.sent = self.best.value
        if self.best.assign is not None and better(self.best.value, self.sent):
            self.box.offer(self.best.value, self.best.assign)
            self.sent = self.best.value
        return kept

    def suggest(self, assign: np.ndarray) -> None:
        """A starting point (not valued) for the companion to polish."""
        self.box.suggest(assign)

    def hand_root(self, bound: float, rounding: np.ndarray | None, cover: np.ndarray) -> None:
        """The root bound and its starting points (not valued), for the companion to polish
        before anything else."""
        self.box.hand_root(bound, rounding, cover)

    # -- the companion's side -----------------------------------------------------------------
    def listen(self) -> None:
        """Publish every later improvement of the incumbent to the parent as it happens."""
        self.best.listener = self.box.publish

    def pull(self) -> np.ndarray | None:
        """Take the parent's latest allocation (if new, feasible and better); return its
        latest suggested starting point (None: nothing new)."""
        self.take(self.box.incoming())
        return self.box.suggestion()

    def root(self) -> tuple[float, list[np.ndarray]] | None:
        """The root bound and its starting points, once the parent has handed them over."""
        return self.box.root_starts()
