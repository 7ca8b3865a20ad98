"""JSON Schemas (draft 2020-12) of the instance files and of the result JSON.

The schemas are generated at run time, not shipped as files: each instance schema is derived
from the problem's field table (``FIELDS`` of ``mel_opt.problems.<pkg>.instance``, the very
table the reader walks), and the result schema from :class:`~mel_opt.result.Status` and the
registered problems and methods. A schema therefore cannot drift from the validator: a new field,
range or choice appears in both at once. ``melopt schema`` prints them.

This module builds a schema from what it is given (a field table and its rules, the methods of
each problem) and imports nothing above ``io``; :mod:`mel_opt.schemas` reads those from the
problem registry (``instance_schema(problem)``, ``result_schema()``).

What a field table says becomes, per field: ``type`` (``integer`` accepts whole floats like
``3.0``, as the reader does), ``required``, ``default``, the tightest lower and upper bound
(``minimum`` / ``exclusiveMinimum`` from the range and the sign), ``enum`` of the choices,
``minLength`` 1 for strings, ``minItems`` 1 for non-empty lists, ``uniqueItems`` for lists of
distinct names, the per-item table of lists of objects, alternative item forms as ``oneOf``
(an item carrying marks of two forms fits no branch), fields that exist under a condition on a
root field as ``if``/``then``, and the meaning and unit in ``description``.

What JSON Schema cannot say (a list as long as another one, distinct ``name`` members of a list
of objects, orderings and sums across fields) is checked by mel_opt only; those rules are listed
in each schema's ``description`` and ``$comment`` (from the table and from the problem's
``CROSS_FIELD_RULES``). Unknown fields are allowed, as the instance contract says (mel_opt
ignores them), so a file may name its schema with ``"$schema"``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mel_opt.io.fields import MAX_SAFE_INTEGER, Field, When, walk

#: Version of the instance format: the ``schema_version`` every instance file carries
#: (:func:`mel_opt.api.parse_instance` accepts this one only).
SCHEMA_VERSION = 1
#: The dialect of every schema mel_opt emits.
DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: Base of the ``$id`` of the schemas: an identifier only (the ``.invalid`` top-level domain
#: never resolves; nothing is fetched).
ID_BASE = "https://mel-opt.invalid/schema/"
RESULT_NAME = "result"

_TYPES = {"number": "number", "integer": "integer", "string": "string", "bool": "boolean",
          "list": "array", "object": "object"}


def schema_id(name: str) -> str:
    """The ``$id`` of the schema ``name`` (a problem name or ``result``)."""
    return f"{ID_BASE}{name}.json"


def schema_text(schema: dict[str, Any]) -> str:
    """A schema as the CLI prints it: JSON, indent 2, a final newline."""
    return json.dumps(schema, indent=2, allow_nan=False) + "\n"


# -- the rules a field table implies -------------------------------------------------------
def table_rules(fields: tuple[Field, ...]) -> list[tuple[str, str]]:
    """(JSON path pattern, rule) of the rules that follow from a field table and that JSON
    Schema cannot express: lengths tied to another list, distinct names of objects."""
    out: list[tuple[str, str]] = []
    for path, f in walk(fields):
        if f.kind != "list":
            continue
        if f.names and (f.fields or f.forms):
            out.append((f"{path}[].name", f"names of the {f.names}s are distinct"))
        item: Field | None = f
        at = path
        while item is not None and item.kind == "list":  # the list, then the lists in it
            if item.length_of is not None:
                out.append((at, f"has one entry per entry of {item.length_of}"))
            item, at = item.item, at + "[]"
    return out


# -- one field -----------------------------------------------------------------------------
def _num(x: float) -> float | int:
    """A bound as JSON shows it best: whole values as integers (equal for every validator)."""
    if isinstance(x, float) and x.is_integer() and abs(x) <= MAX_SAFE_INTEGER:
        return int(x)
    return x


def _bounds(f: Field) -> dict[str, Any]:
    """The tightest lower and upper bound of a numeric field (its sign and its range).

    Each bound is (value, exclusive); the conjunction of the reader's checks is the largest
    lower and the smallest upper bound, an exclusive bound being tighter at the same value.
    """
    lower: list[tuple[float, bool]] = []
    if f.sign is not None:
        lower.append((0, f.sign == "positive"))
    if f.minimum is not None:
        lower.append((f.minimum, f.exclusive_minimum))
    out: dict[str, Any] = {}
    if lower:
        lo, excl = max(lower)
        out["exclusiveMinimum" if excl else "minimum"] = _num(lo)
    if f.maximum is not None:
        out["exclusiveMaximum" if f.exclusive_maximum else "maximum"] = _num(f.maximum)
    return out


def _description(f: Field) -> str:
    text = f.doc + (f" [{f.unit}]" if f.unit else "")
    if f.missing_hint:
        text += f" {f.missing_hint}"
    if f.when is not None:
        text += f"; only when {f.when.key} is {f.when.value!r} (ignored otherwise)"
    return text.strip("; ")


def field_schema(f: Field) -> dict[str, Any]:
    """The full schema of field ``f`` (members that exist under a condition excluded)."""
    out: dict[str, Any] = {"type": _TYPES[f.kind]}
    desc = _description(f)
    if desc:
        out["description"] = desc
    if not f.required and f.default is not None:
        out["default"] = f.default
    if f.numeric:
        out.update(_bounds(f))
    elif f.kind == "string":
        out["minLength"] = 1
        if f.choices:
            out["enum"] = list(f.choices)
    elif f.kind == "object":
        out.update(_members(f.fields, None))
        _closed(out, f.fields)
    elif f.kind == "list":
        if f.nonempty:
            out["minItems"] = 1
        if f.fields or f.forms:
            out["items"] = _item_object(f)
        else:
            assert f.item is not None, f"list field {f.key} declares neither fields nor item"
            out["items"] = field_schema(f.item)
            if f.names:
                out["uniqueItems"] = True
    return out


def _item_object(f: Field) -> dict[str, Any]:
    """An item of a list of objects: its name, the common table, then one of its forms."""
    out: dict[str, Any] = {"type": "object"}
    members = _members(f.fields, None)
    if f.names:
        default = f.name_default.replace("{i}", "<index>")
        name = {"type": "string", "minLength": 1,
                "description": f"{f.names} name (default {default!r})"}
        members["properties"] = {"name": name, **members.get("properties", {})}
    out.update(members)
    if f.forms:
        out["oneOf"] = [_form_branch(f, k) for k in range(len(f.forms))]
    _closed(out, f.fields + tuple(g for form in f.forms for g in form.fields))
    return out


def _closed(node: dict[str, Any], fields: tuple[Field, ...]) -> None:
    """No member beyond ``fields``: every one of them is listed in ``properties`` (those that
    exist only under a condition or in one form too, so that ``additionalProperties`` sees
    them; their conditions are checked where they are declared) and any other is refused, as
    mel_opt refuses it ("unknown field")."""
    props = node.setdefault("properties", {})
    for g in fields:
        props.setdefault(g.key, field_schema(g))
    node["additionalProperties"] = False


def _marks(marks: Iterable[str]) -> dict[str, Any]:
    return {"anyOf": [{"required": [m]} for m in marks]}


def _form_branch(f: Field, k: int) -> dict[str, Any]:
    """Form ``k`` of the items of ``f``: its marks (none needed for the last form, which an
    unmarked item takes), no mark of another form, and its own table."""
    form = f.forms[k]
    others = [m for j, g in enumerate(f.forms) if j != k for m in g.marks]
    last = k == len(f.forms) - 1
    branch: dict[str, Any] = {"title": f"{form.name} form", "description": (
        f"an item carrying any of {', '.join(form.marks)}"
        + (" (or no mark of another form)" if last else ""))}
    branch.update(_members(form.fields, None))
    parts: list[dict[str, Any]] = [] if last else [_marks(form.marks)]
    parts.append({"not": _marks(others)})
    branch["allOf"] = parts
    return branch


def _members(fields: tuple[Field, ...], cond: When | None) -> dict[str, Any]:
    """``properties`` and ``required`` of the fields that exist under ``cond`` (``None``: the
    unconditional ones). Under a condition, the members of unconditional containers that hold
    conditional fields are given as partial schemas (the container itself is checked already).
    """
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in fields:
        if f.when == cond:
            props[f.key] = field_schema(f)
            if f.required:
                required.append(f.key)
        elif cond is not None and f.when is None and _holds(f, cond):
            if f.forms:
                raise NotImplementedError(f"{f.key}: conditional fields inside forms")
            inner = _members(f.fields, cond)
            props[f.key] = inner if f.kind == "object" else {"items": inner}
    out: dict[str, Any] = {}
    if props:
        out["properties"] = props
    if required:
        out["required"] = required
    return out


def _holds(f: Field, cond: When) -> bool:
    """Whether a member of ``f`` (at any depth) exists only under ``cond``."""
    return any(g.when == cond for _, g in walk((f,))[1:])


def _node(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The sub-schema of the JSON path pattern ``path`` (``learners[].name``) in ``schema``."""
    node = schema
    for part in path.split("."):
        key, *items = part.split("[")
        node = node["properties"][key]
        for _ in items:
            node = node["items"]
    return node


def _conditions(fields: tuple[Field, ...]) -> list[When]:
    seen: list[When] = []
    for _, f in walk(fields):
        if f.when is not None and f.when not in seen:
            seen.append(f.when)
    return seen


# -- whole schemas -------------------------------------------------------------------------
def instance_schema_of(problem: str, summary: str, fields: tuple[Field, ...],
                       rules: Sequence[tuple[str, str]], source: str) -> dict[str, Any]:
    """The draft 2020-12 schema of an instance file of ``problem``.

    Parameters
    ----------
    problem : str
        The problem's name (the file's ``problem``).
    summary : str
        One line on the problem, for the schema's description.
    fields : tuple of Field
        Its field table.
    rules : sequence of (str, str)
        (JSON path pattern, rule) of every rule mel_opt checks and the schema cannot express
        (:func:`table_rules` of ``fields`` and the problem's own).
    source : str
        The module that declares the table (named in ``$comment``).
    """
    listed = "; ".join(f"{path}: {rule}" for path, rule in rules)
    schema: dict[str, Any] = {
        "$schema": DIALECT,
        "$id": schema_id(problem),
        "title": f"mel_opt instance: {problem}",
        "description": (
            f"An instance file of the {problem} problem ({summary}). SI units. Unknown "
            "fields are errors (a misspelt field would otherwise change nothing silently); "
            "free-form metadata goes in `meta` (any object) or `description`. Checked by "
            f"mel_opt only (beyond this schema): {listed}."),
        "$comment": (
            f"Generated by mel_opt from the field table of {source}"
            "; `melopt validate` applies these rules and the cross-field rules listed in "
            "description, which JSON Schema cannot express."),
        "type": "object",
    }
    members = _members(fields, None)
    props: dict[str, Any] = {
        "$schema": {"description": "the schema this file follows (ignored by mel_opt)"},
        "problem": {"const": problem, "description": "the problem this file is an instance of"},
        "schema_version": {"type": "integer", "const": SCHEMA_VERSION,
                           "description": "version of the instance format"},
        "name": {"description": "instance name (text; default: the file name without its "
                 "extension; any other value is ignored)"},
        "description": {"description": "free text (any other value is ignored)"},
        "meta": {"type": "object", "description": "free-form metadata (ignored by mel_opt): "
                 "provenance, notes, a generator's parameters"},
        **members.get("properties", {}),
    }
    schema["properties"] = props
    _closed(schema, fields)
    schema["required"] = ["problem", "schema_version", *members.get("required", [])]
    for path, rule in rules:
        node = _node(schema, path)
        said = node.get("description", "")
        node["description"] = f"{said}; mel_opt also checks: {rule}" if said else (
            f"mel_opt checks: {rule}")
    conditional = [
        {"if": {"properties": {c.key: {"const": c.value}}, "required": [c.key]},
         "then": _members(fields, c)} for c in _conditions(fields)]
    if conditional:
        schema["allOf"] = conditional
    return schema


def _array(items: dict[str, Any], description: str) -> dict[str, Any]:
    return {"type": "array", "items": items, "description": description}


_WHOLE = {"type": "integer"}
_NUMBER = {"type": "number"}
#: The decision values of each problem's ``solution`` (the result contract) and the metrics
#: every verified result of it carries.
SOLUTIONS: dict[str, dict[str, dict[str, Any]]] = {
    "mel-async": {
        "d": _array(_WHOLE, "d_k, samples given to each learner"),
        "tau": _array(_WHOLE, "tau_k, local updates of each learner in one cycle"),
    },
    "dab": {
        "shards": _array(_WHOLE, "a_k, shards given to each learner"),
    },
    "med": {
        "assignment": _array(_WHOLE, "task index served by each learner (-1: none)"),
        "d": _array(_array(_WHOLE, "shards of the task per learner"),
                    "d_ij, shards of task i (rows) given to learner j (columns)"),
    },
    "feel": {
        "batch": _array(_WHOLE, "B_k, local batch of each device [sample]"),
        "global_batch": {**_WHOLE, "description": "B, the global batch [sample]"},
        "uplink_slots": _array(_NUMBER, "tau_k^U, uplink slot of each device [s]"),
        "downlink_slots": _array(_NUMBER, "tau_k^D, downlink slot of each device [s]"),
    },
    "adaptive-tau": {
        "tau": {**_WHOLE, "description": "tau*, local updates between global aggregations"},
    },
}
METRICS: dict[str, tuple[str, ...]] = {
    "mel-async": ("max_staleness", "avg_staleness"),
    "med": ("task_delay",),
    "feel": ("learning_efficiency", "round_latency_s"),
}


def _verification() -> dict[str, Any]:
    maybe = {"type": ["number", "null"]}
    return {
        "type": "object",
        "description": "the independent re-check of the solution against the instance",
        "required": ["feasible", "max_violation", "checks", "notes"],
        "properties": {
            "feasible": {"type": "boolean"},
            "max_violation": {**maybe, "minimum": 0, "description": (
                "largest violation of a hard constraint, relative to its scale (null: "
                "unbounded)")},
            "checks": {"type": "object", "additionalProperties": maybe,
                       "description": "each check by name with its violation"},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
    }


def _per_problem(problem: str, methods: Sequence[str]) -> dict[str, Any]:
    """Methods of ``problem``; with a verification, its solution keys and metrics."""
    methods = list(methods)
    then: dict[str, Any] = {"properties": {"method": {"enum": methods}}}
    checked: dict[str, Any] = {"properties": {"solution": {
        "properties": SOLUTIONS.get(problem, {}), "required": list(SOLUTIONS.get(problem, {}))}}}
    if problem in METRICS:
        checked["properties"]["metrics"] = {"required": list(METRICS[problem])}
    return {"if": {"properties": {"problem": {"const": problem}}, "required": ["problem"]},
            "then": {**then, "allOf": [{
                "if": {"properties": {"verification": {"type": "object"}},
                       "required": ["verification"]},
                "then": checked}]}}


def result_schema_of(methods: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """The draft 2020-12 schema of the result JSON (``melopt solve --json``, batch results),
    given each problem's methods (``{problem: [method, ...]}``).

    Every key of :meth:`mel_opt.result.Result.to_dict` is required; other top-level keys are
    allowed (batch adds ``error`` and ``source``). When a result carries a verification, its
    ``solution`` has the problem's decision keys and its ``metrics`` the documented ones.
    """
    from mel_opt.result import Status

    problems = list(methods)
    props: dict[str, Any] = {
        "instance": {"type": "string", "description": "instance name"},
        "problem": {"enum": problems},
        "method": {"type": "string", "description": "the method (see `melopt methods`)"},
        "status": {"enum": [s.value for s in Status], "description": (
            "optimal, locally_optimal and feasible carry a solution")},
        "objective": {"type": ["number", "null"], "description": (
            "objective of the solution as recomputed by the verifier (null without one)")},
        "solution": {"type": "object", "description": "decision values (empty without one)"},
        "metrics": {"type": "object", "description": (
            "metrics recomputed from the solution, then the method's own numbers")},
        "verification": {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/verification"}]},
        "solve_time_s": {"type": "number", "minimum": 0,
                         "description": "wall time of the method alone [s]"},
        "solver": {"type": "object", "required": ["name", "version"], "properties": {
            "name": {"type": "string"}, "version": {"type": "string"}}},
        "message": {"type": "string", "description": "short note from the method"},
    }
    extra = {
        "error": {"type": "string", "description": "batch only: why the result is not ok"},
        "source": {"type": "object", "description": "batch only: the instance file read"},
    }
    return {
        "$schema": DIALECT,
        "$id": schema_id(RESULT_NAME),
        "title": "mel_opt result",
        "description": (
            "One method's verified answer on one instance. Known keys: "
            f"{', '.join(props)} (always present) and {', '.join(extra)} (written by batch). "
            "Other keys may be added and are allowed."),
        "type": "object",
        "required": list(props),
        "properties": {**props, **extra},
        "allOf": [_per_problem(p, methods[p]) for p in problems],
        "$defs": {"verification": _verification()},
    }

