"""Units of work: the learning work split into independent runs, kept as they finish, run on
this machine's cores or on a Ray cluster.

``melopt train``, ``melopt arena`` (its tuning trials too) and ``melopt reproduce`` spend their
time in runs that do not read each other: one (scheme, seed) training run, one (trial, scheme,
seed) arena run. Each is a :class:`Unit`: a module-level function, its small arguments, and a
*key* that names everything its result depends on (the instance, the data set's bytes, every
setting the run reads, the scheme, the seed, the allocation it trains, mel_opt's version).
:func:`run_units` runs a list of them:

- **Kept as they finish.** With a :class:`UnitStore` (the command's output folder's
  ``units/``), every finished unit is written there atomically under the SHA-256 of its key,
  its key beside its result. A rerun of the same command finds them and skips them; a changed
  setting, instance, data set or version changes the key, so a stale unit is never read back
  (and a file whose key differs from the one asked for is not taken, whatever its name).
  Ctrl-C or a crash keeps every unit finished before it.
- **Where.** ``jobs`` worker processes on this machine (forked: they read the large shared
  object, the data set, from the parent's memory, nothing is copied per unit), or a Ray
  cluster reached at ``cluster`` (``auto``: the cluster ``ray start`` runs on this machine, or
  ``HOST:PORT``): the shared object is put in Ray's object store once, each unit is a Ray task
  that Ray runs again on another node when its worker or node is lost
  (:data:`RAY_RETRIES`). The results are the same wherever a unit ran: each run draws from
  its own seeded generators and trains with one BLAS thread.
- **Progress.** A :class:`Progress` hears how many units there are, how many were already
  done, and each one's start and end (the CLI draws them with rich: units done, the slowest
  running unit, an estimate of the time left).

The results come back in the order of the units, so a caller assembles the same rows whatever
ran where and in which order. A result must be JSON (rows of numbers and text): that is what
the store keeps, and a float written by :func:`json.dumps` reads back to the same bits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import multiprocessing
import os
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from mel_opt.errors import UsageError, needs_extra
from mel_opt.io.atomic import atomic_write

__all__ = ["RAY_RETRIES", "Counting", "Execution", "Progress", "Unit", "UnitStore", "current",
           "fingerprint", "plain", "run_units", "using"]

#: Times Ray runs a unit again after its worker or node was lost.
RAY_RETRIES = 3
#: The store's file format (part of every key: a new format never reads an old file).
FORMAT = 1


# ---- keys -----------------------------------------------------------------------------------

def _canonical(obj: Any) -> Any:
    """``obj`` as plain JSON values, the same for equal contents: dataclasses and mappings as
    sorted dicts, numpy arrays by dtype, shape and the SHA-256 of their bytes, floats by their
    exact repr (``nan``, ``inf`` included)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"__type__": type(obj).__name__,
                **{f.name: _canonical(getattr(obj, f.name))
                   for f in dataclasses.fields(obj)}}
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, np.ndarray):
        data = np.ascontiguousarray(obj)
        return {"__array__": str(data.dtype), "shape": list(data.shape),
                "sha256": hashlib.sha256(data.tobytes()).hexdigest()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return {"__float__": repr(float(obj))}
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"cannot key a {type(obj).__name__}")


def fingerprint(obj: Any) -> str:
    """The SHA-256 of ``obj``'s canonical JSON (:func:`_canonical`): equal contents, equal
    fingerprints; a changed number, array element or field, another fingerprint."""
    text = json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def code_version() -> str:
    """mel_opt's version and the SHA-256 of its Python sources: a unit computed by other code
    is another unit."""
    import mel_opt

    root = Path(mel_opt.__file__).parent
    h = hashlib.sha256(mel_opt.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


_DATA: dict[int, tuple[weakref.ref[Any], str]] = {}


def data_fingerprint(ds: Any) -> str:
    """:func:`fingerprint` of a data set (its arrays' bytes), kept while the object lives (a
    data set is hashed once however many of a command's runs read it; the cache holds no
    data set alive)."""
    hit = _DATA.get(id(ds))
    if hit is not None and hit[0]() is ds:
        return hit[1]
    digest = fingerprint(ds)
    for key in [k for k, (ref, _) in _DATA.items() if ref() is None]:
        del _DATA[key]
    _DATA[id(ds)] = (weakref.ref(ds), digest)
    return digest


def plain(value: Any) -> Any:
    """``value`` with numpy scalars and arrays turned into Python numbers and lists (what a
    unit returns, and the store keeps)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value


# ---- units and their store ------------------------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """One independent run.

    Attributes
    ----------
    key : mapping
        Everything the result depends on (:func:`fingerprint` names the stored file).
    label : str
        What the progress display calls it (``arena fedbuff seed 3``).
    fn : callable
        A module-level function, called ``fn(shared, *args)``; returns JSON values.
    args : tuple
        Its arguments besides the shared object (small: they travel with each unit).
    """

    key: Mapping[str, Any]
    label: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()

    @property
    def digest(self) -> str:
        return fingerprint({"format": FORMAT, **self.key})


class UnitStore:
    """A folder of finished units, ``<digest>.json`` each: ``{"key", "label", "seconds",
    "value"}``, written atomically."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def path(self, unit: Unit) -> Path:
        return self.folder / f"{unit.digest}.json"

    def get(self, unit: Unit) -> tuple[bool, Any]:
        """(True, value) when ``unit`` is stored with its own key, else (False, None): a file
        that does not parse or holds another key is not read back (the unit runs again and
        replaces it)."""
        try:
            doc = json.loads(self.path(unit).read_text())
        except (OSError, ValueError):
            return False, None
        if not isinstance(doc, dict) or "value" not in doc:
            return False, None
        if doc.get("key") != _canonical({"format": FORMAT, **unit.key}):
            return False, None
        return True, doc["value"]

    def put(self, unit: Unit, value: Any, seconds: float) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        doc = {"key": _canonical({"format": FORMAT, **unit.key}), "label": unit.label,
               "seconds": seconds, "value": value}
        atomic_write(self.path(unit), json.dumps(doc, allow_nan=True))


# ---- where units run ------------------------------------------------------------------------

class Progress(Protocol):
    """What :func:`run_units` tells a display."""

    def planned(self, total: int, done: int) -> None:
        """``total`` units, ``done`` of them already in the store."""

    def started(self, label: str) -> None:
        """A unit began (or, in a pool, took a free worker)."""

    def finished(self, label: str, seconds: float) -> None:
        """A unit ended after ``seconds``."""


class Counting:
    """A :class:`Progress` that calls ``callback(done, total)`` as units finish (a library
    call's ``progress`` argument), and passes every event on to ``inner``."""

    def __init__(self, callback: Callable[[int, int], None] | None,
                 inner: Progress | None = None, offset: int = 0,
                 total: int | None = None) -> None:
        self.callback, self.inner = callback, inner
        self.offset, self.total = offset, total
        self.done = 0
        self.count = 0

    def planned(self, total: int, done: int) -> None:
        self.count, self.done = total, done
        if self.callback is not None and done:
            self.callback(self.offset + done, self.total or total)
        if self.inner is not None:
            self.inner.planned(total, done)

    def started(self, label: str) -> None:
        if self.inner is not None:
            self.inner.started(label)

    def finished(self, label: str, seconds: float) -> None:
        self.done += 1
        if self.callback is not None:
            self.callback(self.offset + self.done, self.total or self.count)
        if self.inner is not None:
            self.inner.finished(label, seconds)


@dataclass(frozen=True)
class Execution:
    """Where and how a command's units run.

    Attributes
    ----------
    jobs : int or None
        Worker processes on this machine (1: in this process; None: the command's default).
    cluster : str or None
        A Ray cluster's address (``auto``: the one running on this machine); the units run
        there instead of on ``jobs`` processes.
    store : str or None
        The folder finished units are kept in (None: nothing is kept).
    progress : Progress or None
    """

    jobs: int | None = None
    cluster: str | None = None
    store: str | None = None
    progress: Progress | None = None

    @property
    def workers(self) -> int:
        """How many units may run at once here (a cluster decides its own)."""
        return max(1, int(self.jobs or 1))


def refuse_cluster_on_gpu(ex: Execution, device: str) -> None:
    """UsageError for ``--cluster`` with a GPU device: a Ray task does not ask its node for a
    GPU yet, so the units run on one GPU here, not on the cluster."""
    if ex.cluster is not None and device != "cpu":
        raise UsageError(f"--cluster: the units run on the cluster's CPUs; --device {device} "
                         "trains on this machine's GPU (leave out one of the two)")


_CURRENT: list[Execution] = [Execution()]


def current() -> Execution:
    """The execution :func:`using` set (one unit at a time, nothing kept, by default)."""
    return _CURRENT[-1]


@contextlib.contextmanager
def using(execution: Execution) -> Iterator[Execution]:
    """Run the units of the library calls inside the block as ``execution`` says (the CLI's
    ``--jobs``, ``--cluster`` and output folder reach ``train`` inside a catalogue entry this
    way)."""
    _CURRENT.append(execution)
    try:
        yield execution
    finally:
        _CURRENT.pop()


#: The shared object of the units a pool of forked workers runs (set by :func:`_run_pool`).
_SHARED: list[Any] = [None]
_UNITS: list[Sequence[Unit]] = [()]


def _pool_call(i: int) -> tuple[int, Any, float]:
    unit = _UNITS[0][i]
    start = time.perf_counter()
    value = plain(unit.fn(_SHARED[0], *unit.args))
    return i, value, time.perf_counter() - start


def _can_pool(n: int) -> bool:
    from mel_opt.solvers import forked

    return (n > 1 and not multiprocessing.current_process().daemon
            and "fork" in multiprocessing.get_all_start_methods() and forked.can_fork())


def run_units(units: Sequence[Unit], shared: Any = None,
              execution: Execution | None = None) -> list[Any]:
    """Every unit's result, in the order of ``units`` (module docstring).

    Units already in the store are read back, the others run (``execution``, by default
    :func:`current`) and are stored as each finishes. Ctrl-C stops the run at once; what was
    stored stays.

    Raises
    ------
    UsageError
        A ``cluster`` that cannot be reached, or Ray not installed.
    """
    ex = execution if execution is not None else current()
    store = UnitStore(ex.store) if ex.store else None
    results: list[Any] = [None] * len(units)
    todo: list[int] = []
    for i, unit in enumerate(units):
        found, value = store.get(unit) if store is not None else (False, None)
        if found:
            results[i] = value
        else:
            todo.append(i)
    if ex.progress is not None:
        ex.progress.planned(len(units), len(units) - len(todo))

    def finished(i: int, value: Any, seconds: float) -> None:
        results[i] = value
        if store is not None:
            store.put(units[i], value, seconds)
        if ex.progress is not None:
            ex.progress.finished(units[i].label, seconds)

    if not todo:
        return results
    if ex.cluster is not None:
        _run_ray(units, todo, shared, ex, finished)
    elif _can_pool(min(ex.workers, len(todo))):
        _run_pool(units, todo, shared, ex, finished)
    else:
        for i in todo:
            if ex.progress is not None:
                ex.progress.started(units[i].label)
            start = time.perf_counter()
            value = plain(units[i].fn(shared, *units[i].args))
            finished(i, value, time.perf_counter() - start)
    return results


def _run_pool(units: Sequence[Unit], todo: list[int], shared: Any, ex: Execution,
              finished: Callable[[int, Any, float], None]) -> None:
    """``todo`` on forked workers; a worker's unit starts when a worker is free, in order."""
    from mel_opt.processes import pool_worker_init

    n = min(ex.workers, len(todo))
    _SHARED[0], _UNITS[0] = shared, units
    try:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(n, initializer=pool_worker_init) as pool:
            waiting = list(todo)
            running = waiting[:n]
            del waiting[:n]
            if ex.progress is not None:
                for i in running:
                    ex.progress.started(units[i].label)
            for i, value, seconds in pool.imap_unordered(_pool_call, todo):
                finished(i, value, seconds)
                running.remove(i)
                if waiting:  # the pool takes the next unit in order
                    nxt = waiting.pop(0)
                    running.append(nxt)
                    if ex.progress is not None:
                        ex.progress.started(units[nxt].label)
    finally:
        _SHARED[0], _UNITS[0] = None, ()


def _ray_call(fn: Callable[..., Any], shared: Any, args: tuple[Any, ...]
              ) -> tuple[Any, float, str, str]:
    import ray

    start = time.perf_counter()
    value = plain(fn(shared, *args))
    return (value, time.perf_counter() - start, ray.get_runtime_context().get_node_id(),
            code_version())


def connect(address: str) -> tuple[Any, bool]:
    """Ray, connected to the cluster at ``address``, and whether this call connected it (a Ray
    this process already runs is used as it is); UsageError naming ``--cluster`` when Ray is
    not installed or nothing answers there."""
    try:
        import ray
    except ImportError:
        raise UsageError(needs_extra("--cluster", "ray")) from None
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    if ray.is_initialized():
        return ray, False
    from mel_opt.ray_local import connect_ray

    check_address(address)
    try:
        connect_ray(ray, address)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"--cluster: no Ray cluster answers at {address!r} ({first}); start "
                         "one with `ray start --head`, or give its HOST:PORT") from None
    return ray, True


def check_address(address: str, timeout: float = 5.0) -> None:
    """UsageError naming ``--cluster`` when nothing listens at ``HOST:PORT`` (Ray's own
    driver retries an address that does not answer for minutes); ``auto`` is Ray's to find."""
    import socket

    if address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--cluster: {address!r} is not auto or HOST:PORT")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc) or type(exc).__name__
        raise UsageError(f"--cluster: no Ray cluster answers at {address} ({why}); start one "
                         "with `ray start --head`, or give its HOST:PORT") from None


def _run_ray(units: Sequence[Unit], todo: list[int], shared: Any, ex: Execution,
             finished: Callable[[int, Any, float], None]) -> None:
    """``todo`` as Ray tasks on the cluster; a task whose worker or node is lost runs again
    (:data:`RAY_RETRIES`)."""
    assert ex.cluster is not None
    ray, connected = connect(ex.cluster)
    pending: dict[Any, int] = {}
    try:
        call = ray.remote(max_retries=RAY_RETRIES, num_cpus=1)(_ray_call)
        ref = ray.put(shared)
        for i in todo:
            pending[call.remote(units[i].fn, ref, units[i].args)] = i
            if ex.progress is not None:
                ex.progress.started(units[i].label)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for r in ready:
                i = pending.pop(r)
                value, seconds, node, code = ray.get(r)
                if code != code_version():  # another mel_opt there: its numbers are not ours
                    raise UsageError(f"--cluster: node {node[:12]} runs other mel_opt code than "
                                     "this machine; install the same mel_opt on every node")
                finished(i, value, seconds)
    except BaseException:
        for r in list(pending):
            with contextlib.suppress(Exception):
                ray.cancel(r, force=True)
        raise
    finally:
        if connected:  # the cluster stays; this process leaves it
            with contextlib.suppress(Exception):
                ray.shutdown()


def eta(done_seconds: Sequence[float], left: int, workers: int) -> float | None:
    """Seconds left: the mean finished unit's time times the units left, over ``workers``
    (None before any unit finished)."""
    if not done_seconds:
        return None
    return float(np.mean(done_seconds)) * left / max(1, workers) if left else 0.0


def fmt_seconds(s: float) -> str:
    """``42 s``, ``3.5 min``, ``1.2 h``."""
    if not math.isfinite(s):
        return "-"
    if s < 90:
        return f"{s:.0f} s"
    return f"{s / 60:.1f} min" if s < 5400 else f"{s / 3600:.1f} h"
