"""What a training run reports: cycles and seconds to target accuracies, speedups, files.

- :func:`summarise`: per scheme, the cycles and virtual seconds to each target accuracy (the
  first cycle whose validation accuracy reaches it) with 95% t-intervals over the seeds that
  reached it, the final accuracy and loss, the mean truancy (dab), and the speedup against a
  reference scheme: mean seconds to the target of the reference over that of the scheme (the
  ratio of training speeds, as paper 004's Table II defines its speedup).
- :func:`write_outputs`: ``train.csv``, ``summary.json`` and ``train.png`` (accuracy against
  time and against cycles, mean and 95% band over seeds; needs matplotlib).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from mel_opt.blas import describe
from mel_opt.io import atomic_write
from mel_opt.io.csvsafe import csv_text as safe_csv_text
from mel_opt.stats import band, mean_interval
from mel_opt.training.run import TrainRun

CSV_COLUMNS = ("scheme", "seed", "cycle", "time_s", "loss", "accuracy", "truancy", "clipped",
               "kept")


def interval(values: list[float]) -> dict[str, Any]:
    """Mean and 95% Student-t interval of ``values`` (:func:`mel_opt.stats.mean_interval`) as
    ``{"mean", "lo", "hi", "n"}``; n = 0: nulls; n = 1: zero width."""
    iv = mean_interval(values)
    if iv.mean is None:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    half = iv.half_width or 0.0
    return {"mean": iv.mean, "lo": iv.mean - half, "hi": iv.mean + half, "n": iv.n}


def _by_run(run: TrainRun) -> dict[str, dict[int, list[dict[str, Any]]]]:
    out: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in run.rows:
        out[r["scheme"]][r["seed"]].append(r)
    return out


def summarise(run: TrainRun) -> dict[str, Any]:
    """The content of ``summary.json`` (see the module docstring)."""
    s = run.settings
    ref = s.reference or (run.schemes[0] if run.schemes else None)
    runs = _by_run(run)
    schemes: dict[str, Any] = {}
    for scheme in run.schemes:
        seeds = runs[scheme]
        entry: dict[str, Any] = {"targets": {}}
        for target in s.targets:
            cyc, sec = [], []
            for rows in seeds.values():
                hit = next((r for r in rows if r["cycle"] > 0 and r["accuracy"] >= target), None)
                if hit is not None:
                    cyc.append(float(hit["cycle"]))
                    sec.append(float(hit["time_s"]))
            entry["targets"][f"{target:g}"] = {
                "reached": f"{len(cyc)}/{len(seeds)}",
                "cycles": interval(cyc),
                "seconds": interval(sec),
            }
        last = [rows[-1] for rows in seeds.values()]
        entry["final_accuracy"] = interval([r["accuracy"] for r in last])
        entry["final_loss"] = interval([r["loss"] for r in last])
        entry["final_time_s"] = interval([r["time_s"] for r in last])
        tru = [r["truancy"] for rows in seeds.values() for r in rows if r["truancy"] is not None]
        if tru:
            entry["truancy_percent"] = interval(tru)
        # the aggregation rule's doing: updates clipped or left out, cycles that kept the
        # previous model (their aggregate was not finite)
        entry["clipped_updates"] = sum(int(r.get("clipped", 0)) for rows in seeds.values()
                                       for r in rows)
        entry["kept_previous"] = sum(bool(r.get("kept")) for rows in seeds.values()
                                     for r in rows)
        schemes[scheme] = entry
    for entry in schemes.values():
        for key, tgt in entry["targets"].items():
            ref_sec = schemes[ref]["targets"][key]["seconds"]["mean"] if ref in schemes else None
            own = tgt["seconds"]["mean"]
            tgt["speedup"] = None if ref_sec is None or own is None else ref_sec / own
    return {
        "instance": run.instance,
        "problem": run.problem,
        "settings": {k: (list(v) if isinstance(v, tuple) else v)
                     for k, v in vars(s).items()},
        "reference": ref,
        "infeasible": dict(run.infeasible),
        "schemes": schemes,
    }


def csv_text(run: TrainRun) -> str:
    """``train.csv``: one row per (scheme, seed, cycle), cycle 0 being the untrained model."""
    def fmt(value: float | None) -> str:
        return "" if value is None else f"{value:.6g}"

    rows = ({"scheme": r["scheme"], "seed": r["seed"], "cycle": r["cycle"],
             "time_s": fmt(r["time_s"]), "loss": fmt(r["loss"]),
             "accuracy": fmt(r["accuracy"]), "truancy": fmt(r["truancy"]),
             "clipped": r.get("clipped", 0), "kept": r.get("kept", "")} for r in run.rows)
    return safe_csv_text(CSV_COLUMNS, rows)


def plot_run(run: TrainRun, path: Path) -> Path | None:
    """Accuracy against time and against cycles, mean and 95% band over seeds (None without
    matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from mel_opt.plot import save_figure
    except ImportError:
        return None
    runs = _by_run(run)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for scheme in run.schemes:
        seeds = list(runs[scheme].values())
        acc = np.array([[r["accuracy"] for r in rows] for rows in seeds])
        t = np.array([[r["time_s"] for r in rows] for rows in seeds]).mean(axis=0)
        mean, half = band(acc)
        cyc = np.arange(mean.size)
        for ax, xs in ((axes[0], t), (axes[1], cyc)):
            line = ax.plot(xs, mean, label=scheme, lw=1.4)[0]
            # an accuracy band stays within [0, 1] (a 2-seed interval is wide)
            ax.fill_between(xs, np.clip(mean - half, 0.0, 1.0), np.clip(mean + half, 0.0, 1.0),
                            color=line.get_color(), alpha=0.18, linewidth=0)
    for target in run.settings.targets:
        for ax in axes:
            ax.axhline(target, color="grey", lw=0.6, ls="--")
    axes[0].set_xlabel("virtual time [s]")
    axes[1].set_xlabel("global cycle")
    axes[1].xaxis.get_major_locator().set_params(integer=True)
    for ax in axes:
        ax.set_ylabel("validation accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{run.instance} ({run.problem}): {run.settings.model} on "
                 f"{run.settings.dataset}, {run.settings.partition}, "
                 f"{run.settings.seeds} seed(s)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def write_outputs(run: TrainRun, out_dir: str | Path) -> dict[str, Any]:
    """Write ``train.csv``, ``summary.json`` and ``train.png`` into ``out_dir``; returns the
    summary (with ``figure``: the figure's path or None)."""
    out = Path(out_dir)
    summary = summarise(run)
    summary["blas"] = describe()
    fig = plot_run(run, out / "train.png") if run.rows else None
    summary["figure"] = None if fig is None else fig.name
    atomic_write(out / "train.csv", csv_text(run))
    atomic_write(out / "summary.json", json.dumps(summary, indent=1, allow_nan=False) + "\n")
    return summary
