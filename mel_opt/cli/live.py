"""``melopt live``: an instance's allocation run by real learner processes on Flower."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from mel_opt.cli.app import cli, err, guarded, number, out, positive, refuse_overwrite, seed_int
from mel_opt.errors import UsageError, needs_extra


def _need_flower() -> None:
    import importlib.util

    if importlib.util.find_spec("flwr") is None:
        raise UsageError(needs_extra("live runs (Flower)", "flower"))


def rounds_table(summary: dict[str, Any]) -> Table:
    """Accuracy, answering learners and prediction error per round."""
    t = Table(title=f"{summary.get('instance')} ({summary.get('problem')}, "
                    f"{summary.get('method')}): live rounds")
    for col in ("round", "accuracy", "loss", "learners", "missing", "round wall (s)",
                "median |pred - meas| / meas"):
        t.add_column(col, justify="right")
    errors = summary.get("prediction_error", {})
    for r in summary.get("rounds", []):
        err_r = errors.get(f"round_{r['round']}")
        t.add_row(str(r["round"]), f"{r['accuracy']:.3f}", f"{r['loss']:.3f}",
                  str(r.get("learners", "-")), str(len(r.get("missing", []) or [])),
                  "-" if r.get("round_wall_s") is None else f"{r['round_wall_s']:.3g}",
                  "-" if err_r is None else f"{100 * err_r:.1f} %")
    return t


@cli.command("live")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--engine", type=click.Choice(["simulation", "local", "remote"]),
              default="simulation", show_default=True,
              help="Flower's simulation runtime, a loopback deployment started here, or an "
                   "existing deployment (--superlink).")
@click.option("-m", "--method", default=None,
              help="Method that allocates every round (default: the problem's).")
@click.option("--rounds", type=click.IntRange(min=1), default=5, show_default=True,
              help="Global rounds after the probe (adaptive-tau may end earlier: budget).")
@click.option("--nodes", type=click.IntRange(min=1), default=None,
              help="Learner processes (default: the instance's learners; adaptive-tau, whose "
                   "file has none: 5, as paper 003's demo).")
@click.option("--speeds", default=None,
              help="Local nodes' fractions of a core, e.g. 1,0.5,0.25 (--engine local).")
@click.option("--superlink", default=None, help="HOST:PORT of a remote SuperLink (remote).")
@click.option("--root-certificates", type=click.Path(dir_okay=False, exists=True),
              default=None, help="CA certificate (PEM) of the remote SuperLink.")
@click.option("--insecure", is_flag=True, help="Remote SuperLink without TLS (only when asked).")
@click.option("--seed", type=seed_int(), default=0, show_default=True,
              help="Model initialisation, data split and shuffles.")
@click.option("--dataset", default="digits", show_default=True,
              help="digits, fashion-mnist, mnist, or idx:DIR (as train).")
@click.option("--partition", default="iid", show_default=True,
              help="iid, non-iid or dirichlet:ALPHA (as train).")
@click.option("--model", default="twonn", show_default=True,
              help="softmax, twonn or mlp000 (as train).")
@click.option("--lr", type=positive(), default=0.1, show_default=True, help="SGD learning rate.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Local minibatch (problems whose plan does not set its own).")
@click.option("--max-train", type=click.IntRange(min=0), default=0,
              help="Use at most this many training samples (0: all).")
@click.option("--time-limit", type=positive(), default=30.0,
              show_default=True, help="Solver time limit per round [s].")
@click.option("--grace", type=number(min=0), default=None,
              help="Seconds a round waits for replies beyond each learner's predicted "
                   "computation and measured messaging overhead (default: 2 in the "
                   "simulation, 5 in a deployment).")
@click.option("--emulate", is_flag=True,
              help="Also run the emulator on the same instance, seed and rounds "
                   "(written to DIR/emulated).")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for rounds.csv, summary.json and live.png.")
def live_cmd(path: str, engine: str, method: str | None, rounds: int, nodes: int | None,
             speeds: str | None, superlink: str | None, root_certificates: str | None,
             insecure: bool, seed: int, dataset: str, partition: str, model: str, lr: float,
             batch_size: int, max_train: int, time_limit: float, grace: float | None,
             emulate: bool, out_dir: str) -> None:
    """Run PATH's allocation on real learner processes with Flower, round after round.

    A probe round measures every learner (subset benchmarking); each round then solves the
    instance again from the measured speeds, sends every node its own allocation, closes at
    the cycle's deadline (missing learners are left out until they answer again) and feeds
    the measured times back. Transfers on one machine are near instant: their time is
    emulated from the instance and reported as such.
    """
    with guarded():
        _need_flower()
        from mel_opt.live.run import LiveOptions, check, live, load_settings, speeds_from_text
        from mel_opt.training.mlp import layers_for

        layers_for(model, 1, 1)  # an unknown model is a usage error before anything starts
        settings = load_settings(
            path, method=method, rounds=rounds, seed=seed, dataset=dataset,
            partition=partition, model=model, lr=lr, batch_size=batch_size,
            max_train=max_train, time_limit=time_limit, learners=nodes,
            grace_s=grace if grace is not None else (2.0 if engine == "simulation" else 5.0))
        opts = LiveOptions(engine=engine, nodes=nodes, speeds=speeds_from_text(speeds),
                           superlink=superlink, root_certificates=root_certificates,
                           insecure=insecure, emulate=emulate)
        check(settings, opts)
        for name in ("rounds.csv", "summary.json", "live.png"):  # nothing replaces the input
            refuse_overwrite(str(Path(out_dir) / name), path)
        summary = live(settings, opts, out_dir,
                       log=lambda text: err.print(text, style="dim", markup=False))
        out.print(rounds_table(summary))
        for warning in summary.get("warnings", []):
            err.print(f"warning: {warning}", markup=False)
        out.print(f"wrote rounds.csv, summary.json{', live.png' if summary.get('figure') else ''}"
                  f"{' and emulated/' if emulate else ''} to {out_dir}", markup=False)
