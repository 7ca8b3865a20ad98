"""feel (b): closed-form time for up to 100,000 devices.

Two families of ``ren2021`` instances (CPU devices; ``--processor gpu`` for GPUs):

- ``table1``: Table I as it stands. With one 10 MHz cell shared by K devices the upload of a
  32-bit DenseNet121 gradient dominates for large K and the optimum is the full batch;
- ``balanced``: gradients compressed in proportion to K (b = 32 x 12 / K bits per element) so
  that the compute/communication balance of the K = 12 set-up is kept and the optimum stays
  interior, with most batches strictly inside their bounds.

Times are the best of ``--repeat`` runs of the ``closed-form`` method alone (continuous optimum,
whole-B search, repair), and of the continuous optimum alone; the answer is then verified.

    python benchmarks/bench_feel_scale.py [--sizes 12 100 1000 10000 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from mel_opt.api import parse_instance
from mel_opt.problems.base import SolveOptions
from mel_opt.problems.feel import verify
from mel_opt.problems.feel.closed_form import solve_continuous
from mel_opt.problems.feel.generate import generate
from mel_opt.problems.feel.latency import coefficients
from mel_opt.problems.feel.methods import solve_closed_form


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[12, 100, 1000, 10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--processor", choices=("cpu", "gpu"), default="cpu")
    args = ap.parse_args()
    con = Console(width=170)
    table = Table(title=f"closed form, {args.processor.upper()} devices (best of {args.repeat})")
    for col in ("family", "K", "continuous ms", "method ms", "B (whole)", "B* (cont.)",
                "interior", "candidates", "certified", "rounding loss", "verified"):
        table.add_column(col, justify="right")
    for family in ("table1", "balanced"):
        for K in args.sizes:
            bits = 32.0 if family == "table1" else 32.0 * 12 / K
            doc = generate(None, learners=K, seed=args.seed,
                           params={"processor": args.processor, "bits_per_element": str(bits)})
            inst = parse_instance(doc)
            best_c = best_m = float("inf")
            out = None
            for _ in range(args.repeat):
                t = time.perf_counter()
                cont = solve_continuous(coefficients(inst))
                best_c = min(best_c, time.perf_counter() - t)
                t = time.perf_counter()
                out = solve_closed_form(inst, SolveOptions())
                best_m = min(best_m, time.perf_counter() - t)
            assert out is not None and out.solution is not None
            checked = verify(inst, out.solution)
            x = cont.uplink.batch
            co = coefficients(inst)
            inner = int(((x > co.lo + 1e-9) & (x < co.hi - 1e-9)).sum())
            e = out.extras
            table.add_row(family, f"{K:,}", f"{best_c * 1e3:.2f}", f"{best_m * 1e3:.2f}",
                          f"{out.solution['global_batch']:,}", f"{cont.global_batch:,.1f}",
                          f"{inner:,}", str(e["integer_B_candidates"]),
                          str(e["integer_B_certified"]), f"{e['rounding_loss']:.1e}",
                          "ok" if checked.verification.feasible else "FAILED")
    con.print(table)


if __name__ == "__main__":
    main()
