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
booleans) can be made, and nothing the file names is ever called. The one exception is numpy's
scalars (``np.float64(1.5)`` and the other fixed-size numbers, which numpy tools write): the
pickle names ``numpy.dtype`` and ``numpy._core.multiarray.scalar``, and the unpickler hands it
stand-ins of its own instead (:class:`_DtypeCode`, :func:`_numpy_scalar`) that accept only a
numeric type code, a byte order and the value's bytes and rebuild the plain Python number from
them; for protocols 0 to 2, whose bytes come as ``_codecs.encode(text, "latin1")``, a stand-in
that only encodes text as latin-1. Any other numpy global (an array) is refused with the fix.
Both readers refuse files larger than :data:`MAX_TRACE_BYTES` before reading them.

Every value is checked where it is read, and the message names the file, the client and the
field: a number (not a bool, a string, a list), finite, within the range of
:data:`VALUE_RANGES` (a value outside it is a unit error or a corrupt file; within it, every
conversion of :mod:`mel_opt.problems.fleet` stays finite), and an integer too large for a float
is refused rather than overflowing.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.validate import HugeInt

#: Largest trace file read, bytes (64 MiB; FedScale's capacity file of about 500,000 clients
#: is a few MB, FLASH's speed file a few KB).
MAX_TRACE_BYTES = 64 * 2**20

#: The accepted range of each kind of trace value, (low, high), inclusive. Latencies from
#: 1 microsecond to about 2.8 hours per sample; speeds from 1 bit/s to 1 Tbit/s (kbit/s) and
#: from 1 byte/s to 1 TB/s (KB/s); a speed's standard deviation from 0 to 1e9 KB/s; the times
#: of a behaviour trace from 0 to 1e9 s (about 30 years).
VALUE_RANGES: dict[str, tuple[float, float]] = {
    "ms": (1e-3, 1e7),
    "kbit/s": (1e-3, 1e9),
    "KB/s": (1e-3, 1e9),
    "KB/s sigma": (0.0, 1e9),
    "s": (0.0, 1e9),
}

#: The numpy type codes whose scalars a pickle may hold (numbers of fixed size).
_NUMPY_CODES = frozenset({"f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8",
                          "b1"})
_NUMPY_SCALAR = {("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar")}
_NUMPY_FIX = ("convert the file's numbers to plain floats first, e.g. pickle.dump({k: "
              "{f: float(v) for f, v in r.items()} for k, r in d.items()}, fh)")


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
class FedScaleBehaviour:
    """The clients of a FedScale behaviour trace (``client_behave_trace``), in the file's order.

    A client is online at time t [s] when ``active[i] <= t mod finish_s <= inactive[i]`` for
    some i (FedScale's ``ClientMetadata.is_active``).

    Attributes
    ----------
    ids : tuple of str
        Client ids (as text).
    active, inactive : tuple of numpy.ndarray
        Per client, the starts and ends of its online intervals [s], sorted and disjoint.
    finish_s : numpy.ndarray
        Per client, the span after which its trace repeats (``finish_time``) [s].
    """

    ids: tuple[str, ...]
    active: tuple[np.ndarray, ...]
    inactive: tuple[np.ndarray, ...]
    finish_s: np.ndarray


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


class _DtypeCode:
    """Stand-in for ``numpy.dtype`` in a pickle: a numeric type code and its byte order, no
    more (``numpy.dtype(code, align, copy)`` then ``BUILD`` with numpy's state tuple)."""

    def __init__(self, code: Any = None, align: Any = False, copy: Any = True) -> None:
        if not isinstance(code, str) or code not in _NUMPY_CODES:
            raise pickle.UnpicklingError(f"refused the numpy type {code!r:.40} (only numpy "
                                         f"scalars of fixed-size numbers are read); "
                                         + _NUMPY_FIX)
        self.code = code
        self.order = "="

    def __setstate__(self, state: Any) -> None:
        if not (isinstance(state, tuple) and len(state) == 8 and state[1] in ("<", ">", "|", "=")
                and state[2:5] == (None, None, None)):
            raise pickle.UnpicklingError("refused a numpy type of unexpected state; "
                                         + _NUMPY_FIX)
        self.order = state[1]


def _numpy_scalar(dtype: Any, data: Any = None) -> int | float | bool:
    """Stand-in for numpy's ``scalar(dtype, bytes)``: the plain Python number of that type
    code, byte order and bytes (``numpy.frombuffer``; nothing the file names is called)."""
    code = getattr(dtype, "code", None)
    if not isinstance(dtype, _DtypeCode) or code is None or not isinstance(data, bytes):
        raise pickle.UnpicklingError("refused a numpy scalar that is not a type code and its "
                                     "bytes; " + _NUMPY_FIX)
    kind = np.dtype(code).newbyteorder(dtype.order if dtype.order != "|" else "=")
    if len(data) != kind.itemsize:
        raise pickle.UnpicklingError(f"refused a numpy {code} scalar of {len(data)} bytes")
    value: int | float | bool = np.frombuffer(data, dtype=kind)[0].item()
    return value


def _latin1(text: Any, encoding: Any = None) -> bytes:
    """Stand-in for ``_codecs.encode`` (how protocols 0-2 write bytes): latin-1 text only."""
    if not isinstance(text, str) or encoding != "latin1":
        raise pickle.UnpicklingError("refused the global _codecs.encode other than for "
                                     "latin-1 text")
    return text.encode("latin1")


class PlainUnpickler(pickle.Unpickler):
    """An unpickler that builds only plain data and refuses every global.

    Every class, function or extension code a pickle names reaches :meth:`find_class`
    (``GLOBAL``, ``STACK_GLOBAL``, ``INST``, ``OBJ``, ``EXT*``), which raises for all but
    numpy's scalars, so nothing the file names can be put on the stack and ``REDUCE`` /
    ``NEWOBJ`` / ``BUILD`` have only this module's stand-ins to call: :class:`_DtypeCode` for
    ``numpy.dtype``, :func:`_numpy_scalar` for numpy's ``scalar`` and :func:`_latin1` for
    ``_codecs.encode`` (module doc). Persistent ids are refused too (:meth:`persistent_load`).
    """

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102 (documented above)
        if (module, name) in _NUMPY_SCALAR:
            return _numpy_scalar
        if (module, name) == ("numpy", "dtype"):
            return _DtypeCode
        if (module, name) == ("_codecs", "encode"):
            return _latin1
        if module == "numpy" or module.startswith("numpy."):
            raise pickle.UnpicklingError(f"refused the global {module}.{name} (numpy scalars "
                                         "are read, arrays and other numpy objects are not); "
                                         + _NUMPY_FIX)
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


def _number(name: str, where: str, value: Any, unit: str) -> float:
    """``value`` as a float within ``VALUE_RANGES[unit]``, or a UsageError naming the file
    and the field (``where``: the client and the field)."""
    if isinstance(value, HugeInt):
        raise UsageError(f"{name}: {where} is an integer of {value.digits} digits, too "
                         "large for a float")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{name}: {where} must be a number, got {type(value).__name__} "
                         f"{_shown(value)}")
    low, high = VALUE_RANGES[unit]
    try:
        out = float(value)
    except OverflowError:
        digits = int(abs(int(value)).bit_length() * math.log10(2)) + 1
        raise UsageError(f"{name}: {where} is an integer of about {digits} digits, too large "
                         "for a float") from None
    if not math.isfinite(out) or (out <= 0.0 if low > 0 else out < 0.0):
        kind = "a positive" if low > 0 else "a non-negative"
        raise UsageError(f"{name}: {where} must be {kind} finite number, got {value!r:.40}")
    if not low <= out <= high:
        raise UsageError(f"{name}: {where} = {out:g} {unit} is outside {low:g} to {high:g} "
                         f"{unit} (wrong units or a corrupt file?)")
    return out


def _shown(value: Any) -> str:
    """A short repr of a value read from a file (reprlib's limits: a long list or string
    cut; an integer too long for Python's repr named by its type)."""
    try:
        text = reprlib.repr(value)
    except ValueError:
        text = f"<{type(value).__name__} too large to show>"
    return text[:60]


def _positive(name: str, where: str, value: Any, unit: str) -> float:
    """``value`` as a positive float within ``VALUE_RANGES[unit]`` (:func:`_number`)."""
    out = _number(name, where, value, unit)
    if out <= 0.0:
        raise UsageError(f"{name}: {where} must be a positive finite number, got {value!r:.40}")
    return out


#: Longest client id kept as a learner's name (characters).
MAX_ID_CHARS = 200


def _entries(name: str, doc: Any, what: str) -> list[tuple[str, Mapping[Any, Any]]]:
    """The ``(id, record)`` pairs of a trace's top-level mapping, each record a mapping; the
    ids as text, each non-empty, at most :data:`MAX_ID_CHARS` long and distinct as text (the
    keys ``1`` and ``'1'`` collide and are refused, both named)."""
    if isinstance(doc, _Duplicates):
        raise UsageError(f"{name}: client id {doc.duplicates[0]!r:.60} appears more than once "
                         "in the file")
    if not isinstance(doc, dict):
        raise UsageError(f"{name}: a {what} must be a dict of client id -> record, got "
                         f"{type(doc).__name__}")
    if not doc:
        raise UsageError(f"{name}: the {what} has no clients")
    out: list[tuple[str, Mapping[Any, Any]]] = []
    seen: dict[str, Any] = {}
    for key, record in doc.items():
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise UsageError(f"{name}: client id {_shown(key)} must be a string or an integer")
        cid = str(key) if isinstance(key, str) or abs(key) < 10**MAX_ID_CHARS else ""
        if not cid or len(cid) > MAX_ID_CHARS:
            shown = (repr(key)[:40] if isinstance(key, str) or cid else
                     f"(an integer of about {int(abs(key).bit_length() * math.log10(2)) + 1} "
                     "digits)")
            raise UsageError(f"{name}: client id {shown} must be 1 to {MAX_ID_CHARS} "
                             "characters as text")
        if cid in seen:
            raise UsageError(f"{name}: client ids {seen[cid]!r} and {key!r} collide (both are "
                             f"learner {cid!r}); give each client one id")
        seen[cid] = key
        if isinstance(record, _Duplicates):
            raise UsageError(f"{name}: client {cid!r}: field {record.duplicates[0]!r:.40} "
                             "appears more than once")
        if not isinstance(record, dict):
            raise UsageError(f"{name}: client {cid!r} must be a dict, got "
                             f"{type(record).__name__}")
        out.append((cid, record))
    return out


class _Duplicates(dict):  # type: ignore[type-arg]
    """A JSON object with a repeated key (the keys repeated in ``duplicates``)."""

    duplicates: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of the FLASH reader: a dict, marked when a key repeats."""
    out = dict(pairs)
    if len(out) == len(pairs):
        return out
    seen: set[str] = set()
    marked = _Duplicates(out)
    marked.duplicates = [k for k, _ in pairs if k in seen or seen.add(k)]  # type: ignore[func-returns-value]
    return marked


def _json_int(token: str) -> int | HugeInt:
    """An integer literal of a FLASH file, or a :class:`HugeInt` past 400 digits."""
    return HugeInt(token) if len(token.lstrip("-")) > 400 else int(token)


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
        if "computation" not in record and "active" in record and "finish_time" in record:
            raise UsageError(f"{name}: client {cid!r} has 'active' and 'finish_time' but no "
                             "'computation': this is a FedScale behaviour trace "
                             "(client_behave_trace), which gives availability (melopt arena "
                             "--availability fedscale:PATH), not device capacity")
        for key in ("computation", "communication"):
            if key not in record:
                raise UsageError(f"{name}: client {cid!r} has no {key!r}")
        compute.append(_positive(name, f"client {cid!r}: 'computation'", record["computation"],
                                 "ms"))
        bandwidth.append(_positive(name, f"client {cid!r}: 'communication'",
                                   record["communication"], "kbit/s"))
        ids.append(cid)
    return FedScaleCapacity(tuple(ids), _frozen(compute), _frozen(bandwidth))


#: Most online intervals read per client of a behaviour trace.
MAX_INTERVALS = 100_000


def read_fedscale_behaviour(path: str | os.PathLike[str]) -> FedScaleBehaviour:
    """Read a FedScale behaviour trace (``client_behave_trace``), safely (as
    :func:`read_fedscale_capacity`: the same unpickler, nothing the file names is called).

    Parameters
    ----------
    path : path-like
        The pickled dict ``client id -> {"active": [s, ...], "inactive": [s, ...],
        "finish_time": s, ...}`` (other keys, FedScale's ``duration`` and ``model``, are
        ignored).

    Returns
    -------
    FedScaleBehaviour

    Raises
    ------
    UsageError
        One line naming the file, the client and the field: a refused global, a missing key,
        ``active`` / ``inactive`` not lists of numbers of the same length (at most
        :data:`MAX_INTERVALS`), a time negative, not finite or past 1e9 s, intervals not
        sorted or overlapping (``active[i] <= inactive[i] <= active[i + 1]``),
        ``finish_time`` not positive.
    """
    name = os.fspath(path)
    entries = _entries(name, load_plain_pickle(name), "FedScale behaviour trace")
    ids: list[str] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    finish: list[float] = []
    for cid, record in entries:
        if "active" not in record and "computation" in record:
            raise UsageError(f"{name}: client {cid!r} has 'computation' but no 'active': "
                             "this is a FedScale device-capacity file, not a behaviour trace")
        for key in ("active", "inactive", "finish_time"):
            if key not in record:
                raise UsageError(f"{name}: client {cid!r} has no {key!r}")
        cols = []
        for key in ("active", "inactive"):
            seq = record[key]
            where = f"client {cid!r}: {key!r}"
            if not isinstance(seq, (list, tuple)):
                raise UsageError(f"{name}: {where} must be a list of times, got "
                                 f"{type(seq).__name__}")
            if len(seq) > MAX_INTERVALS:
                raise UsageError(f"{name}: {where} has {len(seq):,} times, more than "
                                 f"{MAX_INTERVALS:,}")
            cols.append(np.array([_number(name, f"{where}[{i}]", v, "s")
                                  for i, v in enumerate(seq)], dtype=float))
        a, b = cols
        if a.size != b.size:
            raise UsageError(f"{name}: client {cid!r}: 'active' has {a.size} times and "
                             f"'inactive' {b.size}; they must pair up")
        bad = np.flatnonzero(a > b)
        if bad.size:
            i = int(bad[0])
            raise UsageError(f"{name}: client {cid!r}: 'active'[{i}] = {a[i]:g} is after "
                             f"'inactive'[{i}] = {b[i]:g}")
        bad = np.flatnonzero(b[:-1] > a[1:])
        if bad.size:
            i = int(bad[0])
            raise UsageError(f"{name}: client {cid!r}: interval {i + 1} starts at "
                             f"{a[i + 1]:g} s, before interval {i} ends at {b[i]:g} s (the "
                             "intervals must be sorted and disjoint)")
        finish.append(_positive(name, f"client {cid!r}: 'finish_time'", record["finish_time"],
                                "s"))
        a.setflags(write=False)
        b.setflags(write=False)
        ids.append(cid)
        starts.append(a)
        ends.append(b)
    return FedScaleBehaviour(tuple(ids), tuple(starts), tuple(ends), _frozen(finish))


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
    data = _read_capped(name)  # the size cap and a clear message for a missing or empty file
    try:  # NaN and infinities read as floats and refused with their field below
        doc = json.loads(data.decode("utf-8-sig"), object_pairs_hook=_pairs,
                         parse_int=_json_int)
    except UnicodeDecodeError as exc:
        raise UsageError(f"{name}: not a JSON document: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name}: not a JSON document: malformed JSON at line {exc.lineno}, "
                         f"column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise UsageError(f"{name}: not a JSON document: nested too deeply") from None
    entries = _entries(name, doc, "FLASH speed file")
    cols: dict[str, list[float]] = {key: [] for key in _FLASH_KEYS}
    for uid, record in entries:
        for key in _FLASH_KEYS:
            where = f"$[{_quoted(uid)}].{key}"
            if key not in record:
                raise UsageError(f"{name}: {where} is missing")
            unit = "KB/s" if key.endswith("_u") else "KB/s sigma"
            cols[key].append(_number(name, where, record[key], unit))
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
