"""Export the Pyomo formulation of an instance as LP, MPS, NL (AMPL) or GMS (GAMS).

The exported model is the one a method solves (``build_model(instance, method)`` of the
problem), written with its symbolic names so a reader can match variables to the instance.
Files are written atomically; the NL writer also writes the label files ``<stem>.row`` and
``<stem>.col`` (constraint and variable names, one a line), which land beside the model.

>>> from mel_opt import load_instance
>>> from mel_opt.export import export
>>> export(load_instance("k3.json"), "lp", "k3.lp", method="exact").path   # doctest: +SKIP
PosixPath('k3.lp')
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mel_opt.errors import UsageError
from mel_opt.io.atomic import atomic_path, atomic_write
from mel_opt.problems import get_problem

# format name -> Pyomo's ProblemFormat name
FORMATS = {"lp": "cpxlp", "mps": "mps", "nl": "nl", "gms": "gams"}

# files a writer may put beside the model, named after its stem (NL's symbolic labels)
_LABEL_SUFFIXES = (".row", ".col")


@dataclass(frozen=True)
class Exported:
    """What :func:`export` wrote.

    Attributes
    ----------
    path : Path
        The model file.
    format : str
        One of :data:`FORMATS`.
    problem, method : str
        The problem and the method whose formulation was written.
    label_files : tuple of Path
        Label files written beside the model (NL only), empty otherwise.
    """

    path: Path
    format: str
    problem: str
    method: str
    label_files: tuple[Path, ...] = ()


def _beside(path: Path, suffix: str) -> Path:
    # the naming rule of Pyomo's NL writer: the file name without its extension, plus suffix
    return Path(os.path.splitext(path)[0] + suffix)


def export(instance: Any, fmt: str, path: str | os.PathLike[str],
           method: str | None = None) -> Exported:
    """Write the Pyomo model of ``instance`` for ``method`` to ``path`` in format ``fmt``.

    Parameters
    ----------
    instance
        A validated instance (:func:`mel_opt.load_instance`, :func:`mel_opt.parse_instance`).
    fmt
        ``"lp"`` (CPLEX LP), ``"mps"``, ``"nl"`` (AMPL) or ``"gms"`` (GAMS).
    path
        The model file; its folder is created if missing. An existing file is replaced only
        once the new one is complete.
    method
        The method whose formulation is written (default: the problem's default method).

    Raises
    ------
    UsageError
        Unknown format or method, a problem or method without a Pyomo formulation, or a
        model the format cannot express (e.g. a nonlinear model as LP).
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    spec = get_problem(instance.problem)
    mname = spec.method(method).name
    if spec.build_model is None:
        raise UsageError(f"problem {spec.name!r} has no Pyomo formulation to export")
    model = spec.build_model(instance, mname)
    if model is None:
        raise UsageError(f"method {mname!r} of {spec.name} has no Pyomo formulation")
    target = Path(path)
    labels: list[Path] = []
    with atomic_path(target) as tmp:
        produced = [_beside(tmp, s) for s in _LABEL_SUFFIXES]
        try:
            try:
                model.write(str(tmp), format=FORMATS[fmt],
                            io_options={"symbolic_solver_labels": True})
            except (ValueError, RuntimeError, TypeError) as exc:
                raise UsageError(f"cannot write {spec.name}/{mname} as {fmt}: {exc}") from None
            # label files first, the model last: a reader that sees the model sees its labels
            for side, suffix in zip(produced, _LABEL_SUFFIXES, strict=True):
                if side.exists():
                    labels.append(_beside(target, suffix))
                    atomic_write(labels[-1], side.read_bytes())
        finally:
            for side in produced:
                side.unlink(missing_ok=True)
    return Exported(target, fmt, spec.name, mname, tuple(labels))
