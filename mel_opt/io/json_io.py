"""JSON reading that reports where a file is broken (writing is :mod:`mel_opt.io.atomic`).

Two parsers give the same document. orjson (a dependency) reads a text several times faster
than the standard library; the standard library's reader, with the hooks below, is the
reference: it keeps NaN and infinities as floats and integer literals of more than
``MAX_INT_DIGITS`` digits as :class:`HugeInt` markers, so the validator names their JSON path,
and it words syntax errors by line and column. orjson refuses everything the reference reads
into a float that is not finite, and lone surrogates and deep nesting; whatever it refuses is
read again by the reference, which gives the value or the message. The one thing orjson reads
differently is an integer literal outside the 64-bit range, which it turns into a float: a text
holding a run of 19 or more digits that could be such a literal (:func:`_long_integer`) is read
by the reference alone. :func:`read_json_file` hands orjson the file's bytes (no decoded copy
of a 100 MB text): orjson checks UTF-8 as strictly as Python, and bytes it refuses go to the
reference, which words the error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import orjson

from mel_opt.errors import InstanceError, Issue, MelOptError, UsageError
from mel_opt.io.fields import MAX_INT_DIGITS
from mel_opt.io.validate import HugeInt
from mel_opt.limits import max_input_bytes


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


# Digits -> "d"; the characters that can sit just before a digit of a number without that
# digit starting an integer literal (".": a fraction; "e", "E", "+": an exponent) -> "x";
# everything else (a sign, a separator, a letter, a byte of a multi-byte character) -> " ".
_CLASSES = bytes(ord("d") if 48 <= b <= 57 else ord("x") if b in b".eE+" else 32
                 for b in range(256))
_LONG_RUN = b" " + b"d" * 19
_BOM = b"\xef\xbb\xbf"


def _long_integer(raw: bytes) -> bool:
    """Whether ``raw`` may hold an integer literal of 19 digits or more (a superset: a run of
    19 digits that starts the text or follows anything but a fraction's point or an exponent's
    ``e``/``+``; a long number inside a string counts too). Every integer outside the 64-bit
    range has 19 digits or more. One ``translate`` and one substring search: linear, at C
    speed."""
    classes = raw.translate(_CLASSES)
    return _LONG_RUN in classes or classes.startswith(_LONG_RUN[1:])


def parse_json_text(text: str, source: str | None = None, *, raw: bytes | None = None) -> Any:
    """Parse JSON text; a syntax error becomes an :class:`InstanceError` at ``$``.

    ``raw``: the UTF-8 bytes ``text`` was decoded from, when the caller has them (saves
    encoding the text again for the long-integer test).
    """
    if raw is None:
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the reference reads it
            raw = b""
    if raw and not _long_integer(raw):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # the reference gives the value (NaN, 1e400, ...) or the message
    return _parse_reference(text, source)


def _parse_reference(text: str, source: str | None) -> Any:
    """The standard library's reading, with the hooks of the module doc."""
    try:
        return json.loads(text, parse_constant=_nan_constant, parse_int=_guarded_int)
    except json.JSONDecodeError as exc:
        raise InstanceError(
            Issue("$", f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"),
            source,
        ) from None
    except RecursionError:
        raise InstanceError(Issue("$", "JSON nested too deeply"), source) from None


def read_limited(path: Path) -> bytes:
    """The bytes of ``path``, refused before reading when there are more than
    :func:`mel_opt.limits.max_input_bytes`.

    A regular file's size comes from ``fstat``; a pipe or a device (``/dev/zero``) has none,
    so it is read up to one byte past the limit.

    Raises
    ------
    UsageError
        The file is larger than the limit (the message gives both numbers).
    OSError
        The file cannot be opened or read.
    """
    limit = max_input_bytes()
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise UsageError(_too_large(path, f"{size:,} bytes", limit))
        raw = fh.read(limit + 1)
    if len(raw) > limit:
        raise UsageError(_too_large(path, f"more than {limit:,} bytes", limit))
    return raw


def _too_large(path: Path, size: str, limit: int) -> str:
    return (f"{path}: {size}, larger than the {limit:,} bytes an input file may have "
            "(MELOPT_MAX_INPUT_BYTES raises the limit)")


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
        raw = read_limited(p)
    except FileNotFoundError:
        raise UsageError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{p}: is a directory, expected a JSON instance file") from None
    except OSError as exc:
        raise UsageError(f"{p}: cannot read ({exc.strerror})") from None
    if not _long_integer(raw):  # orjson straight from the bytes: no decoded copy of the text
        body = memoryview(raw)[len(_BOM):] if raw.startswith(_BOM) else raw
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass  # not UTF-8 (orjson checks it as strictly as Python), or the reference's case
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InstanceError(Issue("$", f"not UTF-8 text ({exc.reason})"), str(p)) from None
    return _parse_reference(text, str(p))


def read_json_or_none(path: str | os.PathLike[str]) -> Any:
    """A JSON file's content, or None when it cannot be read or parsed for any reason (missing,
    unreadable, larger than the input limit, not UTF-8, malformed, nested too deeply): the one
    tolerant reader for files a command only peeks into (a batch's hint of a file's problem,
    its earlier results)."""
    try:
        return parse_json_text(read_limited(Path(path)).decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, MelOptError):
        return None
