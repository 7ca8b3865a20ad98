"""mel_opt: resource allocation for Mobile Edge Learning.

Public API: :func:`load_instance`, :func:`parse_instance`, :func:`solve`, :func:`solve_file`,
:func:`methods`, the :class:`Result` type and the error classes.
"""

from mel_opt.api import load_instance, methods, parse_instance, solve, solve_file
from mel_opt.errors import InstanceError, MelOptError, SolverError, UsageError
from mel_opt.result import Result, Status

__version__ = "0.1.0"

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
