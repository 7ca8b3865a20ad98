"""A small collector of validation issues, each with its JSON path.

Problem parsers read raw JSON through a :class:`Validator`; every accessor records an
:class:`~mel_opt.errors.Issue` instead of raising, so one pass reports every problem in the file,
and :meth:`Validator.finish` raises a single :class:`~mel_opt.errors.InstanceError`.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from mel_opt.errors import InstanceError, Issue

_MISSING: Any = object()


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, str):
        shown = value if len(value) <= 30 else value[:27] + "..."
        return f"string {shown!r}"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return repr(value)


def readonly_array(values: Any, dtype: Any = float) -> np.ndarray:
    """A numpy copy of ``values`` that cannot be written (instances are immutable)."""
    arr = np.array(values, dtype=dtype)
    arr.setflags(write=False)
    return arr


def join(path: str, key: str | int) -> str:
    """JSON path of ``key`` under ``path`` (``$`` is the document root)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return key if path == "$" else f"{path}.{key}"


class Validator:
    """Collects issues while reading a JSON document.

    Parameters
    ----------
    source : str, optional
        File name used in the error message.
    """

    def __init__(self, source: str | None = None) -> None:
        self.source = source
        self.issues: builtins.list[Issue] = []

    # -- recording -------------------------------------------------------------------------
    def error(self, path: str, message: str) -> None:
        self.issues.append(Issue(path, message))

    def check(self, ok: bool, path: str, message: str) -> bool:
        if not ok:
            self.error(path, message)
        return ok

    @property
    def ok(self) -> bool:
        return not self.issues

    def finish(self) -> None:
        """Raise one :class:`InstanceError` carrying every issue found, if any."""
        if self.issues:
            raise InstanceError(self.issues, self.source)

    # -- accessors -------------------------------------------------------------------------
    def obj(self, value: Any, path: str) -> dict[str, Any] | None:
        if isinstance(value, dict):
            return value
        self.error(path, f"must be an object, got {_describe(value)}")
        return None

    def _get(self, obj: dict[str, Any], key: str, path: str, default: Any) -> tuple[bool, Any]:
        """(present, value): a missing required key is recorded and gives (False, None)."""
        if key in obj:
            return True, obj[key]
        if default is _MISSING:
            self.error(join(path, key), "is required but missing")
            return False, None
        return False, default

    def number(
        self,
        obj: dict[str, Any],
        key: str,
        path: str,
        *,
        default: Any = _MISSING,
        positive: bool = False,
        nonnegative: bool = False,
        minimum: float | None = None,
        maximum: float | None = None,
        integer: bool = False,
    ) -> Any:
        """Read a finite number (``integer=True``: a whole number) with range checks.

        Returns the value, or ``None`` after recording an issue.
        """
        present, value = self._get(obj, key, path, default)
        if not present:
            return value
        return self.as_number(
            value, join(path, key), positive=positive, nonnegative=nonnegative, minimum=minimum,
            maximum=maximum, integer=integer,
        )

    def as_number(
        self,
        value: Any,
        p: str,
        *,
        positive: bool = False,
        nonnegative: bool = False,
        minimum: float | None = None,
        maximum: float | None = None,
        integer: bool = False,
    ) -> Any:
        kind = "a whole number" if integer else "a number"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.error(p, f"must be {kind}, got {_describe(value)}")
            return None
        if not math.isfinite(value):
            self.error(p, f"must be a finite number, got {value}")
            return None
        if integer:
            if isinstance(value, float) and not value.is_integer():
                self.error(p, f"must be a whole number, got {value}")
                return None
            value = int(value)
        if positive and not value > 0:
            self.error(p, f"must be positive, got {value}")
            return None
        if nonnegative and value < 0:
            self.error(p, f"must be non-negative, got {value}")
            return None
        if minimum is not None and value < minimum:
            self.error(p, f"must be at least {minimum}, got {value}")
            return None
        if maximum is not None and value > maximum:
            self.error(p, f"must be at most {maximum}, got {value}")
            return None
        return value

    def string(
        self,
        obj: dict[str, Any],
        key: str,
        path: str,
        *,
        default: Any = _MISSING,
        choices: Sequence[str] | None = None,
    ) -> Any:
        p = join(path, key)
        present, value = self._get(obj, key, path, default)
        if not present:
            return value
        if not isinstance(value, str) or not value:
            self.error(p, f"must be a non-empty string, got {_describe(value)}")
            return None
        if choices is not None and value not in choices:
            self.error(p, f"must be one of {', '.join(map(repr, choices))}, got {value!r}")
            return None
        return value

    def boolean(self, obj: dict[str, Any], key: str, path: str, *, default: Any = _MISSING) -> Any:
        p = join(path, key)
        present, value = self._get(obj, key, path, default)
        if not present:
            return value
        if not isinstance(value, bool):
            self.error(p, f"must be true or false, got {_describe(value)}")
            return None
        return value

    def list(
        self,
        obj: dict[str, Any],
        key: str,
        path: str,
        *,
        default: Any = _MISSING,
        nonempty: bool = True,
        length: int | None = None,
    ) -> Any:
        p = join(path, key)
        present, value = self._get(obj, key, path, default)
        if not present:
            return value
        return self.as_list(value, p, nonempty=nonempty, length=length)

    def as_list(
        self, value: Any, p: str, *, nonempty: bool = True, length: int | None = None
    ) -> Any:
        if not isinstance(value, list):
            self.error(p, f"must be a list, got {_describe(value)}")
            return None
        if nonempty and not value:
            self.error(p, "must not be empty")
            return None
        if length is not None and len(value) != length:
            self.error(p, f"must have {length} entries, got {len(value)}")
            return None
        return value

    def objects(self, items: Any, path: str) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """(index, JSON path, object) for each entry of a list that is an object; other entries
        are recorded as issues and skipped. ``items`` that is not a list yields nothing (the
        list accessor has already reported it)."""
        if not isinstance(items, builtins.list):
            return
        for i, item in enumerate(items):
            p = join(path, i)
            obj = self.obj(item, p)
            if obj is not None:
                yield i, p, obj

    def unique_name(self, obj: dict[str, Any], path: str, default: str, seen: builtins.list[str],
                    kind: str) -> str:
        """The item's ``name`` (``default`` when absent or invalid), recorded in ``seen``;
        a non-string or duplicate name is an issue at ``path.name``."""
        name = obj.get("name", default)
        if not isinstance(name, str) or not name:
            self.error(join(path, "name"), f"must be a non-empty string, got {name!r}")
            name = default
        elif name in seen:
            self.error(join(path, "name"), f"duplicate {kind} name {name!r}")
        seen.append(name)
        return name

    def numbers(
        self, value: Any, p: str, *, length: int | None = None, **rules: Any
    ) -> builtins.list[Any] | None:
        """A list of numbers, each checked with the rules of :meth:`as_number`."""
        items = self.as_list(value, p, length=length)
        if items is None:
            return None
        out = [self.as_number(v, join(p, i), **rules) for i, v in enumerate(items)]
        return None if any(v is None for v in out) else out
