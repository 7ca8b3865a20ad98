"""``melopt batch``: every instance file under a folder, in parallel, with a progress bar."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from mel_opt.cli.app import (
    STATUS_STYLE,
    cli,
    err,
    guarded,
    job_count,
    method_list,
    out,
    positive,
    run_with_progress,
    seed_int,
)


def _summary_table(rows: list[dict[str, Any]], title: str) -> Table:
    counts: dict[tuple[str, str], dict[str, int]] = {}
    times: dict[tuple[str, str], float] = {}
    for r in rows:
        key = (r["problem"] or "?", r["method"] or "default")
        c = counts.setdefault(key, {})
        c[r["status"]] = c.get(r["status"], 0) + 1
        times[key] = times.get(key, 0.0) + float(r["solve_time_s"] or 0.0)
    t = Table(title=title)
    for col in ("problem", "method", "results", "statuses", "verified", "total solve s"):
        t.add_column(col)
    for key in sorted(counts):
        c = counts[key]
        n = sum(c.values())
        verified = sum(1 for r in rows if (r["problem"] or "?", r["method"] or "default") == key
                       and r["feasible"] is True)
        statuses = ", ".join(f"[{STATUS_STYLE.get(s, 'white')}]{s}[/] {v}"
                             for s, v in sorted(c.items()))
        t.add_row(key[0], key[1], str(n), statuses, f"{verified}/{n}", f"{times[key]:.3f}")
    return t


@cli.command("batch")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for result JSONs and summary.csv.")
@click.option("--methods", default=None, help="Comma-separated methods (default: recommended).")
@click.option("-j", "--jobs", type=job_count(), default=1, show_default=True,
              help="Solves in parallel (worker processes, or Ray tasks with --executor ray).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local",
              show_default=True, help="local: processes on this machine; ray: a Ray cluster "
              "(the ray extra; --address, or a local Ray on 127.0.0.1).")
@click.option("--address", default=None, help="Ray cluster address (default: a local Ray).")
@click.option("--resume", is_flag=True, help="Skip (instance, method) pairs already done.")
@click.option("--time-limit", type=positive(), default=None,
              help="Seconds each solve may take (default: no limit).")
@click.option("--seed", type=seed_int(), default=0, show_default=True,
              help="Seed of randomised methods and generators.")
def batch_cmd(directory: str, out_dir: str, methods: str | None, jobs: int, executor: str,
              address: str | None, resume: bool, time_limit: float | None, seed: int) -> None:
    """Solve every instance file under DIRECTORY (recursively), in parallel.

    Writes one result JSON per (instance, method) under OUTPUT/results and OUTPUT/summary.csv.
    Bad files and failed solves are reported and the batch goes on; exit code 1 if anything
    failed.
    """
    from mel_opt.batch import BatchInterrupted, run_batch

    with guarded():
        try:
            report = run_with_progress(
                lambda **kw: run_batch(directory, out_dir, methods=method_list(methods),
                                       jobs=jobs, executor=executor, address=address,
                                       resume=resume, time_limit=time_limit, seed=seed, **kw),
                f"batch ({executor}, {jobs} job{'s' if jobs > 1 else ''})")
        except BatchInterrupted as stop:
            _interrupted(stop)
        out.print(_summary_table(report.rows, f"{len(report.rows)} results in "
                                 f"{report.wall_time_s:.2f} s -> {report.summary_file}"))
        if report.failures:
            err.print(f"{len(report.failures)} of {len(report.rows)} failed "
                      f"(see {report.summary_file})", markup=False)
        raise SystemExit(1 if report.failures else 0)


def _interrupted(stop: Any) -> None:
    """Ctrl-C: one line saying what was kept and how to go on; exit code 130 (128 + SIGINT)."""
    rep = stop.report
    err.print(f"interrupted: {len(rep.rows)} of {stop.total} results kept, summary in "
              f"{rep.summary_file}; rerun with --resume to finish", markup=False)
    raise SystemExit(130)
