"""The one result type of every method (numerical, analytical, exact, baseline).

A :class:`Result` serialises to the result JSON of the design brief::

    {"instance", "problem", "method", "status", "objective", "solution", "metrics",
     "verification": {"feasible", "max_violation", ...}, "solve_time_s",
     "solver": {"name", "version"}, "message", "timings": {"load", "validate", ...}}

Two ways to the JSON give the same document: :meth:`Result.to_dict` (plain Python values, for
library users) and :meth:`Result.to_json_bytes` / :func:`dumps` (orjson straight from numpy
arrays, for large results: no per-element Python conversion).
"""

from __future__ import annotations

import enum
import json
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import orjson

from mel_opt.status import SolutionStatus, Status, TerminationCondition

__all__ = ["Result", "SolverInfo", "Status", "Verification", "dumps"]


@dataclass(frozen=True)
class Verification:
    """Outcome of the independent re-check of a solution against its instance.

    ``max_violation`` is the largest violation of any hard constraint, in the constraint's own
    units relative to its scale (0 for a feasible integer answer). ``checks`` names each check
    with its violation so a reader can see what was looked at.
    """

    feasible: bool
    max_violation: float
    checks: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "feasible": self.feasible,
            "max_violation": self.max_violation,
            "checks": dict(self.checks),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class SolverInfo:
    name: str
    version: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version}


@dataclass(frozen=True)
class Result:
    """Answer of one method on one instance, verified independently.

    Attributes
    ----------
    instance : str
        Instance name (file stem or ``name`` field).
    problem, method : str
        Problem and method identifiers (``mel-async``, ``exact``...).
    termination : TerminationCondition
        Why the method stopped, as the method (or its backend) said; ``error`` when the method
        failed or its answer failed verification.
    solution_status : SolutionStatus
        What came back: ``optimal``/``feasible`` for an answer that stands, ``infeasible`` for
        one the verifier rejected, ``none`` without one.
    objective : float | None
        Objective value of ``solution`` as recomputed by the verifier (None without a solution).
    solution : dict
        Decision values in the keys of the design brief (``d``, ``tau``...), plain lists.
    metrics : dict
        Problem metrics recomputed from the solution, plus method extras (prefixed by nothing;
        method-reported extras never overwrite a recomputed metric).
    verification : Verification | None
    solve_time_s : float
        Wall time of the method alone (loading and verification excluded).
    solver : SolverInfo
    message : str
        Short human note (why infeasible, which tie-break was used...).
    timings : dict of str to float
        Seconds spent in each phase that produced this result, in the order they ran:
        ``load`` (read the file and parse its JSON) and ``validate`` (turn the document into
        the instance) when the instance came from a file, ``solve`` (the method, equal to
        ``solve_time_s``), ``verify`` (the independent re-check), and ``write`` (encoding the
        result JSON) when the command line writes it.
    """

    instance: str
    problem: str
    method: str
    termination: TerminationCondition
    solution_status: SolutionStatus
    objective: float | None
    solution: dict[str, Any]
    metrics: dict[str, Any]
    verification: Verification | None
    solve_time_s: float
    solver: SolverInfo
    message: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def status(self) -> Status:
        """The user-facing status, derived from the two axes (:meth:`Status.of`)."""
        return Status.of(self.termination, self.solution_status)

    @property
    def exit_code(self) -> int:
        """Exit code of the command line (:attr:`Status.exit_code`)."""
        return self.status.exit_code

    @property
    def ok(self) -> bool:
        """True when a solution came back and it passed verification."""
        return (
            self.status.has_solution
            and self.verification is not None
            and self.verification.feasible
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "problem": self.problem,
            "method": self.method,
            "status": self.status.value,
            "objective": _plain(self.objective),
            "solution": _plain(self.solution),
            "metrics": _plain(self.metrics),
            "verification": (
                None if self.verification is None else _plain(self.verification.to_dict())
            ),
            "solve_time_s": self.solve_time_s,
            "solver": self.solver.to_dict(),
            "message": self.message,
            "timings": dict(self.timings),
        }

    def document(self) -> dict[str, Any]:
        """The fields of :meth:`to_dict` before any conversion (numpy arrays left as they are)."""
        return {
            "instance": self.instance,
            "problem": self.problem,
            "method": self.method,
            "status": self.status.value,
            "objective": self.objective,
            "solution": self.solution,
            "metrics": self.metrics,
            "verification": None if self.verification is None else self.verification.to_dict(),
            "solve_time_s": self.solve_time_s,
            "solver": self.solver.to_dict(),
            "message": self.message,
            "timings": dict(self.timings),
        }

    def to_json_bytes(self, indent: int | None = 2) -> bytes:
        """The result JSON as UTF-8 bytes, by the fast path of :func:`dumps`.

        Parses to the same document as ``json.dumps(self.to_dict())``.
        """
        return dumps(self.document(), indent)

    def to_json(self, indent: int | None = 2) -> str:
        """The result JSON as text (see :meth:`to_json_bytes`)."""
        return self.to_json_bytes(indent).decode()

    def to_json_timed(self, indent: int | None = 2) -> tuple[Result, bytes]:
        """Encode the result and record the time that took as ``timings["write"]``.

        The encoding's duration is only known once the document exists, so the document is
        encoded without ``timings`` and the ``timings`` object (with ``write``) is appended to
        it: one encoding, not two, which matters for results of a million learners.

        Returns
        -------
        Result, bytes
            The result with ``write`` added to its timings, and its JSON document (which
            parses to ``json.loads(result.to_json())`` of that result, ``write`` included).
        """
        start = time.perf_counter()
        doc = self.document()
        del doc["timings"]
        body = dumps(doc, indent)
        timed = replace(self, timings={**self.timings, "write": time.perf_counter() - start})
        tail = dumps(timed.timings, indent)
        if indent:  # a member of the top-level object: one level deeper than on its own
            tail = tail.replace(b"\n", b"\n" + b" " * indent)
            sep = b",\n" + b" " * indent + b'"timings": '
            end = b"\n}"
        else:
            sep, end = b',"timings":', b"}"
        # both encoders end a top-level object with exactly ``end`` at this indent
        return timed, body[: -len(end)] + sep + tail + end

    def __repr__(self) -> str:  # readable, as linopy's Result
        obj = "-" if self.objective is None else f"{self.objective:.6g}"
        ver = "unverified" if self.verification is None else (
            "verified" if self.verification.feasible else "VERIFICATION FAILED"
        )
        return (
            f"Result({self.problem}/{self.method} on {self.instance!r}: {self.status.value}, "
            f"objective {obj}, {ver}, {self.solve_time_s:.3g} s)"
        )


def _plain(value: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into JSON-safe Python values.

    The slow reference path (one Python call per element); :func:`dumps` writes the same
    document without it.
    """
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value


_ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


def _default(value: Any) -> Any:
    """What orjson cannot write itself, in the form :func:`_plain` would give it.

    Non-contiguous or object arrays become lists, other numpy scalars Python scalars,
    subclasses of float/int their base value, enums their value; anything else is refused
    (``TypeError``, as the standard encoder would).
    """
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: Any, indent: int | None = 2) -> bytes:
    """JSON bytes of ``value`` as ``json.dumps(_plain(value), indent=indent)`` would write them.

    The fast path is orjson, which writes numpy arrays and scalars from their memory (no Python
    object per element) and non-finite floats as ``null``, as :func:`_plain` does. Documents
    orjson refuses (a key that is not a string, an integer beyond 64 bits) and indents other
    than 2 go through :func:`_plain` and the standard encoder, so the contract is the same for
    every input. Numbers may be spelled differently (``1e-07`` / ``1e-7``), never valued
    differently; a float32 is written by its own shortest form.

    Raises
    ------
    TypeError
        For a value neither encoder can write.
    """
    if indent in (None, 0, 2):
        option = _ORJSON_OPTIONS | (orjson.OPT_INDENT_2 if indent else 0)
        try:
            return orjson.dumps(value, default=_default, option=option)
        except orjson.JSONEncodeError:
            pass  # the standard encoder below writes it, or raises its own TypeError
    text = json.dumps(_plain(value), indent=indent or None, allow_nan=False)
    return text.encode()
