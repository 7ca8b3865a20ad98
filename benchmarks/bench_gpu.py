"""The emulator on a GPU (``--device cuda``), checked and timed in one run, within a time budget.

Usage (on a machine with an NVIDIA GPU, CuPy and Fashion-MNIST; ``benchmarks/gpu_run.sh``
installs what is missing offline and runs this)::

    python3 benchmarks/bench_gpu.py [--device cuda] [--budget-s 480] [--cpus 16]
        [--parts check,fig3,arena,fig3-cpu,arena-cpu] [--out DIR] [--smoke]

Parts, each in a process of its own, killed at its share of the budget (what finished is
printed; an unfinished part shows how far it got and, where it can, the time it would take):

- ``check``: the same seeds on the CPU and on the device: ``melopt train`` (mel-async K = 10,
  exact and sync, TwoNN, 3 cycles, 2 seeds) and an arena (the allocation, deadline, FedBuff,
  FedProx; 2 cycles, 2 seeds), on 6,000 training images of Fashion-MNIST; the rows must agree
  within the float32 tolerance (:func:`mel_opt.training.device.rows_differ`);
- ``fig3``: the catalogue's ``000-fig3`` at full size on Fashion-MNIST on the device
  (K = 10, 15, 20, four schemes, five seeds, the [784, 300, 124, 60, 10] network, until both
  targets; target: under 60 s on one H200);
- ``arena``: the arena's 10-seed comparison at K = 1,000 on Fashion-MNIST on the device
  (mel-async ``--preset random --learners 1000 --seed 1``, every scheme, 20 budgets, targets
  0.8 and 0.9, time_cv 0.06: ``benchmarks/bench_arena.py --problems mel-async --learners 1000
  --datasets fashion-mnist``; target: under 10 minutes);
- ``fig3-cpu``, ``arena-cpu``: the same work on the machine's CPUs (``--cpus``: fig3's runs in
  that many processes, the arena's learners in that many threads), for the GPU-against-CPU
  table.

``--smoke`` runs every part tiny (the digits, K = 20, 2 seeds, 2 cycles) to check that the
script works, on any machine (``--device cpu`` where there is no GPU). The results are also
written to DIR/results.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the working tree's mel_opt, whatever else is installed
CARRIED_DATA = ROOT / ".gpu-carry" / "datasets"
if "MELOPT_DATA_DIR" not in os.environ and (CARRIED_DATA / "fashion-mnist").is_dir():
    os.environ["MELOPT_DATA_DIR"] = str(CARRIED_DATA)  # benchmarks/gpu_prepare.sh put it there

#: (part, share of the budget); a part gets its share of what the parts before it left.
PARTS = {"check": 0.14, "fig3": 0.22, "arena": 0.30, "fig3-cpu": 0.17, "arena-cpu": 0.17}
TARGETS = {"fig3": 60.0, "arena": 600.0}
CHECK_TRAIN, CHECK_TEST = 6_000, 2_000


class Log:
    """JSON lines a child part appends (the parent reads them even after a kill)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.t0 = time.perf_counter()
        self._last = 0.0

    def write(self, event: str, throttle: bool = False, **fields: Any) -> None:
        now = time.perf_counter() - self.t0
        if throttle and now - self._last < 1.0:
            return
        self._last = now
        with open(self.path, "a") as f:
            f.write(json.dumps({"event": event, "t": round(now, 3), **fields}) + "\n")


# ---- the parts (run in a child process) -------------------------------------------------------

def _data_name(smoke: bool) -> str:
    return "digits" if smoke else "fashion-mnist"


def _compare(cpu: list[dict[str, Any]], dev_rows: list[dict[str, Any]], samples: int
             ) -> dict[str, Any]:
    from mel_opt.training.device import ACCURACY_SAMPLES, LOSS_RTOL, rows_differ

    loss = max((abs(a["loss"] - b["loss"]) / max(abs(a["loss"]), 1e-30)
                for a, b in zip(cpu, dev_rows, strict=False)), default=0.0)
    acc = max((abs(a["accuracy"] - b["accuracy"]) * samples
               for a, b in zip(cpu, dev_rows, strict=False)), default=0.0)
    diffs = rows_differ(cpu, dev_rows, samples)
    return {"rows": len(cpu), "max_loss_rel": loss, "max_acc_samples": acc,
            "loss_rtol": LOSS_RTOL, "acc_samples": ACCURACY_SAMPLES, "ok": not diffs,
            "differences": diffs[:5]}


def part_check(device: str, smoke: bool, cpus: int, log: Log) -> None:
    import numpy as np

    from mel_opt.api import load_instance
    from mel_opt.arena.run import arena
    from mel_opt.arena.settings import ArenaSettings
    from mel_opt.training import TrainSettings, load_dataset, train

    name = _data_name(smoke)
    ds = load_dataset(name, max_train=None if smoke else CHECK_TRAIN,
                      max_test=None if smoke else CHECK_TEST).astype(np.dtype("float32"))
    inst = load_instance(str(ROOT / "instances/mel-async/k10_T15.json"))
    base = dict(schemes=("exact", "sync"), cycles=3, seeds=2, model="twonn", processes=1,
                dataset=name)
    rows = {d: train(inst, TrainSettings(**base, device=d), data=ds).rows
            for d in ("cpu", device)}
    log.write("result", what="melopt train, mel-async K = 10 (exact, sync), 3 cycles, 2 seeds",
              **_compare(rows["cpu"], rows[device], ds.y_test.size))
    a = dict(schemes=("exact", "deadline", "fedbuff", "fedprox"), seeds=2, cycles=2,
             model="twonn", dataset=name, max_train=None if smoke else CHECK_TRAIN,
             max_test=None if smoke else CHECK_TEST)
    got = {d: arena(inst, ArenaSettings(**a, device=d)).rows for d in ("cpu", device)}
    log.write("result", what="arena, mel-async K = 10 (exact, deadline, fedbuff, fedprox), "
              "2 budgets, 2 seeds", **_compare(got["cpu"], got[device], ds.y_test.size))


def part_fig3(device: str, smoke: bool, cpus: int, log: Log) -> None:
    from mel_opt import activity
    from mel_opt.reproduce import paper000_training as fig3

    t0 = time.perf_counter()
    real_ceiling, real_train = fig3.centralised_ceiling, fig3.train_all
    state = {"after_ceiling": 0.0}

    def ceiling(*args: Any, **kwargs: Any) -> float:
        log.write("progress", what="the centralised ceiling (data loaded)")
        got = real_ceiling(*args, **kwargs)
        state["after_ceiling"] = time.perf_counter() - t0
        log.write("progress", what=f"ceiling {got:.3f} done", fraction=0.0)
        return got

    def progress(done: int, total: int) -> None:
        frac = done / max(total, 1)
        spent = time.perf_counter() - t0 - state["after_ceiling"]
        log.write("progress", throttle=True, fraction=frac,
                  projected_s=state["after_ceiling"] + spent / max(frac, 1e-9),
                  what=f"{done}/{total} cycles (every K's runs together)")

    def train_all(calls: Any, **kwargs: Any) -> Any:
        if device == "cpu":  # the runs of every K in --cpus processes at once
            calls = [(inst, dataclasses.replace(settings, processes=cpus))
                     for inst, settings in calls]
        return real_train(calls, progress=progress, **kwargs)

    fig3.centralised_ceiling, fig3.train_all = ceiling, train_all  # progress only
    with activity.reporting(lambda what: None):
        out = fig3.paper000_fig3(None, seeds=1 if smoke else 5, quick=smoke,
                                 dataset=_data_name(smoke), device=device)
    log.write("done", wall_s=time.perf_counter() - t0, rows=len(out.rows))


def part_arena(device: str, smoke: bool, cpus: int, log: Log) -> None:
    from mel_opt.arena import runner
    from mel_opt.arena.run import arena, default_schemes, work_clock
    from mel_opt.arena.settings import ArenaSettings
    from mel_opt.reproduce.learning import generated_instance
    from mel_opt.training import emulate

    K = 20 if smoke else 1000
    inst = generated_instance("mel-async", "random", K, 1)
    s = ArenaSettings(seeds=2 if smoke else 10, cycles=2 if smoke else 20,
                      dataset=_data_name(smoke), time_cv=0.06, targets=(0.8, 0.9),
                      max_train=600 if smoke else None, device=device,
                      threads=cpus if device == "cpu" else None)
    state = {"done": 0, "total": len(default_schemes("mel-async")) * s.seeds, "within": 0.0}
    t0 = time.perf_counter()

    def note() -> None:
        frac = (state["done"] + state["within"]) / state["total"] if state["total"] else None
        spent = time.perf_counter() - t0
        log.write("progress", throttle=True, fraction=frac,
                  projected_s=None if not frac else spent / frac,
                  what=f"{state['done']}/{state['total'] or '?'} runs, "
                  f"{state['within']:.0%} of the next")

    real_row = runner.Run.row

    def row(self: Any, step: int, t: float, *args: Any, **kwargs: Any) -> Any:
        state["within"] = min(1.0, t / max(self.horizon_s, 1e-9))
        note()
        return real_row(self, step, t, *args, **kwargs)

    def progress(done: int, total: int) -> None:
        state.update(done=done, total=total, within=0.0)
        note()

    real_record = emulate.Trainer.record
    horizon = s.cycles * work_clock(inst).budget_s

    def record(self: Any, cycle: int, t: float, *args: Any, **kwargs: Any) -> Any:
        state["within"] = min(1.0, t / max(horizon, 1e-9))  # the allocation's own loop
        note()
        return real_record(self, cycle, t, *args, **kwargs)

    # how far into a run (progress only: the same work)
    runner.Run.row = row  # type: ignore[method-assign]
    emulate.Trainer.record = record  # type: ignore[method-assign]
    log.write("progress", what="loading the data, solving the allocation")
    out = arena(inst, s, progress=progress)
    log.write("done", wall_s=time.perf_counter() - t0, rows=len(out.rows),
              runs=len({(r["scheme"], r["seed"]) for r in out.rows}))


CHILD = {"check": part_check, "fig3": part_fig3, "arena": part_arena}


# ---- the parent ---------------------------------------------------------------------------

def _machine(device: str) -> dict[str, Any]:
    import numpy as np

    info: dict[str, Any] = {"python": platform.python_version(), "numpy": np.__version__,
                            "cpus": os.cpu_count(), "machine": platform.machine()}
    try:
        from mel_opt.blas import describe

        b = describe()
        info["blas"] = f"{b['library']} {b['version']}, {b['architecture']}"
    except Exception as exc:  # a report, not a requirement
        info["blas"] = f"unknown ({exc})"
    if device == "cuda":
        try:
            import cupy

            props = cupy.cuda.runtime.getDeviceProperties(0)
            name = props["name"]
            info["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
            info["cupy"] = cupy.__version__
            info["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        except Exception as exc:
            info["gpu"] = f"not usable: {type(exc).__name__}: {exc}"
    return info


def _run_part(part: str, device: str, args: argparse.Namespace, budget: float,
              out: Path) -> dict[str, Any]:
    name = part.removesuffix("-cpu")
    on = "cpu" if part.endswith("-cpu") else device
    log = out / f"{part}.jsonl"
    log.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--on", on,
           "--log", str(log), "--cpus", str(args.cpus)] + (["--smoke"] if args.smoke else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    t0 = time.perf_counter()
    with open(out / f"{part}.out", "w") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=max(budget, 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the part and any pool it started
            proc.wait()
            code = None
    wall = time.perf_counter() - t0
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    tail = (out / f"{part}.out").read_text().strip().splitlines()[-3:]
    return {"part": part, "device": on, "budget_s": budget, "wall_s": wall,
            "finished": code == 0, "exit": code, "events": events,
            "error": None if code in (0, None) else " | ".join(tail)}


def _timing_cells(r: dict[str, Any]) -> tuple[str, str, str]:
    """(done, seconds, projected total) of a timed part."""
    done = [e for e in r["events"] if e["event"] == "done"]
    if done:
        return "yes", f"{done[-1]['wall_s']:.1f}", f"{done[-1]['wall_s']:.1f}"
    prog = [e for e in r["events"] if e["event"] == "progress"]
    last = prog[-1] if prog else {}
    frac, projected_s = last.get("fraction"), last.get("projected_s")
    if r["error"]:
        return f"failed: {r['error']}", "-", "-"
    projected = (f"~{projected_s:.0f} (from {frac:.1%})" if frac and projected_s
                 else f"> {r['wall_s']:.0f} (no progress to project)")
    return f"no (stopped at its budget; last: {last.get('what', 'nothing reported')})", \
        f"> {r['wall_s']:.0f}", projected


def _report(results: list[dict[str, Any]], machine: dict[str, Any], device: str,
            smoke: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=140)
    t = Table(title="machine")
    t.add_column("what")
    t.add_column("value")
    for k, v in machine.items():
        t.add_row(k, str(v))
    console.print(t)
    check = next((r for r in results if r["part"] == "check"), None)
    if check is not None:
        t = Table(title=f"(a) cpu against {device}, same seeds (float32 tolerance)")
        for col in ("comparison", "rows", "max loss diff (rel.)", "max accuracy diff "
                    "(samples)", "tolerance", "verdict"):
            t.add_column(col, overflow="fold")
        for e in (e for e in check["events"] if e["event"] == "result"):
            t.add_row(e["what"], str(e["rows"]), f"{e['max_loss_rel']:.2e}",
                      f"{e['max_acc_samples']:.0f}",
                      f"{e['loss_rtol']:g} rel., {e['acc_samples']} samples",
                      "agree" if e["ok"] else "DIFFER: " + "; ".join(e["differences"]))
        if check["error"] or not check["finished"]:
            t.add_row("(the check did not finish)", "-", "-", "-", "-",
                      check["error"] or f"stopped at its budget ({check['budget_s']:.0f} s)")
        console.print(t)
    t = Table(title="(b)-(d) times \\[s]: wall time of the whole part, data loading included"
              + (" (SMOKE: tiny sizes, not the work named)" if smoke else ""))
    for col in ("work", "device", "finished", "wall", "projected total", "target"):
        t.add_column(col, overflow="fold")
    timed = {}
    for r in results:
        if r["part"] == "check":
            continue
        name = r["part"].removesuffix("-cpu")
        done, wall, projected = _timing_cells(r)
        timed[(name, r["device"], r["part"].endswith("-cpu"))] = projected
        target = (f"< {TARGETS[name]:.0f}" if not r["part"].endswith("-cpu") else "-")
        t.add_row({"fig3": "000-fig3, full size, Fashion-MNIST",
                   "arena": "arena K = 1,000, 10 seeds, Fashion-MNIST"}[name],
                  r["device"] + (" (all cores)" if r["part"].endswith("-cpu") else ""),
                  done, wall, projected, target)
    console.print(t)
    t = Table(title=f"{device} against the CPUs of this machine")
    for col in ("work", device, "cpu (all cores)"):
        t.add_column(col)
    for name in ("fig3", "arena"):
        t.add_row(name, timed.get((name, device, False), "-"), timed.get((name, "cpu", True), "-"))
    console.print(t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="wall-time budget of all parts together [s]")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 1,
                    help="CPU cores of the CPU parts (processes for fig3, threads for arena)")
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--out", default="/tmp/melopt-bench-gpu")
    ap.add_argument("--smoke", action="store_true", help="every part tiny (a check of the "
                    "script)")
    ap.add_argument("--child", choices=tuple(CHILD), help=argparse.SUPPRESS)
    ap.add_argument("--on", help=argparse.SUPPRESS)
    ap.add_argument("--log", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        from mel_opt.blas import blas_threads

        with blas_threads(1):
            CHILD[a.child](a.on, a.smoke, a.cpus, Log(Path(a.log)))
        return
    parts = [p.strip() for p in a.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.device == "cuda":
        from mel_opt.errors import SettingError
        from mel_opt.training.device import get_device

        try:
            get_device("cuda")
        except SettingError as exc:
            sys.exit(f"error: {exc.as_flag()}")
    machine = _machine(a.device)
    start = time.perf_counter()
    results = []
    for i, part in enumerate(parts):
        left = a.budget_s - (time.perf_counter() - start)
        share = PARTS[part] / sum(PARTS[p] for p in parts[i:])
        budget = max(left * share, 5.0)
        print(f"[{time.perf_counter() - start:6.1f} s] {part} on "
              f"{'cpu' if part.endswith('-cpu') else a.device}, budget {budget:.0f} s",
              flush=True)
        results.append(_run_part(part, a.device, a, budget, out))
    (out / "results.json").write_text(json.dumps({"machine": machine, "device": a.device,
                                                  "smoke": a.smoke, "parts": results},
                                                 indent=1))
    _report(results, machine, a.device, a.smoke)
    print(f"total {time.perf_counter() - start:.0f} s; results in {out / 'results.json'}")


if __name__ == "__main__":
    main()
