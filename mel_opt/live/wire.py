"""Typed messages to Flower's records and back (the one place that knows both).

A message's :class:`~mel_opt.problems.messages.Records` become a ``RecordDict`` with one
``ConfigRecord`` under ``config`` (the scalars) and one ``ArrayRecord`` per list of arrays,
under its own name; :func:`records_of` reads such content back. Nothing is pickled.

Each list of arrays travels *packed*: its arrays' bytes one after the other in a single
one-dimensional ``uint8`` array, and the list's layout (each array's dtype and shape, as
``"<f4:64x50"``) in the config record under ``wire.layout.NAME``. Flower moves a message as a
tree of objects (the message, its record dict, each record, each array, each array's chunks),
every object in a request of its own at each hop (ServerApp to SuperLink, SuperLink to
SuperNode, SuperNode to its ClientApp, and back): a TwoNN's six arrays made sixteen objects
of a reply, one packed array makes six. On loopback with four nodes on two cores, each such
request cost 5-25 ms, so a reply took 0.2-0.35 s from its ClientApp to the SuperLink before
the packing. Content whose list has no layout entry (a client that sends Flower's own
``ArrayRecord`` of several arrays) is read as it is.
"""

from __future__ import annotations

import math

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from mel_opt.problems.messages import CONFIG, Records, ReplyError

__all__ = ["LAYOUT", "content_of", "pack", "records_of", "unpack"]

#: config-record key prefix of a packed list's layout (``LAYOUT + name``)
LAYOUT = "wire.layout."


def pack(arrays: list[np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """``arrays`` as one ``uint8`` buffer and their layout (``"DTYPE:SHAPE"`` each, the dtype
    in numpy's byte-order-explicit form, the shape ``x``-joined, ``""`` for a scalar)."""
    layout, parts = [], []
    for a in arrays:
        a = np.asarray(a, order="C")  # (ascontiguousarray would make a scalar 1-d)
        if a.dtype.hasobject:
            raise ValueError("an array of Python objects cannot travel packed")
        layout.append(f"{a.dtype.str}:{'x'.join(str(n) for n in a.shape)}")
        parts.append(a.reshape(-1).view(np.uint8))
    buffer = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)
    return buffer, layout


def unpack(buffer: np.ndarray, layout: list[str], name: str) -> list[np.ndarray]:
    """The arrays :func:`pack` packed (fresh, writable, aligned); ReplyError naming ``name``
    when the layout does not describe the buffer."""
    raw = np.asarray(buffer, order="C").reshape(-1).view(np.uint8)
    out: list[np.ndarray] = []
    offset = 0
    for i, entry in enumerate(layout):
        code, sep, dims = str(entry).partition(":")
        try:
            if not sep:
                raise ValueError("no ':'")
            dtype = np.dtype(code)
            shape = tuple(int(n) for n in dims.split("x")) if dims else ()
            if dtype.hasobject or any(n < 0 for n in shape):
                raise ValueError("not a plain array")
        except (TypeError, ValueError) as exc:
            raise ReplyError(f"{name}[{i}] has an unreadable layout {entry!r} ({exc})") from None
        size = math.prod(shape) * dtype.itemsize
        if offset + size > raw.size:
            raise ReplyError(f"{name}: its layout needs more than the {raw.size} bytes sent")
        out.append(raw[offset:offset + size].copy().view(dtype).reshape(shape))
        offset += size
    if offset != raw.size:
        raise ReplyError(f"{name}: {raw.size - offset} bytes beyond what its layout describes")
    return out


def content_of(records: Records) -> RecordDict:
    """``records`` as Flower content (each list of arrays packed)."""
    config: dict[str, object] = dict(records.config)
    packed: dict[str, ArrayRecord] = {}
    for name, arrays in records.arrays.items():
        buffer, layout = pack([np.asarray(a) for a in arrays])
        config[LAYOUT + name] = layout
        packed[name] = ArrayRecord([buffer])
    parts: dict[str, ArrayRecord | MetricRecord | ConfigRecord] = {
        CONFIG: ConfigRecord(config)}  # type: ignore[arg-type]
    parts.update(packed)
    return RecordDict(parts)


def records_of(content: RecordDict) -> Records:
    """The records of Flower content (ReplyError when it has no ``config`` record, or a packed
    list its layout does not describe)."""
    config = content.get(CONFIG)
    if not isinstance(config, ConfigRecord):
        raise ReplyError("the message has no config record")
    arrays = {}
    for name, record in content.items():
        if not isinstance(record, ArrayRecord):
            continue
        found = record.to_numpy_ndarrays()
        layout = config.get(LAYOUT + name)
        if layout is None:
            arrays[name] = found
        elif not isinstance(layout, list) or len(found) != 1:
            raise ReplyError(f"{name}: a packed list is one array with a list layout")
        else:
            arrays[name] = unpack(found[0], [str(e) for e in layout], name)
    scalars = {k: v for k, v in config.items() if not k.startswith(LAYOUT)}
    return Records(scalars, arrays)  # type: ignore[arg-type]
