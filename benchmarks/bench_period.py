"""staggered's period: fixed (``--period``) against chosen by the bound (no ``--period``).

Usage::

    python benchmarks/bench_period.py [--problem mel-async] [--learners 100] [--dataset digits]
        [--partitions iid,dirichlet:0.1] [--seeds 10] [--periods 0.0625,0.125,0.25]
        [--rechoose 1,4] [--targets 0.8,0.9] [--max-train N] [--setting NAME=VALUE ...]
        [--jobs N] [--out DIR]

For each partition it runs ``staggered`` (on the population ``melopt generate PROBLEM
--preset random --learners K --seed 1`` gives) once per fixed period and once with
the period the bound chooses, on the same seeds, every other option as given (``--setting``,
e.g. ``lr=0.3``); with ``--rechoose``, also once per value with the bound's period chosen
again every that many budgets. It prints one Markdown table: per run, each target's
Kaplan-Meier median [95 %] (reached/seeds), the paired per-seed difference of the bound's run
(chosen once) minus that run (95 % sign interval), the accuracy at the horizon, the bytes
moved and the period (mean and range over every server step of every seed: the bound's is
measured per seed, and chosen again its period changes within a run). Its runs are units kept under
``--out``: a rerun resumes. Virtual times only: the wall time does not enter the table.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from bench_arena import _population  # the same populations, generated once

from mel_opt.api import load_instance
from mel_opt.arena.report import paired, summarise, target_times
from mel_opt.arena.run import arena
from mel_opt.arena.settings import ArenaSettings
from mel_opt.cli.work import units_run


def _seeds(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(int(r["seed"]), []).append(r)
    return out


def _cell(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="mel-async")
    ap.add_argument("--learners", type=int, default=100)
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--partitions", default="iid,dirichlet:0.1")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--periods", default="0.0625,0.125,0.25")
    ap.add_argument("--rechoose", default="",
                    help="comma-separated budgets: runs whose period is chosen again so often")
    ap.add_argument("--targets", default="0.8,0.9")
    ap.add_argument("--max-train", type=int, default=None)
    ap.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default="/tmp/melopt-bench-period")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    inst = load_instance(str(_population(a.problem, a.learners, out)))
    extra = {}
    for item in a.setting:
        key, _, value = item.partition("=")
        extra[key.strip().replace("-", "_")] = value.strip()
    targets = tuple(float(t) for t in a.targets.split(","))
    runs: list[tuple[str, dict[str, Any]]] = [("bound", {"period": None})]
    runs += [(f"bound, again every {r}", {"period": None, "rechoose": float(r)})
             for r in a.rechoose.split(",") if r]
    runs += [(f"fixed {p}", {"period": float(p)}) for p in a.periods.split(",") if p]
    for partition in a.partitions.split(","):
        print(f"## staggered, {a.problem}, K = {a.learners}, {a.dataset}, {partition}, "
              f"{a.seeds} seeds, {extra or 'defaults'}\n", flush=True)
        results = {}
        for label, opts in runs:
            settings = ArenaSettings(seeds=a.seeds, schemes="staggered", dataset=a.dataset,
                                     partition=partition, max_train=a.max_train,
                                     targets=targets, **{**extra, **opts})
            folder = out / (f"{a.problem}_{partition.replace(':', '')}_"
                            f"{label.replace(' ', '').replace(',', '_')}")
            with units_run(folder, label, a.jobs, None):
                results[label] = arena(inst, settings)
        head = ["period", *[f"to {t} [s]" for t in targets],
                *[f"{t}: bound minus this" for t in targets], "acc. at horizon", "MB moved",
                "period [s]"]
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        bound_seeds = _seeds(results["bound"].rows)
        for label, run in results.items():
            summary = summarise(run)["schemes"]["staggered"]
            seeds = _seeds(run.rows)
            cells = [label]
            for t in targets:
                e = summary["targets"][str(t)]
                m = e.get("median") or {}
                cells.append(f"{_cell(m.get('seconds'))} [{_cell(m.get('lo'))}, "
                             f"{_cell(m.get('hi'))}] ({e['reached']})")
            for t in targets:
                if label == "bound":
                    cells.append("ref.")
                    continue
                p = paired(target_times(bound_seeds, t, run.horizon_s),
                           target_times(seeds, t, run.horizon_s))
                cells.append("-" if p["median"] is None else
                             f"{p['median']:+.3g} [{_cell(p['lo'])}, {_cell(p['hi'])}]")
            periods = np.array([r["period_s"] for rows in seeds.values() for r in rows])
            cells += [f"{summary['horizon_accuracy']['mean']:.3f}",
                      f"{summary['bytes']['mean'] / 1e6:,.0f}",
                      f"{periods.mean():.3g} [{periods.min():.3g}, {periods.max():.3g}]"]
            print("| " + " | ".join(cells) + " |")
        print(flush=True)


if __name__ == "__main__":
    main()
