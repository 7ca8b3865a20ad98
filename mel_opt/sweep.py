"""Parameter sweeps: generate a grid of instances, batch-solve them, tabulate, plot.

A sweep point is a combination of the varied size (``learners`` or ``tasks``), any number of
generator parameters given as lists (``cycle_time_s=7.5,15``) and a seed. Every instance file
records its point in a ``sweep`` field (instance loaders ignore unknown fields), and
``sweep.csv`` joins points with each method's status, objective and scalar metrics, one row per
(instance, method), ready for :func:`mel_opt.plot.plot_sweep`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mel_opt.api import parse_instance
from mel_opt.batch import BatchReport, run_batch
from mel_opt.errors import UsageError
from mel_opt.io.atomic import atomic_write
from mel_opt.io.csvsafe import csv_text
from mel_opt.io.lock import LOCK_NAME, output_lock
from mel_opt.limits import MAX_EVALUATION_ROWS, check_simulation
from mel_opt.problems import get_problem

#: Most values one option of a sweep may take (the grid is their product; a range is counted
#: before it is built).
MAX_VALUES = 10_000
#: Largest number of learners or tasks a sweep asks a generator for.
MAX_SIZE = 10_000_000


def parse_values(text: str, option: str = "value") -> list[str]:
    """``5:20`` (inclusive range), ``5:20:5`` (with step) or ``7.5,15`` (list) -> strings.

    A range is checked and counted before it is built (UsageError naming ``option`` beyond
    :data:`MAX_VALUES` values)."""
    text = text.strip()
    if ":" in text:
        parts = text.split(":")
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise UsageError(f"{option}: range {text!r} must be START:STOP[:STEP] with whole "
                             "numbers") from None
        if len(nums) not in (2, 3) or (len(nums) == 3 and nums[2] <= 0) or nums[1] < nums[0]:
            raise UsageError(f"{option}: bad range {text!r} (START <= STOP, STEP > 0)")
        step = nums[2] if len(nums) == 3 else 1
        count = (nums[1] - nums[0]) // step + 1
        if count > MAX_VALUES:
            raise UsageError(f"{option}: range {text!r} has {count:,} values; at most "
                             f"{MAX_VALUES:,}")
        return [str(v) for v in range(nums[0], nums[1] + 1, step)]
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values:
        raise UsageError(f"{option}: no values in {text!r}")
    if len(values) > MAX_VALUES:
        raise UsageError(f"{option}: {len(values):,} values; at most {MAX_VALUES:,}")
    return values


def size_values(text: str, option: str) -> list[int]:
    """Numbers of learners or tasks: whole numbers in [1, :data:`MAX_SIZE`] (UsageError naming
    ``option``)."""
    out = []
    for v in parse_values(text, option):
        try:
            n = int(v)
        except ValueError:
            raise UsageError(f"{option}: {v!r} is not a whole number") from None
        if not 1 <= n <= MAX_SIZE:
            raise UsageError(f"{option}: {n} must lie in [1, {MAX_SIZE:,}]")
        out.append(n)
    return out


def grid_size(learners: Sequence[int] | None, tasks: Sequence[int] | None,
              params: dict[str, list[str]], seeds: int) -> int:
    """How many instances :func:`make_grid` would write for these values."""
    n = max(1, len(learners or ())) * max(1, len(tasks or ())) * seeds
    for values in params.values():
        n *= len(values)
    return n


def grid_documents(
    problem: str,
    preset: str | None,
    learners: Sequence[int] | None,
    tasks: Sequence[int] | None,
    params: dict[str, list[str]],
    seeds: int,
) -> list[tuple[str, dict[str, Any], Any]]:
    """Every instance of the grid, generated and validated in memory: (tag, document,
    parsed instance)."""
    spec = get_problem(problem)
    if spec.generate is None:
        raise UsageError(f"problem {problem!r} has no generator")
    keys = sorted(params)
    out = []
    sizes_n: Sequence[int | None] = list(learners) if learners else [None]
    sizes_m: Sequence[int | None] = list(tasks) if tasks else [None]
    for n, m, combo, seed in itertools.product(
        sizes_n, sizes_m, itertools.product(*(params[k] for k in keys)),
        range(seeds),
    ):
        point = dict(zip(keys, combo, strict=True))
        doc = spec.generate(preset, learners=n, tasks=m, seed=seed, params=dict(point))
        tag = "_".join(
            [f"n{n}" if n else "", f"m{m}" if m else ""]
            + [f"{k}{v}" for k, v in point.items()] + [f"s{seed}"]
        ).strip("_").replace(".", "p")
        doc["name"] = f"{problem}_{tag}"
        meta = doc.setdefault("meta", {})  # free-form metadata: mel_opt reads only its own key
        meta["sweep"] = {"learners": n, "tasks": m, **point, "seed": seed, "preset": preset}
        out.append((tag, doc, parse_instance(doc, tag)))
    return out


def write_grid(out_dir: Path, documents: list[tuple[str, dict[str, Any], Any]]) -> list[Path]:
    """Write :func:`grid_documents` into ``out_dir/instances`` (atomically, one by one)."""
    files = []
    for tag, doc, _ in documents:
        path = out_dir / "instances" / f"{tag}.json"
        atomic_write(path, json.dumps(doc, indent=1) + "\n")
        files.append(path)
    return files


def make_grid(
    problem: str,
    preset: str | None,
    out_dir: Path,
    learners: Sequence[int] | None,
    tasks: Sequence[int] | None,
    params: dict[str, list[str]],
    seeds: int,
) -> list[Path]:
    """Generate and validate every instance of the grid into ``out_dir/instances``."""
    return write_grid(out_dir, grid_documents(problem, preset, learners, tasks, params, seeds))


def collect(report: BatchReport) -> list[dict[str, Any]]:
    """Rows of ``sweep.csv``: sweep point + method, status, objective and scalar metrics."""
    rows = []
    for r in report.rows:
        try:
            record = json.loads(Path(r["result_file"]).read_text())
            point = json.loads(Path(r["file"]).read_text()).get("meta", {}).get("sweep", {})
        except (OSError, ValueError):
            continue
        row = {k: v for k, v in point.items() if v is not None}
        row.update(method=r["method"], status=r["status"], objective=r["objective"],
                   feasible=r["feasible"], solve_time_s=r["solve_time_s"],
                   instance=r["instance"])
        for k, v in (record.get("metrics") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[k] = v
        rows.append(row)
    return rows


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    fields: list[str] = []
    for r in rows:
        for k in r:
            if k not in fields:
                fields.append(k)
    atomic_write(path, csv_text(fields, rows))


def _prepare_folder(out: Path, resume: bool, force: bool) -> None:
    """Refuse an output folder holding anything, unless the caller chose to reuse it.

    Old instance files and results of another grid would otherwise be mixed into the new
    table. ``resume`` keeps finished results of the same points; ``force`` solves everything
    again. Either way only the new grid is solved and tabulated.
    """
    if resume or force or not out.exists():
        return
    if not out.is_dir():
        raise UsageError(f"{out}: not a directory")
    if any(p.name != LOCK_NAME for p in out.iterdir()):
        raise UsageError(f"{out} is not empty; pass --resume to continue the sweep in it, "
                         f"--force to solve its grid again, or choose a new folder")


def run_evaluation(
    problem: str,
    out_dir: str | Path,
    *,
    preset: str | None = None,
    learners: Sequence[int] | None = None,
    tasks: Sequence[int] | None = None,
    params: dict[str, list[str]] | None = None,
    seeds: int = 1,
    options: dict[str, Any] | None = None,
    reuse: bool = False,
    on_plan: Callable[[int, int], None] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], Path]:
    """Like :func:`run_sweep`, but each instance goes through the problem's ``evaluate`` hook
    (a Monte-Carlo evaluation of its schemes) instead of the solvers; one row per (instance,
    scheme, trial), so plots show bands over trials. Every point is evaluated again;
    ``reuse`` allows a non-empty ``out_dir``."""
    spec = get_problem(problem)
    if spec.evaluate is None:
        raise UsageError(f"problem {problem!r} has no evaluation (simulation) to sweep")
    out = Path(out_dir)
    _prepare_folder(out, reuse, reuse)
    with output_lock(out, "sweep"):
        return _evaluate_grid(spec, problem, out, preset, learners, tasks, params or {}, seeds,
                              options or {}, on_plan, on_result)


def _evaluate_grid(spec: Any, problem: str, out: Path, preset: str | None,
                   learners: Sequence[int] | None, tasks: Sequence[int] | None,
                   params: dict[str, list[str]], seeds: int, options: dict[str, Any],
                   on_plan: Callable[[int, int], None] | None,
                   on_result: Callable[[dict[str, Any]], None] | None,
                   ) -> tuple[list[dict[str, Any]], Path]:
    from mel_opt.api import load_instance

    trials, cycles = int(options.get("trials") or 1), int(options.get("cycles") or 1)
    schemes = len(options.get("schemes") or ()) or 3
    points = grid_size(learners, tasks, params, seeds)  # refused before any file is written
    if points * trials * schemes > MAX_EVALUATION_ROWS:
        raise UsageError(f"{points:,} points x {trials:,} trials x {schemes} schemes would "
                         f"make {points * trials * schemes:,} rows, more than the "
                         f"{MAX_EVALUATION_ROWS:,} an evaluation table may have; use fewer "
                         "trials or points")
    documents = grid_documents(problem, preset, learners, tasks, params, seeds)
    for _, _, inst in documents:  # every point's simulation size checked before any file
        check_simulation(trials, cycles, getattr(inst, "n_learners", 1),
                         getattr(inst, "n_states", 1), schemes)
    files = write_grid(out, documents)
    if on_plan is not None:
        on_plan(len(files), 0)
    rows: list[dict[str, Any]] = []
    for f in files:
        inst = load_instance(f)
        point = json.loads(f.read_text()).get("meta", {}).get("sweep", {})
        seed = int(point.get("seed", 0))
        for r in spec.evaluate(inst, seed, dict(options)):
            rows.append({**{k: v for k, v in point.items() if v is not None},
                         "instance": inst.name, "status": "feasible", "feasible": True, **r})
        if on_result is not None:
            on_result({"file": str(f), "instance": inst.name, "method": "evaluate",
                       "status": "feasible", "feasible": True, "error": ""})
    path = out / "evaluation.csv"
    write_csv(rows, path)
    return rows, path


def run_sweep(
    problem: str,
    out_dir: str | Path,
    *,
    preset: str | None = None,
    learners: Sequence[int] | None = None,
    tasks: Sequence[int] | None = None,
    params: dict[str, list[str]] | None = None,
    seeds: int = 3,
    methods: Sequence[str] | None = None,
    jobs: int = 1,
    time_limit: float | None = None,
    resume: bool = False,
    force: bool = False,
    on_plan: Callable[[int, int], None] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], Path]:
    """Generate the grid, solve it, write sweep.csv (this grid's rows only).

    ``out_dir`` must be new or empty unless ``resume`` (keep finished results of unchanged
    points) or ``force`` (solve every point again) is given. The folder is locked while the
    sweep runs. Files of another grid left in the folder are neither solved nor tabulated.
    """
    out = Path(out_dir)
    _prepare_folder(out, resume, force)
    with output_lock(out, "sweep"):
        files = make_grid(problem, preset, out, learners, tasks, params or {}, seeds)
        report = run_batch(out / "instances", out, methods=methods, jobs=jobs, resume=resume,
                           time_limit=time_limit, files=files, on_plan=on_plan,
                           on_result=on_result)
        rows = collect(report)
        path = out / "sweep.csv"
        write_csv(rows, path)
        return rows, path
