"""JSON reading that reports where a file is broken (writing is :mod:`mel_opt.io.atomic`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mel_opt.errors import InstanceError, Issue, UsageError
from mel_opt.io.fields import MAX_INT_DIGITS
from mel_opt.io.validate import HugeInt


def _nan_constant(token: str) -> float:
    # Python's json accepts NaN/Infinity; keep them as floats so the validator can name the path.
    return float(token.replace("Infinity", "inf"))


def _guarded_int(token: str) -> int | HugeInt:
    """An integer literal, or a :class:`HugeInt` marker past ``MAX_INT_DIGITS`` digits.

    Converting a long literal is slow (quadratic) and past 4300 digits an error of Python's own;
    the marker lets the validator refuse the value with its JSON path instead.
    """
    if len(token) - token.startswith("-") > MAX_INT_DIGITS:
        return HugeInt(token)
    return int(token)


def parse_json_text(text: str, source: str | None = None) -> Any:
    """Parse JSON text; a syntax error becomes an :class:`InstanceError` at ``$``."""
    try:
        return json.loads(text, parse_constant=_nan_constant, parse_int=_guarded_int)
    except json.JSONDecodeError as exc:
        raise InstanceError(
            Issue("$", f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"),
            source,
        ) from None
    except RecursionError:
        raise InstanceError(Issue("$", "JSON nested too deeply"), source) from None


def read_json_file(path: str | os.PathLike[str]) -> Any:
    """Read and parse a JSON file.

    Raises
    ------
    UsageError
        The file does not exist or cannot be read.
    InstanceError
        The file is not valid UTF-8 JSON.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a directory, expected a JSON instance file") from None
    except OSError as exc:
        raise UsageError(f"{p}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InstanceError(Issue("$", f"not UTF-8 text ({exc.reason})"), str(p)) from None
    return parse_json_text(text, str(p))


def read_json_or_none(path: str | os.PathLike[str]) -> Any:
    """A JSON file's content, or None when it cannot be read or parsed for any reason (missing,
    unreadable, not UTF-8, malformed, nested too deeply): the one tolerant reader for files a
    command only peeks into (a batch's hint of a file's problem, its earlier results)."""
    try:
        return parse_json_text(Path(path).read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, InstanceError):
        return None
