"""Solve-side property: whatever passes validation ends in a verified answer or a clear status.

One shipped instance per problem has one of its numeric fields replaced by an extreme magnitude
(or two fields, for interactions); if the parser accepts the document, every method of the
problem is run through ``api.solve`` with a short time limit. The contract: no exception but
mel_opt's own usage errors, and a solved status (exit code 0) only with a verified answer, a
finite objective and finite numbers.
"""

from __future__ import annotations

import copy
import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mel_opt.api import parse_instance, solve
from mel_opt.errors import InstanceError, UsageError
from mel_opt.examples import problem_example
from mel_opt.problems import all_problems, get_problem

ROOT = Path(__file__).resolve().parents[2]
# every problem's declared example (ProblemSpec.example)
SHIPPED = {p: f"instances/{problem_example(p).relpath}" for p in all_problems()}
EXTREMES = [0, -1, 5e-324, 1e-300, 1e-12, 1e12, 1e19, 1e300, 1.7e308, 0.5, 2**53 + 1,
            2**63 - 1, -(2**63)]


def numeric_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location of a number (not a bool) in the document but ``schema_version``."""
    if isinstance(doc, dict):
        items: list[tuple[Any, Any]] = [(k, v) for k, v in doc.items() if k != "schema_version"]
    elif isinstance(doc, list):
        items = list(enumerate(doc))
    else:
        return []
    out = []
    for key, value in items:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out.append((*prefix, key))
        out.extend(numeric_paths(value, (*prefix, key)))
    return out


DOCS = {p: json.loads((ROOT / f).read_text()) for p, f in SHIPPED.items()}
PATHS = {p: numeric_paths(d) for p, d in DOCS.items()}


@st.composite
def mutants(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    problem = draw(st.sampled_from(sorted(DOCS)))
    doc = copy.deepcopy(DOCS[problem])
    for path in draw(st.lists(st.sampled_from(PATHS[problem]), min_size=1, max_size=2)):
        target = doc
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = draw(st.sampled_from(EXTREMES))
    return problem, doc


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(mutants())
def test_extreme_numbers_never_give_an_unverified_answer(case: tuple[str, dict[str, Any]]) -> None:
    problem, doc = case
    try:
        inst = parse_instance(doc, "<mutant>")
    except (InstanceError, UsageError):
        return  # refused with a clear message: the parsers' side of the contract
    for method in get_problem(problem).methods:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # none may leave api.solve
            try:
                res = solve(inst, method, time_limit=2.0)
            except UsageError:
                continue  # e.g. dab's csa without total_shards: a usage error, exit 2
        if res.exit_code == 0:
            assert res.verification is not None and res.verification.feasible, (method, res)
            assert res.objective is not None and math.isfinite(res.objective), (method, res)
        else:
            assert res.status.value in ("infeasible", "time_limit", "iteration_limit", "error")
            assert res.message, (method, res)  # a clear reason comes with every failure


@pytest.mark.parametrize("problem", sorted(SHIPPED))
def test_every_problem_has_numbers_to_mutate(problem: str) -> None:
    assert len(PATHS[problem]) >= 3
