"""What the user waits for: wall time of whole ``melopt`` processes, phase by phase.

Every case runs ``python -m mel_opt.cli solve FILE -o OUT`` in a fresh process and reports its
wall time, its peak memory (maximum resident set, by GNU time) and the phases the result JSON
records in ``timings`` (load = read + JSON parse, validate = document -> instance, solve,
verify, write = encoding the result JSON); ``other`` is the rest of the wall time (interpreter
and imports, the file write). Start-up is timed on ``melopt --version`` and on solving shipped
small instances with their default method.

Large instances are made by tiling a shipped one (seeded): the learners are copied with rates
multiplied by a factor drawn in [1, 1.02] (faster copies keep the tiled instance feasible) and
the totals scaled with the number of copies; med uses its ``hetero`` generator. Case
``mel-async-large-tau`` is mel-async's ``large-tau`` preset (seed 0, or ``--large-tau-seed``,
made by this checkout's generator): tau in the thousands and a maximum staleness of 249 at
1,000,000 learners, where the cost of ``exact`` grows with the staleness range, not only with
K. At 1,000,000 learners it is the file of issue 37 (c2 ~ U(2e-5, 8e-5), c1 ~ U(1e-4, 5e-4),
c0 ~ U(0.05, 0.3), T = 10 s, d = 40 K, d_l = 10, d_u = 200, each learner named: about 100 MB
of JSON); ``--repeat`` solves each file that many times (a table row each).

    python benchmarks/bench_end_to_end.py [--cases startup mel-async mel-async-large-tau feel
        med dab]
        [--sizes 10000 100000 1000000] [--timeout 600] [--pythonpath DIR]
        [--large-tau-seed 0] [--repeat 1]

``--pythonpath`` times another checkout of mel_opt (e.g. an older commit exported with
``git archive``), so a change can be measured before and after on the same machine. A case that
exceeds ``--timeout`` is reported as such.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("load", "validate", "solve", "verify", "write")

# (problem, shipped instance, learner fields multiplied by the rate factor, totals scaled)
TILED = {
    "mel-async": ("instances/mel-async/k10_T15.json", ("cpu_hz", "rate_bps"), ("total_samples",)),
    "feel": ("instances/feel/ren2021_cpu_densenet121_k12.json",
             ("cpu_hz", "uplink_bps", "downlink_bps"), ()),
    "dab": ("instances/dab/mnist_ffn_testbed.json", ("train_rate", "bandwidth_Bps"),
            ("total_shards",)),
}
SMALL = {  # shipped small instances, solved with their default method
    "mel-async": "instances/mel-async/k10_T15.json",
    "feel": "instances/feel/ren2021_cpu_densenet121_k12.json",
    "dab": "instances/dab/mnist_ffn_testbed.json",
    "med": "instances/med/hetero_n10_m3.json",
    "adaptive-tau": "instances/adaptive-tau/svm_defaults.json",
}


def tiled(problem: str, size: int, seed: int) -> dict[str, Any]:
    """The shipped instance of ``problem`` with its learners copied up to ``size``."""
    path, rate_fields, totals = TILED[problem]
    doc = json.loads((ROOT / path).read_text())
    key = "devices" if "devices" in doc else "learners"
    base = doc[key]
    rng = np.random.default_rng(seed)
    factors = rng.uniform(1.0, 1.02, size=(size, len(rate_fields)))
    items = []
    for i in range(size):
        item = copy.copy(base[i % len(base)])
        item["name"] = f"{item['name']}_{i // len(base)}"
        for f, field in enumerate(rate_fields):
            item[field] = float(item[field]) * float(factors[i, f])
        items.append(item)
    doc[key] = items
    for field in totals:
        doc[field] = int(round(doc[field] * size / len(base)))
    doc["name"] = f"{problem}_tiled_{size}"
    return doc


def large_tau_instance(learners: int, seed: int = 0) -> dict[str, Any]:
    from mel_opt.problems.mel_async.generate import generate

    return generate("large-tau", learners=learners, seed=seed)


def med_instance(learners: int, tasks: int, seed: int) -> dict[str, Any]:
    from mel_opt.problems.med.generate import generate

    return generate("hetero", learners=learners, tasks=tasks, seed=seed)


TIME = shutil.which("time") or "/usr/bin/time"


def run(argv: list[str], pythonpath: str, timeout: float) -> tuple[float, float, int | None]:
    """Wall time [s], peak resident memory [MB] and exit code (None on time-out) of one
    ``python -m mel_opt.cli`` process.

    The memory is measured by GNU time around the process: a child forked straight from this
    (large) benchmark process would report this process's resident set as its own peak.
    """
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1"}
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        # cwd: "-m" puts the working folder first on sys.path, before PYTHONPATH
        cmd = [TIME, "-f", "%M", "-o", rss.name, sys.executable, "-m", "mel_opt.cli", *argv]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=pythonpath, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        code: int | None
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # time and the solver process under it
            proc.wait()
            code = None
        wall = time.perf_counter() - start
        lines = [ln for ln in rss.read().split() if ln.isdigit()]
    return wall, int(lines[-1]) / 1024 if lines else float("nan"), code


def solve_row(label: str, doc: dict[str, Any] | None, file: Path, method: str | None,
              args: argparse.Namespace, tmp: Path) -> list[str]:
    """Write ``doc`` to ``file`` (unless None), solve it in a fresh process, one table row."""
    if doc is not None:
        file.write_text(json.dumps(doc))
        Console(stderr=True).print(f"{label}: {file.stat().st_size / 1e6:,.1f} MB of JSON")
    out = tmp / "result.json"
    out.unlink(missing_ok=True)
    argv = ["solve", str(file), "-o", str(out)] + (["-m", method] if method else [])
    wall, mem, code = run(argv, args.pythonpath, args.timeout)
    timings: dict[str, float] = {}
    status = "time-out" if code is None else f"exit {code}"
    if out.exists():
        res = json.loads(out.read_text())
        timings = res.get("timings") or {"solve": res["solve_time_s"]}
        verified = (res.get("verification") or {}).get("feasible")
        status = f"{res['status']}, {'verified' if verified else 'UNVERIFIED'}"
    known = sum(timings.values())
    cells = [f"{timings[p]:.3f}" if p in timings else "-" for p in PHASES]
    other = f"{wall - known:.3f}" if code is not None else "-"
    return [label, f"{wall:.2f}", *cells, other, f"{mem:,.0f}", status]


def startup_rows(args: argparse.Namespace, tmp: Path) -> list[list[str]]:
    rows = []
    wall, mem, code = run(["--version"], args.pythonpath, args.timeout)
    rows.append(["melopt --version", f"{wall:.2f}", *["-"] * (len(PHASES) + 1), f"{mem:,.0f}",
                 f"exit {code}"])
    for problem, path in SMALL.items():
        rows.append(solve_row(f"solve small {problem}", None, ROOT / path, None, args, tmp))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+",
                    default=["startup", "mel-async", "mel-async-large-tau", "feel", "med", "dab"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                    help="numbers of learners of the tiled mel-async and feel cases")
    ap.add_argument("--timeout", type=float, default=600.0, help="per process [s]")
    ap.add_argument("--pythonpath", default=str(ROOT), help="checkout of mel_opt to time")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--large-tau-seed", type=int, default=0,
                    help="seed of the large-tau preset's instances")
    ap.add_argument("--repeat", type=int, default=1, help="solves of each generated file")
    args = ap.parse_args()
    big = args.sizes
    table = Table(title=f"melopt end to end ({args.pythonpath}), seconds and MB")
    for col in ("case", "wall", *PHASES, "other", "peak MB", "status"):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory(prefix="bench_e2e_") as name:
        tmp = Path(name)
        plan: list[tuple[str, Any, str | None]] = []
        if "startup" in args.cases:
            for row in startup_rows(args, tmp):
                table.add_row(*row)
        for problem, method in (("mel-async", "exact"), ("feel", "closed-form")):
            if problem in args.cases:
                plan += [(f"{problem} {method} K={k:,}",
                          lambda p=problem, k=k: tiled(p, k, args.seed), method) for k in big]
        if "mel-async-large-tau" in args.cases:
            seed = args.large_tau_seed
            plan += [(f"mel-async exact large-tau K={k:,} seed {seed}",
                      lambda k=k: large_tau_instance(k, seed), "exact") for k in big]
        if "med" in args.cases:
            plan.append(("med exact N=1,000 x 10 tasks",
                         lambda: med_instance(1000, 10, args.seed), "exact"))
        if "dab" in args.cases:
            plan.append(("dab dab K=100,000", lambda: tiled("dab", 100_000, args.seed), "dab"))
        for label, make, method in plan:
            doc = make()
            for _ in range(max(1, args.repeat)):
                table.add_row(*solve_row(label, doc, tmp / "instance.json", method, args, tmp))
                doc = None  # the file is written once
            Console(stderr=True).print(f"done: {label}")
    Console(width=180).print(table)


if __name__ == "__main__":
    main()
