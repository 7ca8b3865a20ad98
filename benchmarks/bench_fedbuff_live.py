"""The method's allocation, FedBuff and staggered on real learner processes (``melopt live``).

The same population (K learners of mel-async whose speeds span four times, each node
throttled to its relative speed in the file, ``--speeds instance``), data set, model,
learning rate and seed, on Flower's simulation runtime and on the loopback deployment:

- ``allocation``: the method's (``exact``) synchronous rounds, ``--rounds`` of them, each
  solved again from the measured speeds, every learner's work fitted into the file's cycle
  clock T, here in real seconds;
- ``fedbuff``: ``--scheme fedbuff``, every learner the same work (an equal share of the
  file's samples for the passes the median learner fits in T at its measured speed), a
  server step every K = half the learners' updates, as many updates in all as the
  allocation's rounds hold;
- ``staggered``: ``--scheme staggered --groups 2``, the allocation asynchronous: each learner
  the method's data, its work sized to arrive in its group's slot (every T / 2) at its
  measured speed, a server step per group (half the learners' updates), as many updates in
  all as the allocation's rounds hold.

Time is wall-clock from the start of the first round (or step) to each target accuracy of
the global model on the validation set (the probe before it is the same for both and not
counted). Transfers are emulated on one machine (not in the wall time) for both. The table
gives, per engine and scheme, the mean over seeds and, in brackets, the seeds that reached
the target; then the final accuracy, the updates aggregated and the wall time of all rounds.

    python benchmarks/bench_fedbuff_live.py [--engines simulation local] [--learners 4]
        [--seeds 3] [--rounds 5] [--dataset digits] [--schemes allocation fedbuff staggered]

Timings are wall-clock: run it on a quiet machine, alone.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from mel_opt.live.run import LiveOptions, check, live, load_settings

console = Console(width=170)
TARGETS = (0.85, 0.9, 0.95)


#: Seconds per sample-pass of the learners in the file, slowest four times the fastest (they
#: repeat beyond four): ``--speeds instance`` throttles the nodes to 1, 2/3, 0.4 and 0.25 of a
#: core.
C2 = (1e-3, 1.5e-3, 2.5e-3, 4e-3)


def population(K: int, seed: int, clock: float, path: Path) -> Path:
    """K learners of Eq. (5) (``c2`` from :data:`C2`, transfers ``1e-4 d_k + 0.05`` s),
    100 samples each, cycle clock T = ``clock``."""
    learners = [{"name": f"n{k}", "c2": C2[k % len(C2)], "c1": 1e-4, "c0": 0.05}
                for k in range(K)]
    doc = {"problem": "mel-async", "schema_version": 1, "name": f"hetero{K}-s{seed}",
           "cycle_time_s": clock, "total_samples": 100 * K, "min_samples": 10,
           "max_samples": 100 * K, "learners": learners}
    path.write_text(json.dumps(doc))
    return path


def curve(summary: dict[str, Any]) -> list[tuple[float, float]]:
    """(seconds since the first round's start, accuracy) after every round or step."""
    done = [r for r in summary["rounds"][1:] if r.get("round_wall_s") is not None]
    if not done:
        return []
    t0 = done[0]["wall_s"] - done[0]["round_wall_s"]
    return [(0.0, summary["rounds"][0]["accuracy"])] + \
        [(r["wall_s"] - t0, r["accuracy"]) for r in done]


def time_to(points: list[tuple[float, float]], target: float) -> float | None:
    return next((t for t, a in points if a >= target), None)


def one(args: argparse.Namespace, engine: str, scheme: str, seed: int,
        tmp: Path) -> dict[str, Any]:
    path = population(args.learners, seed, args.clock, tmp / f"pop{seed}.json")
    kw: dict[str, Any] = {"rounds": args.rounds, "seed": seed, "dataset": args.dataset,
                          "model": args.model, "lr": args.lr, "grace_s": args.grace}
    buffer = max(1, args.learners // 2)
    if scheme == "fedbuff":
        kw.update(scheme="fedbuff", buffer=buffer,
                  rounds=math.ceil(args.rounds * args.learners / buffer))
    elif scheme == "staggered":  # two groups: a step per half of the learners
        kw.update(scheme="staggered", groups=2,
                  rounds=math.ceil(args.rounds * args.learners / buffer))
    settings = load_settings(path, **kw)
    out = tmp / f"{engine}-{scheme}-{seed}"
    start = time.perf_counter()
    summary = live(check(settings, LiveOptions(engine=engine, nodes=args.learners,
                                               speeds="instance")), out)
    points = curve(summary)
    steps = summary["rounds"][1:]
    return {"points": points, "final": points[-1][1] if points else float("nan"),
            "updates": sum(r.get("learners", 0) for r in steps),
            "wall": points[-1][0] if points else float("nan"),
            "total": time.perf_counter() - start,
            "staleness": [s for r in steps for s in r.get("staleness", [])],
            "stopped": summary.get("stopped")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", nargs="+", default=["simulation", "local"],
                    choices=["simulation", "local"])
    ap.add_argument("--learners", type=int, default=4)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5, help="the allocation's rounds")
    ap.add_argument("--clock", type=float, default=2.0, help="the file's cycle clock T [s]")
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--model", default="twonn")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--grace", type=float, default=10.0)
    ap.add_argument("--schemes", nargs="+", default=["allocation", "fedbuff", "staggered"],
                    choices=["allocation", "fedbuff", "staggered"])
    args = ap.parse_args()
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    runs = [(e, s, seed) for e in args.engines for seed in range(args.seeds)
            for s in args.schemes]
    with tempfile.TemporaryDirectory(prefix="bench-fedbuff-") as tmp, \
            Progress(console=console, transient=True) as bar:
        task = bar.add_task("live runs", total=len(runs))
        for engine, scheme, seed in runs:
            bar.update(task, description=f"{engine} {scheme} seed {seed}")
            try:
                results.setdefault((engine, scheme), []).append(
                    one(args, engine, scheme, seed, Path(tmp)))
            except Exception as exc:  # a failed run is reported, the table goes on
                console.print(f"{engine} {scheme} seed {seed} failed: {exc}")
            bar.advance(task)
    table = Table(title=f"allocation (exact), FedBuff, staggered on real processes: mel-async, "
                        f"{args.learners} learners at 1 to 1/4 of a core, T = {args.clock:g} s, "
                        f"{args.dataset}, {args.model}, {args.seeds} seeds; wall seconds from "
                        "the first round to target, mean (seeds that reached it)")
    for col in ("engine", "scheme", *(f"to {t:g}" for t in TARGETS), "final accuracy",
                "updates", "wall of all rounds s", "median staleness"):
        table.add_column(col, justify="right")
    for (engine, scheme), rs in results.items():
        cells = [engine, scheme]
        for target in TARGETS:
            hits = [t for r in rs if (t := time_to(r["points"], target)) is not None]
            cells.append(f"{statistics.mean(hits):.2f} ({len(hits)}/{len(rs)})" if hits
                         else f"- (0/{len(rs)})")
        stale = [s for r in rs for s in r["staleness"]]
        cells += [f"{statistics.mean(r['final'] for r in rs):.3f}",
                  f"{statistics.mean(r['updates'] for r in rs):.0f}",
                  f"{statistics.mean(r['wall'] for r in rs):.2f}",
                  f"{statistics.median(stale):g}" if stale else "-"]
        table.add_row(*cells)
    console.print(table)
    stopped = [(k, r["stopped"]) for k, rs in results.items() for r in rs if r["stopped"]]
    for key, why in stopped:
        console.print(f"stopped early: {key}: {why}")


if __name__ == "__main__":
    sys.exit(main())
