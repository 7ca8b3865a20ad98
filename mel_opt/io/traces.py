"""Readers of the two public device-trace formats of federated-learning simulators.

FedScale's device-capacity file (``client_device_capacity``, Lai et al., "FedScale:
Benchmarking Model and System Performance of Federated Learning at Scale", ICML 2022,
github.com/SymbioticLab/FedScale, ``benchmark/dataset/data/device_info/``) is a pickled dict
``client id -> {"computation": ms, "communication": kbit/s}``: ``computation`` is a device's
inference latency in milliseconds per sample (from AI Benchmark measurements; FedScale counts a
training pass as three times the inference) and ``communication`` its bandwidth in kbit/s (from
MobiPerf measurements; FedScale divides model sizes in kbit by it).

FLASH's ``models/speed_distri.json`` (Yang et al., "Characterizing Impacts of Heterogeneity in
Federated Learning upon Large-Scale Smartphone Data", WWW 2021, github.com/PKU-Chengxu/FLASH,
BSD-2-Clause) is a JSON object ``user id -> {"down_u", "down_sigma", "up_u", "up_sigma"}``: the
mean and standard deviation, in KB/s (1 KB = 1,024 bytes, as FLASH divides model bytes by
1,024), of each user's download and upload speed; FLASH draws each transfer's speed from the
normal law with those parameters.

A pickle can run arbitrary code when loaded: :func:`read_fedscale_capacity` reads it with
:class:`PlainUnpickler`, whose ``find_class`` refuses every global, so only the values pickle
builds without naming a class (dicts, lists, tuples, sets, numbers, strings, bytes, None,
booleans) can be made, and nothing is ever called. Both readers refuse files larger than
:data:`MAX_TRACE_BYTES` before reading them.
"""

from __future__ import annotations

import io
import math
import os
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.errors import InstanceError, UsageError
from mel_opt.io.json_io import read_json_file

#: Largest trace file read, bytes (64 MiB; FedScale's capacity file of about 500,000 clients
#: is a few MB, FLASH's speed file a few KB).
MAX_TRACE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class FedScaleCapacity:
    """The clients of a FedScale device-capacity file, in the file's order.

    Attributes
    ----------
    ids : tuple of str
        Client ids (as text).
    compute_ms : numpy.ndarray
        Inference latency per sample [ms] (one training pass over a sample: 3 x this).
    bandwidth_kbps : numpy.ndarray
        Link bandwidth [kbit/s], used both ways.
    """

    ids: tuple[str, ...]
    compute_ms: np.ndarray
    bandwidth_kbps: np.ndarray


@dataclass(frozen=True)
class FlashSpeeds:
    """The users of a FLASH ``speed_distri.json``, in the file's order; speeds in KB/s.

    Attributes
    ----------
    ids : tuple of str
        User ids.
    down_mean, down_sigma, up_mean, up_sigma : numpy.ndarray
        Mean and standard deviation of the download and upload speed [KB/s, 1 KB = 1,024 B].
    """

    ids: tuple[str, ...]
    down_mean: np.ndarray
    down_sigma: np.ndarray
    up_mean: np.ndarray
    up_sigma: np.ndarray


class PlainUnpickler(pickle.Unpickler):
    """An unpickler that builds only plain data and refuses every global.

    Every class, function or extension code a pickle names reaches :meth:`find_class`
    (``GLOBAL``, ``STACK_GLOBAL``, ``INST``, ``OBJ``, ``EXT*``), which always raises, so no
    callable can be put on the stack and ``REDUCE`` / ``NEWOBJ`` / ``BUILD`` have nothing to
    call; persistent ids are refused too (:meth:`persistent_load`).
    """

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102 (documented above)
        raise pickle.UnpicklingError(f"refused the global {module}.{name} (only plain dicts, "
                                     "lists, numbers and strings are read)")

    def persistent_load(self, pid: Any) -> Any:  # noqa: D102 (documented above)
        raise pickle.UnpicklingError("refused a persistent id (only plain data is read)")


def _read_capped(path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path``, refused above :data:`MAX_TRACE_BYTES` before they are read."""
    name = os.fspath(path)
    try:
        size = os.stat(name).st_size
        if size > MAX_TRACE_BYTES:
            raise UsageError(f"{name}: {size:,} bytes, more than the {MAX_TRACE_BYTES:,} a "
                             "trace file may have")
        with open(name, "rb") as fh:
            data = fh.read(MAX_TRACE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{name}: cannot read the trace file ({exc.strerror or exc})") from None
    if len(data) > MAX_TRACE_BYTES:
        raise UsageError(f"{name}: more than the {MAX_TRACE_BYTES:,} bytes a trace file may have")
    if not data:
        raise UsageError(f"{name}: the trace file is empty")
    return data


def load_plain_pickle(path: str | os.PathLike[str]) -> Any:
    """The value pickled in ``path``, built by :class:`PlainUnpickler` (nothing is called).

    Raises
    ------
    UsageError
        Naming the file and what was refused (a global, a persistent id) or why the bytes are
        not a pickle; the file over :data:`MAX_TRACE_BYTES`, missing or empty.
    """
    name = os.fspath(path)
    data = _read_capped(name)
    try:
        return PlainUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as exc:
        raise UsageError(f"{name}: not read: {exc}") from None
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            OverflowError, MemoryError, RecursionError) as exc:
        raise UsageError(f"{name}: not a readable pickle ({type(exc).__name__}: {exc})") from None


def _positive(name: str, where: str, value: Any) -> float:
    """``value`` as a positive finite float, or a UsageError naming the file and the field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{name}: {where} must be a number, got {type(value).__name__} "
                         f"{value!r:.40}")
    out = float(value)
    if not math.isfinite(out) or out <= 0.0:
        raise UsageError(f"{name}: {where} must be a positive finite number, got {value!r}")
    return out


def _entries(name: str, doc: Any, what: str) -> list[tuple[str, Mapping[Any, Any]]]:
    """The ``(id, record)`` pairs of a trace's top-level mapping, each record a mapping."""
    if not isinstance(doc, dict):
        raise UsageError(f"{name}: a {what} must be a dict of client id -> record, got "
                         f"{type(doc).__name__}")
    if not doc:
        raise UsageError(f"{name}: the {what} has no clients")
    out: list[tuple[str, Mapping[Any, Any]]] = []
    for key, record in doc.items():
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise UsageError(f"{name}: client id {key!r:.40} must be a string or an integer")
        if not isinstance(record, dict):
            raise UsageError(f"{name}: client {str(key)!r} must be a dict, got "
                             f"{type(record).__name__}")
        out.append((str(key), record))
    return out


def read_fedscale_capacity(path: str | os.PathLike[str]) -> FedScaleCapacity:
    """Read a FedScale device-capacity file (module docstring), safely.

    Parameters
    ----------
    path : path-like
        The pickled dict ``client id -> {"computation": ms per sample, "communication":
        kbit/s}`` (other keys of a record are ignored).

    Returns
    -------
    FedScaleCapacity
        Ids, inference latency [ms per sample] and bandwidth [kbit/s] per client.

    Raises
    ------
    UsageError
        One message naming the file, and the client and field where one is at fault: a refused
        global, not a dict, no clients, a missing key, a value not a positive finite number.
    """
    name = os.fspath(path)
    entries = _entries(name, load_plain_pickle(name), "FedScale device-capacity file")
    ids, compute, bandwidth = [], [], []
    for cid, record in entries:
        for key in ("computation", "communication"):
            if key not in record:
                raise UsageError(f"{name}: client {cid!r} has no {key!r}")
        compute.append(_positive(name, f"client {cid!r}: 'computation'", record["computation"]))
        bandwidth.append(_positive(name, f"client {cid!r}: 'communication'",
                                   record["communication"]))
        ids.append(cid)
    return FedScaleCapacity(tuple(ids), _frozen(compute), _frozen(bandwidth))


_FLASH_KEYS = ("down_u", "down_sigma", "up_u", "up_sigma")


def read_flash_speeds(path: str | os.PathLike[str]) -> FlashSpeeds:
    """Read FLASH's ``speed_distri.json`` (module docstring).

    Parameters
    ----------
    path : path-like
        The JSON object ``user id -> {"down_u", "down_sigma", "up_u", "up_sigma"}`` [KB/s].

    Returns
    -------
    FlashSpeeds
        Means and standard deviations of each user's download and upload speed [KB/s].

    Raises
    ------
    UsageError
        Naming the file and the JSON path of the fault (``$["u1"].up_u``): not an object, no
        users, a missing key, a mean not positive and finite, a sigma negative or not finite.
    """
    name = os.fspath(path)
    _read_capped(name)  # the size cap and a clear message for a missing or empty file
    try:
        doc = read_json_file(name)
    except InstanceError as exc:
        raise UsageError(f"{name}: not a JSON document: {exc.issues[0]}") from None
    entries = _entries(name, doc, "FLASH speed file")
    cols: dict[str, list[float]] = {key: [] for key in _FLASH_KEYS}
    for uid, record in entries:
        for key in _FLASH_KEYS:
            where = f"$[{_quoted(uid)}].{key}"
            if key not in record:
                raise UsageError(f"{name}: {where} is missing")
            value = record[key]
            if key.endswith("_u"):
                cols[key].append(_positive(name, where, value))
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise UsageError(f"{name}: {where} must be a non-negative finite number, got "
                                 f"{value!r:.40}")
            cols[key].append(float(value))
    return FlashSpeeds(tuple(uid for uid, _ in entries), _frozen(cols["down_u"]),
                       _frozen(cols["down_sigma"]), _frozen(cols["up_u"]),
                       _frozen(cols["up_sigma"]))


def _quoted(text: str) -> str:
    """``text`` as a JSON string literal (for a JSON path)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _frozen(values: list[float]) -> np.ndarray:
    """A read-only float array of ``values``."""
    out = np.asarray(values, dtype=float)
    out.setflags(write=False)
    return out
