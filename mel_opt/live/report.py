"""The outputs of a live run, written atomically after every round.

- ``rounds.csv``: one row per (round, learner): the node, the predicted and measured busy
  times (the measured one is the learner's own compute time plus the emulated transfer time
  of the plan), whether it met the round's deadline, its status (``ok``, ``late``,
  ``missing``, ``ignored``) and the allocation's own columns (``d``, ``tau``, ``shards``,
  ``batch``, ``samples``, ``passes``);
- ``summary.json``: global accuracy and loss per round, wall and clock times, the method, the
  final speed estimates, the median prediction error, the warnings;
- ``live.png`` (with matplotlib, at the end): predicted against measured compute time per
  learner over the rounds, and accuracy against wall time.

Pure: the rows and the summary come from :class:`~mel_opt.live.rounds.LiveRun` (or, for a
remote run, from the records the server logged), not from Flower.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mel_opt.io import atomic_write
from mel_opt.io.csvsafe import csv_text

__all__ = ["COLUMNS", "RecordCollector", "rows_from_csv", "rounds_csv", "write_files",
           "write_outputs"]

#: Prefix of the line the server app logs per round (one JSON record after it).
RECORD_PREFIX = "melopt-live "

COLUMNS = ("round", "learner", "name", "node", "status", "predicted_s", "measured_s",
           "deadline_met", "compute_predicted_s", "compute_measured_s", "comm_emulated_s",
           "samples", "passes", "d", "tau", "shards", "batch", "task", "aggregation_s",
           "reason", "adapted")


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def rounds_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """The CSV document of ``rows`` (cells that could run as formulas are neutralised)."""
    return csv_text(COLUMNS, ({k: _cell(v) for k, v in r.items()} for r in rows))


def write_files(out_dir: str | Path, rows: Sequence[Mapping[str, Any]],
                summary: Mapping[str, Any], figure: bool = False) -> dict[str, Any]:
    """Write ``rounds.csv`` and ``summary.json`` (and ``live.png`` when ``figure``)."""
    out = Path(out_dir)
    doc = dict(summary)
    doc["figure"] = None
    if figure:
        fig = plot(rows, doc, out / "live.png")
        doc["figure"] = None if fig is None else fig.name
    atomic_write(out / "rounds.csv", rounds_csv(rows))
    atomic_write(out / "summary.json", json.dumps(doc, indent=1, default=_plain) + "\n")
    return doc


def write_outputs(run: Any, out_dir: str | Path, figure: bool = False) -> dict[str, Any]:
    """:func:`write_files` of a :class:`~mel_opt.live.rounds.LiveRun`."""
    return write_files(out_dir, run.rows, run.summary(), figure)


def rows_from_csv(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``rounds.csv`` again, numbers as numbers (empty cells as None)."""
    import csv

    out: list[dict[str, Any]] = []
    p = Path(path)
    if not p.exists():
        return out
    with p.open(newline="") as f:
        for raw in csv.DictReader(f):
            row: dict[str, Any] = {}
            for key, text in raw.items():
                row[key] = _value(text)
            out.append(row)
    return out


def _value(text: str | None) -> Any:
    """A cell as the number, flag or text it was (a whole number stays exact: node ids are
    64-bit and would lose digits through a float)."""
    if text is None or text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


class RecordCollector:
    """Rebuilds the outputs of a run whose server logs its rounds (a remote SuperLink).

    Feed it every line of ``flwr run --stream``; a line carrying a round record
    (``melopt-live {json}``) is kept and the files are written again at once.
    """

    def __init__(self, out_dir: str | Path) -> None:
        self.out = Path(out_dir)
        self.rows: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {}

    def feed(self, line: str) -> bool:
        """Take ``line``; True when it was a round record."""
        at = line.find(RECORD_PREFIX)
        if at < 0:
            return False
        try:
            record = json.loads(line[at + len(RECORD_PREFIX):])
        except ValueError:
            return False
        self.rows = [r for r in self.rows if r.get("round") != record.get("round")]
        self.rows.extend(record.get("rows", []))
        self.summary = record.get("summary", {})
        self.finish()
        return True

    def finish(self) -> None:
        if self.summary:
            write_files(self.out, self.rows, self.summary)


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def plot(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
         path: Path) -> Path | None:
    """Predicted against measured compute time per learner, and accuracy against wall time
    (None without matplotlib)."""
    from mel_opt.errors import UsageError
    from mel_opt.plot import pyplot, save_figure

    try:
        plt = pyplot()
    except UsageError:  # no matplotlib: no figure
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    learners = sorted({int(r["learner"]) for r in rows})
    for k in learners:
        mine = [r for r in rows if int(r["learner"]) == k and r.get("compute_measured_s")]
        if not mine:
            continue
        rounds = [int(r["round"]) for r in mine]
        name = mine[0].get("name", k)
        line = axes[0].plot(rounds, [r["compute_measured_s"] for r in mine], "o-", lw=1.2,
                            ms=3, label=f"{name} measured")[0]
        axes[0].plot(rounds, [r["compute_predicted_s"] for r in mine], "x--", lw=0.8,
                     color=line.get_color(), label=f"{name} predicted")
    axes[0].set_xlabel("round")
    axes[0].xaxis.get_major_locator().set_params(integer=True)
    axes[0].set_ylabel("compute time [s]")
    axes[0].set_title("predicted (x) and measured (o) per learner", fontsize=9)
    done = [r for r in summary.get("rounds", []) if r.get("wall_s") is not None]
    walls = [r["wall_s"] for r in done]
    tasks = done[0].get("tasks") if done else None
    if tasks:  # one model per task (med): each task's accuracy
        for t, task in enumerate(tasks):
            axes[1].plot(walls, [r["tasks"][t]["accuracy"] for r in done], "o-", lw=1.2,
                         ms=3, label=f"task {task['task']}")
        axes[1].legend(fontsize=7)
    else:
        axes[1].plot(walls, [r["accuracy"] for r in done], "o-", lw=1.4)
    for key, label in dict(summary.get("plotted") or {}).items():
        # what the problem's cycle declares (adaptive-tau: the tau of each round), on a
        # second axis
        traced = [(r["wall_s"], r["control"][key]) for r in done
                  if key in (r.get("control") or {})]
        if traced:
            twin = axes[1].twinx()
            twin.step([w for w, _ in traced], [v for _, v in traced], where="pre",
                      color="tab:gray", lw=1.0)
            twin.set_ylabel(f"{label} (grey)")
    axes[1].set_xlabel("wall time [s]")
    axes[1].set_ylabel("validation accuracy")
    for ax in axes:
        ax.grid(alpha=0.3)
    if len(learners) <= 8:
        axes[0].legend(fontsize=6, ncol=2)
    fig.suptitle(f"{summary.get('instance')} ({summary.get('problem')}, "
                 f"{summary.get('method')}): live run", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)
