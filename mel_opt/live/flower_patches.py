"""Every change mel_opt makes to Flower's internals, in one place, for Flower 1.42.0.

mel_opt pins ``flwr[simulation]==1.42.0`` (:data:`FLOWER_VERSION`). Flower 1.42 has no setting
for several waits that, on one machine, were most of a live round, and one sweep of its
simulation grows with the square of the nodes. Each patch below replaces one attribute of one
Flower module in the process that applies it; each returns a :class:`Patch` (``undo()`` puts the
original back; a context manager too), or ``None`` when the installed Flower lacks what it
relies on, and then changes nothing. ``tests/live/test_flower_patches.py`` checks that the
installed Flower is the pinned one and that every attribute a patch replaces exists with the
signature and the behaviour the patch assumes, so a Flower upgrade fails there, loudly.

- :func:`short_idle_poll` (in the SuperNode) replaces ``time`` in
  ``flwr.supernode.start_client_internal``: the loop's ``time.sleep(3)`` when a pull found
  nothing and its ``time.sleep(0.5)`` checks for its ClientApp's reply get shorter.
- :func:`warm_superexec` (in the SuperNode) replaces ``subprocess`` in the same module: its
  ``subprocess.Popen(["flower-superexec", ...])`` starts :mod:`mel_opt.live.superexec`.
- :func:`short_object_pulls` (in the SuperNode, its SuperExec and ClientApps, the ServerApp)
  rewrites the keyword defaults ``initial_backoff=1`` and ``backoff_cap=10`` of
  ``flwr.supercore.inflatable.inflatable_utils.pull_objects`` and
  ``pull_and_inflate_object_from_tree``.
- :func:`fork_executor` (in the warm SuperExec) wraps
  ``flwr.supercore.superexec.run_superexec.get_executor``: its subprocess executor becomes a
  :class:`~mel_opt.live.superexec.ForkExecutor`.
- :func:`one_scan_per_sweep` (in the simulation, this process, for its duration) replaces
  ``flwr.server.superlink.fleet.vce.vce_api.add_messages_to_queue``.

What each one's knob is, and its default, is :class:`~mel_opt.live.tuning.NodeTuning`'s; the
process that applies them reads the tuning from its environment (:meth:`NodeTuning.from_env
<mel_opt.live.tuning.NodeTuning.from_env>`) and calls :func:`for_supernode`,
:func:`for_superexec` or :func:`for_serverapp`.

The three waits only change how often a loop that checks again after sleeping checks, never
what it does; heartbeats, retries, the Runtime API servers and the ClientApp processes keep
Flower's timing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import Any

from mel_opt.live.tuning import NodeTuning

__all__ = ["FLOWER_VERSION", "IDLE_SLEEP_S", "TARGETS", "WARM_SUPEREXEC_MODULE", "Patch",
           "for_serverapp", "for_superexec", "for_supernode", "fork_executor",
           "installed_version", "one_scan_per_sweep", "short_idle_poll", "short_object_pulls",
           "warm_superexec"]

#: The Flower these patches were written for and are tested against (pyproject's pin).
FLOWER_VERSION = "1.42.0"
#: Flower's idle wait between a SuperNode's pulls [s]; its shorter sleeps wait for a reply
IDLE_SLEEP_S = 3.0
#: What starts in place of ``flower-superexec`` (``python -m`` this, the same arguments)
WARM_SUPEREXEC_MODULE = "mel_opt.live.superexec"
#: Every Flower attribute a patch replaces: patch -> (module, attributes).
TARGETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "short_idle_poll": ("flwr.supernode.start_client_internal", ("time",)),
    "warm_superexec": ("flwr.supernode.start_client_internal", ("subprocess",)),
    "short_object_pulls": ("flwr.supercore.inflatable.inflatable_utils",
                           ("pull_objects", "pull_and_inflate_object_from_tree")),
    "fork_executor": ("flwr.supercore.superexec.run_superexec", ("get_executor",)),
    "one_scan_per_sweep": ("flwr.server.superlink.fleet.vce.vce_api",
                           ("add_messages_to_queue",)),
}


def installed_version() -> str | None:
    """The installed Flower's version (``None``: Flower is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("flwr")
    except PackageNotFoundError:
        return None


class Patch:
    """One patch applied in this process: what it replaced, and how to put it back.

    :meth:`undo` is idempotent; as a context manager the patch is undone on exit.
    """

    def __init__(self, target: str, undo: Callable[[], None]) -> None:
        self.target = target
        self._undo: Callable[[], None] | None = undo

    def undo(self) -> None:
        """Put back what the patch replaced."""
        if self._undo is not None:
            self._undo()
            self._undo = None

    def __enter__(self) -> Patch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.undo()

    def __repr__(self) -> str:
        return f"Patch({self.target!r}{'' if self._undo else ', undone'})"


def _replace(module: ModuleType, name: str, new: Any) -> Patch:
    """Set ``module.name`` to ``new``; the patch puts the original back (unless replaced
    again since)."""
    old = getattr(module, name)
    setattr(module, name, new)

    def undo() -> None:
        if getattr(module, name) is new:
            setattr(module, name, old)

    return Patch(f"{module.__name__}.{name}", undo)


# -- the SuperNode's waits ---------------------------------------------------------------------
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


def short_idle_poll(cap: float, reply_cap: float | None = None) -> Patch | None:
    """Cap the polling sleeps of Flower's SuperNode loop: the idle wait between pulls (3 s)
    at ``cap`` seconds, the waits for a ClientApp's reply (0.5 s) at ``reply_cap`` (``None``:
    ``cap`` too). ``None`` when the loop's module has no ``time`` module global (or it is
    patched already)."""
    from flwr.supernode import start_client_internal as loop

    if not isinstance(getattr(loop, "time", None), ModuleType):
        return None
    return _replace(loop, "time", _ShortSleep(time, cap, reply_cap))


class _WarmPopen:
    """Stands in for the ``subprocess`` module inside Flower's SuperNode loop: a command
    ``flower-superexec ...`` starts :data:`WARM_SUPEREXEC_MODULE` with the same arguments."""

    def __init__(self, real: ModuleType) -> None:
        self._real = real

    def Popen(self, args: Any, *rest: Any, **kwargs: Any) -> Any:  # noqa: N802 - the API's
        if isinstance(args, list) and args and args[0] == "flower-superexec":
            args = [sys.executable, "-m", WARM_SUPEREXEC_MODULE, *args[1:]]
        return self._real.Popen(args, *rest, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def warm_superexec() -> Patch | None:
    """Have Flower's SuperNode start the warm SuperExec (:mod:`mel_opt.live.superexec`) where
    it starts ``flower-superexec``. ``None`` when the loop's module has no ``subprocess``
    global (or it is patched already)."""
    import subprocess

    from flwr.supernode import start_client_internal as loop

    if getattr(loop, "subprocess", None) is not subprocess:
        return None
    return _replace(loop, "subprocess", _WarmPopen(subprocess))


# -- object pulls ------------------------------------------------------------------------------
_PULLS = ("pull_objects", "pull_and_inflate_object_from_tree")
_BACKOFF = ("initial_backoff", "backoff_cap")


def short_object_pulls(initial: float, cap: float) -> Patch | None:
    """Start the back-off of Flower's object pulls at ``initial`` seconds and cap it at
    ``cap`` (Flower's: 1 and 10): the keyword defaults of its two pull functions, which every
    caller in Flower 1.42 leaves unset. ``None`` when a function or a default is missing.

    Raises
    ------
    ValueError
        Unless ``0 < initial <= cap``.
    """
    if not (0 < initial <= cap):
        raise ValueError(f"a pull back-off needs 0 < initial <= cap, got {initial}, {cap}")
    from flwr.supercore.inflatable import inflatable_utils as utils

    defaults = [getattr(getattr(utils, name, None), "__kwdefaults__", None) for name in _PULLS]
    if not all(d is not None and all(k in d for k in _BACKOFF) for d in defaults):
        return None
    kept = [{k: d[k] for k in _BACKOFF} for d in defaults if d is not None]
    for d in defaults:
        assert d is not None
        d["initial_backoff"], d["backoff_cap"] = float(initial), float(cap)

    def undo() -> None:
        for d, old in zip(defaults, kept, strict=True):
            assert d is not None
            d.update(old)

    return Patch(f"{utils.__name__}.{{{','.join(_PULLS)}}}.__kwdefaults__", undo)


# -- the SuperExec's executor ------------------------------------------------------------------
def fork_executor(wrap: Callable[[Any], Any]) -> Patch | None:
    """Have Flower's SuperExec loop use ``wrap(executor)`` for its subprocess executor
    (:class:`mel_opt.live.superexec.ForkExecutor`, which forks ClientApps from this warm
    process and hands other tasks to Flower's). ``None`` without ``os.fork`` or without the
    loop's ``get_executor`` (or with it patched already)."""
    from flwr.supercore.superexec import run_superexec as loop

    real = getattr(loop, "get_executor", None)
    if real is None or not hasattr(os, "fork") or getattr(real, "_melopt_wrapped", False):
        return None
    from flwr.supercore.constant import ExecutorType

    def get_executor(executor_type: Any, *args: Any, **kwargs: Any) -> Any:
        executor = real(executor_type, *args, **kwargs)
        if executor_type == ExecutorType.SUBPROCESS:
            return wrap(executor)
        return executor

    get_executor._melopt_wrapped = True  # type: ignore[attr-defined]
    return _replace(loop, "get_executor", get_executor)


# -- the simulation's sweep --------------------------------------------------------------------
def one_scan_per_sweep() -> Patch:
    """Flower's simulation hands the nodes' messages to its workers by asking its state,
    every 0.1 s, for each node's next message (``vce_api.add_messages_to_queue``); the
    in-memory state answers each question by checking every stored message, so one sweep
    costs K x K checks (a million at K = 1,000: seconds of the server's core in every sweep,
    taken from the learners). This puts in its place one scan per sweep that hands out the
    same messages (valid, not delivered yet, at most one per node per sweep, marked delivered
    as Flower marks them), under the state's lock. A state without those parts keeps
    Flower's own sweep. Use it as a context manager around the simulation."""
    from flwr.server.superlink.fleet.vce import vce_api
    from flwr.supercore.date import now

    original = vce_api.add_messages_to_queue

    def sweep(state: Any, queue: Any, nodes_mapping: dict[int, int], f_stop: Any) -> None:
        store = getattr(state, "message_ins_store", None)
        lock = getattr(state, "lock", None)
        check = getattr(state, "_check_stored_messages", None)
        if not isinstance(store, dict) or lock is None or check is None:
            original(state, queue, nodes_mapping, f_stop)
            return
        nodes = set(nodes_mapping)
        while not f_stop.is_set():
            for msg in _one_scan(store, lock, check, nodes, now):
                queue.put(msg)
            f_stop.wait(0.1)

    return _replace(vce_api, "add_messages_to_queue", sweep)


def _one_scan(store: dict[str, Any], lock: Any, check: Callable[[set[str]], None],
              nodes: set[int], now: Callable[[], Any]) -> list[Any]:
    """The messages of one sweep: each node's first valid undelivered one, marked delivered."""
    found: dict[int, Any] = {}
    with lock:
        check(set(store))  # drops the expired messages, as Flower's sweep does
        for msg in list(store.values()):
            dst = msg.metadata.dst_node_id
            if dst in nodes and dst not in found and msg.metadata.delivered_at == "":
                found[dst] = msg
        stamp = now().isoformat()
        for msg in found.values():
            msg.metadata.delivered_at = stamp
    return list(found.values())


# -- what each process applies -----------------------------------------------------------------
def for_supernode(tuning: NodeTuning) -> list[Patch]:
    """The patches of mel_opt's SuperNode wrapper (:mod:`mel_opt.live.supernode`): the
    idle poll, the warm SuperExec and the pulls, as ``tuning`` says."""
    patches = [short_idle_poll(tuning.idle_poll, tuning.reply_poll)
               if tuning.idle_poll is not None else None,
               warm_superexec() if tuning.warm else None]
    return [p for p in patches if p is not None] + for_serverapp(tuning)


def for_superexec(tuning: NodeTuning | None, wrap: Callable[[Any], Any]) -> list[Patch]:
    """The patches of the warm SuperExec (:mod:`mel_opt.live.superexec`): its executor
    (``wrap``, always) and its ClientApps' pulls (as ``tuning`` says)."""
    executor = fork_executor(wrap)
    return ([] if executor is None else [executor]) + for_serverapp(tuning)


def for_serverapp(tuning: NodeTuning | None) -> list[Patch]:
    """The pulls' back-off as ``tuning`` says (``None``, or no back-off: nothing): what the
    ServerApp applies, and the other processes with their own."""
    if tuning is None or tuning.pull_backoff is None:
        return []
    patch = short_object_pulls(*tuning.pull_backoff)
    return [] if patch is None else [patch]
