"""``melopt arena``: mel_opt's allocations beside the field's alternatives, on one population.

It prints two tables (:func:`arena_table`) and a verdict per target, and writes arena.csv,
curve.csv, summary.json and arena.png (:func:`mel_opt.arena.report.write_outputs`, whose
module docstring says what is computed): per scheme and target, the Kaplan-Meier median time
to the target (a seed that misses it censored at the horizon) with its 95 % Brookmeyer-Crowley
interval and how many seeds reached it, and the median paired per-seed difference against
mel_opt's allocation with its 95 % sign-test interval; then accuracy at the horizon (the same
time for every scheme; summary.json also keeps that at each run's last aggregation), MB moved,
sample-updates, busy and idle learner-seconds, stragglers and dropped updates (those the runs
record), mean +-95 % half-width over seeds. A target's winner is named only where its paired
interval excludes 0 against every other scheme; otherwise the verdict says why there is none.
With ``--tune`` every scheme is first tuned with the same number of trials on a validation
split (:mod:`mel_opt.arena.tune`); a third table (:func:`tuning_table`) shows the values
chosen and their scores, and tuning.csv holds every trial's rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Group
from rich.table import Table
from rich.text import Text

from mel_opt.api import load_instance
from mel_opt.arena.report import write_outputs
from mel_opt.arena.run import arena, availability_of
from mel_opt.arena.settings import ARENA_SETTINGS, ArenaSettings
from mel_opt.cli.app import (
    cli,
    declared_options,
    err,
    fail,
    guarded,
    out,
    refuse_overwrite,
)
from mel_opt.cli.work import execution_options, units_run


def _num(v: float, digits: int = 3) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 ** digits else f"{v:.{digits}g}"


def _pm(iv: dict[str, Any] | None, scale: float = 1.0, digits: int = 3) -> str:
    """mean +-half-width of a Student-t interval (``{"mean", "lo", "hi", "n"}``), scaled."""
    if iv is None or iv["mean"] is None:
        return "-"
    mean, half = iv["mean"] * scale, (iv["hi"] - iv["lo"]) * scale / 2.0
    if iv["n"] < 2 or half <= 1e-9 * max(1.0, abs(mean)):
        return _num(mean, digits)
    return f"{_num(mean, digits)} ±{_num(half, 2)}"


def _median(t: dict[str, Any], horizon: float) -> str:
    """Kaplan-Meier median [95 % interval] (reached/seeds); "> horizon" where not reached."""
    m = t["median"]
    if m["seconds"] is None:
        return f"> {horizon:g} ({t['reached']})"
    hi = "inf" if m["hi"] is None else f"{m['hi']:.4g}"
    lo = "-" if m["lo"] is None else f"{m['lo']:.4g}"
    return f"{m['seconds']:.4g} [{lo}, {hi}] ({t['reached']})"


def _paired(p: dict[str, Any] | None) -> str:
    """Median paired difference [95 % sign interval] (pairs)."""
    if p is None:
        return "reference"
    if p["median"] is None:
        return f"- ({p['n']})"
    lo = "-inf" if p["lo"] is None else f"{p['lo']:+.3g}"
    hi = "+inf" if p["hi"] is None else f"{p['hi']:+.3g}"
    return f"{p['median']:+.3g} [{lo}, {hi}] ({p['n']})"


def times_table(summary: dict[str, Any]) -> Table:
    """Per scheme and target: the Kaplan-Meier median time [95 % interval] (reached/seeds),
    and the median paired difference against the reference [95 % sign interval] (pairs)."""
    ref = summary.get("reference")
    table = Table(title=f"{summary['instance']} ({summary['problem']}): virtual seconds to "
                        f"target, horizon {summary['horizon_s']:g} s",
                  caption="median: Kaplan-Meier over all seeds, a seed that misses the target "
                          "censored at the horizon; [95% Brookmeyer-Crowley interval, log-log "
                          "band; inf: not bounded by the data] (reached/seeds). "
                          f"vs {ref}: median per-seed difference, scheme minus {ref}, a "
                          "censored time counted as the horizon [95% sign-test interval; "
                          "inf: fewer than 6 pairs] (pairs)", caption_justify="left")
    targets = list(next(iter(summary["schemes"].values()))["targets"]) if summary[
        "schemes"] else []
    table.add_column("scheme")
    for t in targets:
        table.add_column(Text(f"to {t} [s]"), justify="right")
        if ref is not None:
            table.add_column(Text(f"{t}: vs {ref} [s]"), justify="right")
    for scheme, e in summary["schemes"].items():
        cells = []
        for t in targets:
            cells.append(_median(e["targets"][t], summary["horizon_s"]))
            if ref is not None:
                cells.append(_paired(e["targets"][t].get("paired")))
        table.add_row(Text(scheme), *map(Text, cells))
    width = len(targets) * (2 if ref is not None else 1)
    for scheme, why in summary["infeasible"].items():
        table.add_row(Text(scheme), *map(Text, (["infeasible", why[:40]] + [""] * width)
                                            [:width]))
    return table


#: The resources table's columns: (title, summary key, scale).
_RESOURCE_COLUMNS = (("acc @ horizon", "horizon_accuracy", 1.0),
                     ("val acc", "final_val_accuracy", 1.0),
                     ("MB moved", "bytes", 1e-6),
                     ("M sample-upd", "updates", 1e-6),
                     ("busy learner-s", "busy_s", 1.0),
                     ("idle learner-s", "idle_s", 1.0),
                     ("stragglers", "stragglers", 1.0),
                     ("dropped", "dropped", 1.0))


def resources_table(summary: dict[str, Any]) -> Table:
    """Per scheme: accuracy at the horizon (the same time for all; on the validation split
    too where the runs have one) and each run's final resources (those the rows carry): mean
    ±half-width of the 95 % Student-t interval over seeds."""
    table = Table(title="accuracy and resources at the horizon, mean ±95% half-width over "
                        "seeds")
    schemes = summary["schemes"]
    columns = [c for c in _RESOURCE_COLUMNS if any(c[1] in e for e in schemes.values())]
    table.add_column("scheme")
    for title, _, _ in columns:
        table.add_column(title, justify="right")
    for scheme, e in schemes.items():
        table.add_row(Text(scheme), *(Text(_pm(e.get(key), scale)) for _, key, scale in columns))
    return table


def _value(v: Any) -> str:
    return "default" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def tuning_table(summary: dict[str, Any]) -> Table:
    """Per scheme (of a tuned run): the values chosen, their score and the range of every
    trial's score (the time-averaged validation accuracy on the tuning seeds), and the
    options the user fixed."""
    tuning = summary["tuning"]
    first = next(iter(tuning.values()), None)
    table = Table(title=f"tuning: {len(first['trials']) if first else 0} trials per scheme, "
                        f"seeds {', '.join(map(str, first['seeds'])) if first else '-'}",
                  caption="score: time-averaged validation accuracy over [0, horizon], mean "
                          "over the tuning seeds; the chosen values are then run on the "
                          "evaluation seeds and judged on the test split; (lowest), "
                          "(highest): the grid's edge, the best may lie beyond it",
                  caption_justify="left")
    for title in ("scheme", "chosen", "score", "trials' scores", "fixed (--set)"):
        table.add_column(title, justify="right" if "score" in title else "left")
    for scheme, e in tuning.items():
        scores = [t["score"] for t in e["trials"] if t["score"] is not None]
        edge = e.get("edges", {})
        table.add_row(
            Text(scheme),
            Text(", ".join(f"{k}={_value(v)}" + (f" ({edge[k]})" if k in edge else "")
                           for k, v in e["chosen"].items()) or "-"),
            Text("-" if e["score"] is None else f"{e['score']:.4f}"),
            Text(f"{min(scores):.4f} .. {max(scores):.4f}" if scores else "-"),
            Text(", ".join(f"{k}={_value(v)}" for k, v in e["fixed"].items()) or "-"))
    return table


def arena_table(summary: dict[str, Any]) -> Group:
    """The two tables ``melopt arena`` prints: :func:`times_table` (times to each target,
    paired differences against the allocation) and :func:`resources_table` (accuracy at the
    horizon, MB moved, sample-updates, busy and idle learner-seconds, stragglers, dropped)."""
    return Group(times_table(summary), resources_table(summary))


@cli.command("arena")
@click.argument("path", type=click.Path(dir_okay=False))
@declared_options(*ARENA_SETTINGS)
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for arena.csv, curve.csv, summary.json and arena.png (and "
                   "tuning.csv with --tune; units/ keeps the finished runs a rerun reads "
                   "back).")
@execution_options
def arena_cmd(path: str, out_dir: str, jobs: int | None, cluster: str | None,
              **values: Any) -> None:
    """Train PATH's population under mel_opt's allocations and the field's alternatives.

    Every scheme runs on the same learners (their times from the instance's model), data,
    partition, model start and seeds, for the same virtual time: the instance's method
    (default: its default method) beside deadline dropping, Oort, FedBuff and FedProx.
    Writes arena.csv, curve.csv, summary.json and arena.png. Times to a target are
    Kaplan-Meier medians (a seed that misses it is censored at the horizon), compared with the
    allocation seed by seed; a winner is named only where its paired 95 % interval excludes 0
    against every other scheme. With --tune, every scheme (the allocation included) first gets
    --trials points of its declared grid, each run on --tune-seeds seeds of their own and
    scored on a validation split; the best of each is then run on the evaluation seeds.
    """
    with guarded():
        for name in ("arena.csv", "curve.csv", "summary.json", "arena.png", "tuning.csv"):
            refuse_overwrite(str(Path(out_dir) / name), path)
        settings = ArenaSettings(**values)
        inst = load_instance(path)
        with units_run(out_dir, "arena", jobs, cluster):
            run = arena(inst, settings)
        summary = write_outputs(run, out_dir)
        for scheme, why in run.infeasible.items():
            err.print(f"warning: scheme {scheme} has no allocation ({why}); not run",
                      markup=False)
        availability = availability_of(settings.availability, inst)
        if availability is not None:
            err.print(f"availability: {availability.matched}", markup=False)
        if summary.get("tuning"):
            out.print(tuning_table(summary))
        out.print(arena_table(summary))
        for target, sentence in summary["verdicts"].items():
            out.print(f"target {target}: {sentence}", markup=False)
        out.print(f"wrote arena.csv, curve.csv, summary.json"
                  f"{', tuning.csv' if run.tuning_rows else ''}"
                  f"{', arena.png' if summary['figure'] else ''} to {out_dir}", markup=False)
        if not run.ran:
            fail("no scheme ran", 1)
