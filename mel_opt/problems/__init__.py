"""Problem registry: every subpackage that defines ``PROBLEM`` is a problem.

Discovery (rather than a hand-kept list) lets a new problem package plug into the CLI, batch and
compare without edits elsewhere.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from mel_opt.errors import UsageError
from mel_opt.problems.base import (
    Checked,
    MethodOutput,
    MethodSpec,
    ProblemSpec,
    SolveOptions,
)

__all__ = [
    "Checked",
    "MethodOutput",
    "MethodSpec",
    "ProblemSpec",
    "SolveOptions",
    "all_problems",
    "get_problem",
]


@cache
def all_problems() -> dict[str, ProblemSpec]:
    """Every registered problem, by its ``problem`` name, in a stable order."""
    found: dict[str, ProblemSpec] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(module, "PROBLEM", None)
        if isinstance(spec, ProblemSpec):
            found[spec.name] = spec
    return found


def get_problem(name: str) -> ProblemSpec:
    problems = all_problems()
    try:
        return problems[name]
    except KeyError:
        raise UsageError(
            f"unknown problem {name!r}; known problems: {', '.join(problems)}"
        ) from None
