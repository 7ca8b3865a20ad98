"""The outputs of a live run, written atomically after every round.

- ``rounds.csv``: one row per (round, learner): the node, the predicted and measured busy
  times (the measured one is the learner's own compute time plus the emulated transfer time
  of the plan), ``comm_measured_s``: the reply's measured round trip minus the learner's
  compute time (the transfers of the order and the reply as they really crossed: on shaped
  links, ``--engine netns``, their time at the link's rate; with the deployment's own
  messaging in it everywhere), and ``comm_predicted_s``, the server's estimate of that before
  the round (learned as the speeds are: an exponentially weighted average of the learner's
  measurements), whether it met the round's deadline, its status (``ok``, ``late``,
  ``missing``, ``ignored``), the plan's ``samples`` and ``passes``, ``shipped_bytes`` (the
  bytes of samples the server sent with the model, dab's claimed shards,
  :mod:`mel_opt.live.claims`), then the columns the run's problem declares for its allocation
  (``LearningCycle.columns``: mel-async ``d`` and ``tau``, dab ``shards`` and ``tau``, ...) and
  those its scheme declares (FedBuff, where a round is a server step: ``staleness``, the
  server steps since the model the learner started from), and any other number a row holds:
  no column is dropped;
- ``summary.json``: global accuracy and loss per round, wall and clock times, the method, the
  final speed estimates, the median prediction error, the warnings;
- ``live.png`` (with matplotlib, at the end): predicted against measured compute time per
  learner over the rounds (late replies ringed, missing and ignored learners marked at their
  predicted time, each round's count of them above it), and accuracy against wall time.

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

__all__ = ["GENERIC", "TRAILING", "RecordCollector", "columns_of", "declared_columns", "draw",
           "round_counts", "rows_from_csv", "rounds_csv", "write_files", "write_outputs"]

#: Prefix of the line the server app logs per round (one JSON record after it).
RECORD_PREFIX = "melopt-live "

#: The columns every run's rows have, first; then the run's own (:func:`columns_of`); then
#: :data:`TRAILING`.
GENERIC = ("round", "learner", "name", "node", "status", "predicted_s", "measured_s",
           "deadline_met", "compute_predicted_s", "compute_measured_s", "comm_emulated_s",
           "comm_predicted_s", "comm_measured_s", "shipped_bytes", "samples", "passes")
TRAILING = ("reason", "adapted")
#: Statuses the figure marks (the learner did not answer usably, or answered late).
MARKED = ("late", "missing", "ignored")
#: Most rounds whose every number is a tick on the figure's round axis.
EVERY_ROUND_TICKS = 15


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def columns_of(rows: Sequence[Mapping[str, Any]], declared: Sequence[str] = ()
               ) -> tuple[str, ...]:
    """The columns of ``rounds.csv``: :data:`GENERIC`, the run's ``declared`` columns (its
    problem's and its scheme's), every other key a row holds (in the order first met), then
    :data:`TRAILING`."""
    own = [c for c in declared if c not in GENERIC and c not in TRAILING]
    for r in rows:
        own.extend(k for k in r if k not in GENERIC and k not in TRAILING and k not in own)
    return (*GENERIC, *own, *TRAILING)


def declared_columns(summary: Mapping[str, Any]) -> tuple[str, ...]:
    """The columns a run's problem and scheme declare, looked up by the names its summary
    gives (none where this machine does not know them: a remote run of a plug-in problem;
    its rows still bring their keys)."""
    from mel_opt.problems import all_problems
    from mel_opt.schemes import SCHEMES

    spec = all_problems().get(str(summary.get("problem")))
    scheme = SCHEMES.get(str(summary.get("scheme")))
    cycle = None if spec is None else spec.learning
    return (*(cycle.columns if cycle is not None else ()),
            *(scheme.columns if scheme is not None else ()))


def rounds_csv(rows: Sequence[Mapping[str, Any]], declared: Sequence[str] = ()) -> str:
    """The CSV document of ``rows`` (:func:`columns_of`; cells that could run as formulas are
    neutralised)."""
    return csv_text(columns_of(rows, declared),
                    ({k: _cell(v) for k, v in r.items()} for r in rows), strict=True)


def write_files(out_dir: str | Path, rows: Sequence[Mapping[str, Any]],
                summary: Mapping[str, Any], figure: bool = False) -> dict[str, Any]:
    """Write ``rounds.csv`` and ``summary.json`` (and ``live.png`` when ``figure``)."""
    out = Path(out_dir)
    doc = dict(summary)
    doc["figure"] = None
    if figure:
        fig = plot(rows, doc, out / "live.png")
        doc["figure"] = None if fig is None else fig.name
    atomic_write(out / "rounds.csv", rounds_csv(rows, declared_columns(summary)))
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


def round_counts(rows: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, int]]:
    """Learners of each round by status (``ok``, ``late``, ``missing``, ``ignored``)."""
    out: dict[int, dict[str, int]] = {}
    for r in rows:
        mine = out.setdefault(int(r["round"]), {})
        status = str(r.get("status"))
        mine[status] = mine.get(status, 0) + 1
    return dict(sorted(out.items()))


def plot(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
         path: Path) -> Path | None:
    """:func:`draw`, saved to ``path`` (None without matplotlib)."""
    from mel_opt.plot import save_figure

    fig = draw(rows, summary)
    return None if fig is None else save_figure(fig, path, dpi=120)


def draw(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> Any:
    """The figure: predicted against measured compute time per learner, and accuracy against
    wall time (None without matplotlib)."""
    from mel_opt.errors import UsageError
    from mel_opt.plot import pyplot

    try:
        plt = pyplot()
    except UsageError:  # no matplotlib: no figure
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    learners = sorted({int(r["learner"]) for r in rows})
    _draw_times(axes[0], rows, learners)
    _draw_accuracy(axes[1], summary)
    for ax in axes:
        ax.grid(alpha=0.3)
    if len(learners) <= 8:
        axes[0].legend(fontsize=6, ncol=2)
    fig.suptitle(f"{summary.get('instance')} ({summary.get('problem')}, "
                 f"{summary.get('method')}): live run", fontsize=9)
    fig.tight_layout()
    return fig


def _draw_times(ax: Any, rows: Sequence[Mapping[str, Any]], learners: list[int]) -> None:
    """Per learner its measured (o) and predicted (x) compute time over the rounds; late
    replies ringed in red, missing and ignored learners marked at their predicted time (0
    where the learner plans its own work), each round's count of them written above it."""
    for k in learners:
        mine = [r for r in rows if int(r["learner"]) == k and r.get("compute_measured_s")]
        if not mine:
            continue
        rounds = [int(r["round"]) for r in mine]
        name = mine[0].get("name", k)
        line = ax.plot(rounds, [r["compute_measured_s"] for r in mine], "o-", lw=1.2,
                       ms=3, label=f"{name} measured")[0]
        ax.plot(rounds, [r["compute_predicted_s"] for r in mine], "x--", lw=0.8,
                color=line.get_color(), label=f"{name} predicted")
    style = {"late": {"marker": "o", "facecolors": "none", "edgecolors": "tab:red", "s": 60},
             "missing": {"marker": "X", "color": "tab:red", "s": 40},
             "ignored": {"marker": "X", "color": "tab:gray", "s": 40}}
    for status in MARKED:
        hit = [r for r in rows if r.get("status") == status]
        if hit:
            ys = [(r.get("compute_measured_s") if status == "late" else None)
                  or r.get("compute_predicted_s") or 0.0 for r in hit]
            ax.scatter([int(r["round"]) for r in hit], ys, zorder=3, label=status,
                       **style[status])
    for r, counts in round_counts(rows).items():
        text = ", ".join(f"{counts[s]} {s}" for s in MARKED if counts.get(s))
        if text:
            ax.annotate(text, xy=(r, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(0, 2), textcoords="offset points", ha="center",
                        va="bottom", fontsize=6, color="tab:red")
    _round_ticks(ax, sorted({int(r["round"]) for r in rows}))
    ax.set_xlabel("round")
    ax.set_ylabel("compute time [s]")
    ax.set_title("predicted (x) and measured (o) per learner", fontsize=9, pad=12)


def _round_ticks(ax: Any, rounds: list[int]) -> None:
    """Whole rounds on the x axis: every round up to :data:`EVERY_ROUND_TICKS` of them (the
    default locator puts 0.96, 0.98, ... around a single round), whole numbers beyond."""
    from matplotlib.ticker import MaxNLocator

    if not rounds:
        return
    lo, hi = rounds[0], rounds[-1]
    if hi - lo < EVERY_ROUND_TICKS:
        ax.set_xticks(range(lo, hi + 1))
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(lo - 0.5, hi + 0.5)


def _draw_accuracy(ax: Any, summary: Mapping[str, Any]) -> None:
    """Validation accuracy against wall time (each task's, where there are several), with the
    numbers the problem's cycle declares (adaptive-tau: the tau of each round) on a second
    axis."""
    done = [r for r in summary.get("rounds", []) if r.get("wall_s") is not None]
    walls = [r["wall_s"] for r in done]
    tasks = done[0].get("tasks") if done else None
    if tasks:  # one model per task (med): each task's accuracy
        for t, task in enumerate(tasks):
            ax.plot(walls, [r["tasks"][t]["accuracy"] for r in done], "o-", lw=1.2,
                    ms=3, label=f"task {task['task']}")
        ax.legend(fontsize=7)
    else:
        ax.plot(walls, [r["accuracy"] for r in done], "o-", lw=1.4)
    for key, label in dict(summary.get("plotted") or {}).items():
        traced = [(r["wall_s"], r["control"][key]) for r in done
                  if key in (r.get("control") or {})]
        if traced:
            twin = ax.twinx()
            twin.step([w for w, _ in traced], [v for _, v in traced], where="pre",
                      color="tab:gray", lw=1.0)
            twin.set_ylabel(f"{label} (grey)")
    ax.set_xlabel("wall time [s]")
    ax.set_ylabel("validation accuracy")
