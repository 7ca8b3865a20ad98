"""The Flower strategy of a live run: each node its own allocation, its measurements back.

:class:`AllocationStrategy` is a Flower ``Strategy`` (Message API). ``configure_train`` builds
one message per node carrying that node's own configuration of the round (its samples, passes,
minibatch, learning rate, predicted time; for a decentralised problem, what it needs to decide
for itself) with the global model; ``aggregate_train`` reads each node's model and measured
metrics and hands them to :class:`~mel_opt.live.rounds.LiveRun`, which judges them, aggregates
through the problem's learning cycle and updates the speed estimates.

``start`` runs the rounds itself rather than through ``Strategy.start``: every round has its
own deadline (the problem's cycle clock), the allocation is solved again each round from the
latest estimates, a probe round comes first, and nodes that went missing are probed again
until they answer. A round that cannot be planned ends the run (``LiveRun.stop``, in the
outputs). It pushes and pulls messages through the grid's documented
``push_messages`` / ``pull_messages`` with a short poll, instead of ``send_and_receive``'s
3-second sleep.

Flower is imported here, in the apps (:mod:`mel_opt.live.server`, :mod:`mel_opt.live.client`)
and by the runner of the engines only (the ``flower`` extra).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from mel_opt.errors import MelOptError
from mel_opt.live import claims
from mel_opt.live.fedbuff import AsyncServer, Step, default_buffer, equal_work
from mel_opt.live.fedbuff import run as fedbuff_loop
from mel_opt.live.rounds import Answer, LiveRun, RoundPlan
from mel_opt.live.wire import content_of, records_of
from mel_opt.problems.learning import sample_bytes
from mel_opt.problems.messages import Records, ReplyError, TrainOrder

__all__ = ["AllocationStrategy", "FedBuffStrategy"]

#: Seconds between two pulls of replies.
POLL_S = 0.1
#: ... and per reply still awaited beyond the first hundred: a pull looks up every awaited
#: message, so with a thousand learners in a pool (the simulation) polling every 0.1 s costs
#: the server's process a second of a core per round, taken from the learners; replies come
#: as the pool works through the queue, and the last ones are pulled every 0.1 s again.
POLL_PER_REPLY_S = 0.001


def poll_s(awaited: int) -> float:
    """Seconds until the next pull when ``awaited`` replies are still out."""
    return max(POLL_S, POLL_PER_REPLY_S * awaited)


def _read(msg: Message) -> Records | str:
    """The message's records, or why they cannot be read (its content has no config)."""
    if not msg.has_content():
        return "the reply has no content"
    try:
        return records_of(msg.content)
    except ReplyError as exc:
        return str(exc)


class AllocationStrategy(Strategy):
    """Per-node allocations from mel_opt's problems, measured times fed back.

    Parameters
    ----------
    run : LiveRun
        The server's state (problem, estimates, global model, records).
    on_round : callable, optional
        Called with ``run`` after the probe and after every round (writes the outputs).
    expected_nodes : int
        Nodes to wait for before the probe.
    node_wait_s : float
        How long to wait for them [s].
    log : callable, optional
        Receives one line of progress per event.
    """

    def __init__(self, run: LiveRun, on_round: Callable[[LiveRun], None] | None = None,
                 expected_nodes: int = 1, node_wait_s: float = 120.0,
                 log: Callable[[str], None] | None = None) -> None:
        self.run = run
        self.on_round = on_round
        self.expected_nodes = expected_nodes
        self.node_wait_s = node_wait_s
        self.log = log or (lambda text: None)
        self._plan: RoundPlan | None = None
        self._round_start = 0.0
        self._pending: dict[str, int] = {}  # message id -> learner, of unanswered messages
        self._elapsed: dict[str, float] = {}  # message id -> seconds until its reply came

    # -- the four Strategy hooks -------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """One message per learner of the round: its typed order (with its task's global
        model; ``arrays`` and ``config`` of Flower's loop are not used)."""
        plan = self.run.plan(server_round)
        self._plan = plan
        return self._messages(plan.orders, str(plan.round))

    def _messages(self, orders: Mapping[int, TrainOrder], group: str) -> list[Message]:
        """One train message per learner of ``orders``, in the message group ``group``."""
        return [Message(content_of(order.encode()), dst_node_id=self.run.node_of(k),
                        message_type=MessageType.TRAIN, group_id=group)
                for k, order in orders.items()]

    def _claim(self, grid: Grid, plan: RoundPlan) -> RoundPlan:
        """The round's claims first (:mod:`mel_opt.live.claims`): each learner's plan, then
        the round with the claimed samples in its orders."""
        messages = self._messages(claims.claim_orders(plan), f"claim-{plan.round}")
        answers = []
        for msg in self._exchange(grid, messages, claims.claim_wait_s(self.run, plan)):
            answer = self._answer(plan.round, msg)
            if answer is not None:
                answers.append(answer)
        return claims.take_claims(self.run, plan, answers)

    def _answer(self, r: int, msg: Message) -> Answer | None:
        """A learner's reply as an :class:`Answer` (None, with a warning, where it failed or
        has no readable content; None, silently, from a node of no learner)."""
        learner = self.run.nodes.get(msg.metadata.src_node_id)
        if learner is None:
            return None
        if msg.has_error():
            self.run.warn(f"round {r}: learner {learner} failed: {msg.error.reason}")
            return None
        records = _read(msg)
        if isinstance(records, str):
            self.run.warn(f"round {r}: learner {learner}'s reply ignored: {records}")
            return None
        return Answer(learner, records, self._elapsed.get(msg.metadata.reply_to_message_id))

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        assert self._plan is not None and self._plan.round == server_round
        answers = [a for msg in list(replies)
                   if (a := self._answer(server_round, msg)) is not None]
        self.run.close(self._plan, answers, time.perf_counter() - self._round_start)
        last = self.run.rounds[-1]
        return (ArrayRecord(self.run.model),
                MetricRecord({"accuracy": float(last["accuracy"]), "loss": float(last["loss"])}))

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        return []  # the server evaluates the global model on its own validation set

    def aggregate_evaluate(self, server_round: int,
                           replies: Iterable[Message]) -> MetricRecord | None:
        return None

    def summary(self) -> None:
        self.log(f"mel_opt allocation strategy: {self.run.spec.name}, method {self.run.method}")

    # -- the round loop ------------------------------------------------------------------------
    def start(self, grid: Grid, initial_arrays: ArrayRecord | None = None, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None
              ) -> Any:
        """Probe, then ``num_rounds`` rounds, each closed at its own deadline."""
        nodes = self._wait_for_nodes(grid)
        # a pool probes its learners a few at a time: the wait grows with their number
        self._probe(grid, nodes, max(self.node_wait_s, self.run.probe_wait_s(len(nodes))))
        if self.on_round is not None:
            self.on_round(self.run)
        for r in range(1, num_rounds + 1):
            self._rejoin(grid)
            self._round_start = time.perf_counter()
            try:
                self._plan = self.run.plan(r)
            except MelOptError as exc:  # no learner left, or no allocation for them
                self.run.stop(r, str(exc))
                self.log(f"round {r}: stopped: {exc}")
                if self.on_round is not None:  # the outputs say why the run ended
                    self.on_round(self.run)
                break
            # where the learners claim first, the orders (and their models) are encoded once,
            # after the claims
            if claims.wanted(self.run, self._plan):
                self._plan = self._claim(grid, self._plan)
            messages = self._messages(self._plan.orders, str(r))
            if self._plan.claimed_by:
                self.log(f"round {r}: {len(self._plan.claims)} claims, "
                         f"{len(messages)} learners sent their shards")
            if self._plan.adapted is not None:
                self.log(f"round {r}: adapted: {self._plan.adapted.text}")
            wait = self.run.wait_s(self._plan)
            self.log(f"round {r}: {len(messages)} learners, waiting up to {wait:.3g} s")
            replies = self._exchange(grid, messages, wait)
            self.aggregate_train(r, replies)
            last = self.run.rounds[-1]
            self.log(f"round {r}: accuracy {last['accuracy']:.3f}, {last['learners']} "
                     f"answered, {len(self.run.missing)} missing, "
                     f"{last['round_wall_s']:.3g} s")
            if self.on_round is not None:
                self.on_round(self.run)
            if self.run.finished:
                self.log(f"round {r}: the run ends here ({self.run.spec.name}: the budget "
                         "is spent)" if not self._plan.last else
                         f"round {r}: the method marked this round the last one")
                break
        return self.run

    def _wait_for_nodes(self, grid: Grid) -> list[int]:
        until = time.perf_counter() + self.node_wait_s
        nodes: list[int] = []
        while time.perf_counter() < until:
            nodes = sorted(grid.get_node_ids())
            if len(nodes) >= self.expected_nodes:
                break
            time.sleep(POLL_S)
        self.log(f"{len(nodes)} node(s) connected")
        return nodes

    def _probe(self, grid: Grid, nodes: Iterable[int], wait: float) -> None:
        """Subset benchmarking on every node; maps node ids to learners."""
        nodes = list(nodes)
        content = self.run.probe_order(len(nodes)).encode()
        messages = [Message(content_of(content), dst_node_id=n,
                            message_type=MessageType.QUERY, group_id="probe") for n in nodes]
        for msg in self._exchange(grid, messages, wait):
            if msg.has_error():
                self.run.warn(f"probe: node {msg.metadata.src_node_id} failed: "
                              f"{msg.error.reason}")
                continue
            records = _read(msg)
            if isinstance(records, str):
                self.run.warn(f"probe: node {msg.metadata.src_node_id}'s reply ignored: "
                              f"{records}")
                continue
            self.run.accept_probe(msg.metadata.src_node_id, records,
                                  self._elapsed.get(msg.metadata.reply_to_message_id))
        self.run.fold_pooled()
        self.log(f"probe: {len(self.run.nodes)} learner(s) measured")

    def _rejoin(self, grid: Grid) -> None:
        """Probe the missing learners again; those that answer are back."""
        if not self.run.missing:
            return
        missing = sorted(self.run.missing)
        nodes = [self.run.node_of(k) for k in missing]
        content = self.run.probe_order(len(self.run.nodes)).encode()
        messages = [Message(content_of(content), dst_node_id=n,
                            message_type=MessageType.QUERY, group_id="rejoin") for n in nodes]
        for msg in self._exchange(grid, messages, self.run.rejoin_wait_s(missing)):
            learner = self.run.nodes.get(msg.metadata.src_node_id)
            if learner is not None and not msg.has_error():
                self.run.missing.discard(learner)
                self.log(f"learner {learner} answers again")

    def _exchange(self, grid: Grid, messages: list[Message], wait: float) -> list[Message]:
        """Push ``messages`` and pull their replies until all came or ``wait`` seconds pass.

        Replies to messages of earlier rounds that arrive meanwhile bring their learner back
        (it answers again) but are not used; an error reply brings nobody back."""
        ids = [i for i in grid.push_messages(messages) if i]
        for i, msg in zip(ids, messages, strict=False):
            learner = self.run.nodes.get(msg.metadata.dst_node_id)
            if learner is not None:
                self._pending[i] = learner
        waiting = set(ids)
        got: list[Message] = []
        sent = time.perf_counter()
        until = sent + wait
        while True:
            for msg in grid.pull_messages(list(waiting | set(self._pending))):
                mid = msg.metadata.reply_to_message_id
                if mid in waiting:
                    waiting.discard(mid)
                    got.append(msg)
                    self._elapsed[mid] = time.perf_counter() - sent
                elif mid in self._pending and not msg.has_error():
                    # a late answer: its learner is alive (an error reply, e.g. the
                    # SuperLink reporting the node offline, is no sign of life)
                    self.run.missing.discard(self._pending[mid])
                self._pending.pop(mid, None)
            if not waiting or time.perf_counter() >= until:
                break
            time.sleep(min(poll_s(len(waiting)), max(0.0, until - time.perf_counter())))
        return got



class _FlowerGrid:
    """Flower's grid as FedBuff's loop sees it (:class:`mel_opt.live.fedbuff.Grid`): one
    message per piece of work, replies pulled with a short poll and read by the
    :class:`~mel_opt.live.fedbuff.AsyncServer`, work past its deadline reported overdue
    (once; its late reply is still pulled)."""

    def __init__(self, server: AsyncServer, grid: Grid) -> None:
        self.server, self.grid = server, grid
        # message id -> (node, sent at, deadline); kept until its reply comes
        self.out: dict[str, tuple[int, float, float]] = {}
        self.late: set[str] = set()

    def push(self, node: int, model: Any, version: int) -> None:
        order, wait = self.server.order(node, model, version)
        msg = Message(content_of(order.encode()), dst_node_id=node,
                      message_type=MessageType.TRAIN, group_id=f"fedbuff-{self.server.seq}")
        now = time.perf_counter()
        for mid in (i for i in self.grid.push_messages([msg]) if i):
            self.out[mid] = (node, now, now + wait)

    def pull(self) -> list[tuple[int, Any]]:
        got = list(self.grid.pull_messages(list(self.out))) if self.out else []
        if not got:
            time.sleep(POLL_S)
            return []
        now = time.perf_counter()
        replies: list[tuple[int, Any]] = []
        for msg in got:
            mid = msg.metadata.reply_to_message_id
            if mid not in self.out:
                continue
            node, sent, _ = self.out.pop(mid)
            self.late.discard(mid)
            content = None if msg.has_error() else _read(msg)
            replies.append((node, self.server.read(node, content, now - sent)))
        return replies

    def overdue(self) -> list[int]:
        now = time.perf_counter()
        late = [mid for mid, (_, _, until) in self.out.items()
                if until < now and mid not in self.late]
        self.late.update(late)
        for mid in late:
            self.server.given_up(self.out[mid][0])
        return [self.out[mid][0] for mid in late]


class FedBuffStrategy(AllocationStrategy):
    """FedBuff (Nguyen et al., AISTATS 2022) on Flower's grid: asynchronous buffered
    aggregation (:mod:`mel_opt.live.fedbuff`) instead of the method's synchronous rounds.

    The same start as the allocation's (the nodes, the probe that maps them to learners and
    measures them), then the loop: ``concurrency`` learners train at once, each the same
    fixed work (:func:`~mel_opt.live.fedbuff.equal_work`), and every ``buffer`` updates
    make one server step, weighted by staleness. Each step is a round of the outputs (its
    accuracy, the updates it holds and their staleness); each reply a row (``ok`` with its
    staleness, ``ignored`` with the reason, ``missing`` when its work was given up).
    """

    def summary(self) -> None:
        self.log(f"mel_opt FedBuff strategy: {self.run.spec.name}")

    def start(self, grid: Grid, initial_arrays: ArrayRecord | None = None, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None
              ) -> Any:
        """Probe, then ``num_rounds`` server steps of FedBuff."""
        run, s = self.run, self.run.settings
        nodes = self._wait_for_nodes(grid)
        self._probe(grid, nodes, max(self.node_wait_s, run.probe_wait_s(len(nodes))))
        if self.on_round is not None:
            self.on_round(run)
        learners = sorted(run.nodes.values())
        if not learners:
            run.stop(1, "no learner answered the probe")
            if self.on_round is not None:
                self.on_round(run)
            return run
        work = equal_work(run.inst, run.N, sample_bytes(run.data.features),
                          run.estimates.seconds)
        C = min(s.concurrency or len(learners), len(learners))
        K = min(s.buffer or default_buffer(C), C)
        self.log(f"fedbuff: {len(learners)} learners, {C} at once, a server step every {K} "
                 f"updates; each {work.samples} samples x {work.passes} passes")
        server = AsyncServer(run, work, num_rounds, self.log)

        def on_step(step: Step, model: Any) -> None:
            server.on_step(step, model)
            if self.on_round is not None:
                self.on_round(run)

        # once every learner was given up, wait this long for one to come back
        polls = math.ceil(max(30.0, 2 * run.probe_wait_s(len(learners))) / POLL_S)
        server.start_clock()
        outcome = fedbuff_loop(_FlowerGrid(server, grid), [run.node_of(k) for k in learners],
                               [np.asarray(a, dtype=float) for a in run.model], buffer=K,
                               concurrency=C, steps=num_rounds, server_lr=s.server_lr,
                               max_polls=polls, on_step=on_step, on_reply=server.on_reply)
        if outcome.stopped is not None:
            run.stop(len(outcome.steps) + 1, f"fedbuff stopped: {outcome.stopped}")
            if self.on_round is not None:
                self.on_round(run)
        return run
