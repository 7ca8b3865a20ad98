"""mel_opt: resource allocation for Mobile Edge Learning.

Public API: :func:`load_instance`, :func:`parse_instance`, :func:`solve`, :func:`solve_file`,
:func:`methods`, the :class:`Result` type and the error classes.

The names are imported on first use (PEP 562), so ``import mel_opt.cli`` and commands such as
``melopt --version`` do not pay for numpy and the problem packages before they need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mel_opt.api import load_instance, methods, parse_instance, solve, solve_file
    from mel_opt.errors import InstanceError, MelOptError, SolverError, UsageError
    from mel_opt.result import Result, Status

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "load_instance": "mel_opt.api",
    "methods": "mel_opt.api",
    "parse_instance": "mel_opt.api",
    "solve": "mel_opt.api",
    "solve_file": "mel_opt.api",
    "InstanceError": "mel_opt.errors",
    "MelOptError": "mel_opt.errors",
    "SolverError": "mel_opt.errors",
    "UsageError": "mel_opt.errors",
    "Result": "mel_opt.result",
    "Status": "mel_opt.result",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mel_opt' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "InstanceError",
    "MelOptError",
    "Result",
    "SolverError",
    "Status",
    "UsageError",
    "__version__",
    "load_instance",
    "methods",
    "parse_instance",
    "solve",
    "solve_file",
]
