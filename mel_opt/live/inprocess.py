"""A live run's rounds with the learners in this process, on a virtual clock (no Flower).

The server side is the same :class:`~mel_opt.live.rounds.LiveRun` and the same round loop
(:func:`mel_opt.live.loop.run_live`) as on Flower; the learners are the same functions the
Flower client app calls (:mod:`mel_opt.live.learner`), each on its own rows of the data set,
answering the same encoded orders. What differs is the exchange (:class:`ClockExchange`): a
:class:`Clock` says how long each learner's work and the round took, so a run is deterministic
(the catalogue's entry of paper 003 runs the adaptive-tau control this way, with the times its
authors simulated), and which learners answer, and what, so a lost or faulty learner is a
choice of the test, not a timer. Nothing crosses a link: learners draw the samples of their
plans from the rows they hold (no claims), and no round trip is measured.

With the run's ``availability`` (:mod:`mel_opt.live.availability`) a learner offline at a
message's virtual time, or one that goes offline before its training ends, sends nothing, as a
lost one; the virtual time counts from the probe.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mel_opt.live import learner as L
from mel_opt.live.availability import Schedule, learner_names, schedule_for
from mel_opt.live.estimates import start_cost
from mel_opt.live.exchange import PROBE, Arrival, Asked
from mel_opt.live.loop import run_live
from mel_opt.live.rounds import LiveRun
from mel_opt.problems.messages import ProbeOrder, Records, TrainOrder
from mel_opt.training.data import Dataset

__all__ = ["Clock", "ClockExchange", "run_in_process"]


@dataclass(frozen=True)
class Clock:
    """Virtual times of a round.

    Attributes
    ----------
    compute_s : callable
        ``(round, learner, sample_passes) -> seconds`` of that learner's training.
    overhead_s : callable
        ``(round) -> seconds`` the round takes beyond its slowest learner's training
        (messages, aggregation).
    probe_s_per_sample : float
        Seconds per sample-pass every learner reports in the probe.
    probe_start_s : float
        Seconds every start of the probe costs beyond its work: with it, each learner's
        probe times three starts of 256, 512 and 1,024 sample-passes and reports their
        split into a start's cost and a rate (:func:`~mel_opt.live.estimates.start_cost`),
        as a real learner's doubling probe does; 0 (the default): one start of 1,000
        sample-passes, not split.
    answers : callable
        ``(round, learner) -> bool``: whether that learner answers that round (False: it is
        lost, as a node that died; default: every learner always answers), rounds 1, 2, ...
        (every learner answers the first probe). A missing learner is probed again before
        each round, as on Flower, and is back once it answers.
    sends : callable
        ``(round, learner, records) -> records``: what that learner's node sends, given what
        its learner answered (default: that answer). A test's faulty learner (non-finite
        weights, arrays of other shapes, an absurd compute time) is one that sends something
        else; the round's length stays the clock's, as a real server's wall clock does not
        believe what a reply says.
    """

    compute_s: Callable[[int, int, float], float]
    overhead_s: Callable[[int], float]
    probe_s_per_sample: float = 1e-4
    probe_start_s: float = 0.0
    answers: Callable[[int, int], bool] = lambda r, k: True
    sends: Callable[[int, int, Records], Records] = lambda r, k, records: records


class ClockExchange:
    """Learners in this process as a live run's exchange (:class:`~mel_opt.live.exchange.
    Exchange`): node k is learner k, on rows ``pools[k]`` of ``data``, timed by ``clock``.

    A synchronous exchange of orders lasts its slowest learner's training plus the clock's
    overhead of the round; pushed work (FedBuff) answers at the virtual time it was pushed
    plus its training, and work of a learner that does not answer is overdue at its due
    time. ``schedule``: the learners' availability on the virtual clock (None: always
    online).
    """

    carries_data = False
    first_wait_s = 0.0

    def __init__(self, data: Dataset, pools: Sequence[np.ndarray], clock: Clock,
                 schedule: Schedule | None = None) -> None:
        self.data, self.clock, self.schedule = data, clock, schedule
        self.pools = [np.asarray(p) for p in pools]
        self.memories = {k: L.Memory({L.SPEED: clock.probe_s_per_sample})
                         for k in range(len(self.pools))}
        self._now = 0.0  # the virtual time
        self._since = 0.0  # virtual seconds since the last lap
        self._events: list[tuple[float, int, int, Records | None]] = []
        self._seq = 0
        self._overdue: list[int] = []

    def nodes(self) -> list[int]:
        return list(range(len(self.pools)))

    def lap(self) -> float:
        since, self._since = self._since, 0.0
        return since

    def polls_for(self, seconds: float) -> int:
        return max(1, math.ceil(seconds / 0.1))

    def _probe(self, node: int, content: Records) -> Records:
        order = ProbeOrder.decode(content)
        rate, start = self.clock.probe_s_per_sample, self.clock.probe_start_s
        steps = [(start + rate * w, float(w)) for w in ((256, 512, 1024) if start else (1000,))]
        report = L.probe_report(order.problem, node, int(self.pools[node].size),
                                sum(c for c, _ in steps), sum(w for _, w in steps),
                                start_cost(steps))
        return L.with_constants(report, order, L.LocalData(self.data, self.pools[node])).encode()

    def _train(self, node: int, content: Records) -> tuple[Records, float]:
        """What learner ``node`` sends for the order in ``content``, and its training time on
        the clock (as the client app answers it, with the clock's time)."""
        order = TrainOrder.decode(content)
        local = L.LocalData(self.data, self.pools[node])
        clock = self.clock
        report = L.answer_train(order, node, local, self.memories[node],
                                lambda work: clock.compute_s(order.round, node, work))
        report = dataclasses.replace(report, work=max(report.work, 1.0))
        return clock.sends(order.round, node, report.encode()), report.compute_s

    def ask(self, messages: Mapping[int, Records], kind: str, group: str, wait_s: float,
            round_: int) -> Asked:
        arrivals, longest = [], 0.0
        for node, content in messages.items():
            # round 0 is the first probe: every learner answers it (the clock's answers are
            # about rounds 1, 2, ...)
            if round_ > 0 and not self.clock.answers(round_, node):
                continue
            if not self._online(node):
                continue
            if kind == PROBE:
                arrivals.append(Arrival(node, self._probe(node, content)))
                continue
            sent, compute = self._train(node, content)
            if self._online(node, compute):
                arrivals.append(Arrival(node, sent))
            longest = max(longest, compute)  # the clock's, not what was sent
        if kind != PROBE:
            self._advance(longest + self.clock.overhead_s(round_))
        return Asked(arrivals)

    def push(self, node: int, content: Records, group: str, wait_s: float,
             round_: int) -> None:
        self._seq += 1
        sent, compute = None, 0.0
        if self.clock.answers(round_, node) and self._online(node):
            sent, compute = self._train(node, content)
        if sent is None or not self._online(node, compute):  # it never answers
            heapq.heappush(self._events, (self._now + wait_s, self._seq, node, None))
            return
        heapq.heappush(self._events, (self._now + compute, self._seq, node, sent))

    def _online(self, node: int, seconds: float = 0.0) -> bool:
        """Whether ``node``'s learner is online now and for ``seconds`` more (the schedule's
        :meth:`~mel_opt.live.availability.Schedule.answers`)."""
        return self.schedule is None or self.schedule.answers(node, self._now, seconds)

    def _advance(self, seconds: float) -> None:
        self._now += seconds
        self._since += seconds

    def pull(self) -> list[Arrival]:
        if not self._events:
            return []
        at, _, node, sent = heapq.heappop(self._events)
        self._advance(max(0.0, at - self._now))
        if sent is None:  # its due time: it never answers
            self._overdue.append(node)
            return []
        return [Arrival(node, sent)]

    def overdue(self) -> list[int]:
        late, self._overdue = self._overdue, []
        return late


def run_in_process(run: LiveRun, pools: Sequence[np.ndarray], clock: Clock,
                   on_round: Callable[[LiveRun], None] | None = None) -> LiveRun:
    """Probe, then ``run.settings.rounds`` rounds (or until the problem ends the run, or a
    round cannot be planned: :meth:`~mel_opt.live.rounds.LiveRun.stop`), or, for an
    asynchronous scheme, its server steps.

    Every learner answers through :func:`mel_opt.live.learner.answer_train`, as a Flower
    client does, and its report goes through the same encoding and the same reading on the
    server; only its compute time is the clock's.

    Parameters
    ----------
    run : LiveRun
        The server's state (its data set is the learners' too).
    pools : sequence of int arrays
        Training-set rows of each learner (learner k holds ``pools[k]``; any split, including
        the same rows for every learner).
    clock : Clock
    on_round : callable, optional
        Called with ``run`` after the probe and after every round.

    With ``run.settings.availability`` the learners follow its behaviour trace on the
    virtual clock (:mod:`mel_opt.live.availability`).
    """
    spec = run.settings.availability
    schedule = None if spec is None else schedule_for(spec, learner_names(run.inst, run.K))
    exchange = ClockExchange(run.data, pools[:run.K], clock, schedule)
    return run_live(run, exchange, on_round or (lambda r: None))

