"""FedBuff's asynchronous server loop over a push/pull grid (Nguyen et al., AISTATS 2022).

Flower's strategies are synchronous; its Grid offers ``push_messages`` and ``pull_messages``,
on which an asynchronous loop is built here: at most ``C`` learners train at once
(concurrency), each idle learner gets the current global model and its version, whatever
replies are ready are read, and after every ``K`` accepted updates the server step of
Algorithm 1 is taken (:class:`mel_opt.arena.fedbuff.FedBuffBuffer`: each update weighted by
``1/sqrt(1 + s)``, ``s`` the server steps since its starting model).

This module holds the loop only, on a small :class:`Grid` protocol, so it is tested against a
scripted grid; it is not yet wired to Flower's Grid, ``LiveRun`` or ``melopt live``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from mel_opt.arena.fedbuff import FedBuffBuffer

Model = list[NDArray[np.float64]]


class Grid(Protocol):
    """What the loop needs of a grid: push work, pull what has come back."""

    def push(self, node: int, model: Model, version: int) -> None:
        """Send ``node`` the global ``model`` of ``version`` to train from."""

    def pull(self) -> list[tuple[int, Model | None]]:
        """Replies ready now: ``(node, local model)``; ``None`` for an error reply."""


@dataclass
class Step:
    """One server step: the version it made and the updates it holds."""

    version: int
    nodes: list[int]
    staleness: list[int]


@dataclass
class Outcome:
    """What the loop did: the final model, its steps and the replies it ignored."""

    model: Model
    steps: list[Step] = field(default_factory=list)
    ignored: list[tuple[int, str]] = field(default_factory=list)
    most_busy: int = 0


def _refusal(reply: Model | None, model: Model) -> str | None:
    """Why a reply cannot enter the buffer (``None`` when it can)."""
    if reply is None:
        return "error reply"
    if len(reply) != len(model) or any(
        np.shape(r) != m.shape for r, m in zip(reply, model, strict=True)
    ):
        return "model of other shapes"
    if not all(np.all(np.isfinite(r)) for r in reply):
        return "non-finite values"
    return None


def run(grid: Grid, nodes: Sequence[int], model: Model, *, buffer: int, concurrency: int,
        steps: int, server_lr: float = 1.0, max_polls: int = 10_000,
        on_step: Callable[[Step, Model], None] | None = None) -> Outcome:
    """Run FedBuff until ``steps`` server steps (or ``max_polls`` empty-handed polls).

    Parameters
    ----------
    grid : Grid
        Where work is pushed and replies pulled.
    nodes : sequence of int
        The learners' node ids.
    model : list of numpy.ndarray
        The initial global model.
    buffer, concurrency : int
        ``K`` (updates per server step) and ``C`` (learners training at once), both >= 1.
    steps : int
        Server steps to take.
    server_lr : float
        ``eta_g`` of Algorithm 1.
    max_polls : int
        Polls without any reply after which the loop stops (every learner lost).
    on_step : callable, optional
        Called with each step and the new model (evaluation, rows of the report).

    Returns
    -------
    Outcome
    """
    buf = FedBuffBuffer(buffer, server_lr)
    out = Outcome(model=[np.array(m, dtype=float) for m in model])
    version = 0
    started: dict[int, tuple[int, Model]] = {}   # node -> (version, model it started from)
    held: list[tuple[int, int]] = []
    idle = [int(n) for n in nodes]
    empty = 0
    while len(out.steps) < steps and empty < max_polls:
        while idle and len(started) < concurrency:
            n = idle.pop(0)
            started[n] = (version, out.model)
            grid.push(n, out.model, version)
        out.most_busy = max(out.most_busy, len(started))
        replies = grid.pull()
        empty = 0 if replies else empty + 1
        for n, reply in replies:
            if n not in started:
                out.ignored.append((n, "no work outstanding"))
                continue
            v0, base = started.pop(n)
            idle.append(n)
            why = _refusal(reply, base)
            if why is not None:
                out.ignored.append((n, why))
                continue
            assert reply is not None
            held.append((n, version - v0))
            # delta = local model minus the model the learner started from (Algorithm 1)
            delta: list[NDArray[np.floating]] = [
                np.asarray(r, float) - b for r, b in zip(reply, base, strict=True)]
            if buf.add(delta, version - v0):
                current: list[NDArray[np.floating]] = list(out.model)
                out.model = buf.flush(current)
                version += 1
                step = Step(version, [h[0] for h in held], [h[1] for h in held])
                held = []
                out.steps.append(step)
                if on_step is not None:
                    on_step(step, out.model)
                if len(out.steps) >= steps:
                    break
    return out
