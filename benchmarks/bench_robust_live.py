"""One learner that lies on real learner processes (``melopt live``): does the run still learn?

Four nodes of mel-async (four learners of paper 000's Eq. (5) whose speeds span four times,
1,200 samples, the cycle clock ``--clock`` seconds), the digits, Flower's simulation
runtime and the loopback deployment (``--engines``). Three runs per engine and seed:

- ``honest``: no one lies, the default aggregation (``norm``);
- ``liar, norm``: learner 1 sends its model times ``--factor`` from round 2 on
  (``--attack scale:F --liar-ids 1 --attack-from 2``: the learner's own process multiplies
  the model it sends, so the lie crosses the wire as any reply), the default aggregation;
- ``liar, mean``: the same liar, the papers' plain mean (the reference: what it ruins).

It prints the final accuracy of each run and the honest run's minus each liar run's, per
engine and seed. Wall-clock rounds: run it alone.

    python benchmarks/bench_robust_live.py [--engines simulation local] [--seeds 1]
        [--rounds 10] [--factor 1000] [--clock 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from mel_opt.live.run import check, live, load_settings
from mel_opt.live.settings import LiveOptions


def population(clock: float, path: Path) -> Path:
    """Four learners of Eq. (5), seconds per sample-pass 1, 1.5, 2.5 and 4 ms, transfers
    ``1e-4 d_k + 0.05`` s, 1,200 samples in all, cycle clock T = ``clock``."""
    learners = [{"name": f"n{k}", "c2": c2, "c1": 1e-4, "c0": 0.05}
                for k, c2 in enumerate((1e-3, 1.5e-3, 2.5e-3, 4e-3))]
    doc = {"problem": "mel-async", "schema_version": 1, "name": "four-liar",
           "cycle_time_s": clock, "total_samples": 1200, "min_samples": 10,
           "max_samples": 1200, "learners": learners}
    path.write_text(json.dumps(doc))
    return path


def one(path: Path, engine: str, seed: int, rounds: int, out: Path,
        **kw: Any) -> dict[str, Any]:
    settings = load_settings(path, rounds=rounds, seed=seed, grace_s=10.0, **kw)
    start = time.perf_counter()
    summary = live(check(settings, LiveOptions(engine=engine, nodes=4)), out)
    return {"accuracy": [r["accuracy"] for r in summary["rounds"]],
            "clipped": summary.get("clipped"), "kept": summary.get("kept_previous"),
            "stopped": summary.get("stopped"), "wall_s": time.perf_counter() - start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", nargs="+", default=["simulation", "local"],
                    choices=["simulation", "local"])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--factor", type=float, default=1000.0)
    ap.add_argument("--clock", type=float, default=2.0)
    args = ap.parse_args()
    liar = {"attack": f"scale:{args.factor:g}", "liar_ids": (1,), "attack_from": 2}
    runs = {"honest": {}, "liar, norm": liar, "liar, mean": {**liar, "aggregation": "mean"}}
    print("| engine | seed | run | final accuracy | honest - it | clipped | wall s |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-robust-live-") as tmp:
        path = population(args.clock, Path(tmp) / "pop.json")
        for engine in args.engines:
            for seed in range(args.seeds):
                honest = None
                for name, kw in runs.items():
                    out = Path(tmp) / f"{engine}-{seed}-{name.replace(', ', '-')}"
                    try:
                        got = one(path, engine, seed, args.rounds, out, **kw)
                    except Exception as exc:  # a failed run is reported, the table goes on
                        print(f"| {engine} | {seed} | {name} | failed: {exc} | | | |")
                        continue
                    final = got["accuracy"][-1]
                    honest = final if name == "honest" else honest
                    gap = "" if honest is None or name == "honest" else \
                        f"{100 * (honest - final):+.1f} points"
                    print(f"| {engine} | {seed} | {name} | {final:.3f} | {gap} | "
                          f"{got['clipped']} | {got['wall_s']:.0f} |", flush=True)
                    print("   accuracy by round: "
                          + ", ".join(f"{a:.3f}" for a in got["accuracy"]), flush=True)


if __name__ == "__main__":
    main()
