"""What an arena reports: time to each target, final accuracy, bytes, idle time, winners.

Per scheme and target, the virtual time to the target is, for each seed, the time of the first
aggregation whose validation accuracy reaches it; the mean and 95 % Student-t interval are over
the seeds that reached it (:func:`mel_opt.training.report.interval`), and ``reached`` says how
many did (a seed that never reaches it within the horizon is left out of the interval, not
counted as the horizon). The winner of a target is the scheme that reached it on the most
seeds, the least mean time breaking ties: a scheme that misses it on some seed ranks behind one
that reaches it on all. Final accuracy, bytes moved and learner-seconds idle are those of each
run's last aggregation within the horizon.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from mel_opt.arena.run import ArenaRun
from mel_opt.io import atomic_write
from mel_opt.io.csvsafe import csv_text as safe_csv_text
from mel_opt.stats import band
from mel_opt.training.report import interval

__all__ = ["CSV_COLUMNS", "csv_text", "summarise", "time_to", "write_outputs"]

CSV_COLUMNS = ("scheme", "seed", "step", "time_s", "loss", "accuracy", "bytes", "idle_s")


def _by_run(run: ArenaRun) -> dict[str, dict[int, list[dict[str, Any]]]]:
    out: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in run.rows:
        out[r["scheme"]][r["seed"]].append(r)
    return out


def time_to(rows: list[dict[str, Any]], target: float) -> float | None:
    """Virtual time of the first row (after the start) whose accuracy reaches ``target``."""
    hit = next((r for r in rows if r["step"] > 0 and r["accuracy"] >= target), None)
    return None if hit is None else float(hit["time_s"])


def _winner(schemes: dict[str, Any], key: str) -> str | None:
    ranked = [(int(e["targets"][key]["reached"].split("/")[0]), e["targets"][key]["seconds"]
               ["mean"], name) for name, e in schemes.items()]
    ranked = [r for r in ranked if r[0] > 0]
    if not ranked:
        return None
    return min(ranked, key=lambda r: (-r[0], r[1]))[2]


def summarise(run: ArenaRun) -> dict[str, Any]:
    """The content of ``summary.json`` (module docstring)."""
    runs = _by_run(run)
    schemes: dict[str, Any] = {}
    for scheme in run.ran:
        seeds = runs[scheme]
        entry: dict[str, Any] = {"targets": {}}
        for target in run.settings.targets:
            times = [t for rows in seeds.values() if (t := time_to(rows, target)) is not None]
            entry["targets"][f"{target:g}"] = {"reached": f"{len(times)}/{len(seeds)}",
                                               "seconds": interval(times)}
        last = [rows[-1] for rows in seeds.values()]
        for name, col in (("final_accuracy", "accuracy"), ("bytes", "bytes"),
                          ("idle_s", "idle_s"), ("final_time_s", "time_s"),
                          ("aggregations", "step")):
            entry[name] = interval([float(r[col]) for r in last])
        schemes[scheme] = entry
    winners = {f"{t:g}": _winner(schemes, f"{t:g}") for t in run.settings.targets}
    return {
        "instance": run.instance,
        "problem": run.problem,
        "horizon_s": run.horizon_s,
        "settings": {k: (list(v) if isinstance(v, tuple) else v)
                     for k, v in vars(run.settings).items()},
        "infeasible": dict(run.infeasible),
        "schemes": schemes,
        "winners": winners,
    }


def csv_text(run: ArenaRun) -> str:
    """``arena.csv``: one row per (scheme, seed, aggregation), step 0 the untrained model."""
    def fmt(v: float) -> str:
        return f"{v:.9g}"

    rows = ({"scheme": r["scheme"], "seed": r["seed"], "step": r["step"],
             "time_s": fmt(r["time_s"]), "loss": fmt(r["loss"]),
             "accuracy": fmt(r["accuracy"]), "bytes": fmt(r["bytes"]),
             "idle_s": fmt(r["idle_s"])} for r in run.rows)
    return safe_csv_text(CSV_COLUMNS, rows)


def plot_run(run: ArenaRun, path: Path, points: int = 200) -> Path | None:
    """Accuracy against virtual time per scheme: each seed's curve held constant between its
    aggregations, on a common time grid; mean and 95 % band over seeds (None without
    matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from mel_opt.plot import save_figure
    except ImportError:
        return None
    grid = np.linspace(0.0, run.horizon_s, points)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for scheme, seeds in _by_run(run).items():
        acc = []
        for rows in seeds.values():
            t = np.array([r["time_s"] for r in rows])
            a = np.array([r["accuracy"] for r in rows])
            acc.append(a[np.clip(np.searchsorted(t, grid, side="right") - 1, 0, None)])
        mean, half = band(np.array(acc))
        line = ax.plot(grid, mean, label=scheme, lw=1.4)[0]
        ax.fill_between(grid, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1),
                        color=line.get_color(), alpha=0.18, linewidth=0)
    for target in run.settings.targets:
        ax.axhline(target, color="grey", lw=0.6, ls="--")
    ax.set_xlabel("virtual time [s]")
    ax.set_ylabel("validation accuracy")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    s = run.settings
    ax.set_title(f"{run.instance} ({run.problem}): {s.model} on {s.dataset}, {s.partition}, "
                 f"{s.seeds} seed(s)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def write_outputs(run: ArenaRun, out_dir: str | Path) -> dict[str, Any]:
    """Write ``arena.csv``, ``summary.json`` and ``arena.png`` into ``out_dir``; returns the
    summary (``figure``: the figure's file name or None)."""
    out = Path(out_dir)
    summary = summarise(run)
    fig = plot_run(run, out / "arena.png") if run.rows else None
    summary["figure"] = None if fig is None else fig.name
    atomic_write(out / "arena.csv", csv_text(run))
    atomic_write(out / "summary.json", json.dumps(summary, indent=1, allow_nan=False) + "\n")
    return summary
