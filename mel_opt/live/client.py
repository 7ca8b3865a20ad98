"""The Flower client app of a live run (``client_app``; its server is
:mod:`mel_opt.live.server`).

A deployment names it in its app's ``pyproject.toml`` (``mel_opt.live.client:client_app``);
the simulation runtime gets it from :func:`make_client_app`. Kept apart from the server side
so that the learner process a SuperNode starts for every message imports only what a learner
needs.

It answers two messages, each decoded and encoded by its typed form
(:mod:`mel_opt.problems.messages`) and handled by the same functions as in-process learners
(:mod:`mel_opt.live.learner`): a QUERY (the probe: subset benchmarking of this node on its own
data, and its partition id, which maps the opaque node id to a learner of the instance) and a
TRAIN (one round: train, measure, reply with the model and the measured numbers). What the
learner keeps between messages (its own speed estimate, a problem's arrays) lives in the node
state of Flower's context.

In the simulation engine a learner offline by the run's availability
(:mod:`mel_opt.live.availability`) answers with an error instead: offline when the message
came, or gone before its answer was ready (wall seconds since the run started), it replies
with Flower's error ``NODE_UNAVAILABLE`` and that reason, not its answer. The server reads a
failed reply as no answer: the learner is missing until it answers a probe again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, Context, Error, Message
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode

from mel_opt.live import learner as L
from mel_opt.live.availability import Schedule
from mel_opt.live.wire import content_of, records_of
from mel_opt.problems.messages import ProbeOrder, TrainOrder
from mel_opt.training.mlp import Params

__all__ = ["NodeMemory", "client_app", "make_client_app"]

#: Node-state keys: the learner's numbers, and the prefix of its arrays.
NUMBERS, ARRAYS = "melopt", "melopt-arrays-"


class NodeMemory(L.Memory):
    """A learner's memory in Flower's node state (it outlives the per-message process)."""

    def __init__(self, context: Context) -> None:
        super().__init__()
        self.context = context
        record = context.state.get(NUMBERS)
        if isinstance(record, ConfigRecord):
            self.numbers = {k: float(v) for k, v in record.items()
                            if isinstance(v, (int, float))}

    def keep_number(self, key: str, value: float) -> None:
        super().keep_number(key, value)
        self.context.state[NUMBERS] = ConfigRecord(dict(self.numbers))

    def arrays(self, key: str) -> Params | None:
        record = self.context.state.get(ARRAYS + key)
        return record.to_numpy_ndarrays() if isinstance(record, ArrayRecord) else None

    def keep_arrays(self, key: str, arrays: Params) -> None:
        self.context.state[ARRAYS + key] = ArrayRecord(list(arrays))

    def number(self, key: str) -> float:
        return self.numbers.get(key, math.nan)


def _partition(context: Context) -> int:
    return int(context.node_config.get("partition-id", 0))


def make_client_app(speeds: Sequence[float] | None = None, schedule: Schedule | None = None,
                    started: float = 0.0) -> ClientApp:
    """The client app (see the module docstring).

    ``speeds``: each partition's fraction of a core (the simulation engine's ``--speeds``;
    None: all whole cores). A learner below 1 answers in a child process held at its share
    (:func:`mel_opt.live.learner.answer_at_speed`): its probe and its training are measured
    at that speed, never computed from it. A deployment throttles whole nodes instead.
    ``schedule``: when each learner is online, in seconds since ``started`` (``time.time()``;
    None: always).
    """
    app = ClientApp()
    shares = None if speeds is None else tuple(float(s) for s in speeds)

    def speed_of(pid: int) -> float:
        return 1.0 if shares is None else shares[pid]

    def offline(pid: int, since: float, until: float | None = None) -> bool:
        """Whether learner ``pid`` is offline at ``since`` or before ``until`` (wall
        times)."""
        end = since if until is None else until
        return schedule is not None and not schedule.answers(pid, since - started,
                                                             end - since)

    def unavailable(pid: int, msg: Message) -> Message:
        return Message(error=Error(ErrorCode.NODE_UNAVAILABLE,
                                   f"learner {pid} is offline (--availability)"), reply_to=msg)

    def answer(msg: Message, context: Context, decode: Callable[[Any], Any],
               work: Callable[..., Any]) -> Message:
        """Decode the order, do ``work(order, pid, local, memory)`` at the learner's speed and
        reply with its report, or with NODE_UNAVAILABLE when the learner is offline at the
        start or at the end of the work."""
        order = decode(records_of(msg.content))
        pid = _partition(context)
        since = time.time()
        if offline(pid, since):
            return unavailable(pid, msg)
        local = L.local_data(order.data, pid)
        report = L.answer_at_speed(lambda memory: work(order, pid, local, memory),
                                   NodeMemory(context), speed_of(pid))
        if offline(pid, since, time.time()):
            return unavailable(pid, msg)
        return Message(content_of(report.encode()), reply_to=msg)

    @app.query()
    def probe(msg: Message, context: Context) -> Message:
        return answer(msg, context, ProbeOrder.decode, L.answer_probe)

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return answer(msg, context, TrainOrder.decode, L.answer_train)

    return app


client_app = make_client_app()
