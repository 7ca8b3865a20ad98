"""Batch solving: every instance file under a folder, with chosen methods, in parallel.

The runner is independent of the terminal: it reports each finished job through a callback (the
CLI draws the rich progress bar). Workers write each result JSON atomically as soon as it is
done, so a killed batch keeps everything it finished, and ``resume=True`` skips jobs whose result
file is present, parses, and belongs to the same instance file (same SHA-256). ``summary.csv`` is
rebuilt from the result files at the end, so it always covers finished work only.

Ctrl-C (SIGINT to the process group, as a terminal sends it) is handled by the parent alone:
workers ignore SIGINT, the parent terminates the pool at once, writes ``summary.csv`` for the
results finished so far and raises :class:`BatchInterrupted`. The output folder is locked
against a second batch or sweep while a batch runs.

Executors: ``local`` (a process pool, or in-process for one job) and ``ray``
(``ray.util.multiprocessing.Pool``, the same Pool interface on a Ray cluster). A Ray that
melopt starts itself (no ``address``) gets the loopback interface as its node address, and
is ended with every process it started when the batch is stopped (:mod:`mel_opt.ray_local`).
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import json
import os
import time
import traceback
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mel_opt.errors import MelOptError, UsageError, needs_extra
from mel_opt.io.atomic import atomic_write, target_of_temp
from mel_opt.io.csvsafe import csv_text
from mel_opt.io.json_io import read_json_or_none
from mel_opt.io.lock import output_lock
from mel_opt.processes import pool_worker_init

SUMMARY_FIELDS = (
    "instance", "file", "problem", "method", "status", "objective", "proven", "key_metrics",
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
    doc = read_json_or_none(path)
    value = doc.get("problem") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def plan(
    root: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    methods: Sequence[str] | None = None,
    time_limit: float | None = None,
    seed: int = 0,
    files: Sequence[Path] | None = None,
) -> list[Job]:
    """Expand instance files x methods into jobs.

    With ``methods`` given, each instance gets those of them its problem has (a method no
    problem knows is a usage error); otherwise the problem's recommended method. Files whose
    problem cannot be read get one job that will report why. ``files`` (under ``root``)
    replaces the scan of ``root``: a sweep solves its own grid, not whatever else lies there.
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
    results = (out / "results").resolve()
    if results == Path(root).resolve() or results in Path(root).resolve().parents:
        raise UsageError(f"{root} lies inside the batch's own results folder {out / 'results'}")
    jobs: list[Job] = []
    for f in discover(root, exclude=out / "results") if files is None else files:
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
        "proven": ";".join((record.get("metrics") or {}).get("proven") or []),
        "key_metrics": _key_metrics(record.get("problem", ""), record.get("metrics") or {}),
        "feasible": ver.get("feasible"),
        "max_violation": ver.get("max_violation"),
        "solve_time_s": record.get("solve_time_s"),
        "wall_time_s": src.get("wall_time_s"),
        "error": record.get("error", ""),
        "result_file": result_file,
    }


def _refuse_replacing_inputs(jobs: Sequence[Job], summary: Path) -> None:
    """UsageError before anything is written when a result file or the summary would replace
    one of the instance files the batch reads (an output folder inside the input folder)."""
    inputs = {Path(j.path).resolve(): j.path for j in jobs}
    for target in [*(j.result_file for j in jobs), summary]:
        hit = inputs.get(Path(target).resolve())
        if hit is not None:
            raise UsageError(f"{hit}: the batch would write {target} over this input file; "
                             "choose an output folder that holds no instance it reads")
    for job in jobs:  # an existing file where a result goes must be a result, not an instance
        doc = read_json_or_none(job.result_file) if job.result_file.exists() else None
        if isinstance(doc, dict) and "schema_version" in doc and "status" not in doc:
            raise UsageError(f"{job.result_file} is an instance file, and the batch would "
                             "write a result over it; choose another output folder")


def run_job(job: Job) -> dict[str, Any]:
    """Load, solve, verify and write one result (atomically); never raises for bad input.

    Returns the summary row. Invalid files and solver failures are recorded with status
    ``invalid`` / ``error`` and their message.
    """
    from mel_opt.api import load_instance, solve

    start = time.perf_counter()
    source: dict[str, Any] = {"path": job.path}
    try:
        inst = load_instance(job.path)  # first: refuses a file past the input limit unread
        source["sha256"] = _sha256(job.path)
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
        text = ("out of memory" if isinstance(exc, MemoryError)
                else f"internal error: {type(exc).__name__}: {exc}")
        record = {"instance": Path(job.path).stem, "problem": _problem_hint(Path(job.path)) or "",
                  "method": job.method or "", "status": "error", "objective": None,
                  "solution": {}, "metrics": {}, "verification": None, "solve_time_s": 0.0,
                  "solver": {"name": "", "version": ""}, "error": text}
    source["wall_time_s"] = time.perf_counter() - start
    record["source"] = source
    try:
        atomic_write(job.result_file, json.dumps(record, indent=1, allow_nan=False) + "\n",
                     durable=False)
    except OSError as exc:  # back to the parent as a row: a worker's exception is a traceback
        row = row_from_record(record, "")
        row.update(status="error", error=f"result not written: {_os_error_text(exc)}",
                   write_errno=exc.errno)
        return row
    return row_from_record(record, str(job.result_file))


def _os_error_text(exc: OSError) -> str:
    return f"{exc.filename}: {exc.strerror or exc}" if exc.filename else str(exc.strerror or exc)


#: errno values of a failed write that stop a batch: the output storage takes no more files
#: (full disk, quota, file size limit, read-only, I/O error); every later result would fail too
STORAGE_ERRNOS = frozenset(getattr(errno, name) for name in
                           ("ENOSPC", "EDQUOT", "EFBIG", "EROFS", "EIO") if hasattr(errno, name))


def completed(job: Job) -> dict[str, Any] | None:
    """The summary row of a finished, valid result for ``job`` (None if it must be run)."""
    path = job.result_file
    record = read_json_or_none(path)
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


#: Where POSIX semaphores (a process pool's locks) are files on Linux
SHM_DIR = "/dev/shm"


def _pool_error_text(exc: OSError, jobs: int) -> str:
    """Why the local pool of ``jobs`` workers did not start, and what to do."""
    where = exc.filename or (SHM_DIR if exc.errno in STORAGE_ERRNOS | {errno.EACCES} else None)
    reason = f"{where}: {exc.strerror or exc}" if where else str(exc.strerror or exc)
    hint = (f" (its semaphores are files in {SHM_DIR}; make room there)"
            if where == SHM_DIR else "")
    return (f"cannot start {jobs} worker processes: {reason}{hint}; or run with --jobs 1, "
            "which needs no pool")


def _pool(executor: str, jobs: int, address: str | None) -> tuple[Any, bool]:
    """The pool of ``executor``, and whether melopt started a local Ray for it."""
    if executor == "local":
        import multiprocessing as mp

        # forkserver: workers fork from a clean server process, never from a parent that may
        # hold solver thread pools (HiGHS) or locks; preloading keeps worker start-up cheap
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["mel_opt.api", "mel_opt.batch", *_problem_modules()])
        try:
            # the workers leave Ctrl-C to the parent (which terminates the pool), and are never
            # ended holding the lock of the result queue (which would hang terminate)
            return ctx.Pool(processes=jobs, initializer=pool_worker_init), False
        except OSError as exc:  # its semaphores and pipes: a full /dev/shm, no processes left
            raise UsageError(_pool_error_text(exc, jobs)) from None
    if executor == "ray":
        try:
            import ray
            from ray.util.multiprocessing import Pool as RayPool
        except ImportError:
            raise UsageError(needs_extra("the ray executor", "ray")) from None
        from mel_opt.ray_local import init_local_ray

        started = not ray.is_initialized()
        if started:
            if address:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
            else:
                init_local_ray(ray, jobs)
        return RayPool(processes=jobs), started and not address
    raise UsageError(f"unknown executor {executor!r}; choose local or ray")


def _execute(todo: list[Job], executor: str, jobs: int,
             address: str | None) -> Generator[dict[str, Any], None, None]:
    if not todo:
        return
    if executor == "local" and jobs == 1:
        for job in todo:
            yield run_job(job)
        return
    pool, started_ray = _pool(executor, jobs, address)
    # chunks amortise the pool's per-task cost but stay small enough to balance the load
    chunk = max(1, min(16, len(todo) // (jobs * 8) or 1))
    try:
        yield from pool.imap_unordered(run_job, todo, chunksize=chunk)
    except BaseException as exc:
        # Ctrl-C (or an error): stop the workers now; close() + join() would first run every
        # queued job. Results already written stay: each one is a complete file.
        pool.terminate()
        pool.join()
        if executor == "ray":
            from mel_opt.ray_local import end_ray_pool

            end_ray_pool(pool, started_ray)
        # The exception's traceback keeps its frames (this one, the pool iterator's) and so
        # the pool alive: its semaphores would then be freed by the interpreter's teardown
        # only, which the CLI's fast exit skips, and multiprocessing's resource tracker would
        # report them as leaked. Drop the pool now (it holds reference cycles: gc frees it).
        traceback.clear_frames(exc.__traceback__)
        del pool
        gc.collect()
        raise
    pool.close()
    pool.join()  # a finished batch leaves a Ray it started running for the next one


def write_summary(rows: Iterable[dict[str, Any]], path: Path) -> None:
    ordered = sorted(rows, key=lambda r: (r["file"], r["method"]))
    atomic_write(path, csv_text(SUMMARY_FIELDS, ordered))


class BatchStopped(MelOptError):
    """The output storage took no more results (full disk, quota, read-only): the batch
    stopped its workers; ``report`` covers the result files written before (``summary.csv``
    too when it could be written), and ``--resume`` continues once there is room."""

    exit_code = 2

    def __init__(self, message: str, report: BatchReport, total: int) -> None:
        super().__init__(message)
        self.report = report
        self.total = total


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a batch; ``report`` covers the jobs finished before it (summary written).

    A subclass of KeyboardInterrupt, so code that does not know it still sees an interrupt.
    """

    def __init__(self, report: BatchReport, total: int) -> None:
        super().__init__(f"interrupted after {len(report.rows)} of {total} results")
        self.report = report
        self.total = total


def _written_since(jobs: Iterable[Job], since: float) -> list[dict[str, Any]]:
    """Rows of the result files of ``jobs`` written at or after ``since`` (epoch seconds).

    After Ctrl-C, a worker may have written its result without the parent receiving the row;
    the summary must still list it, since the file is there.
    """
    rows = []
    for job in jobs:
        path = job.result_file
        try:
            if path.stat().st_mtime < since:
                continue
        except OSError:
            continue
        record = read_json_or_none(path)
        if isinstance(record, dict) and (record.get("source") or {}).get("path") == job.path:
            rows.append(row_from_record(record, str(path)))
    return rows


def _late_rows(todo: Sequence[Job], returned: set[str], since: float,
               on_result: Callable[[dict[str, Any]], None] | None) -> list[dict[str, Any]]:
    """After the workers stopped: the results they wrote whose rows never reached the parent
    (a pool returns rows in chunks), each announced through ``on_result`` like the others,
    so a progress bar counts every result kept."""
    late = _written_since((j for j in todo if str(j.result_file) not in returned), since)
    if on_result is not None:
        for row in late:
            on_result(row)
    return late


def _remove_stale_temps(results: Path) -> None:
    """Delete temporary files of writes cut short (a worker stopped mid-write by Ctrl-C or
    by a full disk's stop): at the start of a run and once a stopped run's workers are gone.

    Safe only under the folder's lock and with no worker of this run left writing.
    """
    if results.is_dir():
        for p in results.rglob(".*.tmp*"):
            if target_of_temp(p) is not None:
                with contextlib.suppress(OSError):
                    p.unlink()


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
    files: Sequence[Path] | None = None,
    on_plan: Callable[[int, int], None] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> BatchReport:
    """Solve every instance under ``root``; write results and ``summary.csv`` under ``out_dir``.

    The output folder is locked for the whole run (:func:`mel_opt.io.lock.output_lock`): a
    second batch or sweep into it is refused with a :class:`UsageError`.

    Parameters
    ----------
    methods : sequence of str, optional
        Methods to run (each instance gets those its problem has); default: recommended.
    jobs : int
        Worker processes (local) or Ray pool size.
    resume : bool
        Skip jobs whose result is already present and valid.
    files : sequence of Path, optional
        Solve these instance files (under ``root``) instead of every ``*.json`` under ``root``.
    on_plan : callable(total, skipped), optional
        Called once the jobs are known.
    on_result : callable(row), optional
        Called as each job finishes (in completion order).

    Raises
    ------
    BatchInterrupted
        On Ctrl-C, after stopping the workers and writing ``summary.csv`` for every result
        file finished so far; ``--resume`` continues from there.
    BatchStopped
        When a result (or the summary) cannot be written for lack of room (full disk, quota,
        read-only file system): the workers are stopped the same way, the results written so
        far stay and ``summary.csv`` lists them if it fits; ``--resume`` continues.
    """
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    with output_lock(out_dir, "batch"):
        _remove_stale_temps(Path(out_dir) / "results")
        start = time.perf_counter()
        started = time.time() - 1.0  # mtime granularity: a result of this run is never older
        all_jobs = plan(root, out_dir, methods, time_limit, seed, files)
        _refuse_replacing_inputs(all_jobs, Path(out_dir) / "summary.csv")
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
        summary = Path(out_dir) / "summary.csv"
        returned: set[str] = set()
        stopped: str | None = None
        results = _execute(todo, executor, jobs, address)
        try:
            for row in results:
                if row.get("write_errno") in STORAGE_ERRNOS:
                    stopped = row["error"].removeprefix("result not written: ")
                    break
                rows.append(row)
                returned.add(row["result_file"])
                if on_result is not None:
                    on_result(row)
            results.close()  # after a stop: ends the workers before the summary is counted
        except KeyboardInterrupt:
            results.close()
            _remove_stale_temps(Path(out_dir) / "results")
            rows += _late_rows(todo, returned, started, on_result)
            write_summary(rows, summary)
            report = BatchReport(rows, skipped, time.perf_counter() - start, summary)
            raise BatchInterrupted(report, len(all_jobs)) from None
        if stopped is not None:  # the workers are stopped: writes they left cut short go
            _remove_stale_temps(Path(out_dir) / "results")
            rows += _late_rows(todo, returned, started, on_result)
        try:
            write_summary(rows, summary)
        except OSError as exc:
            if exc.errno not in STORAGE_ERRNOS:
                raise
            note = f"; {summary} not updated ({exc.strerror})"
            stopped = stopped or _os_error_text(exc)
        else:
            note = f"; {summary} lists them"
        report = BatchReport(rows, skipped, time.perf_counter() - start, summary)
        if stopped is not None:
            raise BatchStopped(f"{stopped}: the batch stopped with {len(rows)} of "
                               f"{len(all_jobs)} results kept{note}; make room and rerun with "
                               "--resume to finish", report, len(all_jobs))
        return report
