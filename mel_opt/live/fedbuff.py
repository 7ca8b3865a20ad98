"""FedBuff's asynchronous server loop over a push/pull grid (Nguyen et al., AISTATS 2022).

Flower's strategies are synchronous; its Grid offers ``push_messages`` and ``pull_messages``,
on which an asynchronous loop is built here: at most ``C`` learners train at once
(concurrency), each idle learner gets the current global model and its version, whatever
replies are ready are read, and after every ``K`` accepted updates the server step of
Algorithm 1 is taken (:class:`mel_opt.arena.fedbuff.FedBuffBuffer`: each update weighted by
``1/sqrt(1 + s)``, ``s`` the server steps since its starting model).

The loop (:func:`run`) is written against a small :class:`Grid` protocol, so it is tested
against a scripted grid; :class:`~mel_opt.live.strategy.FedBuffStrategy` runs it on Flower's
Grid for ``melopt live --scheme fedbuff``. What the loop does with learners that fail:

- a reply that cannot be used (a model of other shapes, non-finite numbers, a report that is
  not believed) is ignored with its reason; the learner is idle again and gets new work;
- an error reply (the node failed, or the SuperLink reports it gone) sets the learner aside
  for the rest of the run;
- work that has not come back by its deadline (:meth:`Grid.overdue`) is given up: the learner
  is *missing* and frees its slot for another; if its reply comes later, it is ignored (the
  slot was given away) and the learner is idle again.

Every learner holds the same fixed work (:func:`equal_work`), as in the arena's FedBuff: an
equal share of the data and the problem's own passes. :class:`AsyncServer` is the server's
side between the loop and the transport: each learner's order and deadline, each reply read
and measured as a synchronous round reads it, the rows and rounds of the outputs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from mel_opt.arena.clock import CLOCKS, work_clock
from mel_opt.arena.fedbuff import FedBuffBuffer
from mel_opt.errors import UsageError
from mel_opt.live.rounds import beyond_compute
from mel_opt.problems.messages import Records, TrainOrder

if TYPE_CHECKING:
    from mel_opt.live.rounds import LiveRun

__all__ = ["AsyncServer", "Grid", "Outcome", "Step", "Work", "default_buffer", "equal_work",
           "run"]

Model = list[NDArray[np.float64]]
#: A reply as the loop reads it: the local model, why it cannot be used (text), or None for
#: an error reply (the node failed).
Reply = Model | str | None
#: FedBuff's buffer in the paper's experiments: ten updates per server step.
PAPER_BUFFER = 10


class Grid(Protocol):
    """What the loop needs of a grid: push work, pull what has come back, say what is late."""

    def push(self, node: int, model: Model, version: int) -> None:
        """Send ``node`` the global ``model`` of ``version`` to train from."""

    def pull(self) -> list[tuple[int, Reply]]:
        """Replies ready now: ``(node, reply)`` (:data:`Reply`)."""

    def overdue(self) -> list[int]:
        """Nodes whose work has not come back by its deadline (each reported once)."""


@dataclass
class Step:
    """One server step: the version it made and the updates it holds."""

    version: int
    nodes: list[int]
    staleness: list[int]


@dataclass
class Outcome:
    """What the loop did: the final model, its steps, the replies it ignored (node, why),
    the learners it gave up waiting for, the most learners busy at once, and why it
    stopped before its steps (None: it did not)."""

    model: Model
    steps: list[Step] = field(default_factory=list)
    ignored: list[tuple[int, str]] = field(default_factory=list)
    given_up: list[int] = field(default_factory=list)
    most_busy: int = 0
    stopped: str | None = None


def _refusal(reply: Reply, model: Model) -> str | None:
    """Why a reply cannot enter the buffer (``None`` when it can)."""
    if reply is None:
        return "error reply"
    if isinstance(reply, str):
        return reply
    if len(reply) != len(model) or any(
        np.shape(r) != m.shape for r, m in zip(reply, model, strict=True)
    ):
        return "model of other shapes"
    if not all(np.all(np.isfinite(r)) for r in reply):
        return "non-finite values"
    return None


def run(grid: Grid, nodes: Sequence[int], model: Model, *, buffer: int, concurrency: int,
        steps: int, server_lr: float = 1.0, max_polls: int = 10_000,
        on_step: Callable[[Step, Model], None] | None = None,
        on_reply: Callable[[int, int, int | None, str | None], None] | None = None
        ) -> Outcome:
    """Run FedBuff until ``steps`` server steps, every learner failed, or ``max_polls``
    empty-handed polls in a row once every learner was given up.

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
        Polls in a row without any reply, while no learner is busy (every one given up),
        after which the loop stops.
    on_step : callable, optional
        Called with each step and the new model (evaluation, the report's rounds).
    on_reply : callable, optional
        Called for every reply and every learner given up, with the node, the step its
        update joins (the next version), its staleness (None where it was not taken) and
        why it was not taken (None: taken; ``"missing"``: given up).

    Returns
    -------
    Outcome
    """
    if buffer < 1 or concurrency < 1 or steps < 0:
        raise ValueError("buffer and concurrency must be >= 1 and steps >= 0")
    buf = FedBuffBuffer(buffer, server_lr)
    out = Outcome(model=[np.array(m, dtype=float) for m in model])
    version = 0
    started: dict[int, tuple[int, Model]] = {}   # node -> (version, model it started from)
    held: list[tuple[int, int]] = []
    idle = [int(n) for n in nodes]
    lost: set[int] = set()   # given up: a late reply brings them back
    empty = 0

    def tell(node: int, staleness: int | None, why: str | None) -> None:
        if why is not None and why != "missing":
            out.ignored.append((node, why))
        if on_reply is not None:
            on_reply(node, version + 1, staleness, why)

    while len(out.steps) < steps:
        while idle and len(started) < concurrency:
            n = idle.pop(0)
            started[n] = (version, out.model)
            grid.push(n, out.model, version)
        out.most_busy = max(out.most_busy, len(started))
        if not started and not lost:
            out.stopped = "every learner failed"
            break
        if empty >= max_polls:
            out.stopped = f"no reply in {max_polls} polls"
            break
        replies = grid.pull()
        # polls count while no learner is busy (busy ones are the grid's to report overdue)
        empty = 0 if replies or started else empty + 1
        for n in grid.overdue():
            if n in started:
                started.pop(n)
                lost.add(n)
                out.given_up.append(n)
                tell(n, None, "missing")
        for n, reply in replies:
            if n in lost:
                lost.discard(n)
                idle.append(n)
                tell(n, None, "late: its work was given up and handed to another learner")
                continue
            if n not in started:
                tell(n, None, "no work outstanding")
                continue
            v0, base = started.pop(n)
            why = _refusal(reply, base)
            if reply is not None:
                idle.append(n)   # alive: new work (an error reply sets it aside)
            if why is not None:
                tell(n, None, why)
                continue
            assert reply is not None and not isinstance(reply, str)
            held.append((n, version - v0))
            tell(n, version - v0, None)
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


def default_buffer(concurrency: int) -> int:
    """FedBuff's ``K`` when the settings leave it unset: the paper's 10, at most half the
    learners training at once (so a step never waits for every one of them), at least 1."""
    return max(1, min(PAPER_BUFFER, concurrency // 2))


@dataclass(frozen=True)
class Work:
    """The fixed work of every FedBuff learner, and what the file's model says it costs.

    Attributes
    ----------
    samples, passes : int
        Samples drawn from the learner's data and passes over them, the same for all.
    comm_s : ndarray, shape (K,)
        Each learner's transfer time for that work in the file's model [s] (emulated on one
        machine, as the allocation's).
    compute_s : ndarray, shape (K,)
        Each learner's computation for it in the file's model [s] (its deadline until the
        learner's own speed is measured).
    """

    samples: int
    passes: int
    comm_s: np.ndarray
    compute_s: np.ndarray


def equal_work(inst: Any, dataset_size: int, sample_bytes: float = 0.0,
               seconds: np.ndarray | None = None) -> Work:
    """The arena's FedBuff work (:mod:`mel_opt.arena.clock`) in live units: an equal share of
    the file's data and the problem's passes (mel-async: ``d / K`` samples for the passes
    the median learner fits in T; dab: ``S / K`` shards of the data set's samples per shard
    for ``mu`` passes).

    ``seconds``: each learner's measured seconds per sample-pass (NaN: not measured). Live,
    the allocation's rounds fit the learners' measured speeds into the file's T, so FedBuff's
    passes are fitted the same way: mel-async's computation ``C2_k u`` of Eq. (5) becomes
    ``seconds_k u`` wherever a learner was measured (the transfers stay the file's, emulated
    for both).

    Raises
    ------
    UsageError
        The problem has no work clock (FedBuff runs on mel-async and dab).
    """
    if str(inst.problem) not in CLOCKS:
        raise UsageError(f"--scheme fedbuff runs the problems {', '.join(CLOCKS)}; this "
                         f"instance is {inst.problem!r}")
    clock = work_clock(inst)
    per_pass = np.asarray(clock.per_pass_s, dtype=float).copy()
    if inst.problem == "dab":
        brief = inst_learner_config(inst, dataset_size, sample_bytes)
        samples = max(1, int(round(clock.share * int(brief["per_shard"]))))
        passes = max(1, int(round(clock.passes)))
    else:
        samples = max(1, int(round(clock.share)))
        if seconds is not None:
            measured = np.isfinite(seconds)
            per_pass[measured] = np.asarray(seconds, dtype=float)[measured] * clock.share
        fits = np.floor((clock.budget_s - np.asarray(clock.fixed_s)) / per_pass)
        passes = max(1, int(np.median(fits)))
    return Work(samples, passes, np.asarray(clock.fixed_s, dtype=float), passes * per_pass)


def inst_learner_config(inst: Any, dataset_size: int, sample_bytes: float) -> dict[str, Any]:
    """A dab learner's brief (its samples per shard), from the problem's own cycle."""
    from mel_opt.problems import get_problem

    cycle = get_problem(inst.problem).learning
    assert cycle is not None
    return dict(cycle.learner_config(inst, 0, dataset_size, sample_bytes))  # type: ignore[attr-defined]


class AsyncServer:
    """FedBuff's server side of a live run, between :func:`run` and a transport (Flower's
    grid in :class:`~mel_opt.live.strategy.FedBuffStrategy`, a scripted one in tests).

    It writes into the :class:`~mel_opt.live.rounds.LiveRun` (its estimates, overheads,
    missing learners, rows and rounds), so the outputs are those of any live run: a server
    step is a round, each reply a row.

    Parameters
    ----------
    run : LiveRun
        The run, its nodes already mapped to learners by the probe.
    work : Work
        Every learner's fixed work.
    steps : int
        Server steps of the run (the last one is marked ``last``).
    log : callable, optional
        Receives one line per step and per learner given up.
    """

    def __init__(self, run: LiveRun, work: Work, steps: int,
                 log: Callable[[str], None] | None = None) -> None:
        self.run, self.work, self.steps = run, work, steps
        self.log = log or (lambda text: None)
        self.seq = 0
        self.info: dict[int, dict[str, Any]] = {}  # node -> its newest work's numbers
        self.busy: set[int] = set()
        self._last = time.perf_counter()

    def predicted_s(self, learner: int) -> float | None:
        """The learner's computation for the work by its speed estimate (None: unknown)."""
        per = float(self.run.estimates.seconds[learner])
        return per * self.work.samples * self.work.passes if math.isfinite(per) else None

    def order(self, node: int, model: Model, version: int) -> tuple[TrainOrder, float]:
        """What ``node`` is sent to train from ``model`` (of ``version``), and how long to
        wait for it [s]: its predicted computation and a quarter more plus its measured
        messaging overhead, through the pool of learners busy at once where there is one,
        plus the grace; before its speed is known, the file's model of its computation
        plus the grace."""
        run, s = self.run, self.run.settings
        k = run.nodes[node]
        self.seq += 1
        pred = self.predicted_s(k)
        comm = float(self.work.comm_s[k])
        order = TrainOrder(run.spec.name, self.seq, s.seed, s.alpha, s.lr, s.batch_size,
                           s.data_spec(len(run.nodes)),
                           [np.asarray(a, dtype=np.float32) for a in model],
                           samples=self.work.samples, passes=self.work.passes,
                           predicted_s=(pred or 0.0) + comm, comm_s=comm)
        self.busy.add(node)
        one = 1.25 * pred + run.overhead_s(k) if pred is not None else \
            float(self.work.compute_s[k])
        wait = run.queue_s([one] * len(self.busy)) + s.grace
        before = run.overhead_s(k) if math.isfinite(float(run.overhead[k])) else None
        self.info[node] = {"predicted_s": None if pred is None else pred + comm,
                           "comm_predicted_s": before,
                           "comm_emulated_s": comm, "compute_predicted_s": pred,
                           "samples": self.work.samples, "passes": self.work.passes,
                           "version": version}
        return order, wait

    def read(self, node: int, records: Records | str | None,
             elapsed_s: float | None) -> Reply:
        """The local model in ``node``'s reply, why it cannot be used, or None for an error
        reply. ``records``: the reply's content, the reason it has none readable (text), or
        None for an error. A usable reply's measured compute time updates the learner's speed
        estimate and messaging overhead, as in a synchronous round."""
        run = self.run
        self.busy.discard(node)
        k = run.nodes[node]
        info = self.info.setdefault(node, {"version": 0, "comm_emulated_s": 0.0})
        if records is None:
            run.warn(f"fedbuff: learner {k} failed; it is left out of the run")
            return None
        if isinstance(records, str):
            return records
        report = run.read_report(k, 0, records, elapsed_s)
        if isinstance(report, str):
            return report
        why = run.measure(k, report.compute_s, report.work, int(info["version"]) + 1)
        if why:
            return f"its measurement is not believed: {why}"
        run.note_overhead(k, report.compute_s, elapsed_s)
        run.fold_pooled()
        info.update(compute_measured_s=report.compute_s,
                    measured_s=report.compute_s + float(info["comm_emulated_s"]),
                    comm_measured_s=beyond_compute(elapsed_s, report.compute_s))
        return report.model

    def given_up(self, node: int) -> None:
        """``node``'s work is overdue: it no longer holds a slot."""
        self.busy.discard(node)

    def on_reply(self, node: int, joins: int, staleness: int | None, why: str | None) -> None:
        """One row: the reply of ``node`` (or its work given up) for server step ``joins``."""
        run = self.run
        k = run.nodes[node]
        info = self.info.get(node, {})
        row: dict[str, Any] = {"round": joins, "learner": k, "name": run.learner_name(k),
                               "node": node, "deadline_met": None, "staleness": staleness}
        row.update({c: info.get(c) for c in ("predicted_s", "comm_emulated_s",
                                             "comm_predicted_s", "compute_predicted_s",
                                             "samples", "passes")})
        if why is None:
            row.update(status="ok", measured_s=info.get("measured_s"),
                       compute_measured_s=info.get("compute_measured_s"),
                       comm_measured_s=info.get("comm_measured_s"))
        elif why == "missing":
            row.update(status="missing", measured_s=None, compute_measured_s=None)
            run.missing.add(k)
            self.log(f"fedbuff: learner {k} is late; its work is given up")
        else:
            row.update(status="ignored", reason=why, measured_s=None, compute_measured_s=None)
            run.warn(f"step {joins}: learner {k}'s reply ignored: {why}")
        if why is None or why.startswith("late"):
            run.missing.discard(k)
        run.rows.append(row)

    def on_step(self, step: Step, model: Model) -> None:
        """One round of the outputs: the new global model, evaluated."""
        run = self.run
        run.models[0] = [np.asarray(a, dtype=np.float32) for a in model]
        now = time.perf_counter()
        run.rounds.append({"round": step.version, **run.evaluation(),
                           "wall_s": now - run.started, "round_wall_s": now - self._last,
                           "clock_s": None, "learners": len(step.nodes),
                           "missing": sorted(run.missing), "method": "fedbuff",
                           "solve_s": 0.0, "allocation": {},
                           "last": step.version >= self.steps,
                           "staleness": list(step.staleness)})
        self._last = now
        r = run.rounds[-1]
        self.log(f"step {step.version}: accuracy {r['accuracy']:.3f}, {len(step.nodes)} "
                 f"updates, staleness {max(step.staleness)} at most, "
                 f"{r['round_wall_s']:.3g} s")

    def start_clock(self) -> None:
        """The first step's wall time counts from now."""
        self._last = time.perf_counter()
