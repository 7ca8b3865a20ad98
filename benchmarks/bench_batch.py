"""Batch throughput and overhead.

Usage::

    python benchmarks/bench_batch.py [--instances 1000] [--learners 50] [--method ipopt]
                                     [--no-ray]

Generates N mel-async instances (preset ``random``, seeded), then measures

- the bare solve: load + solve + verify in one loop, no batch machinery;
- ``run_batch`` with 1 local worker (in-process), 2 local workers (process pool), and Ray with
  2 workers (local Ray instance), each writing result files and summary.csv;

and prints instances per second, the speed-up of 2 workers over 1, the Ray/local ratio, and the
per-instance overhead of the batch machinery against the bare solve (1 worker).
Targets (issue 5): speed-up >= 1.7 on 2 cores; overhead < 20 ms; Ray within 2x of local.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import mel_opt
from mel_opt.batch import run_batch
from mel_opt.problems.mel_async.generate import generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--learners", type=int, default=20)
    ap.add_argument("--method", default="ipopt")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    console = Console()
    work = Path(tempfile.mkdtemp(prefix="melopt-bench-"))
    try:
        src = work / "in"
        src.mkdir()
        for i in range(args.instances):
            doc = generate("random", learners=args.learners, seed=i, params={})
            (src / f"r{i:04d}.json").write_text(json.dumps(doc))
        files = sorted(src.glob("*.json"))

        t0 = time.perf_counter()
        for f in files:
            res = mel_opt.solve(mel_opt.load_instance(f), args.method)
            assert res.ok
        bare = time.perf_counter() - t0

        rows = [("bare loop (no batch)", bare)]
        timings = {}
        for label, kw in (("batch, 1 local worker", {"jobs": 1}),
                          ("batch, 2 local workers", {"jobs": 2}),
                          ("batch, Ray, 2 workers", {"jobs": 2, "executor": "ray"})):
            if "Ray" in label and args.no_ray:
                continue
            if "Ray" in label:
                try:
                    import ray
                except ImportError:
                    console.print("ray not installed: skipped")
                    continue
                ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            out = work / label.replace(" ", "_").replace(",", "")
            t0 = time.perf_counter()
            rep = run_batch(src, out, methods=[args.method], **kw)
            wall = time.perf_counter() - t0
            assert len(rep.rows) == len(files) and not rep.failures
            timings[label] = wall
            rows.append((label, wall))
            if "Ray" in label:
                import ray

                ray.shutdown()
        table = Table(title=f"{len(files)} mel-async instances (K = {args.learners}, "
                            f"method {args.method})")
        for c in ("run", "wall s", "instances / s", "ms / instance"):
            table.add_column(c, justify="right")
        for label, wall in rows:
            table.add_row(label, f"{wall:.2f}", f"{len(files) / wall:.1f}",
                          f"{1000 * wall / len(files):.2f}")
        console.print(table)
        one = timings.get("batch, 1 local worker")
        two = timings.get("batch, 2 local workers")
        ray_t = timings.get("batch, Ray, 2 workers")
        if one and two:
            console.print(f"speed-up of 2 workers over 1: {one / two:.2f}x (target >= 1.7)")
        if one:
            console.print(f"batch overhead per instance (1 worker vs bare loop): "
                          f"{1000 * (one - bare) / len(files):.2f} ms (target < 20 ms)")
        if ray_t and two:
            console.print(f"Ray / local wall-time ratio: {ray_t / two:.2f} (target <= 2)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
