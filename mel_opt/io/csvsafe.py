"""CSV text whose cells a spreadsheet shows as text, never runs as formulas.

Spreadsheet programs treat a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and, in some,
a leading tab or carriage return) as a formula, so an instance named
``=HYPERLINK("http://...")`` would become a live link in ``summary.csv``. Every CSV file
mel_opt writes is built by :func:`csv_text`, which prefixes such text cells with ``'`` (the
spreadsheet convention for "literal text"). Numbers are left alone: a float ``-1.5`` and a
string that parses as a number (``"-1.5"``, ``"+3"``) cannot be a formula and stay numbers.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def safe_cell(value: Any) -> Any:
    """``value`` as a CSV cell: None becomes empty, formula-like text gets a leading ``'``.

    Non-string values (numbers, booleans) are returned unchanged for the csv module to format.
    """
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_TRIGGERS) and not _is_number(value):
        return "'" + value
    return value


def csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]],
             strict: bool = False) -> str:
    """A CSV document (``\\n`` line ends): the header ``columns``, then one line per row.

    A row's missing keys give empty cells; every cell (the header too) goes through
    :func:`safe_cell`. A row's keys outside ``columns`` are left out, or, with ``strict``,
    refused (ValueError naming them): a writer whose columns must hold every key says so.
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([safe_cell(c) for c in columns])
    known = set(columns)
    for r in rows:
        if strict and not known.issuperset(r):
            raise ValueError(f"row keys {sorted(set(r) - known)} are not columns")
        w.writerow([safe_cell(r.get(c)) for c in columns])
    return buf.getvalue()
