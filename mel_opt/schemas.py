"""The JSON Schemas of the registered problems' instance files and of the result JSON.

:mod:`mel_opt.io.schema` turns a field table into a schema and imports nothing above ``io``;
this module reads what it needs from the problem registry: each problem's field table
(``FIELDS`` beside its parser), its ``CROSS_FIELD_RULES`` and summary, and every problem's
methods. ``melopt schema`` prints what these functions return.
"""

from __future__ import annotations

import importlib
from typing import Any

from mel_opt.io.fields import Field
from mel_opt.io.schema import instance_schema_of, result_schema_of, table_rules
from mel_opt.problems import all_problems, get_problem


def _instance_module(problem: str) -> Any:
    """The module holding the problem's parser: its ``FIELDS`` live beside it."""
    module = importlib.import_module(get_problem(problem).parse.__module__)
    if not isinstance(getattr(module, "FIELDS", None), tuple):
        raise TypeError(f"{module.__name__} declares no FIELDS table")
    return module


def problem_fields(problem: str) -> tuple[Field, ...]:
    """The field table of ``problem`` (raises UsageError for an unknown problem)."""
    fields: tuple[Field, ...] = _instance_module(problem).FIELDS
    return fields


def cross_field_rules(problem: str) -> list[tuple[str, str]]:
    """(JSON path pattern, rule) of every rule mel_opt checks and the schema cannot express.

    The first ones follow from the field table (lengths tied to another list, distinct names
    of objects); the others are the problem's ``CROSS_FIELD_RULES`` (orderings, sums, what a
    learner can do within a deadline).
    """
    out = table_rules(problem_fields(problem))
    out.extend(getattr(_instance_module(problem), "CROSS_FIELD_RULES", ()))
    return out


def instance_schema(problem: str) -> dict[str, Any]:
    """The draft 2020-12 schema of an instance file of ``problem``.

    Raises
    ------
    UsageError
        Unknown problem.
    """
    spec = get_problem(problem)
    return instance_schema_of(problem, spec.summary, problem_fields(problem),
                              cross_field_rules(problem), _instance_module(problem).__name__)


def result_schema() -> dict[str, Any]:
    """The draft 2020-12 schema of the result JSON (``melopt solve --json``, batch results),
    for every registered problem and its methods (see
    :func:`mel_opt.io.schema.result_schema_of`)."""
    return result_schema_of({name: list(spec.methods) for name, spec in all_problems().items()})
