"""FedBuff: buffered asynchronous aggregation (Nguyen et al., AISTATS 2022).

Learners train asynchronously, at most ``C`` at once (the concurrency). Each finished learner
sends its delta (its local model minus the global model it started from); the server keeps
them in a buffer and, once the buffer holds ``K`` updates, takes one server step and empties
the buffer (the paper's Algorithm 1). An update trained from a global model ``s`` server steps
old (its staleness) is weighted by ``1 / sqrt(1 + s)``, the paper's staleness function.

The server step of Algorithm 1 sums the weighted deltas, divides by ``K`` and applies the
server learning rate ``eta_g``::

    w <- w + eta_g * (1 / K) * sum_i delta_i / sqrt(1 + s_i)

(the paper's clients send ``w_start - w_local`` and the server subtracts; here deltas are
``w_local - w_start`` and are added, which is the same step).

The server's loop (:func:`run`) is written once, against a small :class:`Workers` protocol:
push work to a learner, pull what has come back, say what is late. Three implementations
carry it: Flower's grid and the in-process learners of a live run
(:class:`mel_opt.live.fedbuff.LiveWorkers` over either exchange), and the arena's virtual clock
(:class:`mel_opt.arena.virtual.VirtualWorkers`). What the loop does with learners that fail:

- a reply that cannot be used (a model of other shapes, non-finite numbers, a report that is
  not believed) is ignored with its reason; the learner is idle again and gets new work;
- an error reply (the node failed) sets the learner aside for the rest of the run;
- work that has not come back by its deadline (:meth:`Workers.overdue`) is given up: the
  learner is *missing* and frees its slot for another; if its reply comes later, it is
  ignored (the slot was given away) and the learner is idle again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, overload

import numpy as np
from numpy.typing import NDArray

from mel_opt.schemes.base import GRID_LR, Loop, RoundContext, SchemeSpec
from mel_opt.schemes.options import LOCAL_STEPS, PASSES
from mel_opt.settings import Setting

__all__ = ["PAPER_BUFFER", "SPEC", "FedBuffBuffer", "FedBuffOutcome", "FixedWork", "Model",
           "Step", "Update", "Workers", "default_buffer", "first_idle", "run",
           "staleness_weight"]

Model = list[NDArray[np.floating]]
#: A learner's answer as the loop reads it: its local model, why it cannot be used (text), or
#: None for an error reply (the node failed).
Update = Model | str | None
#: FedBuff's buffer in the paper's experiments: ten updates per server step.
PAPER_BUFFER = 10


@overload
def staleness_weight(s: int | float) -> float: ...


@overload
def staleness_weight(s: NDArray[np.generic]) -> NDArray[np.float64]: ...


def staleness_weight(s: int | float | NDArray[np.generic]) -> float | NDArray[np.float64]:
    """FedBuff's staleness weight ``1 / sqrt(1 + s)``.

    Parameters
    ----------
    s : int, float or array
        Staleness: how many server steps were taken between the global model a learner
        started from and the step its update joins (0 = fresh). Must be >= 0.

    Returns
    -------
    float or numpy.ndarray
        The weight, in (0, 1]; an array of the same shape for an array.

    Raises
    ------
    ValueError
        When any staleness is negative or not finite.
    """
    if isinstance(s, (int, float, np.integer, np.floating)):  # one update: no array made
        v = float(s)
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"staleness must be finite and >= 0, got {s!r}")
        return 1.0 / math.sqrt(1.0 + v)
    arr = np.asarray(s, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"staleness must be finite and >= 0, got {s!r}")
    w = 1.0 / np.sqrt(1.0 + arr)
    if w.ndim == 0:
        return float(w)
    return w


class FedBuffBuffer:
    """The server's buffer of weighted updates (FedBuff, Algorithm 1).

    Parameters
    ----------
    size : int
        ``K``, the number of updates that triggers a server step (>= 1).
    server_lr : float, optional
        ``eta_g``, the server learning rate applied to the buffered average (> 0; 1.0 by default).

    Examples
    --------
    >>> import numpy as np
    >>> b = FedBuffBuffer(2)
    >>> b.add([np.array([2.0])], staleness=0)
    False
    >>> b.add([np.array([4.0])], staleness=3)
    True
    >>> b.flush([np.array([1.0])])[0]
    array([3.])
    """

    def __init__(self, size: int, server_lr: float = 1.0, rule: str | None = "mean") -> None:
        from mel_opt.problems.aggregate import parse_rule

        if int(size) != size or size < 1:
            raise ValueError(f"buffer size must be an integer >= 1, got {size!r}")
        if not np.isfinite(server_lr) or server_lr <= 0:
            raise ValueError(f"server_lr must be > 0, got {server_lr!r}")
        self.size = int(size)
        self.server_lr = float(server_lr)
        self._sum: list[NDArray[np.float64]] | None = None
        self._count = 0
        self.rule = parse_rule(rule)
        self._held: list[list[NDArray[np.float64]]] = []  # weighted deltas (a robust rule)
        #: What the last :meth:`flush`'s rule did: why an update (by its place in the buffer)
        #: did not enter as sent, and why the step was not taken (None: it was).
        self.notes: dict[int, str] = {}
        self.kept: str | None = None
        self._lengths: list[float] = []  # the latest updates' lengths (the norm rule)
        self._pending: dict[int, str] = {}  # the buffer's clipped updates, by place

    def __len__(self) -> int:
        return self._count

    def add(self, delta: list[NDArray[np.floating]], staleness: int,
            weight: float | None = None) -> bool:
        """Add one learner's update, weighted by its staleness (or by ``weight``).

        Parameters
        ----------
        delta : list of numpy.ndarray
            The learner's local model minus the global model it started from, one array per
            layer, shaped like the model.
        staleness : int
            Server steps taken since that learner's starting model (>= 0).
        weight : float, optional
            The update's weight in the step, in place of :func:`staleness_weight`
            (finite, >= 0).

        Returns
        -------
        bool
            True once the buffer holds ``size`` updates (time for :meth:`flush`).
        """
        w = staleness_weight(staleness)
        if weight is not None:
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"an update's weight must be finite and >= 0, got {weight!r}")
            w = float(weight)
        if self.rule.name == "norm":
            delta = self._bounded(delta)
        elif self.rule.name != "mean":
            self._held.append([w * np.asarray(d, dtype=float) for d in delta])
            self._count += 1
            return self._count >= self.size
        if self._sum is None:
            self._sum = [w * np.asarray(d, dtype=float) for d in delta]
        else:
            if len(delta) != len(self._sum) or any(
                np.shape(d) != s.shape for d, s in zip(delta, self._sum, strict=True)
            ):
                raise ValueError("delta's layers do not match the buffered ones")
            for acc, d in zip(self._sum, delta, strict=True):
                acc += w * np.asarray(d, dtype=float)
        self._count += 1
        return self._count >= self.size

    def _bounded(self, delta: list[NDArray[np.floating]]) -> list[NDArray[np.floating]]:
        """``delta`` clipped onto C times the median length of the latest updates (the
        ``norm`` rule on an asynchronous server: a buffer of a few updates has no median to
        speak of, the last ``max(10, 3 K)`` updates have; this one among them)."""
        from mel_opt.problems.aggregate import NORM_BOUND

        with np.errstate(over="ignore", invalid="ignore"):
            length = float(np.sqrt(sum(float(np.sum(np.square(np.asarray(d, dtype=float))))
                                       for d in delta)))
        self._lengths = [*self._lengths, length][-max(10, 3 * self.size):]
        med = float(np.median(self._lengths))
        c = NORM_BOUND if self.rule.value is None else self.rule.value
        if not length > c * med:
            return delta
        self._pending[self._count] = (f"clipped: its update's length {length:.3g} is above "
                                      f"{c:g} x the median {med:.3g} of the latest "
                                      f"{len(self._lengths)}")
        return [np.asarray(d, dtype=float) * (c * med / length) for d in delta]

    def flush(self, model: list[NDArray[np.floating]]) -> list[NDArray[np.float64]]:
        """Take the server step and empty the buffer.

        Parameters
        ----------
        model : list of numpy.ndarray
            The current global model, one array per layer.

        Returns
        -------
        list of numpy.ndarray
            ``model + server_lr * (sum of weighted deltas) / size`` (Algorithm 1 divides by
            ``K``, the buffer size, also when flushed early with fewer updates); the model
            unchanged (copied) when the buffer is empty. With a robust rule (``rule``,
            :mod:`mel_opt.problems.aggregate`) the sum is ``n`` times the rule's centre of
            the ``n`` weighted deltas (the mean's is the sum itself): ``norm`` clips a delta
            longer than C times the median length, ``median``, ``trimmed`` and ``krum`` take
            their centre of the deltas. A step that would not be finite is not taken (the
            model is returned unchanged, :attr:`kept` says why).
        """
        self.notes, self.kept, self._pending = dict(self._pending), None, {}
        if self._held:
            from mel_opt.problems.aggregate import combine

            n = len(self._held)
            stacked = [np.stack([h[i] for h in self._held]) for i in range(len(self._held[0]))]
            got = combine(stacked, np.ones(n), [np.zeros_like(a[0]) for a in stacked],
                          self.rule)
            self._held, self._count = [], 0
            self.notes.update(got.notes)
            if got.model is None:
                self.kept = got.kept
                return [np.array(m, dtype=float) for m in model]
            with np.errstate(over="ignore", invalid="ignore"):
                out = [np.asarray(m, dtype=float) + self.server_lr * n * c / self.size
                       for m, c in zip(model, got.model, strict=True)]
            return self._checked(out, model)
        if self._sum is None:
            return [np.array(m, dtype=float) for m in model]
        out = [
            np.asarray(m, dtype=float) + self.server_lr * acc / self.size
            for m, acc in zip(model, self._sum, strict=True)
        ]
        self._sum = None
        self._count = 0
        return self._checked(out, model)

    def _checked(self, out: list[NDArray[np.float64]],
                 model: list[NDArray[np.floating]]) -> list[NDArray[np.float64]]:
        """``out``, or ``model`` (copied) where ``out`` in the model's dtypes is not finite."""
        with np.errstate(over="ignore", invalid="ignore"):
            finite = all(np.isfinite(np.asarray(o).astype(np.asarray(m).dtype)).all()
                         for o, m in zip(out, model, strict=True))
        if finite:
            return out
        self.kept = "the server step is not finite; the previous model is kept"
        return [np.array(m, dtype=float) for m in model]


class Workers(Protocol):
    """What the loop needs of the learners: push work, pull what has come back, say what is
    late."""

    def push(self, node: int, model: Model, version: int) -> None:
        """Send ``node`` the global ``model`` of ``version`` to train from."""

    def pull(self) -> list[tuple[int, Update]]:
        """Answers ready now: ``(node, update)`` (:data:`Update`)."""

    def overdue(self) -> list[int]:
        """Nodes whose work has not come back by its deadline (each reported once)."""


@dataclass
class Step:
    """One server step: the version it made and the updates it holds."""

    version: int
    nodes: list[int]
    staleness: list[int]
    #: Updates that did not enter as sent (node -> why: clipped, left out by the rule).
    notes: dict[int, str] = field(default_factory=dict)
    #: Why the step kept the previous model (its result was not finite); None: it did not.
    kept: str | None = None


@dataclass
class FedBuffOutcome:
    """What the loop did: the final model, its steps, the answers it ignored (node, why),
    the learners it gave up waiting for, the most learners busy at once, and why it
    stopped before its steps (None: it did not)."""

    model: Model
    steps: list[Step] = field(default_factory=list)
    ignored: list[tuple[int, str]] = field(default_factory=list)
    given_up: list[int] = field(default_factory=list)
    most_busy: int = 0
    stopped: str | None = None


def _refusal(update: Update, model: Model) -> str | None:
    """Why an answer cannot enter the buffer (``None`` when it can)."""
    if update is None:
        return "error reply"
    if isinstance(update, str):
        return update
    if len(update) != len(model) or any(
        np.shape(r) != m.shape for r, m in zip(update, model, strict=True)
    ):
        return "model of other shapes"
    if not all(np.all(np.isfinite(r)) for r in update):
        return "non-finite values"
    return None


def first_idle(idle: Sequence[int], n: int) -> list[int]:
    """The default choice of the learners that start: the ``n`` idle the longest."""
    return list(idle[:n])


def default_buffer(concurrency: int) -> int:
    """FedBuff's ``K`` when a run leaves it unset: the paper's 10, at most half the learners
    training at once (so a step never waits for every one of them), at least 1."""
    return max(1, min(PAPER_BUFFER, concurrency // 2))


def run(workers: Workers, nodes: Sequence[int], model: Model, *, buffer: int,
        concurrency: int, steps: int, server_lr: float = 1.0, aggregation: str = "mean",
        max_polls: int = 10_000,
        pick: Callable[[Sequence[int], int], list[int]] = first_idle,
        until: Callable[[], bool] | None = None,
        on_step: Callable[[Step, Model], None] | None = None,
        on_reply: Callable[[int, int, int | None, str | None], None] | None = None,
        weigh: Callable[[int, int], float] | None = None) -> FedBuffOutcome:
    """Run FedBuff until ``steps`` server steps, every learner failed, ``until`` says so, or
    ``max_polls`` empty-handed polls in a row once every learner was given up.

    The global model keeps the dtype of ``model``: each update is the learner's model minus
    the model it started from, in that dtype, and the server step (computed in float64,
    :class:`FedBuffBuffer`) is cast back.

    Parameters
    ----------
    workers : Workers
        Where work is pushed and answers pulled.
    nodes : sequence of int
        The learners' node ids, in the order they are first idle.
    model : list of numpy.ndarray
        The initial global model.
    buffer, concurrency : int
        ``K`` (updates per server step) and ``C`` (learners training at once), both >= 1.
    steps : int
        Server steps to take.
    server_lr : float
        ``eta_g`` of Algorithm 1.
    aggregation : str
        The rule applied to each step's buffered deltas (:class:`FedBuffBuffer`).
    max_polls : int
        Polls in a row without any answer, while no learner is busy (every one given up),
        after which the loop stops.
    pick : callable
        ``(idle, n) -> the n idle learners that start now`` (default :func:`first_idle`; the
        arena draws them at random, as FedBuff's server samples its clients).
    until : callable, optional
        Checked before every pull: True ends the run (the arena's horizon of virtual time).
    on_step : callable, optional
        Called with each step and the new model (evaluation, the outputs' rounds).
    on_reply : callable, optional
        Called for every answer and every learner given up, with the node, the step its
        update joins (the next version), its staleness (None where it was not taken) and
        why it was not taken (None: taken; ``"missing"``: given up).
    weigh : callable, optional
        ``(node, staleness) -> weight`` of an update in its step (default: FedBuff's
        :func:`staleness_weight`; a scheme that plans its learners' work weighs by its plan).
    """
    if buffer < 1 or concurrency < 1 or steps < 0:
        raise ValueError("buffer and concurrency must be >= 1 and steps >= 0")
    buf = FedBuffBuffer(buffer, server_lr, aggregation)
    dtypes = [np.asarray(m).dtype for m in model]
    out = FedBuffOutcome(model=[np.array(m) for m in model])
    version = 0
    started: dict[int, tuple[int, Model]] = {}   # node -> (version, model it started from)
    held: list[tuple[int, int]] = []
    idle = [int(n) for n in nodes]
    lost: set[int] = set()   # given up: a late answer brings them back
    empty = 0

    def tell(node: int, staleness: int | None, why: str | None) -> None:
        if why is not None and why != "missing":
            out.ignored.append((node, why))
        if on_reply is not None:
            on_reply(node, version + 1, staleness, why)

    while len(out.steps) < steps:
        if idle and len(started) < concurrency:
            for n in pick(idle, min(len(idle), concurrency - len(started))):
                idle.remove(n)
                started[n] = (version, out.model)
                workers.push(n, out.model, version)
        out.most_busy = max(out.most_busy, len(started))
        if not started and not lost:
            out.stopped = "every learner failed"
            break
        if empty >= max_polls:
            out.stopped = f"no reply in {max_polls} polls"
            break
        if until is not None and until():
            break
        answers = workers.pull()
        # polls count while no learner is busy (busy ones are the workers' to report overdue)
        empty = 0 if answers or started else empty + 1
        for n in workers.overdue():
            if n in started:
                started.pop(n)
                lost.add(n)
                out.given_up.append(n)
                tell(n, None, "missing")
        for n, update in answers:
            if n in lost:
                lost.discard(n)
                idle.append(n)
                tell(n, None, "late: its work was given up and handed to another learner")
                continue
            if n not in started:
                tell(n, None, "no work outstanding")
                continue
            v0, base = started.pop(n)
            why = _refusal(update, base)
            if update is not None:
                idle.append(n)   # alive: new work (an error reply sets it aside)
            if why is not None:
                tell(n, None, why)
                continue
            assert update is not None and not isinstance(update, str)
            held.append((n, version - v0))
            tell(n, version - v0, None)
            # delta = local model minus the model the learner started from (Algorithm 1)
            delta: Model = [np.asarray(r, dtype=b.dtype) - b
                            for r, b in zip(update, base, strict=True)]
            w = None if weigh is None else weigh(n, version - v0)
            if buf.add(delta, version - v0, w):
                out.model = [a.astype(t) for a, t in
                             zip(buf.flush(out.model), dtypes, strict=True)]
                version += 1
                step = Step(version, [h[0] for h in held], [h[1] for h in held],
                            {held[i][0]: why for i, why in buf.notes.items()}, buf.kept)
                held = []
                out.steps.append(step)
                if on_step is not None:
                    on_step(step, out.model)
                if len(out.steps) >= steps:
                    break
    return out


@dataclass
class FixedWork:
    """FedBuff's learners in the arena: the run's fixed local work at every start, FedBuff's
    staleness weight, ``concurrency x K`` learners at once and the buffer (the paper's 10, at
    most half the concurrency, by default; at most the concurrency)."""

    ctx: RoundContext
    concurrency: int
    buffer: int

    @classmethod
    def of(cls, ctx: RoundContext) -> FixedWork:
        o, K = ctx.options, ctx.clock.K
        c = max(1, min(K, round(o.concurrency * K)))
        return cls(ctx, c, default_buffer(c) if o.buffer is None else min(o.buffer, c))

    @property
    def nodes(self) -> list[int]:
        return list(range(self.ctx.clock.K))

    def passes(self, node: int, now: float) -> float:
        return float(self.ctx.fixed_work(np.array([node]))[0])

    def weight(self, node: int, staleness: int) -> float:
        return staleness_weight(staleness)

    def measured(self, node: int, per_pass_s: float, start_s: float = 0.0) -> None:
        """The fixed work does not follow speeds."""

    def stepped(self, model: Model, now: float) -> None:
        """The fixed work does not follow the model."""

    def placed(self, sizes: np.ndarray, seconds: np.ndarray, now: float) -> dict[str, list[int]]:
        """The fixed work does not weigh by data."""
        return {}

    def row(self) -> dict[str, float]:
        return {}


# -- its declaration --------------------------------------------------------------------------
#: The arena's buffer: the paper's 10, capped at the concurrency.
ARENA_BUFFER = Setting("buffer", int, None, "fedbuff's buffer: updates per server step (at "
                       "most the concurrency).", minimum=1, nullable=True,
                       default_doc="the paper's 10, at most half the concurrency")
ARENA_CONCURRENCY = Setting("concurrency", float, 1.0, "fedbuff's concurrency: the share of the "
                            "K learners training at once.", minimum=0.0, minimum_open=True,
                            maximum=1.0, default_doc="1: every learner, as the allocation")
ARENA_SERVER_LR = Setting("server_lr", float, 1.0, "The server learning rate of the "
                          "asynchronous schemes (fedbuff, staggered).",
                          minimum=0.0, minimum_open=True)
LIVE_BUFFER = Setting("buffer", int, None, "FedBuff's K: updates per server step (--scheme "
                      "fedbuff).", minimum=1, nullable=True,
                      default_doc="the paper's 10, at most half the concurrency")
LIVE_CONCURRENCY = Setting("concurrency", int, None, "FedBuff's C: learners training at once "
                           "(--scheme fedbuff).", minimum=1, nullable=True,
                           default_doc="every learner")
LIVE_SERVER_LR = Setting("server_lr", float, 1.0, "The server learning rate of the "
                         "asynchronous schemes (--scheme fedbuff or staggered).", minimum=0.0,
                         minimum_open=True)

SPEC = SchemeSpec(
    "fedbuff", "FedBuff: asynchronous, a server step every K updates, stale ones down-weighted",
    Loop.BUFFERED,
    options={"arena": (PASSES, LOCAL_STEPS, ARENA_CONCURRENCY, ARENA_BUFFER, ARENA_SERVER_LR),
             "live": (LIVE_BUFFER, LIVE_CONCURRENCY, LIVE_SERVER_LR)},
    needs=("work_clock",), engines=("arena", "live"), serve=run, plan=FixedWork.of,
    columns=("staleness",),
    label="fedbuff", title="FedBuff",
    # 4 x 2 x 3 x 4 = 96 points. Its authors tune the client and the server learning rates per
    # task and train far more learners at once than a step waits for (concurrency 1000, buffer
    # K = 10: Nguyen et al., AISTATS 2022, Section 5 and appendix): concurrency 0.3 or every
    # learner; buffer the default rule (None: 10, at most half the concurrency), 3 or the
    # paper's 10 (the arena caps it at the concurrency); server_lr 1 (plain FedAvg's step), a
    # half-decade each way and a decade below (tuned on the digits at K = 100, IID, it chose
    # the grid's lowest, 0.3, so the grid reaches one step further).
    grid={"lr": GRID_LR, "concurrency": (0.3, 1.0), "buffer": (None, 3, 10),
          "server_lr": (0.1, 0.3, 1.0, 3.0)})
