"""Declarative field tables: what an instance file may contain, as data.

Every problem declares its JSON fields once, as a tuple of :class:`Field` (kind, required or
default, documented range, choices, per-item tables for lists of objects, unit and meaning).
One generic reader (:func:`mel_opt.io.reader.read_table`) walks such a table and collects every
issue with its JSON path; the same tables can generate JSON Schemas and the range documentation,
which is why they hold no code.

Ranges are the *documented valid ranges* of the fields: physically meaningful values that the
float64 arithmetic of the models carries without overflow, underflow to zero or loss of integer
exactness. Numbers outside them are refused by the validator (one line, JSON path, exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["number", "integer", "string", "bool", "list", "object"]
Sign = Literal["positive", "non-negative"]

#: Largest whole number accepted anywhere (2^53 - 1: every integer up to it is exact in float64).
MAX_SAFE_INTEGER = 2**53 - 1
#: Integer literals with more digits are refused while the JSON text is read (before any
#: conversion: Python's int-from-string is quadratic and limited to 4300 digits).
MAX_INT_DIGITS = 30


@dataclass(frozen=True)
class When:
    """A condition on an already read root field: the field applies when ``key`` == ``value``."""

    key: str
    value: Any


@dataclass(frozen=True)
class Form:
    """One of several alternative shapes of the items of a list of objects.

    An item takes the first form one of whose ``marks`` keys it carries; an item carrying the
    marks of two forms is an issue; an item carrying none takes the last form.
    """

    name: str
    marks: tuple[str, ...]
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Field:
    """One JSON field of an instance file.

    Attributes
    ----------
    key : str
        The JSON name.
    kind : str
        ``number`` (finite float64), ``integer`` (whole number, floats like 3.0 accepted),
        ``string`` (non-empty), ``bool``, ``list`` or ``object``.
    doc, unit : str
        One-line meaning and unit, for the documentation and schemas.
    required : bool
        A missing required field is an issue; a missing optional one takes ``default``.
    default : any
        Value of an absent optional field (``None``: absent stays ``None``).
    sign : {"positive", "non-negative"} or None
        Checked before the range, with the messages ``must be positive`` /
        ``must be non-negative`` (kept as their own rule: they are the common failure).
    minimum, maximum : float or None
        Documented range; ``exclusive_minimum`` / ``exclusive_maximum`` exclude the bound.
    choices : tuple of str
        Allowed values of a string.
    fields : tuple of Field
        Members of an object, or the per-item table of a list of objects.
    forms : tuple of Form
        Alternative per-item tables of a list of objects (after the common ``fields``).
    item : Field or None
        The item of a list of scalars or of lists (its ``key`` is not used).
    nonempty : bool
        A list must have at least one entry.
    length_of : str or None
        A list must have as many entries as the root list named here.
    length_message : str
        Message for a wrong length, formatted with ``n`` (expected) and ``got``; the default is
        ``must have {n} entries, got {got}``.
    names : str
        For lists: items (or, for a list of objects, their ``name``) must be distinct; the word
        used in the duplicate message (``duplicate learner name 'a'``).
    name_default, name_default_single : str
        Default ``name`` of item ``i`` (``"learner{i}"``); the second one is used when the list
        has exactly one item.
    missing_hint : str
        Appended to ``is required but missing``.
    when : When or None
        The field exists only when a root field has a given value (absent otherwise).
    """

    key: str
    kind: Kind
    doc: str = ""
    unit: str = ""
    required: bool = True
    default: Any = None
    sign: Sign | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: tuple[str, ...] = ()
    fields: tuple[Field, ...] = ()
    forms: tuple[Form, ...] = ()
    item: Field | None = None
    nonempty: bool = True
    length_of: str | None = None
    length_message: str = ""
    names: str = ""
    name_default: str = ""
    name_default_single: str = ""
    missing_hint: str = ""
    when: When | None = None

    @property
    def numeric(self) -> bool:
        return self.kind in ("number", "integer")


def number(key: str, lo: float, hi: float, *, unit: str = "", doc: str = "",
           sign: Sign | None = "positive", integer: bool = False, **kw: Any) -> Field:
    """A numeric field with the documented range [lo, hi] (shorthand used by the tables)."""
    return Field(key, "integer" if integer else "number", doc=doc, unit=unit, sign=sign,
                 minimum=lo, maximum=hi, **kw)


def walk(table: tuple[Field, ...], prefix: str = "") -> list[tuple[str, Field]]:
    """Every field of ``table`` with its JSON path pattern (``learners[].cpu_hz``), depth first.

    Used by documentation and by tests that exercise every numeric field of every problem.
    """
    out: list[tuple[str, Field]] = []
    for f in table:
        path = f"{prefix}{f.key}"
        out.append((path, f))
        if f.kind == "object":
            out.extend(walk(f.fields, path + "."))
        elif f.kind == "list":
            out.extend(walk(f.fields, path + "[]."))
            for form in f.forms:
                out.extend(walk(form.fields, path + "[]."))
            item = f.item
            depth = "[]"
            while item is not None:
                if item.kind == "list" and item.item is not None:
                    item, depth = item.item, depth + "[]"
                    continue
                out.append((path + depth, item))
                break
    return out
