"""Flower's grid as a live run's exchange (:class:`mel_opt.live.exchange.Exchange`).

The server app (:mod:`mel_opt.live.server`) runs the one round loop
(:func:`mel_opt.live.loop.run_live`) over :class:`FlowerExchange`: every order is one Flower
message (probes as ``query`` messages, training orders and claims as ``train`` messages, each
exchange its own message group), pushed and pulled through the grid's documented
``push_messages`` / ``pull_messages`` with a short poll instead of ``send_and_receive``'s
3-second sleep, each reply's round trip measured on the wall clock.

Flower's ``Strategy`` writes a synchronous loop of its own around ``configure_train`` and
``aggregate_train``; a live run's rounds each have their own deadline, are planned again from
the latest measurements, start with a probe, probe the missing again and, for FedBuff, are
not rounds at all, so the server app runs mel_opt's loop on the grid directly.

Flower is imported here, in the apps (:mod:`mel_opt.live.server`, :mod:`mel_opt.live.client`)
and by the runner of the engines only (the ``flower`` extra).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from flwr.app import Message, MessageType
from flwr.serverapp import Grid

from mel_opt.live.exchange import PROBE, Arrival, Asked
from mel_opt.live.wire import content_of, records_of
from mel_opt.problems.messages import Records, ReplyError

__all__ = ["POLL_PER_REPLY_S", "POLL_S", "FlowerExchange", "poll_s"]

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


def _arrival(msg: Message, elapsed_s: float | None, node: int | None = None) -> Arrival:
    """A reply as an :class:`~mel_opt.live.exchange.Arrival` (from ``node``, default its
    source): its records, or why it has none (an error reply, or content without the config
    a message of ours carries)."""
    node = msg.metadata.src_node_id if node is None else node
    if msg.has_error():
        return Arrival(node, None, failed=True, why=str(msg.error.reason), elapsed_s=elapsed_s)
    if not msg.has_content():
        return Arrival(node, None, why="the reply has no content", elapsed_s=elapsed_s)
    try:
        return Arrival(node, records_of(msg.content), elapsed_s=elapsed_s)
    except ReplyError as exc:
        return Arrival(node, None, why=str(exc), elapsed_s=elapsed_s)


class FlowerExchange:
    """The run's exchange on Flower's ``grid`` (module docstring).

    Parameters
    ----------
    grid : Grid
    expected_nodes : int
        Nodes to wait for before the probe.
    node_wait_s : float
        How long to wait for them [s]; also the least wait of the probe (the nodes' learner
        processes start then).
    """

    carries_data = True

    def __init__(self, grid: Grid, expected_nodes: int = 1, node_wait_s: float = 120.0) -> None:
        self.grid = grid
        self.expected_nodes = expected_nodes
        self.first_wait_s = node_wait_s
        self._pending: dict[str, int] = {}  # message id -> node, of unanswered messages
        # pushed one at a time (FedBuff): message id -> (node, sent at, due at)
        self._out: dict[str, tuple[int, float, float]] = {}
        self._late: set[str] = set()
        self._lap = time.perf_counter()

    def nodes(self) -> list[int]:
        until = time.perf_counter() + self.first_wait_s
        nodes: list[int] = []
        while time.perf_counter() < until:
            nodes = sorted(self.grid.get_node_ids())
            if len(nodes) >= self.expected_nodes:
                break
            time.sleep(POLL_S)
        return nodes

    def lap(self) -> float:
        now = time.perf_counter()
        since, self._lap = now - self._lap, now
        return since

    def polls_for(self, seconds: float) -> int:
        return math.ceil(seconds / POLL_S)

    def _message(self, node: int, content: Records, kind: str, group: str) -> Message:
        mtype = MessageType.QUERY if kind == PROBE else MessageType.TRAIN
        return Message(content_of(content), dst_node_id=node, message_type=mtype,
                       group_id=group)

    def ask(self, messages: Mapping[int, Records], kind: str, group: str, wait_s: float,
            round_: int) -> Asked:
        """Push ``messages`` and pull their replies until all came or ``wait_s`` seconds pass.

        Replies to messages of earlier exchanges that arrive meanwhile say their node is
        alive (``heard``) but are not used; an error reply (the SuperLink reporting the node
        offline) is no sign of life."""
        out = [self._message(n, c, kind, group) for n, c in messages.items()]
        ids = [i for i in self.grid.push_messages(out) if i]
        for i, msg in zip(ids, out, strict=False):
            self._pending[i] = msg.metadata.dst_node_id
        waiting = set(ids)
        got: list[Arrival] = []
        heard: set[int] = set()
        sent = time.perf_counter()
        until = sent + wait_s
        while True:
            for msg in self.grid.pull_messages(list(waiting | set(self._pending))):
                mid = msg.metadata.reply_to_message_id
                if mid in waiting:
                    waiting.discard(mid)
                    got.append(_arrival(msg, time.perf_counter() - sent))
                elif mid in self._pending and not msg.has_error():
                    heard.add(self._pending[mid])
                self._pending.pop(mid, None)
            if not waiting or time.perf_counter() >= until:
                break
            time.sleep(min(poll_s(len(waiting)), max(0.0, until - time.perf_counter())))
        return Asked(got, frozenset(heard))

    def push(self, node: int, content: Records, group: str, wait_s: float,
             round_: int) -> None:
        msg = self._message(node, content, "train", group)
        now = time.perf_counter()
        for mid in (i for i in self.grid.push_messages([msg]) if i):
            self._out[mid] = (node, now, now + wait_s)

    def pull(self) -> list[Arrival]:
        got = list(self.grid.pull_messages(list(self._out))) if self._out else []
        if not got:
            time.sleep(POLL_S)
            return []
        now = time.perf_counter()
        arrivals = []
        for msg in got:
            mid = msg.metadata.reply_to_message_id
            if mid not in self._out:
                continue
            node, sent, _ = self._out.pop(mid)
            self._late.discard(mid)
            arrivals.append(_arrival(msg, now - sent, node))
        return arrivals

    def overdue(self) -> list[int]:
        now = time.perf_counter()
        late = [mid for mid, (_, _, until) in self._out.items()
                if until < now and mid not in self._late]
        self._late.update(late)
        return [self._out[mid][0] for mid in late]
