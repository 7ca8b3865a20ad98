"""The fair arena at scale: mel_opt's allocations beside the field's alternatives, tuned alike.

Usage::

    python benchmarks/bench_arena.py [--problems mel-async,dab] [--learners 100,1000]
        [--datasets digits,fashion-mnist] [--partitions iid,dirichlet:0.1]
        [--time-cv 0.06] [--seeds 10] [--cycles 20] [--tune] [--trials 8] [--tune-seeds 2]
        [--schemes S1,S2] [--max-train N] [--max-test N] [--targets 0.7,0.8]
        [--setting NAME=VALUE ...] [--out DIR] [--jobs N] [--cluster auto|HOST:PORT]

For each (problem, K, data set, partition, time spread) it generates a population with
``melopt generate PROBLEM --preset random --learners K --seed 1``, runs
:func:`mel_opt.arena.run.arena` (every scheme of the registry by default: the problem's default
method, deadline, oort, fedbuff, fedprox, staggered and the two ablations; with ``--tune`` each
picked from its declared grid with the same number of trials, on a validation split) and writes the
run's outputs (``arena.csv``, ``curve.csv``, ``summary.json``, ``arena.png``) under ``--out``.
Its runs are units (``melopt arena``'s, kept in ``OUT/NAME/units``, on ``--jobs`` processes or
a Ray ``--cluster``): a stopped benchmark run again with the same ``--out`` resumes where it
stopped, as long as mel_opt's sources are the same (run it from a clone of its own).
It prints the tables ``melopt arena`` prints, the verdicts, then the same as one Markdown
table (what the how-to's tables are copied from), the wall time and the peak resident memory
of this process so far. Wall times are on whatever else the machine runs: run it alone, one
benchmark at a time, to quote them.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from mel_opt.api import load_instance
from mel_opt.arena.report import write_outputs
from mel_opt.arena.run import arena
from mel_opt.arena.settings import ArenaSettings
from mel_opt.cli.arena import arena_table
from mel_opt.cli.work import units_run
from mel_opt.training.data import dataset_dir


def _population(problem: str, K: int, out: Path) -> Path:
    path = out / f"{problem}_k{K}.json"
    if not path.exists():
        melopt = str(Path(sys.executable).parent / "melopt")
        subprocess.run([melopt, "generate", problem, "--preset", "random", "--learners",
                        str(K), "--seed", "1", "-o", str(path)], check=True, capture_output=True)
    return path


def _num(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 10 ** digits else f"{v:.{digits}g}"


def _median(t: dict[str, Any], horizon: float) -> str:
    m = t.get("median") or {}
    if m.get("seconds") is None:
        return f"> {horizon:g} ({t['reached']})"
    hi = "inf" if m.get("hi") is None else _num(m["hi"])
    return f"{_num(m['seconds'])} [{_num(m.get('lo'))}, {hi}] ({t['reached']})"


def _paired(p: dict[str, Any] | None) -> str:
    if not p:
        return "ref."
    if p.get("median") is None:
        return "-"
    lo = "-inf" if p.get("lo") is None else f"{p['lo']:+.3g}"
    hi = "+inf" if p.get("hi") is None else f"{p['hi']:+.3g}"
    return f"{p['median']:+.3g} [{lo}, {hi}]"


def _mean(iv: dict[str, Any] | None, scale: float = 1.0) -> str:
    if not iv or iv.get("mean") is None:
        return "-"
    return _num(iv["mean"] / scale)


def markdown(summary: dict[str, Any]) -> str:
    """The run as one Markdown table: per scheme, each target's Kaplan-Meier median [95 %]
    (reached/seeds) and paired difference against the allocation, accuracy at the horizon,
    millions of sample-updates, busy and idle learner-seconds, stragglers and dropped updates
    (means over seeds), and the values tuning chose; the verdicts; then every two schemes'
    paired difference per target, median [95 % sign interval] (pairs)."""
    schemes = summary["schemes"]
    targets = list(next(iter(schemes.values()))["targets"]) if schemes else []
    tuning = summary.get("tuning") or {}
    head = ["scheme", *[f"to {t} [s]" for t in targets], *[f"{t}: vs alloc." for t in targets],
            "acc @ horizon", "M sample-upd.", "busy l-s", "idle l-s", "stragglers", "dropped"]
    if tuning:
        head.append("tuned")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, e in schemes.items():
        cells = [name]
        cells += [_median(e["targets"][t], summary["horizon_s"]) for t in targets]
        cells += [_paired(e["targets"][t].get("paired")) for t in targets]
        cells += [_mean(e.get("horizon_accuracy")), _mean(e.get("updates"), 1e6),
                  _mean(e.get("busy_s")), _mean(e.get("idle_s")), _mean(e.get("stragglers")),
                  _mean(e.get("dropped"))]
        if tuning:
            chosen = (tuning.get(name) or {}).get("chosen") or {}
            cells.append(", ".join(f"{k} {v}" for k, v in chosen.items()) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [f"\ntarget {t}: {v}" for t, v in summary.get("verdicts", {}).items()]
    pairs = summary.get("pairs") or {}
    if any(pairs.values()):  # every two schemes, the earlier minus the later, per target
        lines += ["", "| scheme minus | " + " | ".join(f"to {t} [s]" for t in pairs) + " |",
                  "|" + "---|" * (len(pairs) + 1)]
        for i, first in enumerate(next(iter(pairs.values()))):
            name = f"{first['scheme']} - {first['against']}"
            lines.append(f"| {name} | "
                         + " | ".join(_paired(per[i]) + f" ({per[i]['n']})"
                                      for per in pairs.values()) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", default="mel-async,dab")
    ap.add_argument("--learners", default="100,1000")
    ap.add_argument("--datasets", default="digits,fashion-mnist")
    ap.add_argument("--partitions", default="iid")
    ap.add_argument("--time-cv", default="0.06", help="comma-separated run-to-run spreads")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--schemes", default=None)
    ap.add_argument("--tune", action="store_true", help="tune every scheme (melopt arena --tune)")
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--tune-seeds", type=int, default=None)
    ap.add_argument("--max-train", type=int, default=None,
                    help="use at most this many training samples (Fashion-MNIST has 60,000)")
    ap.add_argument("--max-test", type=int, default=None)
    ap.add_argument("--targets", default="0.8,0.9")
    ap.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                    help="any other melopt arena setting, e.g. shares=lognormal:1 (repeat)")
    ap.add_argument("--out", default="/tmp/melopt-bench-arena")
    ap.add_argument("--jobs", type=int, default=None,
                    help="worker processes (default: one per CPU)")
    ap.add_argument("--cluster", default=None, help="a Ray cluster: auto or HOST:PORT")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    console = Console(width=130)
    for dataset in a.datasets.split(","):
        if dataset != "digits" and dataset_dir(dataset) is None:
            print(f"{dataset}: not installed, skipped\n")
            continue
        for problem in a.problems.split(","):
            for K in (int(k) for k in a.learners.split(",")):
                inst = load_instance(str(_population(problem, K, out)))
                for partition in a.partitions.split(","):
                    for cv in (float(c) for c in a.time_cv.split(",")):
                        extra: dict[str, Any] = {}
                        if a.tune:
                            extra["tune"] = True
                            if a.trials is not None:
                                extra["trials"] = a.trials
                            if a.tune_seeds is not None:
                                extra["tune_seeds"] = a.tune_seeds
                        if a.schemes:
                            extra["schemes"] = a.schemes
                        for item in a.setting:
                            key, _, value = item.partition("=")
                            extra[key.strip().replace("-", "_")] = value.strip()
                        settings = ArenaSettings(
                            seeds=a.seeds, cycles=a.cycles, dataset=dataset,
                            partition=partition, time_cv=cv, max_train=a.max_train,
                            max_test=a.max_test, targets=a.targets, **extra)
                        name = (f"{problem}_k{K}_{dataset}_{partition.replace(':', '')}"
                                f"_cv{cv:g}{'_tuned' if a.tune else ''}"
                                + "".join(f"_{x.replace('=', '').replace(':', '')}"
                                          for x in a.setting))
                        print(f"## {problem}, K = {K}, {dataset}, {partition}, time_cv {cv:g}, "
                              f"{a.seeds} seeds, horizon {a.cycles} budgets, "
                              f"{'tuned' if a.tune else 'defaults'}, max_train "
                              f"{a.max_train or 'all'}", flush=True)
                        t0 = time.perf_counter()
                        (out / name).mkdir(parents=True, exist_ok=True)
                        with units_run(out / name, "arena", a.jobs, a.cluster):
                            run = arena(inst, settings)
                        wall = time.perf_counter() - t0
                        summary = write_outputs(run, out / name)
                        console.print(arena_table(summary))
                        print(markdown(summary))
                        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                        print(f"\nwall {wall:.1f} s, peak resident memory {peak:.0f} MB, "
                              f"outputs in {out / name}\n", flush=True)


if __name__ == "__main__":
    main()
