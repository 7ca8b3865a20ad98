"""``flower-supernode`` with a shorter idle poll, for the local engine.

``python -m mel_opt.live.supernode ARGS`` runs Flower's own SuperNode entry point
(``flwr.supernode.cli.flower_supernode``) with the same ``ARGS``; one thing differs. Flower
1.42's SuperNode loop (``flwr.supernode.start_client_internal``) sleeps a fixed 3 s whenever
its pull from the SuperLink finds no message, and 0.5 s per check while it waits for its
ClientApp's reply or for a reply's contents; no flag or environment variable sets either. In a
round loop every node that has just replied starts such a 3 s sleep exactly when the next
round's message is sent, so each round pays up to 3 s per node for nothing; on loopback that
is most of a round of a small model.

Here the module-global ``time`` that loop uses is replaced by a proxy whose ``sleep`` waits at
most ``MELOPT_SUPERNODE_POLL`` seconds (environment, default 0.2). Only those three polling
waits get shorter: they are loops that check again after sleeping, so a shorter sleep changes
how often they check, never what they do; heartbeats, retries, the Runtime API server and the
ClientApp processes keep Flower's timing. The price is one Fleet API request per node every
0.2 s while idle: about 0.04 of a core per node at rest, the SuperLink's share included (a
round trip of one message to two nodes on two cores took 2.5 s instead of 5.1 s). When the
installed Flower no longer has that module attribute the SuperNode runs unchanged.

The SuperExec between the SuperNode and its ClientApp processes polls for tasks every second;
that one has a setting (``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``), which the local federation sets.
"""

from __future__ import annotations

import os
import sys
import time
from types import ModuleType
from typing import Any

__all__ = ["DEFAULT_POLL", "POLL_ENV", "main", "patch_idle_poll"]

POLL_ENV = "MELOPT_SUPERNODE_POLL"
DEFAULT_POLL = 0.2


class _ShortSleep:
    """Stands in for the ``time`` module inside one Flower module: ``sleep`` is capped."""

    def __init__(self, real: ModuleType, cap: float) -> None:
        self._real = real
        self._cap = cap

    def sleep(self, seconds: float) -> None:
        self._real.sleep(min(seconds, self._cap))

    def __getattr__(self, name: str) -> Any:  # time.time, time.monotonic, ... unchanged
        return getattr(self._real, name)


def patch_idle_poll(cap: float) -> bool:
    """Cap the polling sleeps of Flower's SuperNode loop at ``cap`` seconds.

    Returns
    -------
    bool
        Whether the loop's module had the ``time`` global this relies on (otherwise nothing
        is changed).
    """
    from flwr.supernode import start_client_internal as loop

    if not isinstance(getattr(loop, "time", None), ModuleType):
        return False
    loop.time = _ShortSleep(time, cap)  # type: ignore[assignment]
    return True


def main() -> None:
    """Patch the poll, then run Flower's SuperNode with this process's arguments."""
    try:
        cap = float(os.environ.get(POLL_ENV, DEFAULT_POLL))
    except ValueError:
        cap = DEFAULT_POLL
    if cap > 0:
        patch_idle_poll(cap)
    from flwr.supernode.cli import flower_supernode

    sys.argv[0] = "flower-supernode"  # Flower's messages name the command it knows
    flower_supernode()


if __name__ == "__main__":
    main()
