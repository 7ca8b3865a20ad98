"""``melopt arena --tune``: the same tuning budget for every scheme, each picked on a validation
split, all judged on the test split.

A comparison against baselines run at their defaults is not a fair one: FedProx's authors tune
mu per data set, FedBuff's the client and server learning rates, and participation and the
local work decide what deadline dropping and Oort achieve. With ``tune`` the arena first tunes
every scheme it runs, mel_opt's allocation included, with the same budget:

1. **Grid.** Every scheme declares one grid (:attr:`~mel_opt.schemes.base.SchemeSpec.grid`:
   arena option -> values, each value's reason beside its declaration); its points are the
   grid's product. An option the user fixes for a scheme (``--set SCHEME.OPTION=VALUE``) is
   left out of that scheme's grid and keeps its value.
2. **Trials.** Each scheme gets ``trials`` points of its grid, drawn without replacement by a
   generator seeded with the CRC-32 of the scheme's name (:func:`draw`): the same points every
   run, whatever else runs (more trials keep the fewer's first). A grid with fewer points
   than ``trials`` is refused (a :class:`~mel_opt.errors.SettingError` naming the scheme,
   exit 2), so no scheme gets fewer.
3. **Tuning runs.** Each trial runs on ``tune_seeds`` seeds of its own (:func:`tuning_seeds`:
   from 1000, never an evaluation seed), with a validation split held out of the training
   samples (``validation``; by default the test split's size, at most a sixth of the training
   samples: :func:`default_validation`). Trial i of every scheme runs in one
   :func:`~mel_opt.arena.run.arena` call whose ``per_scheme`` holds each scheme's i-th values:
   a (scheme, seed) run reads only its own scheme's settings, so that is each scheme's own run
   with its values, and the problem's methods are solved once per trial.
4. **Score** (:func:`score`): per tuning seed, the *time-averaged validation accuracy*: the
   accuracy on the validation split, held constant between aggregations (the model the server
   holds), integrated over [0, horizon] and divided by the horizon; a trial's score is its
   mean over the tuning seeds. It rewards reaching accuracy early (the time to a target is
   what the arena reports) and ending high, and it never reads the test split. The best trial
   per scheme is chosen (ties: the earlier trial).
5. **Evaluation.** One arena call runs every scheme on the evaluation seeds (``first_seed``
   .. ``first_seed + seeds - 1``) with ``per_scheme`` holding the user's values and every
   scheme's chosen ones, so the report is the usual one (times to target on the test split,
   paired differences against the allocation); its ``tuning`` (summary.json's) records per
   scheme the grid, the fixed values, every trial's values and score, the chosen values,
   those at their grid's edge (:func:`edges`: the best may lie beyond) and the metric, and
   ``tuning_rows`` every trial's rows (``tuning.csv``).

A tuned arena costs ``trials x tune_seeds + seeds`` runs per scheme instead of ``seeds``: with
the defaults (8 x 2 + 10) 2.6 times an untuned one.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mel_opt import api, units
from mel_opt.arena.run import ArenaRun, _check, arena, arena_data, execution, plan, scheme_of
from mel_opt.arena.settings import ArenaSettings
from mel_opt.errors import SettingError
from mel_opt.problems import get_problem
from mel_opt.problems.base import Instance
from mel_opt.training.data import Dataset, load_dataset

__all__ = ["METRIC", "TUNE_FIRST_SEED", "default_validation", "draw", "edges", "points",
           "score", "tuned", "tuning_seeds"]

#: The first tuning seed (evaluation seeds start at ``first_seed``, 0 by default).
TUNE_FIRST_SEED = 1000
#: What a trial's score is (module docstring, 4).
METRIC = ("time-averaged validation accuracy: val_accuracy held between aggregations, "
          "integrated over [0, horizon] and divided by the horizon; mean over the tuning seeds")


def edges(grid: Mapping[str, tuple[Any, ...]], chosen: Mapping[str, Any]) -> dict[str, str]:
    """The chosen values that lie at their numeric grid's edge: option -> ``lowest`` or
    ``highest`` (the grid's least or greatest number, of at least two; ``None``, "the
    default", is not a number). Where tuning picks an edge, the best value may lie beyond
    the grid, and the report says so.

    >>> edges({"lr": (0.03, 0.1, 0.3), "groups": (5, None, 20), "mu": (0.1,)},
    ...       {"lr": 0.03, "groups": None, "mu": 0.1})
    {'lr': 'lowest'}
    >>> edges({"period": (0.0625, 0.125, 1.0)}, {"period": 1.0})
    {'period': 'highest'}
    """
    out: dict[str, str] = {}
    for name, value in chosen.items():
        numbers = [v for v in grid.get(name, ()) if isinstance(v, (int, float))
                   and not isinstance(v, bool)]
        if len(set(numbers)) < 2 or not isinstance(value, (int, float)) or \
                isinstance(value, bool):
            continue
        if value == min(numbers):
            out[name] = "lowest"
        elif value == max(numbers):
            out[name] = "highest"
    return out


def points(grid: Mapping[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """The grid's product, in order: the last option varies fastest.

    >>> points({"lr": (0.1, 0.3), "mu": (0.01, 1.0)})
    ... # doctest: +NORMALIZE_WHITESPACE
    [{'lr': 0.1, 'mu': 0.01}, {'lr': 0.1, 'mu': 1.0}, {'lr': 0.3, 'mu': 0.01},
     {'lr': 0.3, 'mu': 1.0}]
    """
    names = list(grid)
    return [dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(grid[n] for n in names))]


def draw(scheme: str, grid: Mapping[str, tuple[Any, ...]], trials: int,
         fixed: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """``trials`` points of ``grid`` for ``scheme``, without replacement: the first of a
    permutation of its points by a generator seeded with the CRC-32 of the scheme's name
    (the same every run; more trials keep the fewer's first); ``fixed``: the options the
    user set for it (only named in the refusal).

    Raises
    ------
    SettingError
        (``trials``) The grid has fewer points than ``trials``.
    """
    every = points(grid)
    if len(every) < trials:
        why = (f" once {', '.join(sorted(fixed))} {'is' if len(fixed) == 1 else 'are'} fixed "
               "by --set" if fixed else "")
        raise SettingError("trials", ArenaSettings.setting("trials").flag,
                           f"{scheme}'s grid has {len(every)} point"
                           f"{'' if len(every) == 1 else 's'}{why}, fewer than the {trials} "
                           "trials every scheme gets", ": ")
    rng = np.random.default_rng(zlib.crc32(scheme.encode()))
    return [every[int(i)] for i in rng.permutation(len(every))[:trials]]


def score(rows: list[dict[str, Any]], horizon: float, column: str = "val_accuracy") -> float:
    """The time average of ``column`` over [0, ``horizon``]: each row's value held until the
    next row's time (the first row's before it, the last row's until the horizon),
    integrated and divided by the horizon. Rewards reaching accuracy early and ending high.

    >>> score([{"time_s": 0.0, "val_accuracy": 0.5}, {"time_s": 5.0, "val_accuracy": 0.8}],
    ...       10.0)
    0.65
    """
    if not horizon > 0:
        raise ValueError(f"the horizon must be > 0, got {horizon}")
    if not rows:
        raise ValueError("no rows to score")
    ordered = sorted(rows, key=lambda r: float(r["time_s"]))
    if any(r.get(column) is None for r in ordered):
        raise ValueError(f"a row lacks {column} (tuning needs a validation split)")
    t = np.clip([float(r["time_s"]) for r in ordered], 0.0, horizon)
    v = np.array([float(r[column]) for r in ordered])
    widths = np.diff(np.append(t, horizon))
    widths[0] += t[0]  # before the first row: its value
    return float(np.dot(v, widths) / horizon)


def tuning_seeds(s: ArenaSettings) -> range:
    """The tuning seeds: ``tune_seeds`` of them from :data:`TUNE_FIRST_SEED`, or from past the
    evaluation seeds where those reach it (never an evaluation seed)."""
    start = max(TUNE_FIRST_SEED, s.first_seed + s.seeds)
    return range(start, start + s.tune_seeds)


def default_validation(ds: Dataset) -> int:
    """The validation split when tuning leaves it unset: the test split's size, at most a
    sixth of the training samples (at least 1)."""
    return max(1, min(int(ds.y_test.size), int(ds.y_train.size) // 6))


def _item(scheme: str, option: str, value: Any) -> str:
    """One ``per_scheme`` entry (``none``: a nullable option's default rule)."""
    text = "none" if value is None else repr(value) if isinstance(value, float) else str(value)
    return f"{scheme}.{option}={text}"


def _no_test_split(ds: Dataset) -> Dataset:
    """``ds`` without its test split: a trial is scored on the validation split only, so it is
    not even shown the test split (nor spends its time evaluating the model there at every
    step; its rows' test loss and accuracy are NaN)."""
    return dataclasses.replace(ds, x_test=ds.x_test[:0], y_test=ds.y_test[:0])


def tuned(inst: Instance, settings: ArenaSettings, *, data: Dataset | None = None,
          progress: Callable[[int, int], None] | None = None) -> ArenaRun:
    """Tune every scheme of ``settings``, then run the chosen values on the evaluation seeds
    (module docstring); what :func:`~mel_opt.arena.run.arena` returns when ``tune`` is set.

    The run returned is the evaluation's (its ``settings`` have ``tune`` set, the validation
    split resolved and ``per_scheme`` holding the chosen values), with ``tuning`` and
    ``tuning_rows`` filled in. ``progress(done, total)`` counts every trial's runs and the
    evaluation's.

    Raises
    ------
    SettingError
        A grid with fewer points than ``trials`` (naming the scheme), or any setting
        :func:`~mel_opt.arena.run.arena` refuses.
    """
    problem = api.problem_of(inst)
    schemes = _check(problem, settings)
    user = settings.overrides()
    plans: dict[str, list[dict[str, Any]]] = {}
    grids: dict[str, dict[str, tuple[Any, ...]]] = {}
    for scheme in schemes:
        fixed = user.get(scheme, {})
        grids[scheme] = {k: tuple(v) for k, v in scheme_of(problem, scheme).grid.items()
                         if k not in fixed}
        plans[scheme] = draw(scheme, grids[scheme], settings.trials, fixed)
    ds = data if data is not None else load_dataset(
        settings.dataset, max_train=settings.max_train, max_test=settings.max_test)
    validation = (settings.validation if settings.validation is not None
                  else default_validation(ds))
    own = tuple(settings.per_scheme or ())
    seeds = tuning_seeds(settings)
    base = dataclasses.replace(settings, tune=False, validation=validation,
                               first_seed=seeds.start, seeds=len(seeds))
    per_trial = len(schemes) * len(seeds)
    total = settings.trials * per_trial + len(schemes) * settings.seeds
    # every trial's runs are units of one list: they run together, on as many workers as
    # the command has, and a rerun skips the ones kept
    held, split = arena_data(base, ds)
    held = _no_test_split(held)
    shared = (inst, get_problem(problem).learning, held, split)
    trials = [plan(inst, dataclasses.replace(
        base, per_scheme=own + tuple(_item(s, k, v) for s in schemes
                                     for k, v in plans[s][i].items()) or None),
        held, split) for i in range(settings.trials)]
    everything = [u for t in trials for u in t.units]
    results = units.run_units(everything, shared,
                              execution(len(everything), progress, 0, total,
                                        settings.device))
    scores: dict[str, list[float | None]] = {s: [] for s in schemes}
    rows: list[dict[str, Any]] = []
    at = 0
    for i, planned in enumerate(trials):
        trial = planned.fill(results[at:at + len(planned.units)])
        at += len(planned.units)
        by_run: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(
            lambda: defaultdict(list))
        for r in trial.rows:
            by_run[r["scheme"]][r["seed"]].append(r)
            rows.append({"trial": i, **r})
        for s in schemes:
            runs = by_run.get(s)
            scores[s].append(None if not runs else float(np.mean(
                [score(rs, trial.horizon_s) for rs in runs.values()])))
    done = len(everything)

    def counted(d: int, n: int) -> None:
        if progress is not None:
            progress(done + d, total)

    chosen: dict[str, dict[str, Any]] = {}
    best: dict[str, float | None] = {}
    for s in schemes:
        ran = [(v, j) for j, v in enumerate(scores[s]) if v is not None]
        pick = max(ran, key=lambda p: (p[0], -p[1])) if ran else None
        chosen[s] = dict(plans[s][pick[1]]) if pick else {}
        best[s] = pick[0] if pick else None
    final = dataclasses.replace(
        settings, tune=False, validation=validation,
        per_scheme=own + tuple(_item(s, k, v) for s in schemes for k, v in chosen[s].items())
        or None)
    out = arena(inst, final, data=ds, progress=counted)
    if progress is not None:
        progress(total, total)
    out.settings = dataclasses.replace(final, tune=True)
    metric = f"{METRIC} ({', '.join(map(str, seeds))}), horizon {out.horizon_s:g} s"
    out.tuning = {s: {"grid": {k: list(v) for k, v in grids[s].items()},
                      "fixed": dict(user.get(s, {})),
                      "trials": [{"values": dict(p), "score": sc}
                                 for p, sc in zip(plans[s], scores[s], strict=True)],
                      "chosen": chosen[s], "edges": edges(grids[s], chosen[s]),
                      "score": best[s], "seeds": list(seeds), "metric": metric}
                  for s in schemes}
    out.tuning_rows = rows
    return out
