"""JSON reading that reports where a file is broken, and atomic writing."""

from __future__ import annotations

import json
import os
import tempfile
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


def atomic_write_text(path: str | os.PathLike[str], text: str, durable: bool = True) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same folder, then rename.

    A reader (or a resumed batch) sees either the old file or the complete new one, never a
    half-written file, even if the process is killed mid-write. ``durable=True`` also flushes
    the data to disk before the rename (survives a power cut, at a few ms per file); the batch
    runner skips that for its many small result files, since ``--resume`` re-validates every
    result it finds and re-solves anything that does not parse.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
