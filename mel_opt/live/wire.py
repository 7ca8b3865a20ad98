"""Typed messages to Flower's records and back (the one place that knows both).

A message's :class:`~mel_opt.problems.messages.Records` become a ``RecordDict`` with one
``ConfigRecord`` under ``config`` (the scalars) and one ``ArrayRecord`` per list of arrays,
under its own name; :func:`records_of` reads such content back. Arrays travel as Flower's
ArrayRecord (protobuf): nothing is pickled.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from mel_opt.problems.messages import CONFIG, Records, ReplyError

__all__ = ["content_of", "records_of"]


def content_of(records: Records) -> RecordDict:
    """``records`` as Flower content."""
    parts: dict[str, ArrayRecord | MetricRecord | ConfigRecord] = {
        CONFIG: ConfigRecord(dict(records.config))}
    for name, arrays in records.arrays.items():
        parts[name] = ArrayRecord([np.asarray(a) for a in arrays])
    return RecordDict(parts)


def records_of(content: RecordDict) -> Records:
    """The records of Flower content (ReplyError when it has no ``config`` record)."""
    config = content.get(CONFIG)
    if not isinstance(config, ConfigRecord):
        raise ReplyError("the message has no config record")
    arrays = {name: record.to_numpy_ndarrays() for name, record in content.items()
              if isinstance(record, ArrayRecord)}
    return Records({k: v for k, v in config.items()}, arrays)  # type: ignore[misc]
