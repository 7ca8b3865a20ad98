"""Problem registry: every subpackage that defines ``PROBLEM`` is a problem, and so is every
``PROBLEM`` another installed distribution declares under the entry-point group
``mel_opt.problems``.

Discovery (rather than a hand-kept list) lets a new problem package plug into the CLI, batch,
compare, train and live without edits elsewhere: inside mel_opt as a subpackage, or outside it
as a package of its own whose distribution names it::

    [project.entry-points."mel_opt.problems"]
    my-problem = "my_package"          # a module with PROBLEM, or a ProblemSpec itself
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings
from functools import cache
from importlib.metadata import EntryPoint, entry_points

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
    for point in sorted(entry_points(group=ENTRY_POINTS), key=lambda p: p.name):
        spec = _plugged_in(point)
        if spec is None:
            continue
        if spec.name in found:
            warnings.warn(f"problem {spec.name!r} of entry point {point.value!r} is already "
                          "registered; the plug-in is ignored", stacklevel=2)
            continue
        found[spec.name] = spec
    return found


#: The entry-point group of problems from other distributions.
ENTRY_POINTS = "mel_opt.problems"


def _plugged_in(point: EntryPoint) -> ProblemSpec | None:
    """The ProblemSpec an entry point names (its module's ``PROBLEM``, or the object itself);
    None, with a warning, when it cannot be loaded or is no problem (a broken plug-in must
    not take every command down)."""
    try:
        target = point.load()
    except Exception as exc:  # noqa: BLE001 (any failure of third-party code at import)
        warnings.warn(f"the mel_opt problem plug-in {point.value!r} does not load: "
                      f"{type(exc).__name__}: {exc}", stacklevel=3)
        return None
    spec = getattr(target, "PROBLEM", target)
    if not isinstance(spec, ProblemSpec):
        warnings.warn(f"the mel_opt problem plug-in {point.value!r} declares no ProblemSpec",
                      stacklevel=3)
        return None
    return spec


def get_problem(name: str) -> ProblemSpec:
    problems = all_problems()
    try:
        return problems[name]
    except KeyError:
        raise UsageError(
            f"unknown problem {name!r}; known problems: {', '.join(problems)}"
        ) from None
