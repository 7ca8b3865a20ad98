"""Live runs on Flower: seconds per round by engine, peak memory, how well the estimates
learn real (throttled) speeds, and what a loopback deployment adds to a round.

Three sections:

- ``rounds``: one mel-async instance of K learners (cycle clock ``--clock`` seconds up to
  K = 50, shorter beyond so that a round's work stays a few tens of core-seconds:
  ``--clock * 50 / K``, at least ``--min-clock``; small transfer coefficients), ``--rounds``
  rounds, on the emulator (``melopt train``'s engine), Flower's simulation runtime (a pool of
  one Ray actor per core, the learners queued through it), and the loopback deployment (2 and
  4 nodes, for K <= ``--local-max``, default 50). Seconds per round exclude start-up (Ray, the
  SuperLink and SuperNodes, the probe): the median of the rounds' own wall times (the
  simulation's include its solve, shown apart). The emulator trains the allocation of the
  simulated learners' final speed estimates (about the same work: both medians are shown).
  Peak memory sums the resident set of this process and every process it started (Ray's,
  Flower's), sampled every 0.2 s.
- ``speeds``: the loopback deployment with 4 nodes at 1, 0.5, 0.25 and 0.25 of a core (a
  SIGSTOP/SIGCONT duty cycle), 6 rounds: predicted against measured compute time per learner,
  and the median relative error per round (target: below 20 % from round 3 on).
- ``overhead``: the loopback deployment (``--engine local``, with TLS unless ``--no-tls``)
  with 4 nodes (``--overhead-nodes 2 4``: each count in turn), ``--rounds`` rounds: per
  round, its wall time minus its slowest learner's measured compute time (what the
  deployment adds: messages, learner processes, polls), and the median. Runs alone:
  ``python benchmarks/bench_live.py overhead``.
- ``links`` (root; not run by default): 2 nodes of mel-async (the ``rounds`` section's
  instance) and of dab (``instances/dab/mnist_ffn_testbed.json``), TwoNN on
  ``--links-dataset`` (Fashion-MNIST: a 162 kB model), on the loopback deployment
  and across links shaped to each of ``--link-rates`` (1, 4 and 16 Mbit/s): the model's
  predicted transfer time (down and up at the rate) against ``comm_measured_s`` per round,
  and that minus the loopback's (what the link itself added). Runs alone:
  ``python benchmarks/bench_live.py links``.
- ``shards`` (root; not run by default): dab with 2 learners on Fashion-MNIST, links shaped to
  each of ``--shard-rates`` (4, 8, 16 Mbit/s, the file's b_k): each learner claims its a_k
  shards, the server ships them with the model (the thesis's shard: 500 images, 1.568 MB);
  the file's predicted transfer against the measured one, beside the loopback deployment's.
  ``python benchmarks/bench_live.py shards``.
- ``transfers`` (root; not run by default): ``--transfers file`` against ``measured`` where
  the file's link model is wrong (links shaped to ``--wrong-rate``, 4 Mbit/s, while the dab
  file says 16 Mbit/s and the mel-async file a 20 ms model transfer): each round's wall time
  against the clock, and each learner's work.

    python benchmarks/bench_live.py [rounds] [speeds] [overhead] [--sizes 4 10 50 200 1000]
        [--rounds 5] [--clock 1.0] [--min-clock 0.1]

Timings are wall-clock: run it on a quiet machine, alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mel_opt import api
from mel_opt.live.run import LiveOptions, check, live, load_settings
from mel_opt.processes import Sampler, tree_rss
from mel_opt.training import TrainSettings, load_dataset, train

console = Console(width=160)


def _quiet(text: str) -> None:
    pass


#: Where a run's progress lines go (``--verbose``: stderr).
PROGRESS = _quiet


def instance(K: int, clock: float, path: Path) -> Path:
    learners = [{"name": f"n{k}", "c2": 1e-3, "c1": 1e-4, "c0": 0.02} for k in range(K)]
    doc = {"problem": "mel-async", "schema_version": 1, "name": f"live{K}",
           "cycle_time_s": clock, "total_samples": 100 * K, "min_samples": 10,
           "max_samples": 100 * K, "learners": learners}
    path.write_text(json.dumps(doc))
    return path


class PeakMemory(Sampler):
    """Peak summed RSS of this process and its descendants (sampled in a thread)."""

    peak = 0

    def sample(self) -> None:
        self.peak = max(self.peak, tree_rss(os.getpid()))


def emulator_round(K: int, clock: float, rounds: int, tmp: Path,
                   seconds: list[float | None], dataset: str = "digits"
                   ) -> tuple[float, int, float]:
    """The emulator on the same work as a live run: the instance calibrated with the live
    run's final speed estimates (``seconds`` per sample-pass), so each learner has the
    allocation the live learners had. Returns seconds per round, peak bytes and the
    sample-passes of a round."""
    from mel_opt.problems import get_problem
    from mel_opt.problems.learning import RunContext
    from mel_opt.training.partition import proportional_sizes

    inst = api.load_instance(instance(K, clock, tmp / f"e{K}.json"))
    data = load_dataset(dataset)
    cycle = get_problem("mel-async").learning
    assert cycle is not None
    known = [s for s in seconds if s is not None]
    sigma = [s if s is not None else statistics.median(known) for s in seconds]
    import numpy as np

    live_inst = cycle.live_instance(inst, np.arange(K), np.array(sigma), data.y_train.size)
    sol = api.solve(live_inst, "exact").solution
    sizes = proportional_sizes(cycle.data_shares(live_inst, "exact", sol, data.y_train.size),
                               data.y_train.size)
    plan = cycle.configure_cycle(live_inst, RunContext("exact", sol, 0, sizes), 1)
    work = float(sum(p.samples * p.passes for p in plan.learners))
    with PeakMemory() as mem:
        start = time.perf_counter()
        train(live_inst, TrainSettings(schemes=("exact",), cycles=rounds, seeds=1,
                                       dataset=dataset), data=data)
        wall = time.perf_counter() - start
    return wall / rounds, mem.peak, work


def live_round(K: int, clock: float, rounds: int, engine: str, nodes: int | None,
               tmp: Path, speeds: tuple[float, ...] | None = None, dataset: str = "digits"
               ) -> tuple[float, int, dict[str, Any]]:
    settings = load_settings(instance(K, clock, tmp / f"l{K}.json"), rounds=rounds,
                             grace_s=3.0 if engine == "simulation" else 5.0, dataset=dataset)
    out = tmp / f"out-{engine}-{K}-{nodes}-{len(speeds or ())}"
    with PeakMemory() as mem:
        summary = live(check(settings, LiveOptions(engine=engine, nodes=nodes,
                                                   speeds=speeds)), out, log=PROGRESS)
    walls = [r["round_wall_s"] for r in summary["rounds"][1:] if "round_wall_s" in r]
    return statistics.median(walls), mem.peak, summary


def clock_for(K: int, args: argparse.Namespace) -> float:
    """The cycle clock of K learners: ``--clock`` up to 50 learners, then shorter (each
    learner computes about the clock on a whole core, and a pool of a few cores works
    through all of them every round)."""
    return max(args.min_clock, args.clock * min(1.0, 50 / K))


def section_rounds(args: argparse.Namespace, tmp: Path) -> None:
    table = Table(title=f"seconds per round (median, start-up excluded), mel-async on "
                        f"{args.dataset}, "
                        f"{args.rounds} rounds; the emulator trains the allocation the "
                        "simulated learners had (same work); peak MB of all processes; "
                        f"simulation: a pool of {os.cpu_count()} actors (one per core)")
    for col in ("K", "clock s", "engine", "nodes", "sample-passes / round (median)", "s / round",
                "solve s", "x emulator", "answered", "peak MB"):
        table.add_column(col, justify="right")
    for K in args.sizes:
        clock = clock_for(K, args)
        try:
            sim, sim_mem, summary = live_round(K, clock, args.rounds, "simulation", None, tmp,
                                               dataset=args.dataset)
        except Exception as exc:  # a failed case is reported, the table goes on
            table.add_row(str(K), f"{clock:g}", "simulation", str(K), "", "failed",
                          str(exc)[:40], "", "", "")
            continue
        base, mem, work = emulator_round(K, clock, args.rounds, tmp,
                                         summary["estimates_s_per_sample"], args.dataset)
        solve = statistics.median(r.get("solve_s", 0.0) for r in summary["rounds"][1:])
        from mel_opt.live.report import rows_from_csv

        rows = rows_from_csv(tmp / f"out-simulation-{K}-None-0" / "rounds.csv")
        sim_work = statistics.median(
            sum((x["samples"] or 0) * (x["passes"] or 0) for x in rows if x["round"] == r)
            for r in range(1, args.rounds + 1))
        answered = sum(r.get("learners", 0) for r in summary["rounds"][1:])
        table.add_row(str(K), f"{clock:g}", "emulator", "-", f"{work:,.0f}", f"{base:.3f}",
                      "", "1.0", "", f"{mem / 2**20:,.0f}")
        table.add_row(str(K), f"{clock:g}", "simulation", str(K), f"{sim_work:,.0f}",
                      f"{sim:.3f}", f"{solve:.3f}", f"{sim / base:.2f}",
                      f"{answered} / {K * args.rounds}", f"{sim_mem / 2**20:,.0f}")
        for nodes in (n for n in (2, 4) if n <= K and K <= args.local_max):
            try:
                sec, mem, _ = live_round(K, clock, args.rounds, "local", nodes, tmp,
                                         dataset=args.dataset)
            except Exception as exc:
                table.add_row(str(K), f"{clock:g}", "local", str(nodes), "", "failed",
                              str(exc)[:40], "", "", "")
                continue
            table.add_row(str(K), f"{clock:g}", "local", str(nodes), "", f"{sec:.3f}", "",
                          f"{sec / base:.2f}", "", f"{mem / 2**20:,.0f}")
        console.print(f"done: K = {K}")
    console.print(table)


def section_speeds(args: argparse.Namespace, tmp: Path) -> None:
    speeds = (1.0, 0.5, 0.25, 0.25)
    _, _, summary = live_round(4, args.speed_clock, 6, "local", 4, tmp, speeds)
    rows = json.loads(json.dumps(summary))
    table = Table(title="loopback deployment, 4 nodes at 1, 0.5, 0.25, 0.25 of a core: "
                        "compute time predicted / measured [s] per round")
    table.add_column("round", justify="right")
    for k in range(4):
        table.add_column(f"learner {k} ({speeds[k]:g})", justify="right")
    table.add_column("median |error|", justify="right")
    from mel_opt.live.report import rows_from_csv

    csv_rows = rows_from_csv(tmp / "out-local-4-4-4" / "rounds.csv")
    errors = rows["prediction_error"]
    for r in range(1, 7):
        cells = []
        for k in range(4):
            row = next((x for x in csv_rows if x["round"] == r and x["learner"] == k), None)
            if row is None or row.get("compute_measured_s") is None:
                cells.append(row["status"] if row else "-")
            else:
                cells.append(f"{row['compute_predicted_s']:.2f} / "
                             f"{row['compute_measured_s']:.2f}")
        e = errors.get(f"round_{r}")
        table.add_row(str(r), *cells, "-" if e is None else f"{100 * e:.1f} %")
    console.print(table)
    later = errors.get("round_3_on")
    console.print(f"median relative error, rounds 3-6: "
                  f"{'-' if later is None else f'{100 * later:.1f} %'} (target < 20 %)")


def section_overhead(args: argparse.Namespace, tmp: Path) -> None:
    """What the loopback deployment adds to a round: its wall time minus its slowest
    learner's measured compute time, per round (from ``summary.json`` and ``rounds.csv``),
    for each node count of ``--overhead-nodes``."""
    from mel_opt.live.report import rows_from_csv

    for nodes in args.overhead_nodes:
        _, _, summary = live_round(nodes, args.clock, args.rounds, "local", nodes, tmp)
        rows = rows_from_csv(tmp / f"out-local-{nodes}-{nodes}-0" / "rounds.csv")
        table = Table(title=f"loopback deployment (--engine local), {nodes} nodes, mel-async, "
                            f"clock {args.clock:g} s: round wall - slowest learner's compute [s]")
        for col in ("round", "round wall", "slowest compute", "answered", "overhead"):
            table.add_column(col, justify="right")
        overheads = []
        for r in summary["rounds"][1:]:
            computes = [x["compute_measured_s"] for x in rows if x["round"] == r["round"]
                        and x.get("compute_measured_s") is not None]
            if "round_wall_s" not in r or not computes:
                table.add_row(str(r["round"]), "-", "-", "0", "-")
                continue
            slowest = max(computes)
            overheads.append(r["round_wall_s"] - slowest)
            table.add_row(str(r["round"]), f"{r['round_wall_s']:.3f}", f"{slowest:.3f}",
                          f"{len(computes)} / {nodes}", f"{overheads[-1]:.3f}")
        console.print(table)
        console.print(f"median overhead per round, {nodes} nodes: "
                      f"{statistics.median(overheads):.3f} s" if overheads else
                      f"median overhead per round, {nodes} nodes: - (no round had a measured "
                      "learner)")


def section_links(args: argparse.Namespace, tmp: Path) -> None:
    """Communication over shaped links (``--engine netns``, root): per problem and link rate,
    the model's predicted transfer time (down and up at the link's rate) against the measured
    ``comm_measured_s`` (round trip minus compute), beside the loopback deployment's (the
    deployment's own messaging, no link), per round, median over the learners."""
    import numpy as np

    from mel_opt.live.report import rows_from_csv
    from mel_opt.training.mlp import init_params, layers_for

    data = load_dataset(args.links_dataset, max_train=args.links_max_train)
    model_bytes = sum(a.nbytes for a in init_params(layers_for("twonn", data.features,
                                                                data.classes), 0, np.float32))
    root = Path(__file__).resolve().parents[1]
    files = {"mel-async": instance(2, args.clock, tmp / "links-ma.json"),
             "dab": root / "instances" / "dab" / "mnist_ffn_testbed.json"}
    rounds = args.rounds
    table = Table(title=f"shaped links (--engine netns), 2 nodes, TwoNN on {args.links_dataset} "
                        f"({model_bytes / 1e3:.0f} kB a model), {rounds} rounds: model "
                        "transfer predicted (down + up at the rate) vs comm_measured_s "
                        "(round trip - compute), median of the 2 learners [s]")
    for col in ("problem", "link", "predicted", *(f"round {r}" for r in range(1, rounds + 1)),
                "measured - loopback", "measured / predicted", "round wall s"):
        table.add_column(col, justify="right")
    for problem, path in files.items():
        for rate in (None, *args.link_rates):
            engine = "local" if rate is None else "netns"
            settings = load_settings(path, rounds=rounds, grace_s=30.0,
                                     dataset=args.links_dataset,
                                     max_train=args.links_max_train)
            out = tmp / f"links-{problem}-{rate}"
            opts = LiveOptions(engine=engine, nodes=2,
                               link_rate=None if rate is None else (rate,))
            try:
                summary = live(check(settings, opts), out, log=PROGRESS)
            except Exception as exc:  # a failed case is reported, the table goes on
                table.add_row(problem, "loopback" if rate is None else f"{rate:g} Mbit/s",
                              "", f"failed: {str(exc)[:60]}")
                continue
            rows = rows_from_csv(out / "rounds.csv")
            per_round = [statistics.median(x["comm_measured_s"] for x in rows
                                           if x["round"] == r and x.get("comm_measured_s")
                                           is not None) if any(
                x["round"] == r and x.get("comm_measured_s") is not None for x in rows)
                else float("nan") for r in range(1, rounds + 1)]
            measured = statistics.median(v for v in per_round if v == v)
            walls = [r["round_wall_s"] for r in summary["rounds"][1:] if "round_wall_s" in r]
            if rate is None:
                base = measured
                table.add_row(problem, "loopback", "0", *(f"{v:.2f}" for v in per_round),
                              "", "", f"{statistics.median(walls):.2f}")
                continue
            predicted = 2 * 8 * model_bytes / (rate * 1e6)
            table.add_row(problem, f"{rate:g} Mbit/s", f"{predicted:.2f}",
                          *(f"{v:.2f}" for v in per_round), f"{measured - base:.2f}",
                          f"{(measured - base) / predicted:.2f}",
                          f"{statistics.median(walls):.2f}")
            console.print(f"done: {problem} {rate} Mbit/s")
    console.print(table)


def dab_file(rate_mbit: float, model_bytes: int, deadline: float, total_shards: int,
             path: Path) -> Path:
    """Two dab learners on links of ``rate_mbit`` (b_k = rate / 8), the run's real model
    bytes, the thesis's shard (500 images of 28 x 28 float32), mu = 2 passes."""
    learners = [{"name": f"n{k}", "train_rate": 5.0, "bandwidth_Bps": rate_mbit * 1e6 / 8}
                for k in range(2)]
    doc = {"problem": "dab", "schema_version": 1, "name": f"shards-{rate_mbit:g}",
           "deadline_s": deadline, "iterations": 2, "model_bytes": model_bytes,
           "shard_bytes": 1_568_000, "total_shards": total_shards, "learners": learners}
    path.write_text(json.dumps(doc))
    return path


def section_shards(args: argparse.Namespace, tmp: Path) -> None:
    """dab's shards across shaped links (``--engine netns``, root): each learner claims a_k
    shards from its own speed and its link's rate (Eq. (3.5)), the server ships them with the
    model; per link rate, the shards and bytes shipped, the transfer the file predicts
    ((2 model + a_k shards) / b_k, ``comm_emulated_s``), the measured ``comm_measured_s``
    (round trip - compute), and that minus the loopback's messaging, median over learners
    and rounds."""
    import numpy as np

    from mel_opt.live.report import rows_from_csv
    from mel_opt.training.mlp import init_params, layers_for

    data = load_dataset("fashion-mnist", max_train=args.shards_max_train)
    model_bytes = sum(a.nbytes for a in init_params(layers_for("twonn", data.features,
                                                                data.classes), 0, np.float32))
    total = int(data.y_train.size) // 500
    table = Table(title=f"dab shards across shaped links (--engine netns), 2 learners, "
                        f"Fashion-MNIST (a shard: 500 images, 1.568 MB), TwoNN "
                        f"({model_bytes / 1e3:.0f} kB), D = {args.shards_deadline:g} s, "
                        f"{args.rounds} rounds; medians over learners and rounds [s]")
    for col in ("link", "a_k", "shipped MB", "predicted comm", "measured comm",
                "measured - loopback", "measured / predicted", "round wall s"):
        table.add_column(col, justify="right")
    base = None
    for rate in (None, *args.shard_rates):
        link = rate if rate is not None else args.shard_rates[0]
        path = dab_file(link, model_bytes, args.shards_deadline, total,
                        tmp / f"shards-{rate}.json")
        settings = load_settings(path, rounds=args.rounds, grace_s=30.0,
                                 dataset="fashion-mnist", max_train=args.shards_max_train)
        out = tmp / f"shards-{rate}"
        engine = "local" if rate is None else "netns"
        name = "loopback" if rate is None else f"{rate:g} Mbit/s"
        try:
            summary = live(check(settings, LiveOptions(engine=engine, nodes=2)), out,
                           log=PROGRESS)
        except Exception as exc:  # a failed case is reported, the table goes on
            table.add_row(name, f"failed: {str(exc)[:60]}")
            continue
        rows = [r for r in rows_from_csv(out / "rounds.csv")
                if r.get("comm_measured_s") is not None and r.get("shipped_bytes")]
        if not rows:
            table.add_row(name, "no learner shipped")
            continue
        shards = sorted({int(r["shards"]) for r in rows})
        measured = statistics.median(r["comm_measured_s"] for r in rows)
        predicted = statistics.median(r["comm_emulated_s"] for r in rows)
        walls = [r["round_wall_s"] for r in summary["rounds"][1:] if "round_wall_s" in r]
        mb = statistics.median(r["shipped_bytes"] for r in rows) / 1e6
        if rate is None:  # the deployment's own messaging, the shards crossing loopback
            base = measured
            table.add_row(name, ",".join(map(str, shards)), f"{mb:.2f}", "",
                          f"{measured:.2f}", "", "", f"{statistics.median(walls):.2f}")
            continue
        beyond = measured - (base or 0.0)
        table.add_row(name, ",".join(map(str, shards)), f"{mb:.2f}", f"{predicted:.2f}",
                      f"{measured:.2f}", f"{beyond:.2f}", f"{beyond / predicted:.2f}",
                      f"{statistics.median(walls):.2f}")
        console.print(f"done: shards {name}")
    console.print(table)


def section_transfers(args: argparse.Namespace, tmp: Path) -> None:
    """Planning with the file's transfers against the measured ones (``--transfers``), when
    the file's link model is wrong (root): every link shaped to ``--wrong-rate`` Mbit/s while
    the files say otherwise (dab: b_k of 16 Mbit/s; mel-async: C0_k = 0.02 s, a model crossing
    in 20 ms); per round, the round's wall time against the problem's clock and what each
    learner was given."""
    import numpy as np

    from mel_opt.live.report import rows_from_csv
    from mel_opt.training.mlp import init_params, layers_for

    data = load_dataset("fashion-mnist", max_train=args.shards_max_train)
    model_bytes = sum(a.nbytes for a in init_params(layers_for("twonn", data.features,
                                                                data.classes), 0, np.float32))
    rate = args.wrong_rate
    mel = tmp / "transfers-ma.json"
    doc = json.loads(instance(2, args.transfers_clock, mel).read_text())
    doc["total_samples"] = doc["max_samples"] = 1000
    mel.write_text(json.dumps(doc))
    files = {"dab": (dab_file(16.0, model_bytes, args.shards_deadline,
                              int(data.y_train.size) // 500, tmp / "transfers-dab.json"),
                     args.shards_deadline, "shards"),
             "mel-async": (mel, args.transfers_clock, "d")}
    rounds = args.rounds
    table = Table(title=f"--transfers file vs measured, links shaped to {rate:g} Mbit/s while "
                        f"the files say 16 Mbit/s (dab) or C0 = 0.02 s (mel-async); Fashion-"
                        f"MNIST, TwoNN ({model_bytes / 1e3:.0f} kB), 2 learners; per round: "
                        "wall s (learners' work: dab a_k, mel-async d_k)")
    for col in ("problem", "clock s", "transfers", *(f"round {r}" for r in range(1, rounds + 1))):
        table.add_column(col, justify="right")
    for problem, (path, clock, work) in files.items():
        for transfers in ("file", "measured"):
            settings = load_settings(path, rounds=rounds, grace_s=30.0, transfers=transfers,
                                     dataset="fashion-mnist", max_train=args.shards_max_train)
            out = tmp / f"transfers-{problem}-{transfers}"
            try:
                summary = live(check(settings, LiveOptions(engine="netns", nodes=2,
                                                           link_rate=(rate,))), out,
                               log=PROGRESS)
            except Exception as exc:  # a failed case is reported, the table goes on
                table.add_row(problem, f"{clock:g}", transfers, f"failed: {str(exc)[:60]}")
                continue
            rows = rows_from_csv(out / "rounds.csv")
            cells = []
            for rec in summary["rounds"][1:]:
                given = [str(r.get(work)) for r in rows if r["round"] == rec["round"]]
                cells.append(f"{rec['round_wall_s']:.1f} ({','.join(given)})")
            table.add_row(problem, f"{clock:g}", transfers, *cells)
            console.print(f"done: transfers {problem} {transfers}")
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sections", nargs="*",
                    choices=["", "rounds", "speeds", "overhead", "links", "shards",
                             "transfers"],
                    default=[])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 10, 50, 200, 1000])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--overhead-nodes", type=int, nargs="+", default=[4],
                    help="node counts of the overhead section (each a loopback deployment)")
    ap.add_argument("--clock", type=float, default=1.0, help="cycle clock T [s]")
    ap.add_argument("--min-clock", type=float, default=0.1,
                    help="shortest cycle clock of the large K of the rounds section [s]")
    ap.add_argument("--speed-clock", type=float, default=2.0,
                    help="cycle clock of the speeds section [s]")
    ap.add_argument("--local-max", type=int, default=50,
                    help="largest K the rounds section also runs on the loopback deployment")
    ap.add_argument("--link-rates", type=float, nargs="+", default=[1.0, 4.0, 16.0],
                    help="link rates of the links section [Mbit/s]")
    ap.add_argument("--links-dataset", default="fashion-mnist",
                    help="data set of the links section (its 28 x 28 TwoNN is 162 kB: a "
                         "model of the 8 x 8 digits, 18 kB, crosses within a token bucket's "
                         "burst)")
    ap.add_argument("--links-max-train", type=int, default=3000,
                    help="training samples of the links section")
    ap.add_argument("--shard-rates", type=float, nargs="+", default=[4.0, 8.0, 16.0],
                    help="link rates of the shards section [Mbit/s]")
    ap.add_argument("--shards-deadline", type=float, default=8.0,
                    help="dab deadline D of the shards section [s]")
    ap.add_argument("--shards-max-train", type=int, default=6000,
                    help="training samples of the shards section (12 shards of 500)")
    ap.add_argument("--wrong-rate", type=float, default=4.0,
                    help="link rate of the transfers section [Mbit/s]")
    ap.add_argument("--transfers-clock", type=float, default=6.0,
                    help="mel-async's T in the transfers section [s]")
    ap.add_argument("--dataset", default="digits",
                    help="data set of the rounds section (digits: at K = 1,000 a learner "
                         "holds 1 or 2 samples; fashion-mnist: 60)")
    ap.add_argument("--verbose", action="store_true", help="print each run's progress")
    ap.add_argument("--no-tls", action="store_true",
                    help="loopback deployments without TLS (to measure what TLS costs; "
                         "melopt live itself always serves them with TLS)")
    args = ap.parse_args()
    if args.no_tls:
        from mel_opt.live import federation

        with_tls = federation.LocalFederation.__init__

        def without_tls(self: Any, *a: Any, **kw: Any) -> None:
            kw["tls"] = False
            with_tls(self, *a, **kw)

        federation.LocalFederation.__init__ = without_tls  # type: ignore[method-assign]
    if args.verbose:
        global PROGRESS
        PROGRESS = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    chosen = [s for s in args.sections if s] or ["rounds", "speeds", "overhead"]
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        if "rounds" in chosen:
            section_rounds(args, Path(tmp))
        if "speeds" in chosen:
            section_speeds(args, Path(tmp))
        if "overhead" in chosen:
            section_overhead(args, Path(tmp))
        if "links" in chosen:
            section_links(args, Path(tmp))
        if "shards" in chosen:
            section_shards(args, Path(tmp))
        if "transfers" in chosen:
            section_transfers(args, Path(tmp))


if __name__ == "__main__":
    sys.exit(main())
