"""DAB against CSA over the deadline (thesis Fig. 3.6-3.7), in the time model of Eq. (3.4).

Instance: instances/dab/mnist_ffn_testbed.json (the thesis author's mnist_ffn task and measured
rates: 5 learners, mu = 2, total_shards = 60), deadline swept. For each deadline:

- ``dab``: shards per cycle, the largest predicted eta_k and the truancy (max eta - D) / D;
- ``csa`` (mel-async exact): status, maximum staleness and truancy; at short deadlines the
  fixed 60 shards no longer fit, the model's version of "CSA fails to adapt ... to meet low
  deadlines";
- ``csa-author``: the thesis author's CSA rule (weights (c_k + b_k) / sum, shards rounded,
  tau_k = max(1, round(c_k / d_k (D - (2 Omega + d_k) / b_k))) with sizes in shard units),
  whose rounding overshoots the deadline: its truancy is the model's counterpart of Fig. 3.7.

    python benchmarks/bench_dab_deadline.py [--deadlines 2 4 6 ...]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from mel_opt.api import load_instance, solve
from mel_opt.problems.dab import DabInstance, verify

HERE = Path(__file__).resolve().parent.parent


def author_csa(inst: DabInstance) -> dict[str, list[int]]:
    """The CSA of the thesis author's published code, for comparison."""
    b = inst.bandwidth / inst.shard_bytes  # shards/s
    om = inst.model_bytes / inst.shard_bytes  # shards
    c = inst.train_rate
    w = (c + b) / (c + b).sum()
    d = np.round(w * inst.total_shards).astype(int)  # type: ignore[operator]
    d = np.maximum(d, 1)
    tau = np.maximum(1, np.round(c / d * (inst.deadline - (2 * om + d) / b))).astype(int)
    return {"shards": d.tolist(), "tau": tau.tolist()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instance", default=str(HERE / "instances/dab/mnist_ffn_testbed.json"))
    ap.add_argument("--deadlines", type=float, nargs="+",
                    default=[2, 4, 6, 8, 10, 15, 20, 30, 45, 60])
    args = ap.parse_args()
    base = load_instance(args.instance)

    con = Console(width=130)
    table = Table(title=f"DAB vs CSA over the deadline: {base.name} ({base.K} learners, "
                        f"mu = {base.iterations}, CSA total = {base.total_shards} shards)")
    for col in ("D (s)", "DAB shards", "DAB max eta (s)", "DAB truancy %", "DAB excluded",
                "CSA status", "CSA staleness", "CSA truancy %", "author-CSA truancy %"):
        table.add_column(col, justify="right")
    for D in args.deadlines:
        inst = dataclasses.replace(base, deadline=float(D))
        dab = solve(inst, "dab")
        csa = solve(inst, "csa")
        auth = verify(inst, author_csa(inst))
        dab_cells = (
            [str(dab.metrics["shards_per_cycle"]), f"{dab.metrics['max_eta_s']:.2f}",
             f"{100 * dab.metrics['truancy']:.1f}", str(len(dab.metrics["excluded"]))]
            if dab.ok else ["0", "-", "-", str(base.K)]
        )
        csa_cells = (
            [csa.status.value, f"{csa.metrics['max_staleness']:.0f}",
             f"{100 * csa.metrics['truancy']:.1f}"] if csa.ok else [csa.status.value, "-", "-"]
        )
        table.add_row(f"{D:g}", *dab_cells, *csa_cells, f"{100 * auth.metrics['truancy']:.1f}")
    con.print(table)


if __name__ == "__main__":
    main()
