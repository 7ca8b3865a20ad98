"""``melopt live``: an instance's allocation run by real learner processes on Flower."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from mel_opt.cli.app import cli, declared_options, err, guarded, out, refuse_overwrite
from mel_opt.errors import UsageError, needs_extra
from mel_opt.live.settings import LiveOptions, LiveSettings
from mel_opt.schemes import scheme_options


def _need_flower() -> None:
    import importlib.util

    if importlib.util.find_spec("flwr") is None:
        raise UsageError(needs_extra("live runs (Flower)", "flower"))


def rounds_table(summary: dict[str, Any]) -> Table:
    """Accuracy, answering learners and prediction error per round."""
    t = Table(title=f"{summary.get('instance')} ({summary.get('problem')}, "
                    f"{summary.get('method')}): live rounds")
    adapted = any("adapted" in r for r in summary.get("rounds", []))
    for col in ("round", "accuracy", "loss", "learners", "missing", "round wall (s)",
                "median |pred - meas| / meas"):
        t.add_column(col, justify="right")
    if adapted:  # what the problem changed in the file's job for the learners left
        t.add_column("adapted")
    stale = any("staleness" in r for r in summary.get("rounds", []))
    if stale:  # FedBuff: how old the updates of each server step were
        t.add_column("max staleness", justify="right")
    errors = summary.get("prediction_error", {})
    for r in summary.get("rounds", []):
        err_r = errors.get(f"round_{r['round']}")
        cells = [str(r["round"]), f"{r['accuracy']:.3f}", f"{r['loss']:.3f}",
                 str(r.get("learners", "-")), str(len(r.get("missing", []) or [])),
                 "-" if r.get("round_wall_s") is None else f"{r['round_wall_s']:.3g}",
                 "-" if err_r is None else f"{100 * err_r:.1f} %"]
        if adapted:
            cells.append((r.get("adapted") or {}).get("text", ""))
        if stale:
            cells.append(str(max(r["staleness"])) if r.get("staleness") else "-")
        t.add_row(*cells)
    return t


# the schemes' own options (FedBuff's buffer, concurrency and server rate, staggered's groups
# and period) as the registry declares them
_SERVER = ("method", "rounds", "scheme", *(o.name for o in scheme_options("live")), "seed",
           "dataset", "partition", "model", "lr", "batch_size", "max_train", "time_limit",
           "grace_s", "probe_s", "adapt", "shards", "transfers", "availability", "aggregation",
           "attack", "liars", "liar_ids", "attack_from")
_ENGINE = ("engine", "nodes", "speeds", "link_rate", "superlink", "root_certificates", "insecure",
           "emulate")


@cli.command("live")
@click.argument("path", type=click.Path(dir_okay=False))
@declared_options(*(LiveOptions.setting(n) for n in _ENGINE[:1]),
                  *(LiveSettings.setting(n) for n in _SERVER[:2]),
                  *(LiveOptions.setting(n) for n in _ENGINE[1:]),
                  *(LiveSettings.setting(n) for n in _SERVER[2:]), short={"method": "-m"})
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for rounds.csv, summary.json and live.png.")
def live_cmd(path: str, out_dir: str, **values: Any) -> None:
    """Run PATH's allocation on real learner processes with Flower, round after round.

    With --scheme fedbuff the server runs FedBuff instead (asynchronous, every learner the
    same work, a server step after every --buffer updates; --rounds counts the steps), so
    the method's allocation and the field's asynchronous answer meet on the same processes.
    With --scheme staggered the allocation runs asynchronously: each learner holds the
    method's data, its work is sized to arrive in its group's slot (--groups, --period), and
    the server steps once per group.

    A probe round measures every learner (subset benchmarking); each round then solves the
    instance again from the measured speeds, sends every node its own allocation, closes at
    the cycle's deadline (missing learners are left out until they answer again) and feeds
    the measured times back. Transfers on one machine are near instant: their time is
    emulated from the instance and reported as such. When the file's job no longer fits the
    learners left, the problem adapts it (--adapt). Exit code 1: the run ended before its
    rounds (no learner left, or no allocation for them); the rounds done are kept.
    """
    with guarded():
        _need_flower()
        from mel_opt.live.run import ended_early, live, load_job

        opts = LiveOptions(**{n: values[n] for n in _ENGINE})
        job = load_job(path, opts, learners=opts.nodes, **{n: values[n] for n in _SERVER})
        for name in ("rounds.csv", "summary.json", "live.png"):  # nothing replaces the input
            refuse_overwrite(str(Path(out_dir) / name), path)
        summary = live(job, out_dir, log=lambda text: err.print(text, style="dim", markup=False))
        out.print(rounds_table(summary))
        for warning in summary.get("warnings", []):
            err.print(f"warning: {warning}", markup=False)
        out.print(f"wrote rounds.csv, summary.json{', live.png' if summary.get('figure') else ''}"
                  f"{' and emulated/' if opts.emulate else ''} to {out_dir}", markup=False)
        early = ended_early(summary)
        if early is not None:  # exit code 1, after the rounds done are shown and written
            raise early
