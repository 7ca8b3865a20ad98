"""feel (a): the closed form against IPOPT, time and objective, on Table-I instances.

For each K and seed (CPU devices of the ``ren2021`` preset; ``--processor gpu`` for GPUs):

- P4 (fixed B = the continuous optimum rounded): Algorithm 1 against one IPOPT run of P4+P5;
- P1 (free B): the continuous closed form (outer search) against one IPOPT run of P1;
- the full methods: ``closed-form`` (continuous optimum + certified whole-B search + repair)
  against ``ipopt`` with its default 8 starts (+ the same repair).

Efficiencies are recomputed from the latency model for both; "rel. diff" is
(closed form - IPOPT) / closed form (positive: the closed form is better).

    python benchmarks/bench_feel_vs_ipopt.py [--sizes 6 12 50 200] [--seeds 3] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from mel_opt.api import parse_instance, solve
from mel_opt.problems.feel import formulation
from mel_opt.problems.feel.closed_form import solve_continuous
from mel_opt.problems.feel.generate import generate
from mel_opt.problems.feel.latency import coefficients
from mel_opt.problems.feel.multistart import point_efficiency
from mel_opt.solvers import ipopt


def timed(f: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best wall time of ``repeat`` calls [s] and the last result."""
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[6, 12, 50, 200])
    ap.add_argument("--seeds", type=int, default=3, help="instances per size (seeds 1..N)")
    ap.add_argument("--repeat", type=int, default=5, help="closed-form timing repeats (best)")
    ap.add_argument("--processor", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--bits", type=float, default=32.0, help="bits per gradient element")
    args = ap.parse_args()

    con = Console(width=170)
    t4 = Table(title=f"P4 (fixed B) and P1 (free B), continuous: closed form vs one IPOPT run "
                     f"({args.processor}, b = {args.bits:g})")
    for col in ("K", "seed", "B*", "P4 cf ms", "P4 ipopt ms", "P4 rel. diff", "P1 cf ms",
                "P1 ipopt ms", "P1 rel. diff", "P1 speed-up"):
        t4.add_column(col, justify="right")
    tm = Table(title="Full methods (whole batches): closed-form vs ipopt (8 starts)")
    for col in ("K", "seed", "cf B", "ipopt B", "cf ms", "ipopt ms", "speed-up",
                "cf efficiency", "ipopt efficiency", "rel. diff", "certified"):
        tm.add_column(col, justify="right")
    speedups: dict[int, list[float]] = {}
    for K in args.sizes:
        for seed in range(1, args.seeds + 1):
            doc = generate(None, learners=K, seed=seed,
                           params={"processor": args.processor, "bits_per_element": str(args.bits)})
            inst = parse_instance(doc)
            co = coefficients(inst)
            # P1 continuous
            t_cf1, cont = timed(lambda co=co: solve_continuous(co), args.repeat)
            B = float(round(cont.global_batch))
            t_cf4, c4 = timed(lambda co=co, B=B: solve_continuous(co, B), args.repeat)

            def run(model: Any, inst: Any = inst, co: Any = co) -> float:
                ipopt.solve_nlp(model, tol=1e-10)
                b, up, dn = formulation.unscale(inst, model)
                return point_efficiency(co, b, up, dn)

            t0 = time.perf_counter()
            e4 = run(formulation.build_p4_model(inst, B))
            t_ip4 = time.perf_counter() - t0
            t0 = time.perf_counter()
            e1 = run(formulation.build_p1_model(inst))
            t_ip1 = time.perf_counter() - t0
            t4.add_row(str(K), str(seed), f"{cont.global_batch:.1f}", f"{t_cf4 * 1e3:.2f}",
                       f"{t_ip4 * 1e3:.0f}", f"{(c4.efficiency - e4) / c4.efficiency:+.1e}",
                       f"{t_cf1 * 1e3:.2f}", f"{t_ip1 * 1e3:.0f}",
                       f"{(cont.efficiency - e1) / cont.efficiency:+.1e}",
                       f"{t_ip1 / t_cf1:.0f}x")
            # full methods
            t_cf, rcf = timed(lambda inst=inst: solve(inst, "closed-form"), args.repeat)
            rip = solve(inst, "ipopt")
            t_ip = rip.solve_time_s
            speedups.setdefault(K, []).append(t_ip / t_cf)
            tm.add_row(str(K), str(seed), str(rcf.solution["global_batch"]),
                       str(rip.solution["global_batch"]), f"{t_cf * 1e3:.2f}",
                       f"{t_ip * 1e3:.0f}", f"{t_ip / t_cf:.0f}x", f"{rcf.objective:.6e}",
                       f"{rip.objective:.6e}",
                       f"{(rcf.objective - rip.objective) / rcf.objective:+.1e}",
                       str(rcf.metrics["integer_B_certified"]))
    con.print(t4)
    con.print(tm)
    for K, s in speedups.items():
        con.print(f"K = {K}: median full-method speed-up {statistics.median(s):.0f}x")


if __name__ == "__main__":
    main()
