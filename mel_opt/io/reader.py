"""The one generic reader of instance documents: it walks a field table (:mod:`.fields`).

:func:`read_table` checks an object against a table and returns the validated values by JSON
name; every issue goes to the :class:`~mel_opt.io.validate.Validator` with its JSON path, so a
single pass reports everything wrong in a file. Lists of objects come back as :class:`Rows`:
one float64 column per numeric field, checked with numpy (see
:meth:`~mel_opt.io.validate.Validator.check_column`), so reading is linear in the file size.
Cross-field checks (sizes, orderings, derived coefficients) are left to each problem.
"""

from __future__ import annotations

import difflib
import gc
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import eq, methodcaller
from typing import Any

import numpy as np

from mel_opt.io.fields import Field, Form
from mel_opt.io.validate import _MISSING, Validator, _describe, join


@dataclass
class Rows:
    """A list of objects read through its per-item table.

    Attributes
    ----------
    n : int
        Number of items in the file (objects or not).
    names : list of str
        Each item's ``name`` (its default when absent or invalid); empty unless the field asks
        for unique names.
    columns : dict
        Per field: a float64 array of length ``n`` for numeric fields (NaN where the value was
        refused, absent or belongs to another form), else a list of length ``n``.
    forms : list of str or None
        The form of each item (``None``: not an object or of conflicting forms).
    """

    n: int
    names: list[str] = field(default_factory=list)
    columns: dict[str, Any] = field(default_factory=dict)
    forms: list[str | None] = field(default_factory=list)

    def __len__(self) -> int:
        return self.n

    def of_form(self, name: str) -> np.ndarray:
        """Which items take the form ``name`` (boolean, length ``n``)."""
        if self.n and self.forms[0] == name and self.forms.count(name) == self.n:
            return np.ones(self.n, dtype=bool)  # the common case, at C speed
        return np.fromiter(map(eq, self.forms, repeat(name)), dtype=bool, count=self.n)

    def col(self, key: str) -> np.ndarray:
        """The numeric column of ``key`` (float64, NaN where missing or refused)."""
        out = self.columns.get(key)
        return np.full(self.n, np.nan) if out is None else np.asarray(out, dtype=float)


def _applies(f: Field, root: Mapping[str, Any]) -> bool:
    return f.when is None or root.get(f.when.key) == f.when.value


#: Top-level keys every instance file may carry beside its problem's fields: ``meta`` is the
#: one place for free-form metadata (any JSON object; mel_opt ignores it).
TOP_LEVEL_KEYS = ("$schema", "problem", "schema_version", "name", "description", "meta")
#: Lists of objects at least this long are read with the cyclic garbage collector paused.
_QUIET_GC_FROM = 10_000
#: At most this many unknown fields are reported per object (a file with a wrong shape
#: would otherwise list every key of every item).
MAX_UNKNOWN = 20


def unknown_keys(v: Validator, keys: Iterable[str], path: str, table: Sequence[Field],
                 root: Mapping[str, Any], extra: Iterable[str] = ()) -> None:
    """One issue per key of an object that its table does not know ("unknown field", with the
    closest known name when one is close), or that applies only under another condition."""
    fields = {f.key: f for f in table}
    allowed = set(extra) | {k for k, f in fields.items() if _applies(f, root)}
    reported = 0
    for key in keys:
        if key in allowed or reported >= MAX_UNKNOWN:
            continue
        reported += 1
        f = fields.get(key)
        if f is not None and f.when is not None:
            v.error(join(path, key), f"applies only when {f.when.key} is {f.when.value!r}")
            continue
        close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        v.error(join(path, key), f"unknown field {str(key)!r}{hint} (free-form notes belong "
                                 f"in 'meta' or 'description')")


def read_table(v: Validator, obj: Mapping[str, Any], table: Sequence[Field], path: str = "$",
               root: dict[str, Any] | None = None) -> dict[str, Any]:
    """Validate ``obj`` against ``table``; the values by JSON name (``None`` where refused).

    ``root`` holds the values read so far at the top level (for ``when`` and ``length_of``);
    the top-level call fills it in table order.
    """
    values: dict[str, Any] = {}
    top = values if root is None else root
    if root is None:  # the document itself: its problem's fields and the common keys
        for f in table:  # the conditions read first, as the loop below does
            if f.when is None and f.key in obj and f.kind not in ("list", "object"):
                top.setdefault(f.key, obj[f.key])
        unknown_keys(v, list(obj), path, table, top, TOP_LEVEL_KEYS)
        top.clear()
        if "meta" in obj and not isinstance(obj["meta"], dict):
            v.error(join(path, "meta"), "must be an object (free-form metadata)")
    else:
        unknown_keys(v, list(obj), path, table, top)
    for f in table:
        if not _applies(f, top):
            values[f.key] = None
            continue
        p = join(path, f.key)
        if f.key not in obj:
            if f.required:
                v.check_value(_MISSING, p, f)
            values[f.key] = None if f.required else f.default
            continue
        values[f.key] = read_value(v, obj[f.key], p, f, top)
    return values


def read_value(v: Validator, raw: Any, p: str, f: Field, root: dict[str, Any]) -> Any:
    """One value of field ``f`` at path ``p`` (scalars, objects and lists alike)."""
    if f.kind == "object":
        o = v.obj(raw, p)
        return None if o is None else read_table(v, o, f.fields, p, root)
    if f.kind != "list":
        return v.check_value(raw, p, f)
    length = None
    if f.length_of is not None:
        ref = root.get(f.length_of)
        length = None if ref is None else len(ref)
    items = v.as_list(raw, p, nonempty=f.nonempty, length=length,
                      length_message=f.length_message)
    if items is None:
        return None
    if f.fields or f.forms:
        return _read_rows(v, items, p, f, root)
    item = f.item
    assert item is not None, f"list field {f.key} declares neither fields nor item"
    if item.numeric:
        return v.check_column(items, lambda i: f"{p}[{i}]", item)
    vals = [read_value(v, x, join(p, i), item, root) for i, x in enumerate(items)]
    if f.names:
        _distinct(v, vals, items, p, f.names)
    return vals


def _distinct(v: Validator, vals: list[Any], items: list[Any], p: str, word: str) -> None:
    """Duplicate entries of a list of strings (one issue per repeat, at the repeat)."""
    seen: set[str] = set()
    for i, s in enumerate(vals):
        if s is None:
            continue
        if s in seen:
            v.error(join(p, i), f"duplicate {word} name {items[i]!r}")
        seen.add(s)


def _read_rows(v: Validator, items: list[Any], p: str, f: Field, root: dict[str, Any]) -> Rows:
    """A list of objects read column by column (see :class:`Rows`).

    The cyclic garbage collector is paused meanwhile: the columns are lists of numbers and
    strings, and a collection would walk every object of a large document (a million
    learners' dicts) for nothing; it is resumed as it was found."""
    if len(items) < _QUIET_GC_FROM or not gc.isenabled():
        return _read_rows_now(v, items, p, f, root)
    gc.disable()
    try:
        return _read_rows_now(v, items, p, f, root)
    finally:
        gc.enable()


def _read_rows_now(v: Validator, items: list[Any], p: str, f: Field, root: dict[str, Any]
                   ) -> Rows:
    first = len(v.issues)
    rows = Rows(len(items))
    objs: list[dict[str, Any] | None] = items
    if set(map(type, items)) != {dict}:
        objs = []
        for i, x in enumerate(items):
            if isinstance(x, dict):
                objs.append(x)
            else:
                v.error(join(p, i), f"must be an object, got {_describe(x)}")
                objs.append(None)
    if f.names:
        rows.names = _names(v, objs, p, f)
    present: set[str] = set().union(*(objs if objs is items else  # at C speed
                                      (o for o in objs if o is not None)))
    _unknown_in_items(v, objs, p, f, root, present)
    is_obj = np.array([o is not None for o in objs], dtype=bool) if objs is not items else (
        np.ones(rows.n, dtype=bool))
    form_of = _forms(v, objs, p, f.forms, is_obj, present)
    names: list[str | None] = [form.name for form in f.forms] if f.forms else [""]
    names.append(None)  # index -1: not an object, or two forms at once
    if rows.n and bool(np.all(form_of == form_of[0])):
        rows.forms = [names[int(form_of[0])]] * rows.n
    else:
        rows.forms = list(map(names.__getitem__, form_of.tolist()))
    groups: list[tuple[np.ndarray, tuple[Field, ...]]] = [(form_of >= 0, f.fields)]
    groups += [(form_of == k, form.fields) for k, form in enumerate(f.forms)]
    for mask, table in groups:
        if not any(_applies(fld, root) for fld in table):
            continue
        # every item (the common, large case) needs no index list
        sel = None if bool(mask.all()) else np.flatnonzero(mask).tolist()
        for fld in table:
            if _applies(fld, root):
                rows.columns[fld.key] = _read_column(v, objs, sel, p, fld, root, rows.n)
    # Columns are checked field by field; report item by item, as a reader of the file goes.
    v.issues[first:] = sorted(v.issues[first:], key=lambda issue: _item_index(issue.path, p))
    return rows


def _unknown_in_items(v: Validator, objs: list[dict[str, Any] | None], p: str, f: Field,
                      root: dict[str, Any], present: set[str]) -> None:
    """Unknown keys of the items of a list of objects: ``present`` (the keys of all items,
    gathered at C speed) first, and only items holding an unknown one are looked at."""
    table = f.fields + tuple(g for form in f.forms for g in form.fields)
    extra = ("name",) if f.names else ()
    known = {g.key for g in table if _applies(g, root)} | set(extra)
    if present <= known:
        return
    bad = present - known
    reported = 0
    for i, o in enumerate(objs):
        if o is None or bad.isdisjoint(o):
            continue
        unknown_keys(v, [k for k in o if k in bad], join(p, i), table, root, extra)
        reported += 1
        if reported >= 5:  # the first few items show the mistake; the rest repeat it
            break


def _item_index(path: str, prefix: str) -> int:
    """The item index in ``prefix[i]...`` (sorting key of the issues of a list of objects)."""
    rest = path[len(prefix) + 1:] if path.startswith(prefix + "[") else ""
    head = rest.split("]", 1)[0]
    return int(head) if head.isdigit() else -1


def _read_column(v: Validator, objs: list[dict[str, Any] | None], sel: list[int] | None,
                 p: str, fld: Field, root: dict[str, Any], n: int) -> Any:
    """The column of ``fld`` over the items ``sel`` (None: every item, all objects)."""
    key = fld.key
    miss = _MISSING if fld.required else fld.default
    if sel is None:  # every item: dict.get mapped over the list, at C speed
        raw = list(map(dict.get, objs, repeat(key, n), repeat(miss, n)))  # type: ignore[arg-type]
    else:
        raw = [objs[i].get(key, miss) for i in sel]  # type: ignore[union-attr]
    if fld.numeric and (fld.required or fld.default is not None):
        if sel is None:  # every item, in order: no scatter through an index list
            return v.check_column(raw, lambda j: f"{p}[{j}].{key}", fld)
        checked = v.check_column(raw, lambda j: f"{p}[{sel[j]}].{key}", fld)
        col = np.full(n, np.nan)
        col[sel] = checked
        return col
    out: list[Any] = [None] * n
    for j, i in enumerate(range(n) if sel is None else sel):
        x = raw[j]
        if x is _MISSING:
            v.check_value(_MISSING, f"{p}[{i}].{key}", fld)
        elif key in objs[i]:  # type: ignore[operator]
            out[i] = read_value(v, x, f"{p}[{i}].{key}", fld, root)
        else:
            out[i] = x
    return out


def _names(v: Validator, objs: list[dict[str, Any] | None], p: str, f: Field) -> list[str]:
    """Each item's name; a non-string or repeated name is an issue at ``path.name``.

    A set makes the duplicate check linear; the message names the path of each repeat.
    """
    template = f.name_default_single if len(objs) == 1 and f.name_default_single else (
        f.name_default)
    if None not in objs:  # the common case, at C speed: distinct non-empty strings
        given = list(map(dict.get, objs, repeat("name"), repeat(_MISSING)))  # type: ignore[arg-type]
        if set(map(type, given)) == {str} and "" not in given and len(set(given)) == len(given):
            return given  # type: ignore[return-value]
    names: list[str] = []
    seen: set[str] = set()
    for i, o in enumerate(objs):
        if o is None:
            names.append(template.format(i=i))
            continue
        name = o.get("name", _MISSING)
        if name is _MISSING:
            name = template.format(i=i)
        if not isinstance(name, str) or not name:
            v.error(f"{p}[{i}].name", f"must be a non-empty string, got {name!r}")
            name = template.format(i=i)
        elif name in seen:
            v.error(f"{p}[{i}].name", f"duplicate {f.names} name {name!r}")
        seen.add(name)
        names.append(name)
    return names


def _has(objs: list[dict[str, Any] | None], key: str) -> np.ndarray:
    """Which items carry ``key`` (False for non-objects)."""
    if None in objs:
        return np.array([o is not None and key in o for o in objs], dtype=bool)
    return np.fromiter(map(methodcaller("__contains__", key), objs), dtype=bool,
                       count=len(objs))


def _forms(v: Validator, objs: list[dict[str, Any] | None], p: str, forms: tuple[Form, ...],
           is_obj: np.ndarray, present: set[str]) -> np.ndarray:
    """Index of the form each item takes (see :class:`~mel_opt.io.fields.Form`); -1 for an
    item that is not an object or carries the marks of two forms. Without forms: 0.

    ``present`` holds every key of every item: a mark no item carries is not looked for, and
    when no item carries a mark of any form but the last (the default), every object takes
    the last form without looking at the items."""
    out = np.where(is_obj, 0, -1)
    if not forms:
        return out
    last = len(forms) - 1
    if not any(m in present for form in forms[:-1] for m in form.marks):
        return np.where(is_obj, last, -1)
    marked = np.zeros((len(forms), len(objs)), dtype=bool)
    for k, form in enumerate(forms):
        for m in form.marks:
            if m in present:
                marked[k] |= _has(objs, m)
    count = marked.sum(axis=0)
    out = np.where(count == 0, len(forms) - 1, np.argmax(marked, axis=0))
    for i in np.flatnonzero(count > 1).tolist():
        a, b = (forms[k] for k in np.flatnonzero(marked[:, i])[:2])
        v.error(join(p, i), f"give either the {a.name} form ({', '.join(a.marks)}) or the "
                f"{b.name} form ({', '.join(b.marks)}), not both")
    return np.where(is_obj & (count <= 1), out, -1)
