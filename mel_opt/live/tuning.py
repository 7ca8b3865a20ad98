"""How mel_opt tunes the SuperNodes it starts, and the one environment variable that carries it.

:class:`NodeTuning` is declared once for both SuperNodes mel_opt starts: each node of a loopback
deployment (:class:`~mel_opt.live.federation.LocalFederation`) and ``melopt node``'s
(:class:`~mel_opt.live.device.DeviceNode`). Its defaults are what ``melopt live --engine
local`` and ``melopt node`` run with; :mod:`mel_opt.live.flower_patches` says what each knob
changes in Flower and what Flower's own value is.

Flower starts most of the processes concerned (a SuperNode's SuperExec, the ClientApps, the
ServerApp), so the tuning reaches them through their environment: :meth:`NodeTuning.env` gives
two variables,

- ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``: Flower's own setting, read by Flower's SuperExec;
- ``MELOPT_NODE_TUNING`` (:data:`TUNING_ENV`): the whole tuning as JSON, read in one place,
  :meth:`NodeTuning.from_env`, by mel_opt's SuperNode wrapper (:mod:`mel_opt.live.supernode`),
  its warm SuperExec (:mod:`mel_opt.live.superexec`) and the ServerApp. A process without it
  (or with a value it cannot read) runs Flower's own timings, except the SuperNode wrapper
  started by hand, which keeps its short polls (:data:`BY_HAND`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mel_opt.errors import UsageError

__all__ = ["BY_HAND", "DEFAULT_TUNING", "TASK_POLL_ENV", "TUNING_ENV", "NodeTuning", "WarmData"]

#: the tuning as JSON, in the environment of every process of a node (and of a local SuperLink)
TUNING_ENV = "MELOPT_NODE_TUNING"
#: Flower's own: seconds between a SuperExec's polls for work (its default 1, range 0.01-60)
TASK_POLL_ENV = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"
_TASK_POLL_RANGE = (0.01, 60.0)  # what Flower's SuperExec accepts (it exits otherwise)


@dataclass(frozen=True)
class WarmData:
    """A data set a warm SuperExec loads once before any task, so that the learners forked
    from it find it loaded (:func:`mel_opt.live.learner.dataset`'s arguments)."""

    name: str
    max_train: int | None = None
    max_test: int | None = None


@dataclass(frozen=True)
class NodeTuning:
    """The knobs of a SuperNode as mel_opt starts it, and of the process trees around it.

    Parameters
    ----------
    idle_poll
        Seconds an idle SuperNode waits between pulls from the SuperLink (Flower's: 3, no
        setting; at 0.2 s about 0.04 of a core per node at rest, for a round trip ~2.5 s
        shorter). ``None`` keeps Flower's 3 s.
    reply_poll
        Seconds between a SuperNode's checks for its ClientApp's reply, a look into its own
        memory, no request (Flower's: 0.5). Applies with ``idle_poll`` only.
    task_poll
        Seconds between a SuperExec's polls for work (Flower's: 1; each SuperExec costs about
        0.01 of a core at 0.25 s, 0.04 at 0.1 s). In [0.01, 60], Flower's range.
    pull_backoff
        ``(initial, cap)``: seconds before an object (a message's arrays) asked for before it
        arrived is asked again, doubling up to ``cap`` (Flower's: 1 and 10), in the SuperNode,
        its ClientApps and the ServerApp; ``None`` keeps Flower's.
    warm
        Run each message's ClientApp in a process forked from a warm SuperExec
        (:mod:`mel_opt.live.superexec`: imports loaded once per node) rather than a fresh
        ``flwr-clientapp`` interpreter. With ``idle_poll`` ``None`` and ``warm`` off the node
        is Flower's own ``flower-supernode``.
    warm_data
        The data set the warm SuperExec loads before any task (``None``: each learner loads
        it itself).
    throttle_period
        Seconds of one duty cycle of the throttle of a node held at a fraction of a core
        (:class:`~mel_opt.live.throttle.Throttle`).
    grace
        Seconds between SIGTERM and SIGKILL when the node's processes end
        (:class:`~mel_opt.live.process_trees.ProcessTrees`).

    Raises
    ------
    UsageError
        A value out of its range.
    """

    idle_poll: float | None = 0.2
    reply_poll: float = 0.02
    task_poll: float = 0.25
    pull_backoff: tuple[float, float] | None = (0.02, 0.2)
    warm: bool = True
    warm_data: WarmData | None = None
    throttle_period: float = 0.1
    grace: float = 5.0

    def __post_init__(self) -> None:
        def positive(name: str, value: float | None) -> None:
            if value is not None and not (math.isfinite(value) and value > 0):
                raise UsageError(f"the node tuning's {name} must be a positive number of "
                                 f"seconds, got {value!r}")

        for name in ("idle_poll", "reply_poll", "task_poll", "throttle_period"):
            positive(name, getattr(self, name))
        low, high = _TASK_POLL_RANGE
        if not low <= self.task_poll <= high:
            raise UsageError(f"the node tuning's task_poll must be in [{low:g}, {high:g}] s "
                             f"(Flower's range), got {self.task_poll!r}")
        if self.pull_backoff is not None:
            initial, cap = self.pull_backoff
            positive("pull_backoff", initial)
            if not initial <= cap:
                raise UsageError("the node tuning's pull_backoff needs initial <= cap, got "
                                 f"{initial!r}, {cap!r}")
        if not (math.isfinite(self.grace) and self.grace >= 0):
            raise UsageError(f"the node tuning's grace must be >= 0 s, got {self.grace!r}")

    @property
    def patched(self) -> bool:
        """Whether the node runs mel_opt's SuperNode wrapper (:mod:`mel_opt.live.supernode`)
        rather than Flower's own ``flower-supernode``."""
        return self.idle_poll is not None or self.warm

    def env(self) -> dict[str, str]:
        """The environment that carries this tuning to a node's processes."""
        return {TASK_POLL_ENV: f"{self.task_poll:g}",
                TUNING_ENV: json.dumps(dataclasses.asdict(self), sort_keys=True)}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> NodeTuning | None:
        """The tuning :meth:`env` wrote into ``env`` (default: this process's environment);
        ``None`` when it is absent or not one (the process then keeps Flower's timings)."""
        value = (env if env is not None else os.environ).get(TUNING_ENV)
        if not value:
            return None
        try:
            fields: dict[str, Any] = json.loads(value)
            if fields.get("pull_backoff") is not None:
                fields["pull_backoff"] = tuple(float(v) for v in fields["pull_backoff"])
            if fields.get("warm_data") is not None:
                fields["warm_data"] = WarmData(**fields["warm_data"])
            return cls(**fields)
        except (ValueError, TypeError, AttributeError, UsageError):
            return None


#: What ``melopt live --engine local`` and ``melopt node`` run with.
DEFAULT_TUNING = NodeTuning()
#: A SuperNode wrapper started by hand (``python -m mel_opt.live.supernode``, no
#: :data:`TUNING_ENV`): the short polls, Flower's SuperExec and back-off.
BY_HAND = NodeTuning(warm=False, pull_backoff=None)
