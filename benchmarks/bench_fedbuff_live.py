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
  the method's data, its work sized to arrive in its group's slot (every ``--period`` of T,
  offset by half of it) at its measured speed, a server step per group (half the learners'
  updates), as many updates in all as the allocation's rounds hold;
- ``staggered-bound`` (not in the default list): the same with ``--period-rule bound``, the
  period chosen by Wang et al.'s bound from the constants each learner measures in its
  probe, over the allocation's rounds (``--horizon``); the table's last column gives the
  period chosen, in cycles.

Time is wall-clock from the start of the first round (or step) to each target accuracy of
the global model on the validation set (the probe before it is the same for both and not
counted). Transfers are emulated on one machine (not in the wall time) for both.

``--equal`` says what the schemes are given alike:

- ``time`` (the default): the allocation runs first; its wall time W from the first round's
  start to the end of its last round is every other scheme's budget on that engine and
  seed. They are given more updates than they can spend in W (``--slack`` times the count
  that would fill W at their nominal rate: FedBuff's learners each about one update a cycle,
  ``staggered``'s one every ``period`` of it) and their curves are cut at W: a target counts
  only if reached within W, and the final accuracy is the last one at or before W. A run
  that ended before W is reported in the column ``short of W``.
- ``updates``: every scheme aggregates the same number of updates (the allocation's rounds
  times K); each runs to its end.

The table gives, per engine and scheme, the mean over seeds and, in brackets, the seeds that
reached the target; then the final accuracy, the updates aggregated and the wall time.

    python benchmarks/bench_fedbuff_live.py [--engines simulation local] [--learners 4]
        [--seeds 3] [--rounds 5] [--dataset digits] [--schemes allocation fedbuff staggered]
        [--equal time|updates] [--slack 3]

Timings are wall-clock: run it on a quiet machine, alone.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
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


def done(summary: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    """Every finished round or step with its end in seconds since the first one's start."""
    rounds = [r for r in summary["rounds"][1:] if r.get("round_wall_s") is not None]
    if not rounds:
        return []
    t0 = rounds[0]["wall_s"] - rounds[0]["round_wall_s"]
    return [(r["wall_s"] - t0, r) for r in rounds]


def curve(summary: dict[str, Any]) -> list[tuple[float, float]]:
    """(seconds since the first round's start, accuracy) after every round or step."""
    ends = done(summary)
    if not ends:
        return []
    return [(0.0, summary["rounds"][0]["accuracy"])] + [(t, r["accuracy"]) for t, r in ends]


def time_to(points: list[tuple[float, float]], target: float) -> float | None:
    return next((t for t, a in points if a >= target), None)


def cut(points: list[tuple[float, float]], budget: float) -> list[tuple[float, float]]:
    """The points of a curve at or before ``budget`` seconds."""
    return [(t, a) for t, a in points if t <= budget]


#: The rate of round trips a cycle that ``staggered-bound``'s steps are counted for (its
#: period is not known before the probe): as for the default period, a quarter of T.
BOUND_RATE = 4.0


def steps_for(scheme: str, args: argparse.Namespace, equal_time: bool) -> int:
    """Server steps a scheme is given: the allocation's rounds; for the asynchronous
    schemes (a step per half of the learners' updates) as many updates as those rounds
    hold, times the rate they deliver updates at and ``--slack`` when the time is equal."""
    if scheme == "allocation":
        return args.rounds
    buffer = max(1, args.learners // 2)
    steps = args.rounds * args.learners / buffer
    if equal_time:  # a staggered learner makes a round trip every `period` of a cycle
        rate = {"staggered": 1.0 / args.period, "staggered-bound": BOUND_RATE}.get(scheme, 1.0)
        steps *= rate * args.slack
    return math.ceil(steps)


def one(args: argparse.Namespace, engine: str, scheme: str, seed: int,
        tmp: Path, budget: float | None = None) -> dict[str, Any]:
    """One live run; with ``budget`` its curve is cut at that many wall seconds."""
    path = population(args.learners, seed, args.clock, tmp / f"pop{seed}.json")
    rounds = steps_for(scheme, args, budget is not None)
    kw: dict[str, Any] = {"rounds": rounds, "seed": seed, "dataset": args.dataset,
                          "model": args.model, "lr": args.lr, "grace_s": args.grace}
    buffer = max(1, args.learners // 2)
    if scheme == "fedbuff":
        kw.update(scheme="fedbuff", buffer=buffer)
    elif scheme == "staggered":  # two groups: a step per half of the learners
        kw.update(scheme="staggered", groups=2, period=args.period)
    elif scheme == "staggered-bound":  # the period by the bound, over the allocation's time
        kw.update(scheme="staggered", groups=2, period_rule="bound", horizon=args.rounds)
    settings = load_settings(path, **kw)
    out = tmp / f"{engine}-{scheme}-{seed}"
    start = time.perf_counter()
    summary = live(check(settings, LiveOptions(engine=engine, nodes=args.learners,
                                               speeds="instance")), out)
    whole = curve(summary)
    points = cut(whole, budget) if budget is not None else whole
    steps = [r for t, r in done(summary) if budget is None or t <= budget]
    return {"points": points, "final": points[-1][1] if points else float("nan"),
            "updates": sum(r.get("learners", 0) for r in steps),
            "wall": points[-1][0] if points else float("nan"),
            "short": budget is not None and bool(whole) and whole[-1][0] < budget,
            "total": time.perf_counter() - start,
            "staleness": [s for r in steps for s in r.get("staleness", [])],
            # the times the data was placed again at new speeds (staggered; the whole run)
            "placed": sum("placed" in r for r in summary["rounds"]),
            "period": next((r["control"]["period_s"] / args.clock for _, r in done(summary)
                            if "period_s" in (r.get("control") or {})), None),
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
                    choices=["allocation", "fedbuff", "staggered", "staggered-bound"])
    ap.add_argument("--equal", choices=["time", "updates"], default="time",
                    help="what every scheme is given alike (see the module's text)")
    ap.add_argument("--slack", type=float, default=3.0,
                    help="with --equal time: the asynchronous schemes' updates beyond the "
                         "count their nominal rate fills the allocation's wall time with")
    ap.add_argument("--period", type=float, default=0.25,
                    help="staggered's period as a fraction of the cycle T")
    args = ap.parse_args()
    equal_time = args.equal == "time"
    if equal_time and "allocation" not in args.schemes:
        ap.error("--equal time measures the others against the allocation's wall time: "
                 "keep allocation in --schemes")
    order = (["allocation"] + [s for s in args.schemes if s != "allocation"]
             if equal_time else args.schemes)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    runs = [(e, s, seed) for e in args.engines for seed in range(args.seeds) for s in order]
    budgets: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-fedbuff-") as tmp, \
            Progress(console=console, transient=True) as bar:
        task = bar.add_task("live runs", total=len(runs))
        for engine, scheme, seed in runs:
            bar.update(task, description=f"{engine} {scheme} seed {seed}")
            budget = budgets.get((engine, seed)) if scheme != "allocation" else None
            if equal_time and scheme != "allocation" and budget is None:
                console.print(f"{engine} {scheme} seed {seed} skipped: the allocation's run "
                              "failed, so there is no time to match")
                bar.advance(task)
                continue
            try:
                r = one(args, engine, scheme, seed, Path(tmp), budget)
                results.setdefault((engine, scheme), []).append(r)
                if scheme == "allocation" and r["points"]:
                    budgets[(engine, seed)] = r["wall"]
            except Exception as exc:  # a failed run is reported, the table goes on
                console.print(f"{engine} {scheme} seed {seed} failed: {exc}")
            bar.advance(task)
    alike = ("each given the allocation's wall time" if equal_time
             else "each the same number of updates")
    table = Table(title=f"allocation (exact), FedBuff, staggered on real processes: mel-async, "
                        f"{args.learners} learners at 1 to 1/4 of a core, T = {args.clock:g} s, "
                        f"{args.dataset}, {args.model}, {args.seeds} seeds, {alike}; wall "
                        "seconds from the first round to target, mean (seeds that reached it)")
    for col in ("engine", "scheme", *(f"to {t:g}" for t in TARGETS), "final accuracy",
                "updates", "wall s", "short of W", "median staleness", "period [T]",
                "placed again"):
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
                  f"{sum(r['short'] for r in rs)}/{len(rs)}" if equal_time else "-",
                  f"{statistics.median(stale):g}" if stale else "-"]
        periods = [r["period"] for r in rs if r["period"] is not None]
        cells.append(f"{statistics.mean(periods):.3g}" if periods else "-")
        placed = [r["placed"] for r in rs]
        cells.append(f"{min(placed)} to {max(placed)}" if any(placed) else "0")
        table.add_row(*cells)
    console.print(table)
    stopped = [(k, r["stopped"]) for k, rs in results.items() for r in rs if r["stopped"]]
    for key, why in stopped:
        console.print(f"stopped early: {key}: {why}")


if __name__ == "__main__":
    main()
