"""Batch solving: every instance file under a folder, with chosen methods, in parallel.

The runner is independent of the terminal: it reports each finished job through a callback (the
CLI draws the rich progress bar). Workers write each result JSON atomically as soon as it is
done, so a killed batch keeps everything it finished, and ``resume=True`` skips jobs whose result
file is present, parses, and belongs to the same instance file (same SHA-256). ``summary.csv`` is
rebuilt from the result files at the end, so it always covers finished work only.

Executors: ``local`` (a process pool, or in-process for one job) and ``ray``
(``ray.util.multiprocessing.Pool``, the same Pool interface on a Ray cluster).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mel_opt.errors import MelOptError, UsageError
from mel_opt.io.atomic import atomic_write

SUMMARY_FIELDS = (
    "instance", "file", "problem", "method", "status", "objective", "key_metrics",
    "feasible", "max_violation", "solve_time_s", "wall_time_s", "error", "result_file",
)


@dataclass(frozen=True)
class Job:
    """One (instance file, method) pair; ``method`` None means the problem's default."""

    path: str  # instance file
    rel: str  # path relative to the batch root (names the result file)
    method: str | None
    out_dir: str
    time_limit: float | None = None
    seed: int = 0

    @property
    def result_file(self) -> Path:
        stem = self.rel[:-5] if self.rel.endswith(".json") else self.rel
        return Path(self.out_dir) / "results" / f"{stem}.{self.method or 'default'}.json"


def discover(root: str | os.PathLike[str], exclude: Path | None = None) -> list[Path]:
    """Instance files under ``root`` (recursively ``*.json``), sorted; ``exclude`` is skipped."""
    base = Path(root)
    if not base.is_dir():
        raise UsageError(f"{base}: not a directory")
    ex = exclude.resolve() if exclude is not None else None
    files = []
    for p in sorted(base.rglob("*.json")):
        if not p.is_file():
            continue
        if ex is not None and (p.resolve() == ex or ex in p.resolve().parents):
            continue
        files.append(p)
    return files


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


def _problem_hint(path: Path) -> str | None:
    """The ``problem`` field, read cheaply to expand methods (full validation is the worker's)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    value = doc.get("problem") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def plan(
    root: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    methods: Sequence[str] | None = None,
    time_limit: float | None = None,
    seed: int = 0,
) -> list[Job]:
    """Expand instance files x methods into jobs.

    With ``methods`` given, each instance gets those of them its problem has (a method no
    problem knows is a usage error); otherwise the problem's recommended method. Files whose
    problem cannot be read get one job that will report why.
    """
    from mel_opt.problems import all_problems

    problems = all_problems()
    if methods:
        known = {m for spec in problems.values() for m in spec.methods}
        unknown = [m for m in methods if m not in known]
        if unknown:
            raise UsageError(f"no problem has method(s) {', '.join(unknown)}; "
                             f"known methods: {', '.join(sorted(known))}")
    out = Path(out_dir)
    jobs: list[Job] = []
    for f in discover(root, exclude=out / "results"):
        rel = f.relative_to(root).as_posix()
        problem = _problem_hint(f)
        spec = problems.get(problem or "")
        if spec is None or not methods:
            chosen: list[str | None] = [None]
        else:
            chosen = [m for m in methods if m in spec.methods] or [None]
        for m in chosen:
            jobs.append(Job(str(f), rel, m, str(out), time_limit, seed))
    return jobs


def _key_metrics(problem: str, metrics: dict[str, Any]) -> str:
    from mel_opt.problems import all_problems

    spec = all_problems().get(problem)
    keys = spec.key_metrics if spec is not None else ()
    parts = []
    for k in keys:
        v = metrics.get(k)
        if isinstance(v, float):
            parts.append(f"{k}={v:.6g}")
        elif v is not None:
            parts.append(f"{k}={v}")
    return ";".join(parts)


def row_from_record(record: dict[str, Any], result_file: str) -> dict[str, Any]:
    """A summary.csv row from a result JSON (as written by :func:`run_job`)."""
    ver = record.get("verification") or {}
    src = record.get("source") or {}
    return {
        "instance": record.get("instance", ""),
        "file": src.get("path", ""),
        "problem": record.get("problem", ""),
        "method": record.get("method", ""),
        "status": record.get("status", ""),
        "objective": record.get("objective"),
        "key_metrics": _key_metrics(record.get("problem", ""), record.get("metrics") or {}),
        "feasible": ver.get("feasible"),
        "max_violation": ver.get("max_violation"),
        "solve_time_s": record.get("solve_time_s"),
        "wall_time_s": src.get("wall_time_s"),
        "error": record.get("error", ""),
        "result_file": result_file,
    }


def run_job(job: Job) -> dict[str, Any]:
    """Load, solve, verify and write one result (atomically); never raises for bad input.

    Returns the summary row. Invalid files and solver failures are recorded with status
    ``invalid`` / ``error`` and their message.
    """
    from mel_opt.api import load_instance, solve

    start = time.perf_counter()
    source: dict[str, Any] = {"path": job.path}
    try:
        source["sha256"] = _sha256(job.path)
        inst = load_instance(job.path)
        res = solve(inst, job.method, time_limit=job.time_limit, seed=job.seed)
        record = res.to_dict()
        if not res.ok:
            record["error"] = res.message if not res.status.has_solution else (
                "verification failed" if res.verification and not res.verification.feasible
                else res.message)
    except MelOptError as exc:
        record = {"instance": Path(job.path).stem, "problem": _problem_hint(Path(job.path)) or "",
                  "method": job.method or "", "status": "invalid", "objective": None,
                  "solution": {}, "metrics": {}, "verification": None, "solve_time_s": 0.0,
                  "solver": {"name": "", "version": ""}, "error": str(exc)}
    except Exception as exc:  # a bug in a method: record it, keep the batch going
        record = {"instance": Path(job.path).stem, "problem": _problem_hint(Path(job.path)) or "",
                  "method": job.method or "", "status": "error", "objective": None,
                  "solution": {}, "metrics": {}, "verification": None, "solve_time_s": 0.0,
                  "solver": {"name": "", "version": ""},
                  "error": f"internal error: {type(exc).__name__}: {exc}"}
    source["wall_time_s"] = time.perf_counter() - start
    record["source"] = source
    atomic_write(job.result_file, json.dumps(record, indent=1, allow_nan=False) + "\n",
                 durable=False)
    return row_from_record(record, str(job.result_file))


def completed(job: Job) -> dict[str, Any] | None:
    """The summary row of a finished, valid result for ``job`` (None if it must be run)."""
    path = job.result_file
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("status") in (None, "invalid", "error"):
        return None
    src = record.get("source") or {}
    try:
        if src.get("sha256") != _sha256(job.path):
            return None
    except OSError:
        return None
    return row_from_record(record, str(path))


def is_failure(row: dict[str, Any]) -> bool:
    solved = row["status"] in ("optimal", "locally_optimal", "feasible")
    return not solved or row["feasible"] is False


@dataclass
class BatchReport:
    rows: list[dict[str, Any]]
    skipped: int
    wall_time_s: float
    summary_file: Path

    @property
    def failures(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if is_failure(r)]


def _problem_modules() -> list[str]:
    """Module names of the problem packages (imported once by the fork server, not per worker)."""
    import pkgutil

    import mel_opt.problems as problems

    return [f"mel_opt.problems.{m.name}" for m in pkgutil.iter_modules(problems.__path__)
            if m.ispkg]


def _pool(executor: str, jobs: int, address: str | None) -> Any:
    if executor == "local":
        import multiprocessing as mp

        # forkserver: workers fork from a clean server process, never from a parent that may
        # hold solver thread pools (HiGHS) or locks; preloading keeps worker start-up cheap
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["mel_opt.api", "mel_opt.batch", *_problem_modules()])
        return ctx.Pool(processes=jobs)
    if executor == "ray":
        try:
            import ray
            from ray.util.multiprocessing import Pool as RayPool
        except ImportError:
            raise UsageError("the ray executor needs Ray: pip install 'mel_opt[ray]'") from None
        if not ray.is_initialized():
            if address:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
            else:
                ray.init(num_cpus=jobs, include_dashboard=False, ignore_reinit_error=True,
                         log_to_driver=False)
        return RayPool(processes=jobs)
    raise UsageError(f"unknown executor {executor!r}; choose local or ray")


def _execute(todo: list[Job], executor: str, jobs: int,
             address: str | None) -> Iterator[dict[str, Any]]:
    if not todo:
        return
    if executor == "local" and jobs == 1:
        for job in todo:
            yield run_job(job)
        return
    pool = _pool(executor, jobs, address)
    # chunks amortise the pool's per-task cost but stay small enough to balance the load
    chunk = max(1, min(16, len(todo) // (jobs * 8) or 1))
    try:
        yield from pool.imap_unordered(run_job, todo, chunksize=chunk)
    finally:
        pool.close()
        pool.join()


def write_summary(rows: Iterable[dict[str, Any]], path: Path) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=SUMMARY_FIELDS, lineterminator="\n")
    w.writeheader()
    for r in sorted(rows, key=lambda r: (r["file"], r["method"])):
        w.writerow({k: "" if r.get(k) is None else r.get(k) for k in SUMMARY_FIELDS})
    atomic_write(path, buf.getvalue())


def run_batch(
    root: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    methods: Sequence[str] | None = None,
    jobs: int = 1,
    executor: str = "local",
    address: str | None = None,
    resume: bool = False,
    time_limit: float | None = None,
    seed: int = 0,
    on_plan: Callable[[int, int], None] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> BatchReport:
    """Solve every instance under ``root``; write results and ``summary.csv`` under ``out_dir``.

    Parameters
    ----------
    methods : sequence of str, optional
        Methods to run (each instance gets those its problem has); default: recommended.
    jobs : int
        Worker processes (local) or Ray pool size.
    resume : bool
        Skip jobs whose result is already present and valid.
    on_plan : callable(total, skipped), optional
        Called once the jobs are known.
    on_result : callable(row), optional
        Called as each job finishes (in completion order).
    """
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    start = time.perf_counter()
    all_jobs = plan(root, out_dir, methods, time_limit, seed)
    rows: list[dict[str, Any]] = []
    todo: list[Job] = []
    for job in all_jobs:
        done = completed(job) if resume else None
        if done is not None:
            rows.append(done)
        else:
            todo.append(job)
    skipped = len(rows)
    if on_plan is not None:
        on_plan(len(all_jobs), skipped)
    for row in _execute(todo, executor, jobs, address):
        rows.append(row)
        if on_result is not None:
            on_result(row)
    summary = Path(out_dir) / "summary.csv"
    write_summary(rows, summary)
    return BatchReport(rows, skipped, time.perf_counter() - start, summary)
