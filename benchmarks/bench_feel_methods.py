"""feel (c): learning efficiency of every method on the preset (shipped) instances.

Each instance in ``instances/feel`` (Table I, K = 6 and 12, CPU and GPU, plus a fixed-B and a
1-bit variant) is solved by every method; efficiencies are recomputed by the independent
verifier. "vs closed form" is the efficiency relative to the closed form's.

    python benchmarks/bench_feel_methods.py [--dir instances/feel] [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mel_opt.api import load_instance, solve
from mel_opt.problems.feel import PROBLEM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(Path(__file__).parents[1] / "instances" / "feel"))
    ap.add_argument("--seed", type=int, default=0, help="seed of random-batch and ipopt")
    args = ap.parse_args()
    con = Console(width=200)
    table = Table(title="feel: learning efficiency by method (verified)")
    for col in ("instance", "method", "status", "efficiency", "vs closed form", "B",
                "round s", "uplink s", "downlink s", "max idle s", "time ms", "verified"):
        table.add_column(col, justify="right" if col not in ("instance", "method") else "left")
    for path in sorted(Path(args.dir).glob("*.json")):
        inst = load_instance(path)
        ref = None
        for method in PROBLEM.methods:
            res = solve(inst, method, seed=args.seed)
            if method == "closed-form":
                ref = res.objective
            m = res.metrics
            ok = res.verification is not None and res.verification.feasible
            rel = (f"{res.objective / ref:.4f}" if res.objective is not None and ref else "-")
            table.add_row(
                path.stem, method, res.status.value,
                "-" if res.objective is None else f"{res.objective:.6e}", rel,
                str(res.solution.get("global_batch", "-")),
                f"{m['round_latency_s']:.2f}" if "round_latency_s" in m else "-",
                f"{m['uplink_latency_s']:.2f}" if "uplink_latency_s" in m else "-",
                f"{m['downlink_latency_s']:.2f}" if "downlink_latency_s" in m else "-",
                f"{m['max_idle_s']:.2f}" if "max_idle_s" in m else "-",
                f"{res.solve_time_s * 1e3:.1f}", "ok" if ok else "-")
        table.add_section()
    con.print(table)


if __name__ == "__main__":
    main()
