"""The common part of the catalogue's learning entries: a real model trained under each
allocation.

The entries live with their papers, each module holding the runs (the paper's experiment, its
constants, the training emulator driven over the paper's set-up), the claims that judge their
rows and the figure:

- :mod:`~mel_opt.reproduce.paper000_training`: ``000-fig3``, paper 000, Fig. 3: cycles to 95% /
  97% accuracy, K = 10, 15, 20;
- :mod:`~mel_opt.reproduce.paper004_training`: ``004-table2`` (Table II: accuracy and speedup
  against individual learning), ``004-fig4-5-training`` (Figs. 4-5: the proposed batches on
  GPU devices), ``004-fig3`` (Fig. 3: the proposed scheme across DNNs and learning rates);
- :mod:`~mel_opt.reproduce.thesis001_ch3_training`: ``001-fig3.6-3.8-training`` (Figs.
  3.6-3.8: DAB against CSA over deadlines) and ``001-fig3.4-3.5`` (Figs. 3.4-3.5: DAB against
  CSA over the global update index).

A run is a function ``run(out_dir=None, seeds=..., quick=False, ..., dataset="digits",
data=None) -> ExperimentOutcome``: flat rows with our numbers next to the paper's (an interval
as ``x``, ``x_lo``, ``x_hi``), and the figures written when an output directory is given.
The entry holds the function itself (:func:`computed`), so a renamed run fails at import.
Our data (scikit-learn's 8 x 8 digits by default), models and virtual clocks differ from the
papers' testbeds; choices made once, not tuned to the papers: SGD with learning rate 0.1, local
minibatches of 32, the instance generators' own presets. The entries need the ``training``
extra (scikit-learn for the digits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mel_opt import api
from mel_opt.problems import get_problem
from mel_opt.reproduce.catalogue import Computed, Context, Row
from mel_opt.reproduce.figures import Line, Panel
from mel_opt.training.data import Dataset, load_dataset
from mel_opt.training.report import summarise, write_outputs
from mel_opt.training.run import TrainRun

NEEDS = ("train", "plot")
SLACK = 0.005  # accuracy differences below half a point are read as "no worse"


@dataclass
class ExperimentOutcome:
    """What one paper experiment produced.

    Attributes
    ----------
    name : str
    rows : list of dict
        Our numbers beside the paper's (``paper_*`` columns hold the paper's, None where the
        paper gives none); flat: an interval is ``x`` (mean), ``x_lo`` and ``x_hi``.
    figures : list of Path
        Written only when the experiment was given an output directory.
    wall_s : float
        Wall time of the experiment [s].
    """

    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    wall_s: float = 0.0


#: A paper's learning experiment: ``run(out_dir, seeds=, quick=, dataset=, ...)``.
Experiment = Callable[..., ExperimentOutcome]


def run_experiment(experiment: Experiment, ctx: Context, full: int, quick: int) -> Computed:
    """The rows of ``experiment`` run as ``ctx`` says (seeds: ``full`` or ``quick`` unless
    given) and a note on the seeds, the data and the wall time."""
    seeds = ctx.trials(full=full, quick=quick)
    dataset = ctx.training_data()
    out = experiment(None, seeds=seeds, quick=ctx.quick, dataset=dataset, device=ctx.device)
    if dataset == "digits":
        what = "digits (scikit-learn, 8 x 8{})".format(
            "; Fashion-MNIST is not installed" if ctx.dataset is None else "")
    else:
        what = dataset + (f" (quick: {QUICK_TRAIN:,} training and {QUICK_TEST:,} validation "
                          "images of it)" if ctx.quick else "")
    on = "" if ctx.device == "cpu" else f" on {ctx.device}"
    return out.rows, [f"{seeds} seed(s) per scheme; data: {what}; experiment "
                      f"{out.wall_s:.1f} s wall{on}"]


def computed(experiment: Experiment, full: int, quick: int) -> Callable[[Context], Computed]:
    """An entry's ``compute``: :func:`run_experiment` of this very function."""
    return lambda ctx: run_experiment(experiment, ctx, full, quick)


def generated_instance(problem: str, preset: str | None, K: int | None, seed: int,
                       params: dict[str, str] | None = None) -> Any:
    """The instance ``problem``'s generator makes from ``preset`` with K learners and ``seed``
    (``params``: its ``--param`` overrides)."""
    gen = get_problem(problem).generate
    assert gen is not None  # mel-async and feel both declare a generator
    doc = gen(preset, learners=K, seed=seed, params=params or {})
    return api.parse_instance(doc)


#: Training and validation images a quick (smoke) run keeps of a large data set: it checks that
#: the path runs on the data, its verdicts are indicative only (the digits are smaller: whole).
QUICK_TRAIN, QUICK_TEST = 6_000, 2_000


def experiment_data(dataset: str, data: Dataset | None, quick: bool = False) -> Dataset:
    """``data`` when given (tests pass a small one), else the data set named ``dataset``;
    ``quick``: a fixed subset of at most :data:`QUICK_TRAIN` / :data:`QUICK_TEST` images."""
    if data is not None:
        return data
    if quick:
        return load_dataset(dataset, max_train=QUICK_TRAIN, max_test=QUICK_TEST)
    return load_dataset(dataset)


def save_run(run: TrainRun, out: Path | None, outcome: ExperimentOutcome) -> dict[str, Any]:
    """The run's summary; with a directory, also its files (figure listed in ``outcome``)."""
    if out is None:
        return summarise(run)
    summary = write_outputs(run, out)
    if summary["figure"]:
        outcome.figures.append(out / summary["figure"])
    return summary


def out_subdir(out_dir: str | Path | None, name: str) -> Path | None:
    """``out_dir / name``, or None (no files) without an output directory."""
    return None if out_dir is None else Path(out_dir) / name


def judged_rows(rows: Sequence[Row]) -> list[Row]:
    """The judged rows (the learning-curve rows, ``part = "curve"``, only feed the figure)."""
    return [r for r in rows if r.get("part") != "curve"]


def time_panels(rows: Sequence[Row], keys: Sequence[str], schemes: Sequence[str],
                title: Callable[[Row], str]) -> list[Panel]:
    """One panel per value of ``keys`` among the curve rows: each scheme's mean accuracy
    against virtual time, with the case's target dashed (reached or not)."""
    curves = [r for r in rows if r.get("part") == "curve"]
    panels = []
    for case in sorted({tuple(r[k] for k in keys) for r in curves}, key=str):
        mine = [r for r in curves if tuple(r[k] for k in keys) == case]
        panel = Panel(title(mine[0]), "virtual time [s], log scale", "accuracy", xlog=True)
        for s in schemes:
            pts = sorted((r["time_s"], r["curve_accuracy"]) for r in mine if r["scheme"] == s)
            if pts:
                panel.lines.append(Line(s, [p[0] for p in pts], [p[1] for p in pts]))
        target = next((r.get("target") for r in rows if r.get("part") != "curve"
                       and all(r.get(k) == v for k, v in zip(keys, case, strict=True))
                       and r.get("target") is not None), None)
        if target is not None:
            first = min((r["time_s"] for r in mine if r["time_s"] > 0), default=1.0)
            last = max(r["time_s"] for r in mine)
            panel.lines.append(Line(f"target {target:.1%}", [first, last], [target, target],
                                    dashed=True))
        panels.append(panel)
    return panels


def sooner(a: float | None, b: float | None) -> bool:
    """a < b, where None (target never reached) is later than any number."""
    if a is None:
        return False
    return b is None or a < b
