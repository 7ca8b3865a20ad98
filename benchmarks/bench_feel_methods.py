"""feel (c): learning efficiency of every method on the preset (shipped) instances.

Each instance in ``instances/feel`` (Table I, K = 6 and 12, CPU and GPU, plus a fixed-B and a
1-bit variant) is solved by every method; efficiencies are recomputed by the independent
verifier. "vs closed form" is the efficiency relative to the closed form's.

``--gpu`` prints instead the GPU part of paper 004 (Section VI-D, Figs. 4-5): for K = 6 and 12,
the efficiency of closed-form, full-batch, online and random-batch and the optimal global batch
B*, under Table I (b = 32, compute_scale 1) and along a sweep of the gradient compression ratio
r = 32 / bits_per_element and compute_scale (means over ``--seeds`` preset seeds; the ratios to
the closed form are the worst over the seeds; "ranking" = every baseline >= 1% behind), then
the verdict of ``melopt reproduce 004-fig4-5`` with the same number of seeds.

    python benchmarks/bench_feel_methods.py [--dir instances/feel] [--seed 0]
    python benchmarks/bench_feel_methods.py --gpu [--seeds 3]
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mel_opt.api import load_instance, solve
from mel_opt.problems.feel import PROBLEM
from mel_opt.reproduce.catalogue import Context, select
from mel_opt.reproduce.paper004 import SCHEMES, STRICT_MARGIN, run_schemes

GPU_BITS = (32.0, 1.0, 0.32, 0.1, 0.032)  # r = 1, 32, 100, 320, 1000
GPU_SCALE = (1.0, 3.0, 10.0)
ORDER = ("closed-form", "full-batch", "online", "random-batch")


def _mean(runs: list[dict[str, dict[str, Any]]], m: str, key: str) -> float:
    return sum(r[m][key] for r in runs) / len(runs)


def gpu_part(con: Console, seeds: int) -> None:
    """The GPU table: Table I first, then the r x compute_scale sweep (see the docstring)."""
    table = Table(title=f"feel GPU (paper 004 Section VI-D), {seeds} seeds per row")
    for col in ("K", "b", "r", "scale", "r x scale", "B*", "E closed-form", "E full", "E online",
                "E random", "full/cf", "random/cf", "online/cf", "ranking", "compute s",
                "round s"):
        table.add_column(col, justify="right")
    for K in (6, 12):
        for bits in GPU_BITS:
            for scale in GPU_SCALE:
                params = {"processor": "gpu", "bits_per_element": f"{bits:g}",
                          "compute_scale": f"{scale:g}"}
                runs = [r for s in range(seeds) if (r := run_schemes(params, K, s)) is not None]
                if not runs:
                    continue
                mean = partial(_mean, runs)
                worst = {m: max(r[m]["relative"] for r in runs) for m in SCHEMES}
                rank = all(w <= 1 - STRICT_MARGIN for m, w in worst.items() if m != "closed-form")
                r_ = 32.0 / bits
                table.add_row(str(K), f"{bits:g}", f"{r_:g}", f"{scale:g}", f"{r_ * scale:g}",
                              f"{mean('closed-form', 'global_batch'):.1f}",
                              *(f"{mean(m, 'efficiency'):.4e}" for m in ORDER),
                              *(f"{worst[m]:.4f}" for m in ("full-batch", "random-batch",
                                                              "online")),
                              "yes" if rank else "no",
                              f"{mean('closed-form', 'compute_s'):.3f}",
                              f"{mean('closed-form', 'round_s'):.3f}")
        table.add_section()
    con.print(table)
    outcome = select(["004-fig4-5"])[0].run(Context(seeds=seeds))
    con.print(f"melopt reproduce 004-fig4-5 ({seeds} seeds): {outcome.verdict}")
    for note in outcome.notes:
        con.print(f"  {note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(Path(__file__).parents[1] / "instances" / "feel"))
    ap.add_argument("--seed", type=int, default=0, help="seed of random-batch and ipopt")
    ap.add_argument("--gpu", action="store_true", help="the GPU part of paper 004 instead")
    ap.add_argument("--seeds", type=int, default=3, help="preset seeds per GPU row")
    args = ap.parse_args()
    con = Console(width=200)
    if args.gpu:
        gpu_part(con, args.seeds)
        return
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
