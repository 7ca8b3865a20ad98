"""The tiny app: the ServerApp sends one QUERY to every node per round and times the replies.

Run config (all optional): ``tiny-rounds`` (rounds, 1), ``tiny-nodes`` (nodes to wait for,
1), ``tiny-timeout`` (seconds per round and for the nodes to appear, 20), ``tiny-poll``
(seconds between the server's pulls; 0 uses ``Grid.send_and_receive``, whose pulls are 3 s
apart), ``tiny-replies`` (a round ends once this many nodes replied without an error; 0, the
default: every node it asked), ``tiny-fail`` (the ServerApp raises at once).
Each round prints one line ``tinyapp round=R seconds=S partitions=[...] warm=[...]`` (the
partition ids of the nodes that replied, and for each whether its ClientApp ran in a process
forked from mel_opt's warm SuperExec), which the local federation streams back to the test.
"""

from __future__ import annotations

import os
import time

from flwr.app import ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

server_app = ServerApp()
client_app = ClientApp()


def _exchange(grid: Grid, messages: list[Message], timeout: float, poll: float,
              enough: int = 0) -> list[Message]:
    if poll <= 0:
        return list(grid.send_and_receive(messages, timeout=timeout))
    # our own loop: pulls every `poll` seconds instead of the Grid's fixed 3 s
    pending = set(grid.push_messages(messages))
    replies: list[Message] = []
    end = time.monotonic() + timeout
    while pending and time.monotonic() < end:
        got = list(grid.pull_messages(pending))
        replies += got
        pending -= {m.metadata.reply_to_message_id for m in got}
        if enough and sum(not m.has_error() for m in replies) >= enough:
            break
        if pending:
            time.sleep(poll)
    return replies


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    if cfg.get("tiny-fail"):
        raise RuntimeError("tinyapp fails as asked")
    rounds = int(cfg.get("tiny-rounds", 1))
    want = int(cfg.get("tiny-nodes", 1))
    timeout = float(cfg.get("tiny-timeout", 20.0))
    poll = float(cfg.get("tiny-poll", 0.05))
    enough = int(cfg.get("tiny-replies", 0))
    end = time.monotonic() + timeout
    nodes = list(grid.get_node_ids())
    while len(nodes) < want and time.monotonic() < end:
        time.sleep(0.2)
        nodes = list(grid.get_node_ids())
    for r in range(rounds):
        messages = [Message(RecordDict({"config": ConfigRecord({"round": r})}),
                            dst_node_id=node, message_type=MessageType.QUERY)
                    for node in nodes]
        t0 = time.monotonic()
        replies = _exchange(grid, messages, timeout, poll, enough)
        seconds = time.monotonic() - t0
        ok = sorted((m for m in replies if not m.has_error()),
                    key=lambda m: int(m.content["metrics"]["partition-id"]))
        parts = [int(m.content["metrics"]["partition-id"]) for m in ok]
        warm = [int(m.content["metrics"]["warm"]) for m in ok]
        errors = sorted({m.error.reason for m in replies if m.has_error()})
        print(f"tinyapp round={r} seconds={seconds:.3f} partitions={parts} warm={warm}",
              flush=True)
        for reason in errors:  # Flower's own reason for a failed reply
            print(f"tinyapp round={r} error={reason}", flush=True)


def _forked_from_warm() -> bool:
    """Whether this process's parent is mel_opt's warm SuperExec."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            return b"mel_opt.live.superexec" in f.read()
    except OSError:
        return False


@client_app.query()
def query(msg: Message, context: Context) -> Message:
    metrics = MetricRecord({"partition-id": int(context.node_config["partition-id"]),
                            "pid": os.getpid(), "warm": int(_forked_from_warm())})
    return Message(RecordDict({"metrics": metrics}), reply_to=msg)
