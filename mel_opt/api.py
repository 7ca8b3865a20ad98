"""The public Python API: load an instance, solve it with a named method, get a verified result.

>>> import mel_opt
>>> inst = mel_opt.load_instance("instances/mel-async/k10_T15.json")   # doctest: +SKIP
>>> res = mel_opt.solve(inst, method="exact")                          # doctest: +SKIP
>>> res.metrics["max_staleness"], res.verification.feasible            # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import math
import os
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mel_opt import deadline
from mel_opt.errors import (
    InstanceError,
    Issue,
    MelOptError,
    SolverError,
)
from mel_opt.io.json_io import read_json_file
from mel_opt.io.schema import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported: api's name
from mel_opt.io.validate import Validator
from mel_opt.problems import SolveOptions, all_problems, get_problem
from mel_opt.problems.base import Checked, Instance, MethodOutput, MethodSpec
from mel_opt.result import Result, SolverInfo
from mel_opt.status import SolutionStatus, Status, TerminationCondition


def parse_instance(doc: Any, source: str | None = None, name: str | None = None) -> Instance:
    """Validate a raw JSON document and return the problem's frozen instance object.

    Raises
    ------
    InstanceError
        With every issue found and its JSON path.
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None
    problem = v.string(root, "problem", "$", choices=tuple(all_problems()))
    v.number(root, "schema_version", "$", integer=True, minimum=SCHEMA_VERSION,
             maximum=SCHEMA_VERSION)
    v.finish()
    if "name" not in root or not isinstance(root.get("name"), str):
        root = {**root, "name": name or (Path(source).stem if source else "instance")}
    return get_problem(problem).parse(root, source)


def load_instance(path: str | os.PathLike[str], *,
                  timings: dict[str, float] | None = None) -> Instance:
    """Read and validate an instance file (JSON); the instance's name defaults to the file stem.

    Parameters
    ----------
    path
        The instance file.
    timings
        When given, receives the seconds spent in ``load`` (reading the file and parsing its
        JSON) and in ``validate`` (checking the document and building the instance); the keys
        of :attr:`Result.timings <mel_opt.result.Result.timings>`.
    """
    start = time.perf_counter()
    doc = read_json_file(path)
    loaded = time.perf_counter()
    inst = parse_instance(doc, str(path), Path(path).stem)
    if timings is not None:
        timings["load"] = loaded - start
        timings["validate"] = time.perf_counter() - loaded
    return inst


def problem_of(instance: Instance) -> str:
    return str(instance.problem)


def solve(
    instance: Instance,
    method: str | None = None,
    *,
    time_limit: float | None = None,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
) -> Result:
    """Solve ``instance`` with ``method`` (default: the problem's recommended one) and verify.

    The solution is re-checked against the instance by the problem's verifier, which shares no
    code with the method. ``options`` are the method's declared options
    (:attr:`MethodSpec.options <mel_opt.problems.base.MethodSpec.options>`), checked before it
    runs. Invalid requests (unknown method, unknown option, bad option value) raise
    :class:`~mel_opt.errors.UsageError`; everything else ends in a result, and a solved
    status (exit code 0) only stands for an answer the verifier accepts with finite
    violations and a finite objective, whose numbers are finite and not negative. Otherwise:

    - the method raised (SolverError, or arithmetic trouble such as ZeroDivisionError or
      OverflowError): status ``error`` with the exception in ``message``;
    - the verifier rejected a solved answer: status ``error``, ``message`` names the failing
      checks, ``verification`` is kept;
    - ``time_limit`` seconds passed (the deadline of :mod:`mel_opt.deadline`, which every long
      loop and solver adapter reads): the method's incumbent, or status ``time_limit``.

    Numerical RuntimeWarnings raised meanwhile are collected into ``message``, not printed.
    The result's ``timings`` hold ``solve`` and, when a solution was verified, ``verify``
    (seconds).
    """
    spec = get_problem(problem_of(instance))
    mspec = spec.method(method)
    opts = SolveOptions(time_limit=time_limit, seed=seed,
                        options=mspec.read_options(options, spec.name))
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        # Numerical warnings become a note of the result, never lines on stderr.
        warnings.simplefilter("always")
        out, message, imported_s = _call_method(mspec, instance, opts)
        elapsed = time.perf_counter() - start - imported_s
        timings = {"solve": elapsed}
        if imported_s > 1e-3:
            timings["import"] = imported_s
        termination, point = out.termination, out.solution_status
        if out.solution is None:
            point = SolutionStatus.NONE
        verification = None
        metrics: dict[str, Any] = {}
        objective = None
        if out.solution is not None and Status.of(termination, point).has_solution:
            verify_start = time.perf_counter()
            try:
                checked = spec.verify(instance, out.solution)
            except MelOptError:
                raise
            except Exception as exc:  # the verifier's own arithmetic trouble: no answer stands
                termination, point = TerminationCondition.ERROR, SolutionStatus.NONE
                message = f"the verifier failed: {_describe(exc)}"
            else:
                timings["verify"] = time.perf_counter() - verify_start
                verification = checked.verification
                metrics = dict(checked.metrics)
                objective = checked.objective
                rejection = _rejection(checked, out.solution)
                if rejection:
                    # an answer that does not stand: the solve ended in error, its point kept
                    # for the reader but marked infeasible
                    termination, point = TerminationCondition.ERROR, SolutionStatus.INFEASIBLE
                    message = f"method returned an answer that fails verification: {rejection}"
        for key, value in out.extras.items():
            metrics.setdefault(key, value)
        if Status.of(termination, point).has_solution:
            metrics["proven"] = _proven(spec, Status.of(termination, point), metrics)
        message = _with_warnings(message, caught)
    return Result(
        instance=instance.name,
        problem=spec.name,
        method=mspec.name,
        termination=termination,
        solution_status=point,
        objective=objective,
        solution=dict(out.solution or {}),
        metrics=metrics,
        verification=verification,
        solve_time_s=elapsed,
        solver=out.solver,
        message=message,
        timings=timings,
    )


def _proven(spec: Any, status: Status, metrics: dict[str, Any]) -> list[str]:
    """The objectives the answer is proven optimal for: what the method says it proved
    (``proven_levels``, e.g. mel-async's lexicographic stages), else the problem's objective
    (its first key metric) when the status is optimal, else none."""
    levels = metrics.get("proven_levels")
    if isinstance(levels, list):
        return [str(x) for x in levels] if status is Status.OPTIMAL else []
    return [spec.key_metrics[0]] if status is Status.OPTIMAL and spec.key_metrics else []


# The hard-stop timer fires this long after the deadline: the cooperative checks of the
# methods get the first chance to return their incumbent (the limit is kept within 0.5 s).
_GRACE_S = 0.4


#: Modules each solver backend loads on its first use (imported before a method's clock).
BACKEND_IMPORTS = {"ipopt": ("pyomo.environ", "cyipopt"), "highs": ("pyomo.environ", "highspy")}


#: Set by the command line: Pyomo's log records go to standard error. Pyomo's own handler
#: writes them to standard output, which a ``--json`` answer must have to itself; a library
#: user keeps Pyomo's default.
PYOMO_LOG_TO_STDERR = False


def _pyomo_log_to_stderr() -> None:
    """Swap Pyomo's standard-output log handler for one on standard error (same format)."""
    import logging

    plog = sys.modules.get("pyomo.common.log")
    handler = getattr(plog, "pyomo_handler", None)
    logger = logging.getLogger("pyomo")
    if handler is None or handler not in logger.handlers:
        return
    new = logging.StreamHandler(sys.stderr)
    new.setFormatter(handler.formatter)
    new.setLevel(handler.level)
    logger.removeHandler(handler)
    logger.addHandler(new)


def _warm_up(mspec: MethodSpec) -> float:
    """Import the modules ``mspec`` needs (seconds spent); a missing one is left for the method
    to report as it does."""
    start = time.perf_counter()
    names = list(mspec.imports)
    for b in mspec.backends:
        names += BACKEND_IMPORTS.get(b, ())
    for name in dict.fromkeys(names):
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if PYOMO_LOG_TO_STDERR and "pyomo.common.log" in sys.modules:
        _pyomo_log_to_stderr()
    return time.perf_counter() - start


def _call_method(mspec: MethodSpec, instance: Any,
                 opts: SolveOptions) -> tuple[MethodOutput, str, float]:
    """Run one method under its deadline: its output (or one standing for its failure), the
    message, and the seconds spent importing what it needs first (inside the deadline, outside
    the method's own clock).

    A deadline that has already passed (an outer limit used up) does not start the method: a
    ``time_limit`` stop without a point. A :class:`~mel_opt.deadline.TimeLimitReached` gives
    its incumbent or a ``time_limit`` stop without a point; a SolverError, or any exception
    that is not one of mel_opt's deliberate errors (a bug or arithmetic trouble in the method:
    ZeroDivisionError, OverflowError, FloatingPointError, ValueError...), gives an ``error``
    stop with a one-line message instead of an internal error. Usage errors (bad options)
    still raise.
    """
    info = SolverInfo(mspec.name)
    imported = 0.0
    try:
        with deadline.limit(opts.time_limit) as dl, deadline.hard_stop(dl, _GRACE_S):
            if dl.expired():  # no time left (an outer limit used it up): do not start
                raise deadline.TimeLimitReached(
                    f"time limit of {dl.time_limit:g} s reached before the method started")
            imported = _warm_up(mspec)
            out = mspec.func(instance, opts)
    except deadline.TimeLimitReached as exc:
        if isinstance(exc.incumbent, MethodOutput):
            out = exc.incumbent
        else:
            return MethodOutput.nothing(TerminationCondition.TIME_LIMIT, info), str(exc), \
                imported
    except SolverError as exc:
        return MethodOutput.nothing(TerminationCondition.ERROR, info), str(exc), imported
    except MelOptError:
        raise
    except Exception as exc:
        return (MethodOutput.nothing(TerminationCondition.ERROR, info),
                f"the method failed: {_describe(exc)}", imported)
    return out, out.message, imported


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _rejection(checked: Checked, solution: Mapping[str, Any]) -> str:
    """Why a solved status may not stand for this verified answer ('' when it may).

    The verifier must accept it with finite violations and give it a finite objective, and
    every number of the solution must be finite and, but for the -1 sentinels of
    :data:`_SIGNED_KEYS`, non-negative.
    """
    ver = checked.verification
    values = [ver.max_violation, *ver.checks.values()]
    if not ver.feasible or not all(math.isfinite(v) for v in values):
        worst = sorted(ver.checks.items(), key=lambda kv: -_order(kv[1]))
        named = ", ".join(f"{k} = {v:.3g}" for k, v in worst[:3] if _order(v) > 0)
        return named or "; ".join(ver.notes) or f"max violation {ver.max_violation:.3g}"
    if checked.objective is None or not math.isfinite(float(checked.objective)):
        return f"the verifier found no finite objective (got {checked.objective})"
    for key, value in solution.items():
        nums = _numbers(value)
        if not np.isfinite(nums).all():
            return f"solution.{key} holds a non-finite number"
        floor = -1.0 if key in _SIGNED_KEYS else 0.0
        if nums.size and nums.min() < floor:
            return f"solution.{key} holds a negative quantity ({nums.min():g})"
    return ""


def _numbers(value: Any) -> np.ndarray:
    """The numbers of a solution value as floats (booleans and text are not quantities).

    Numeric lists and arrays convert in one step (a million learners: milliseconds); mixed or
    ragged values, and integers beyond 64 bits, go element by element.
    """
    if isinstance(value, (bool, str)) or value is None:
        return np.zeros(0)
    try:
        arr = np.asarray(value)
    except ValueError:  # ragged nesting
        arr = np.asarray(value, dtype=object)
    if arr.dtype.kind in "iuf":
        return arr.astype(float).ravel()
    if arr.dtype.kind == "b":
        return np.zeros(0)
    return np.array([float(v) for v in np.asarray(value, dtype=object).ravel()
                     if isinstance(v, (int, float, np.number)) and not isinstance(v, bool)],
                    dtype=float)


# Solution keys whose -1 is a sentinel, not a quantity (med: a learner with no task).
_SIGNED_KEYS = frozenset({"assignment"})


def _order(value: float) -> float:
    """Sort key of a check's violation: NaN counts as the worst."""
    return math.inf if math.isnan(value) else value


def _with_warnings(message: str, caught: list[warnings.WarningMessage]) -> str:
    """``message`` plus one note naming the distinct numerical warnings raised (never shown
    on stderr)."""
    texts = sorted({str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)})
    if not texts:
        return message
    note = f"numerical warnings: {'; '.join(texts[:3])}" + (" ..." if len(texts) > 3 else "")
    return f"{message} ({note})" if message else note


def solve_file(path: str | os.PathLike[str], method: str | None = None, **kw: Any) -> Result:
    """Load and solve one instance file; the result's timings include ``load`` and
    ``validate``."""
    timings: dict[str, float] = {}
    res = solve(load_instance(path, timings=timings), method, **kw)
    return replace(res, timings={**timings, **res.timings})


def methods(problem: str | None = None) -> dict[str, list[str]]:
    """Method names by problem (all problems, or one)."""
    probs = all_problems() if problem is None else {problem: get_problem(problem)}
    return {name: list(spec.methods) for name, spec in probs.items()}


__all__ = [
    "Instance",
    "InstanceError",
    "Issue",
    "MelOptError",
    "load_instance",
    "methods",
    "parse_instance",
    "solve",
    "solve_file",
]
