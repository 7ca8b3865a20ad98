"""The public Python API: load an instance, solve it with a named method, get a verified result.

>>> import mel_opt
>>> inst = mel_opt.load_instance("instances/mel-async/k10_T15.json")   # doctest: +SKIP
>>> res = mel_opt.solve(inst, method="exact")                          # doctest: +SKIP
>>> res.metrics["max_staleness"], res.verification.feasible            # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mel_opt.errors import InstanceError, Issue, MelOptError, SolverError
from mel_opt.io.json_io import read_json_file
from mel_opt.io.validate import Validator
from mel_opt.problems import SolveOptions, all_problems, get_problem
from mel_opt.problems.base import Instance
from mel_opt.result import Result, SolverInfo, Status, status_from_termination

SCHEMA_VERSION = 1


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
    code with the method. Solver failures become a result with status ``error``; invalid
    requests (unknown method) raise :class:`~mel_opt.errors.UsageError`. The result's
    ``timings`` hold ``solve`` and, when a solution was verified, ``verify`` (seconds).
    """
    spec = get_problem(problem_of(instance))
    mspec = spec.method(method)
    opts = SolveOptions(time_limit=time_limit, seed=seed, extra=dict(options or {}))
    start = time.perf_counter()
    try:
        out = mspec.func(instance, opts)
    except SolverError as exc:
        elapsed = time.perf_counter() - start
        return Result(
            instance=instance.name, problem=spec.name, method=mspec.name, status=Status.ERROR,
            objective=None, solution={}, metrics={}, verification=None, solve_time_s=elapsed,
            solver=SolverInfo(mspec.name), message=str(exc), timings={"solve": elapsed},
        )
    elapsed = time.perf_counter() - start
    status = status_from_termination(out.termination)
    verification = None
    metrics: dict[str, Any] = {}
    objective = None
    timings = {"solve": elapsed}
    if out.solution is not None and status.has_solution:
        verify_start = time.perf_counter()
        checked = spec.verify(instance, out.solution)
        timings["verify"] = time.perf_counter() - verify_start
        verification = checked.verification
        metrics = dict(checked.metrics)
        objective = checked.objective
    for key, value in out.extras.items():
        metrics.setdefault(key, value)
    return Result(
        instance=instance.name,
        problem=spec.name,
        method=mspec.name,
        status=status,
        objective=objective,
        solution=dict(out.solution or {}),
        metrics=metrics,
        verification=verification,
        solve_time_s=elapsed,
        solver=out.solver,
        message=out.message,
        timings=timings,
    )


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
