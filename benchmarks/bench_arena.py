"""The arena at scale: mel_opt's allocations beside the field's alternatives.

Usage::

    python benchmarks/bench_arena.py [--learners 100,1000] [--seeds 5]
        [--datasets digits,fashion-mnist] [--problems mel-async,dab] [--cycles 20]
        [--max-train N] [--max-test N] [--targets 0.8,0.9] [--out DIR]

For each problem and K it generates a population with ``melopt generate PROBLEM --preset
random --learners K --seed 1`` (the coefficient form of mel-async; dab's thesis set-up), then
runs :func:`mel_opt.arena.run.arena` with the default schemes (the problem's default method,
deadline, oort, fedbuff, fedprox), TwoNN, IID, the given seeds and horizon, on the 8 x 8
digits and on Fashion-MNIST where installed. It prints, per (problem, K, data set), the table
``melopt arena`` prints (time to 0.8 and 0.9 with 95 % intervals over seeds and how many seeds
reached each, final accuracy, MB moved, learner-seconds idle), the winner of each target, the
wall time and the peak resident memory of this process so far. Wall times are on whatever else
the machine runs.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

from mel_opt.api import load_instance
from mel_opt.arena.report import summarise
from mel_opt.arena.run import arena
from mel_opt.arena.settings import ArenaSettings
from mel_opt.training.data import dataset_dir


def _cell(iv: dict, digits: int = 4) -> str:
    if iv["mean"] is None:
        return "-"
    if iv["n"] > 1 and iv["hi"] - iv["lo"] > 1e-9 * max(1.0, abs(iv["mean"])):
        return f"{iv['mean']:.{digits}g} [{iv['lo']:.{digits}g}, {iv['hi']:.{digits}g}]"
    return f"{iv['mean']:.{digits}g}"


def _population(problem: str, K: int, out: Path) -> Path:
    path = out / f"{problem}_k{K}.json"
    if not path.exists():
        melopt = str(Path(sys.executable).parent / "melopt")
        subprocess.run([melopt, "generate", problem, "--preset", "random", "--learners",
                        str(K), "--seed", "1", "-o", str(path)], check=True, capture_output=True)
    return path


def _table(summary: dict, wall: float) -> None:
    targets = list(next(iter(summary["schemes"].values()))["targets"])
    head = ["scheme", *[f"to {t} [s] (seeds)" for t in targets], "final acc", "MB moved",
            "learner-s idle"]
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for scheme, e in summary["schemes"].items():
        mb = {**e["bytes"], **{k: None if e["bytes"][k] is None else e["bytes"][k] / 1e6
                                for k in ("mean", "lo", "hi")}}
        print(" | ".join([scheme, *[f"{_cell(e['targets'][t]['seconds'])} "
                                    f"({e['targets'][t]['reached']})" for t in targets],
                          _cell(e["final_accuracy"], 3), _cell(mb, 3), _cell(e["idle_s"])]))
    for t, who in summary["winners"].items():
        print(f"target {t}: " + (f"{who} wins" if who else "no scheme reaches it"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"wall {wall:.1f} s, peak resident memory {peak:.0f} MB\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", default="100,1000")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--datasets", default="digits,fashion-mnist")
    ap.add_argument("--problems", default="mel-async,dab")
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--max-train", type=int, default=None,
                    help="use at most this many training samples (Fashion-MNIST has 60,000)")
    ap.add_argument("--max-test", type=int, default=None)
    ap.add_argument("--targets", default="0.8,0.9")
    ap.add_argument("--out", default="/tmp/melopt-bench-arena")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for dataset in a.datasets.split(","):
        if dataset != "digits" and dataset_dir(dataset) is None:
            print(f"{dataset}: not installed, skipped\n")
            continue
        for problem in a.problems.split(","):
            for K in (int(k) for k in a.learners.split(",")):
                inst = load_instance(str(_population(problem, K, out)))
                settings = ArenaSettings(seeds=a.seeds, cycles=a.cycles, dataset=dataset,
                                         max_train=a.max_train, max_test=a.max_test,
                                         targets=a.targets)
                print(f"## {problem}, K = {K}, {dataset}, {a.seeds} seeds, horizon "
                      f"{a.cycles} budgets, max_train {a.max_train or 'all'}", flush=True)
                t0 = time.perf_counter()
                run = arena(inst, settings)
                wall = time.perf_counter() - t0
                _table(summarise(run), wall)
                sys.stdout.flush()


if __name__ == "__main__":
    main()
