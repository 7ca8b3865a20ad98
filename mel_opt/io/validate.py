"""A collector of validation issues, each with its JSON path, and the checks of single values.

Problem parsers read raw JSON through a :class:`Validator`; every check records an
:class:`~mel_opt.errors.Issue` instead of raising, so one pass reports every problem in the file,
and :meth:`Validator.finish` raises a single :class:`~mel_opt.errors.InstanceError`.

:meth:`Validator.check_value` is the one place where the message of a bad value is written;
:meth:`Validator.check_column` validates a whole column of numbers with numpy and calls it only
for the failing entries, so large files are checked in linear time with the same messages.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from mel_opt.errors import InstanceError, Issue
from mel_opt.io.fields import MAX_INT_DIGITS, Field, Kind, Sign

_MISSING: Any = object()
#: Columns shorter than this are checked value by value (numpy's set-up costs more).
_VECTOR_MIN = 32


class HugeInt:
    """An integer literal of more than :data:`~mel_opt.io.fields.MAX_INT_DIGITS` digits.

    The JSON reader keeps it as this marker instead of converting it (which is slow and, past
    4300 digits, an error); a numeric field holding it is refused with its JSON path.
    """

    __slots__ = ("digits", "negative")

    def __init__(self, text: str) -> None:
        self.negative = text.startswith("-")
        self.digits = len(text) - self.negative

    def __repr__(self) -> str:
        return _huge(self.negative, self.digits)


def _huge(negative: bool, digits: int) -> str:
    return f"{'a negative' if negative else 'an'} integer of {digits} digits"


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
    return _show(value)


def _show(value: Any) -> str:
    """A number as the messages print it; huge integers by their digit count (no conversion
    to text: Python refuses that past 4300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 99:
        digits = int(value.bit_length() * 0.30103) + 1  # exact after the correction below
        if abs(value) < 10 ** (digits - 1):
            digits -= 1
        return _huge(value < 0, digits)
    return repr(value)


def _bound(x: float) -> str:
    """A range bound as the messages print it (whole numbers without a decimal point)."""
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e6):
        return str(int(x))
    return f"{x:g}"


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


def _rule(kind: Kind, *, positive: bool = False, nonnegative: bool = False,
          minimum: float | None = None, maximum: float | None = None) -> Field:
    sign: Sign | None = "positive" if positive else "non-negative" if nonnegative else None
    return Field("", kind, sign=sign, minimum=minimum, maximum=maximum)


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

    # -- single values: the one source of the messages ------------------------------------
    def check_value(self, value: Any, p: str, f: Field) -> Any:
        """``value`` checked against the kind, sign, range and choices of field ``f``.

        Returns the value (a whole float becomes ``int`` for integer fields), or ``None``
        after recording one issue at path ``p``.
        """
        if value is _MISSING:
            self.error(p, "is required but missing" + (f" {f.missing_hint}" if f.missing_hint
                                                       else ""))
            return None
        if f.kind == "string":
            if not isinstance(value, str) or not value:
                self.error(p, f"must be a non-empty string, got {_describe(value)}")
                return None
            if f.choices and value not in f.choices:
                self.error(p, f"must be one of {', '.join(map(repr, f.choices))}, "
                           f"got {value!r}")
                return None
            return value
        if f.kind == "bool":
            if not isinstance(value, bool):
                self.error(p, f"must be true or false, got {_describe(value)}")
                return None
            return value
        return self._check_number(value, p, f)

    def _check_number(self, value: Any, p: str, f: Field) -> Any:
        integer = f.kind == "integer"
        if isinstance(value, HugeInt):
            return self._out_of_range(value, p, f, below=value.negative)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            kind = "a whole number" if integer else "a number"
            self.error(p, f"must be {kind}, got {_describe(value)}")
            return None
        if isinstance(value, float):
            if not math.isfinite(value):
                self.error(p, f"must be a finite number, got {value}")
                return None
            if integer:
                if not value.is_integer():
                    self.error(p, f"must be a whole number, got {value}")
                    return None
        # Comparisons of int and float are exact in Python; nothing is converted before the
        # range has been checked (a huge int would overflow float()).
        lo, hi = f.minimum, f.maximum
        if f.sign == "positive" and not value > 0:
            self.error(p, f"must be positive, got {_show(value)}")
            return None
        if f.sign == "non-negative" and value < 0:
            self.error(p, f"must be non-negative, got {_show(value)}")
            return None
        if lo is not None and (value < lo or (f.exclusive_minimum and value == lo)):
            return self._out_of_range(value, p, f, below=True)
        if hi is not None and (value > hi or (f.exclusive_maximum and value == hi)):
            return self._out_of_range(value, p, f, below=False)
        if integer:
            return int(value)
        return value

    def _out_of_range(self, value: Any, p: str, f: Field, *, below: bool) -> None:
        shown = _show(value) if not isinstance(value, HugeInt) else repr(value)
        if below and f.sign == "positive" and (isinstance(value, HugeInt) or not value > 0):
            self.error(p, f"must be positive, got {shown}")
        elif below and f.sign == "non-negative" and (isinstance(value, HugeInt) or value < 0):
            self.error(p, f"must be non-negative, got {shown}")
        elif below and f.minimum is not None:
            word = "must exceed" if f.exclusive_minimum else "must be at least"
            self.error(p, f"{word} {_bound(f.minimum)}, got {shown}")
        elif not below and f.maximum is not None:
            word = "must be below" if f.exclusive_maximum else "must be at most"
            self.error(p, f"{word} {_bound(f.maximum)}, got {shown}")
        else:
            self.error(p, f"must have at most {MAX_INT_DIGITS} digits, got {shown}")
        return None

    # -- columns of numbers: numpy finds the failures, check_value words them -------------
    def check_column(self, values: Sequence[Any], path_of: Callable[[int], str],
                     f: Field) -> np.ndarray:
        """Check a sequence of raw values against numeric field ``f``.

        Returns a float64 array with NaN at every entry that was refused (each refused entry
        is recorded, with the message :meth:`check_value` gives it, at ``path_of(i)``).
        The work is vectorised for plain ``int``/``float`` entries; anything else (a missing
        marker, a string, a huge integer) is checked one by one.
        """
        n = len(values)
        out = np.full(n, np.nan)
        if n < _VECTOR_MIN:
            for i, x in enumerate(values):
                got = self.check_value(x, path_of(i), f)
                if got is not None:
                    out[i] = got
            return out
        plain = {float, int}
        if set(map(type, values)) <= plain:
            numeric = np.ones(n, dtype=bool)
            nums = values
        else:
            numeric = np.array([type(x) in plain for x in values], dtype=bool)
            nums = [x for x, ok in zip(values, numeric.tolist(), strict=True) if ok]
        try:
            arr = np.fromiter(nums, dtype=np.float64, count=len(nums))
        except OverflowError:  # an int beyond float64: the value-by-value path words it
            arr = np.array([x if abs(x) < 2**1000 else math.inf for x in nums])
        out[numeric] = arr
        flagged = ~numeric
        flagged[numeric] = self._column_failures(arr, f)
        for i in np.flatnonzero(flagged).tolist():  # in file order, like a reader
            got = self.check_value(values[i], path_of(i), f)
            out[i] = np.nan if got is None else got
        return out

    @staticmethod
    def _column_failures(arr: np.ndarray, f: Field) -> np.ndarray:
        """Entries a value-by-value check could refuse (a superset: rechecked one by one)."""
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr)
            if f.kind == "integer":
                bad |= np.floor(arr) != arr
            if f.sign == "positive":
                bad |= ~(arr > 0)
            elif f.sign == "non-negative":
                bad |= arr < 0
            if f.minimum is not None:
                bad |= (arr <= f.minimum) if f.exclusive_minimum else (arr < f.minimum)
            if f.maximum is not None:
                # >= catches ints that round onto the bound when converted to float64
                bad |= arr >= f.maximum if f.exclusive_maximum or f.kind == "integer" \
                    else arr > f.maximum
        return bad

    # -- accessors kept for callers that read a few values by hand ------------------------
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

    def number(self, obj: dict[str, Any], key: str, path: str, *, default: Any = _MISSING,
               integer: bool = False, **rules: Any) -> Any:
        """Read a finite number (``integer=True``: a whole number) with range checks
        (``positive``, ``nonnegative``, ``minimum``, ``maximum``).

        Returns the value, or ``None`` after recording an issue.
        """
        present, value = self._get(obj, key, path, default)
        if not present:
            return value
        return self.as_number(value, join(path, key), integer=integer, **rules)

    def as_number(self, value: Any, p: str, *, integer: bool = False, **rules: Any) -> Any:
        return self.check_value(value, p, _rule("integer" if integer else "number", **rules))

    def string(self, obj: dict[str, Any], key: str, path: str, *, default: Any = _MISSING,
               choices: Sequence[str] | None = None) -> Any:
        present, value = self._get(obj, key, path, default)
        if not present:
            return value
        return self.check_value(value, join(path, key),
                                Field(key, "string", choices=tuple(choices or ())))

    def boolean(self, obj: dict[str, Any], key: str, path: str, *, default: Any = _MISSING) -> Any:
        present, value = self._get(obj, key, path, default)
        if not present:
            return value
        return self.check_value(value, join(path, key), Field(key, "bool"))

    def as_list(
        self, value: Any, p: str, *, nonempty: bool = True, length: int | None = None,
        length_message: str = "",
    ) -> Any:
        if not isinstance(value, list):
            self.error(p, f"must be a list, got {_describe(value)}")
            return None
        if nonempty and not value:
            self.error(p, "must not be empty")
            return None
        if length is not None and len(value) != length:
            template = length_message or "must have {n} entries, got {got}"
            self.error(p, template.format(n=length, got=len(value)))
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

    def numbers(self, value: Any, p: str, *, length: int | None = None, integer: bool = False,
                **rules: Any) -> builtins.list[Any] | None:
        """A list of numbers, each checked with the rules of :meth:`as_number`."""
        items = self.as_list(value, p, length=length)
        if items is None:
            return None
        out = [self.as_number(v, join(p, i), integer=integer, **rules)
               for i, v in enumerate(items)]
        return None if any(v is None for v in out) else out
