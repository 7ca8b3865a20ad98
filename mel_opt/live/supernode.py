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
most ``MELOPT_SUPERNODE_POLL`` seconds (environment, default 0.2) when idle, and at most 0.02 s
while it waits for its ClientApp's reply (a look into the node's own memory, no request). Only
those three polling waits get shorter: they are loops that check again after sleeping, so a
shorter sleep changes how often they check, never what they do; heartbeats, retries, the
Runtime API server and the ClientApp processes keep Flower's timing. The price is one Fleet API
request per node every 0.2 s while idle: about 0.04 of a core per node at rest, the SuperLink's
share included (a round trip of one message to two nodes on two cores took 2.5 s instead of 5.1
s). When the installed Flower no longer has that module attribute the SuperNode runs unchanged.

The SuperExec between the SuperNode and its ClientApp processes polls for tasks every second;
that one has a setting (``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``), which the local federation sets.

With ``MELOPT_WARM_SUPEREXEC=1`` in the environment (the local federation sets it) the
SuperNode starts :mod:`mel_opt.live.superexec` where Flower's loop starts ``flower-superexec``
(same arguments): a SuperExec that forks each message's ClientApp process from a warm process
instead of starting a fresh interpreter, about a second less per message.

Objects (a message's arrays) cross between the SuperLink, a SuperNode and its ClientApp by
separate pulls; an object asked for before it has arrived is asked again after a back-off that
starts at 1 s and doubles up to 10 s (``flwr.supercore.inflatable.inflatable_utils``, no
setting). A message is announced before its arrays have all been pushed, so on loopback
nearly every hop met that back-off: about 3.5 s from a node's first sight of a round's message
to its ClientApp's start. With ``MELOPT_PULL_BACKOFF=INITIAL,CAP`` in the environment
(:func:`patch_object_pulls`; the local federation sets ``0.02,0.2``, and the ServerApp and the
warm SuperExec read it too) the back-off starts and stays shorter: more requests while an
object is on its way, the same objects in the end.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from types import ModuleType
from typing import Any

__all__ = ["DEFAULT_POLL", "POLL_ENV", "PULL_BACKOFF_ENV", "WARM_ENV", "main",
           "patch_from_env", "patch_idle_poll", "patch_object_pulls", "patch_superexec"]

POLL_ENV = "MELOPT_SUPERNODE_POLL"
DEFAULT_POLL = 0.2
WARM_ENV = "MELOPT_WARM_SUPEREXEC"
#: the loop's waits for a reply (its own memory, no request) are capped here [s]
REPLY_POLL = 0.02
#: Flower's idle wait between pulls is 3 s; its waits for a reply are 0.5 s
IDLE_SLEEP_S = 3.0
PULL_BACKOFF_ENV = "MELOPT_PULL_BACKOFF"


class _ShortSleep:
    """Stands in for the ``time`` module inside one Flower module: ``sleep`` is capped (the
    loop's 3 s idle wait at ``cap``, its shorter waits for a reply, which only look at the
    node's own memory, at ``reply_cap``)."""

    def __init__(self, real: ModuleType, cap: float, reply_cap: float | None = None) -> None:
        self._real = real
        self._cap = cap
        self._reply_cap = cap if reply_cap is None else min(cap, reply_cap)

    def sleep(self, seconds: float) -> None:
        cap = self._cap if seconds >= IDLE_SLEEP_S else self._reply_cap
        self._real.sleep(min(seconds, cap))

    def __getattr__(self, name: str) -> Any:  # time.time, time.monotonic, ... unchanged
        return getattr(self._real, name)


def patch_idle_poll(cap: float, reply_cap: float | None = None) -> bool:
    """Cap the polling sleeps of Flower's SuperNode loop: the idle wait at ``cap`` seconds,
    the waits for a ClientApp's reply at ``reply_cap`` (``None``: ``cap`` too).

    Returns
    -------
    bool
        Whether the loop's module had the ``time`` global this relies on (otherwise nothing
        is changed).
    """
    from flwr.supernode import start_client_internal as loop

    if not isinstance(getattr(loop, "time", None), ModuleType):
        return False
    loop.time = _ShortSleep(time, cap, reply_cap)  # type: ignore[assignment]
    return True


def patch_object_pulls(initial: float, cap: float) -> bool:
    """Start the back-off of Flower's object pulls at ``initial`` seconds and cap it at
    ``cap`` (Flower's: 1 and 10) in this process.

    Returns
    -------
    bool
        Whether the installed Flower has the functions and defaults this relies on (otherwise
        nothing is changed).
    """
    if not (0 < initial <= cap):
        raise ValueError(f"a pull back-off needs 0 < initial <= cap, got {initial}, {cap}")
    from flwr.supercore.inflatable import inflatable_utils as utils

    functions = [getattr(utils, name, None)
                 for name in ("pull_objects", "pull_and_inflate_object_from_tree")]
    defaults = [getattr(f, "__kwdefaults__", None) for f in functions]
    if not all(d is not None and "initial_backoff" in d and "backoff_cap" in d
               for d in defaults):
        return False
    for d in defaults:
        assert d is not None
        d["initial_backoff"], d["backoff_cap"] = float(initial), float(cap)
    return True


def patch_from_env(env: Mapping[str, str] | None = None) -> None:
    """Apply :func:`patch_object_pulls` as :data:`PULL_BACKOFF_ENV` says (nothing when it
    is unset or not two positive numbers)."""
    value = (env if env is not None else os.environ).get(PULL_BACKOFF_ENV, "")
    try:
        initial, cap = (float(v) for v in value.split(","))
        patch_object_pulls(initial, cap)
    except ValueError:
        return


class _WarmPopen:
    """Stands in for the ``subprocess`` module inside Flower's SuperNode loop: a command
    ``flower-superexec ...`` starts :mod:`mel_opt.live.superexec` with the same arguments."""

    def __init__(self, real: ModuleType) -> None:
        self._real = real

    def Popen(self, args: Any, *rest: Any, **kwargs: Any) -> Any:  # noqa: N802 - the API's
        if isinstance(args, list) and args and args[0] == "flower-superexec":
            args = [sys.executable, "-m", "mel_opt.live.superexec", *args[1:]]
        return self._real.Popen(args, *rest, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def patch_superexec() -> bool:
    """Start the warm SuperExec (:mod:`mel_opt.live.superexec`) instead of Flower's.

    Returns
    -------
    bool
        Whether the loop's module had the ``subprocess`` global this relies on (otherwise
        nothing is changed).
    """
    import subprocess

    from flwr.supernode import start_client_internal as loop

    if getattr(loop, "subprocess", None) is not subprocess:
        return False
    loop.subprocess = _WarmPopen(subprocess)  # type: ignore[assignment]
    return True


def main() -> None:
    """Patch the poll, then run Flower's SuperNode with this process's arguments."""
    try:
        cap = float(os.environ.get(POLL_ENV, DEFAULT_POLL))
    except ValueError:
        cap = DEFAULT_POLL
    if cap > 0:
        patch_idle_poll(cap, REPLY_POLL)
    if os.environ.get(WARM_ENV) == "1":
        patch_superexec()
    patch_from_env()
    from flwr.supernode.cli import flower_supernode

    sys.argv[0] = "flower-supernode"  # Flower's messages name the command it knows
    flower_supernode()


if __name__ == "__main__":
    main()
