"""What an arena reports: times to each target as censored data, paired differences against
mel_opt's allocation, a winner only where the data carry one, accuracy on a common time grid,
and the resources each scheme spent.

Every statistic below is over the seeds; seed i of every scheme shares the population, the
partition and the model start, so the schemes are compared seed by seed. ``LEVEL`` is 0.95.

- **Time to a target** (``schemes[s]["targets"][t]``). A seed's time is the virtual time of
  its first aggregation (after the start) whose accuracy reaches the target; a seed that
  never reaches it within the horizon is *censored at the horizon* (it needed more than the
  horizon, how much more is unknown). ``reached`` is ``"k/n"``; ``seconds`` is, as before, the
  mean and Student-t interval over the k seeds that reached it (kept for callers; it ignores
  the others). ``median`` is the median of the Kaplan-Meier estimate over all n seeds
  (:func:`mel_opt.stats.kaplan_meier`) with its 95 % Brookmeyer-Crowley interval read from
  the log-log band (:func:`mel_opt.stats.km_median`): ``seconds`` None where the median is not
  reached (the estimate stays above 1/2: "> horizon"), ``lo``/``hi`` None where the band never
  falls to 1/2 within the data (not bounded). ``km`` holds the estimate's steps.
- **Paired difference against the allocation** (``targets[t]["paired"]``). The reference is
  the first scheme run that is a method of the problem (``summary["reference"]``); it gets
  None, every other scheme, per seed both ran, its time minus the reference's. A seed where
  both are censored carries no information and is left out (``both_censored``); where one is
  (``one_censored``) its time is set to the horizon, which keeps the difference's sign and
  pulls its size toward 0 (the true difference is larger). ``median`` and its 95 % interval
  are the sign test's, between two order statistics (:func:`mel_opt.stats.sign_interval`,
  exact binomial coverage, no assumption on the distribution): ``lo``/``hi`` None where the n
  pairs are too few (fewer than 6 at 95 %). Why this is conservative: whether the interval
  excludes 0 depends only on how many differences lie on each side of 0; setting a censored
  time to the horizon never changes a difference's side (it can only make one 0, when the
  other time is the horizon itself, which makes excluding 0 harder), and when the interval
  excludes 0 its end nearest 0 understates the true one.
- **Every pair** (``pairs[t]``): the same paired difference for every two schemes run, the
  earlier in the run's order minus the later (``{"scheme", "against", ...}``, a list in
  that order), so that two of the field's schemes, or a new scheme and a tuned baseline, are
  compared as the allocation is.
- **Winner** (``winners[t]``, ``verdicts[t]``). The candidate is the scheme with the least
  Kaplan-Meier median (ties: the least mean time, censored times as the horizon); it wins
  only if its paired interval against *every* other scheme (the same sign-test interval, the
  candidate's time minus the other's) lies below 0. Otherwise ``winners[t]`` is None and
  ``verdicts[t]`` says why: no scheme reaches the target, none does on more than half its
  seeds, or the interval against some scheme includes 0 or is unbounded (too few seeds).
- **Accuracy on a common time grid** (``schemes[s]["curve"]``, ``curve.csv``). Each seed's
  accuracy is held constant between its aggregations (the model the server holds at that
  time) and read at t = c x budget, c = 1 .. cycles (budget = horizon / cycles; an
  aggregation at a grid time counts); the mean and Student-t interval over seeds at every
  point. ``horizon_accuracy`` is the last point: the same time for every scheme, the fair
  final accuracy. ``final_accuracy`` (each run's last aggregation within the horizon) stays.
- **Resources**: the mean and Student-t interval over seeds of each run's final cumulative
  ``bytes`` (model bytes moved), ``idle_s`` and ``busy_s`` (learner-seconds idle and busy),
  ``updates`` (sample-updates), ``stragglers`` (learner-rounds past the round's budget),
  ``dropped`` (updates trained and not aggregated) and ``final_val_accuracy`` (accuracy on the
  validation split): each of the last five only where the rows carry it.
- **Tuning** (``tuning``, ``tuning.csv``; with ``--tune``, :mod:`mel_opt.arena.tune`): per
  scheme its grid, the values the user fixed, every trial's values and score (the
  time-averaged validation accuracy on the tuning seeds), the values chosen and the metric;
  everything above is then the chosen values' runs on the evaluation seeds, on the test
  split. ``tuning.csv`` holds every trial's rows (:data:`TUNING_COLUMNS`). None untuned.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from mel_opt import api
from mel_opt.arena.run import ArenaRun
from mel_opt.io import atomic_write
from mel_opt.io.csvsafe import csv_text as safe_csv_text
from mel_opt.stats import band, kaplan_meier, km_band, km_median, sign_interval
from mel_opt.training.report import interval

__all__ = ["CSV_COLUMNS", "CURVE_COLUMNS", "LEVEL", "OPTIONAL_COLUMNS", "RESOURCES",
           "TUNING_COLUMNS", "csv_text", "curve_csv_text", "held_at", "paired", "pairs_needed",
           "reference_of", "summarise", "target_times", "time_to", "tuning_csv_text", "verdict",
           "write_outputs"]

CSV_COLUMNS = ("scheme", "seed", "step", "time_s", "loss", "accuracy", "bytes", "idle_s")
#: Columns a run's rows may carry beside :data:`CSV_COLUMNS`; written and reported where present.
OPTIONAL_COLUMNS = ("busy_s", "updates", "stragglers", "dropped", "clipped", "kept",
                    "val_accuracy", "period_s")
#: summary key -> row column of each run's final resources (the first two always present).
RESOURCES = {"bytes": "bytes", "idle_s": "idle_s", "busy_s": "busy_s", "updates": "updates",
             "stragglers": "stragglers", "dropped": "dropped", "clipped": "clipped",
             "kept_previous": "kept", "final_val_accuracy": "val_accuracy",
             "period_s": "period_s"}
CURVE_COLUMNS = ("scheme", "time_s", "accuracy_mean", "accuracy_lo", "accuracy_hi", "seeds")
#: ``tuning.csv``'s columns: every tuning trial's rows (validation accuracy only: the test
#: split is not read to tune).
TUNING_COLUMNS = ("scheme", "trial", "seed", "step", "time_s", "val_accuracy")
LEVEL = 0.95
METHODS = {
    "time_to_target": "first aggregation reaching the target; a seed that never does is "
                      "censored at the horizon",
    "median": "Kaplan-Meier median, 95 % Brookmeyer-Crowley interval from the log-log band; "
              "null seconds: not reached (> horizon); null lo/hi: not bounded by the data",
    "paired": "per seed, scheme minus reference (censored time = horizon; both censored: "
              "left out); median and 95 % sign-test interval between order statistics; "
              "null lo/hi: too few pairs",
    "winner": "least KM median, and its paired 95 % interval against every other scheme "
              "below 0; else none",
    "curve": "accuracy held between aggregations, read at c x budget (c = 1 .. cycles); mean "
             "and 95 % Student-t interval over seeds",
}

Times = dict[int, tuple[float, bool]]


def _by_run(run: ArenaRun) -> dict[str, dict[int, list[dict[str, Any]]]]:
    out: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in run.rows:
        out[r["scheme"]][r["seed"]].append(r)
    return out


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def time_to(rows: list[dict[str, Any]], target: float) -> float | None:
    """Virtual time of the first row (after the start) whose accuracy reaches ``target``."""
    hit = next((r for r in rows if r["step"] > 0 and r["accuracy"] >= target), None)
    return None if hit is None else float(hit["time_s"])


def target_times(seeds: dict[int, list[dict[str, Any]]], target: float,
                 horizon: float) -> Times:
    """Per seed, (time, reached): the time :func:`time_to` gives, or (horizon, False)."""
    out: Times = {}
    for seed, rows in seeds.items():
        t = time_to(rows, target)
        out[seed] = (horizon, False) if t is None else (t, True)
    return out


def reference_of(run: ArenaRun) -> str | None:
    """The allocation the others are compared with: the first scheme run that is a method of
    the problem (None if none ran)."""
    methods = set(api.methods(run.problem)[run.problem])
    return next((s for s in run.ran if s in methods), None)


def paired(a: Times, b: Times, level: float = LEVEL) -> dict[str, Any]:
    """``a``'s time minus ``b``'s, per seed both ran (module docstring): ``{"n", "median",
    "lo", "hi", "coverage", "one_censored", "both_censored"}``, None where undefined.

    >>> p = paired({0: (3.0, True), 1: (5.0, True), 2: (9.0, False)},
    ...            {0: (4.0, True), 1: (9.0, False), 2: (9.0, False)})
    >>> p["n"], p["median"], p["lo"], p["one_censored"], p["both_censored"]
    (2, -2.5, None, 1, 1)
    """
    diffs, one, both = [], 0, 0
    for seed in sorted(a.keys() & b.keys()):
        (ta, ra), (tb, rb) = a[seed], b[seed]
        if not (ra or rb):
            both += 1
            continue
        one += ra != rb
        diffs.append(ta - tb)
    iv = sign_interval(diffs, level)
    return {"n": iv.n, "median": _finite(iv.median), "lo": _finite(iv.low),
            "hi": _finite(iv.high), "coverage": iv.coverage if iv.rank else None,
            "one_censored": one, "both_censored": both}


def _target_entry(times: Times) -> dict[str, Any]:
    reached = [t for t, r in times.values() if r]
    km = kaplan_meier([t for t, _ in times.values()], [r for _, r in times.values()])
    med = km_median(km, LEVEL)
    low, high = km_band(km, LEVEL)
    return {
        "reached": f"{len(reached)}/{len(times)}",
        "seconds": interval(reached),
        "median": {"seconds": _finite(med.median), "lo": _finite(med.low),
                   "hi": _finite(med.high)},
        "km": {"time_s": list(km.time), "at_risk": list(km.at_risk),
               "reached": list(km.events), "survival": list(km.survival),
               "lo": [_finite(v) for v in low], "hi": [_finite(v) for v in high]},
    }


def held_at(rows: list[dict[str, Any]], grid: np.ndarray, column: str = "accuracy") -> np.ndarray:
    """``column`` of the last row at or before each grid time (the first row's before it); an
    aggregation within 1e-9 of the horizon's scale after a grid time counts at it (the clock's
    sums and the grid's products round differently).

    >>> rows = [{"time_s": 0.0, "accuracy": 0.1}, {"time_s": 15.0, "accuracy": 0.5},
    ...         {"time_s": 40.0, "accuracy": 0.7}]
    >>> held_at(rows, np.array([15.0, 30.0, 45.0])).tolist()
    [0.5, 0.5, 0.7]
    """
    ordered = sorted(rows, key=lambda r: r["time_s"])
    t = np.array([float(r["time_s"]) for r in ordered])
    v = np.array([float(r[column]) for r in ordered])
    eps = 1e-9 * max(1.0, float(grid[-1]) if grid.size else 1.0)
    return np.asarray(v[np.clip(np.searchsorted(t, grid + eps, side="right") - 1, 0, None)])


def _grid(run: ArenaRun) -> np.ndarray:
    cycles = run.settings.cycles
    return np.array([run.horizon_s * c / cycles for c in range(1, cycles + 1)])


def _curve(seeds: dict[int, list[dict[str, Any]]], grid: np.ndarray) -> dict[str, Any]:
    acc = np.array([held_at(rows, grid) for rows in seeds.values()]).reshape(-1, grid.size)
    return {"time_s": grid.tolist(), "accuracy": [interval(acc[:, i].tolist())
                                                  for i in range(grid.size)]}


def _resources(last: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, col in RESOURCES.items():
        vals = [float(r[col]) for r in last if r.get(col) is not None]
        if vals or key in ("bytes", "idle_s"):
            out[key] = interval(vals)
    return out


def _fmt(v: float | None) -> str:
    return "-inf" if v is None else f"{v:+.4g}"


def pairs_needed(level: float = LEVEL) -> int:
    """The fewest pairs whose sign interval at ``level`` is bounded (6 at 95 %).

    >>> pairs_needed(0.95), pairs_needed(0.99)
    (6, 8)
    """
    n = 1
    while sign_interval(range(n), level).rank == 0:
        n += 1
    return n


def verdict(times: dict[str, Times], medians: dict[str, float | None], horizon: float,
            level: float = LEVEL) -> tuple[str | None, str]:
    """The winner of one target (or None) and the sentence why (module docstring).

    ``times``: per scheme (in the run's order), its seeds' (time, reached); ``medians``: its
    Kaplan-Meier median (None: not reached).
    """
    if not any(r for per in times.values() for _, r in per.values()):
        return None, f"no scheme reaches it within the horizon ({horizon:g} s)"
    order = list(times)
    candidates = [s for s in order if medians.get(s) is not None]
    if not candidates:
        return None, ("no clear winner: no scheme reaches it on more than half its seeds "
                      f"within the horizon ({horizon:g} s)")

    def key(s: str) -> tuple[float, float, int]:
        ts = [t for t, _ in times[s].values()]
        return float(medians[s] or 0.0), float(np.mean(ts)), order.index(s)

    best = min(candidates, key=key)
    m = medians[best]
    if len(order) == 1:
        return best, f"{best} wins: the only scheme run (median {m:.4g} s)"
    fails, passes = [], []
    unbounded: dict[int, list[str]] = defaultdict(list)  # pairs -> schemes, said once
    for other in order:
        if other == best:
            continue
        p = paired(times[best], times[other], level)
        iv = (f"{_fmt(p['median'])} s [{_fmt(p['lo'])}, "
              f"{'+inf' if p['hi'] is None else _fmt(p['hi'])}] over {p['n']} seeds")
        if p["n"] == 0:
            fails.append(f"{other} (no seed where either reaches it)")
        elif p["hi"] is None:
            unbounded[p["n"]].append(other)
        elif p["hi"] >= 0:
            fails.append(f"{other} ({iv} includes 0)")
        else:
            passes.append(f"{other} {iv}")
    too_few = {n: (f"{n} paired seed{'' if n == 1 else 's'} {'is' if n == 1 else 'are'} too "
                   f"few for a {level:.0%} sign interval ({pairs_needed(level)} needed)")
               for n in unbounded}
    if not fails and len(unbounded) == 1:  # one reason for every other scheme: said once
        n = next(iter(unbounded))
        return None, (f"no clear winner: {best} has the least median ({m:.4g} s), but "
                      f"{too_few[n]}" + ("" if len(unbounded[n]) == len(order) - 1 else
                                         f" against {', '.join(unbounded[n])}"))
    fails += [f"{', '.join(names)} (unbounded: {too_few[n]})" for n, names in unbounded.items()]
    if fails:
        return None, (f"no clear winner: {best} has the least median ({m:.4g} s) but its "
                      f"paired {level:.0%} interval does not exclude 0 against "
                      + "; ".join(fails))
    return best, (f"{best} wins: median {m:.4g} s, and its paired {level:.0%} interval "
                  f"excludes 0 against every other scheme ({best} minus " + "; ".join(passes)
                  + ")")


def summarise(run: ArenaRun) -> dict[str, Any]:
    """The content of ``summary.json`` (module docstring)."""
    runs = _by_run(run)
    grid = _grid(run)
    ref = reference_of(run)
    keys = {f"{t:g}": t for t in run.settings.targets}
    times = {k: {s: target_times(runs[s], t, run.horizon_s) for s in run.ran}
             for k, t in keys.items()}
    schemes: dict[str, Any] = {}
    for scheme in run.ran:
        seeds = runs[scheme]
        entry: dict[str, Any] = {"targets": {}}
        for k in keys:
            e = _target_entry(times[k][scheme])
            e["paired"] = (None if ref is None or scheme == ref
                           else {"against": ref, **paired(times[k][scheme], times[k][ref])})
            entry["targets"][k] = e
        last = [rows[-1] for rows in seeds.values()]
        for name, col in (("final_accuracy", "accuracy"), ("final_time_s", "time_s"),
                          ("aggregations", "step")):
            entry[name] = interval([float(r[col]) for r in last])
        entry.update(_resources(last))
        entry["curve"] = _curve(seeds, grid)
        entry["horizon_accuracy"] = (entry["curve"]["accuracy"][-1] if grid.size
                                     else interval([]))
        schemes[scheme] = entry
    pairs = {k: [{"scheme": a, "against": b, **paired(times[k][a], times[k][b])}
                 for i, a in enumerate(run.ran) for b in run.ran[i + 1:]] for k in keys}
    winners: dict[str, str | None] = {}
    verdicts: dict[str, str] = {}
    for k in keys:
        medians = {s: schemes[s]["targets"][k]["median"]["seconds"] for s in run.ran}
        winners[k], verdicts[k] = verdict(times[k], medians, run.horizon_s)
    return {
        "instance": run.instance,
        "problem": run.problem,
        "horizon_s": run.horizon_s,
        "tuning": run.tuning,
        "settings": {k: (list(v) if isinstance(v, tuple) else v)
                     for k, v in vars(run.settings).items()},
        "infeasible": dict(run.infeasible),
        "reference": ref,
        "level": LEVEL,
        "methods": dict(METHODS),
        "schemes": schemes,
        "pairs": pairs,
        "winners": winners,
        "verdicts": verdicts,
    }


def csv_text(run: ArenaRun) -> str:
    """``arena.csv``: one row per (scheme, seed, aggregation), step 0 the untrained model;
    the columns of :data:`CSV_COLUMNS`, then those of :data:`OPTIONAL_COLUMNS` some row
    carries (empty where a row lacks it)."""
    def fmt(v: Any) -> Any:
        return None if v is None else f"{float(v):.9g}"

    extra = [c for c in OPTIONAL_COLUMNS if any(r.get(c) is not None for r in run.rows)]
    rows = ({"scheme": r["scheme"], "seed": r["seed"], "step": r["step"],
             **{c: fmt(r.get(c)) for c in (*CSV_COLUMNS[3:], *extra)}} for r in run.rows)
    return safe_csv_text((*CSV_COLUMNS, *extra), rows)


def tuning_csv_text(run: ArenaRun) -> str:
    """``tuning.csv``: every tuning trial's rows (:data:`TUNING_COLUMNS`; a trial's values
    are summary.json's ``tuning[scheme]["trials"][trial]``)."""
    rows = ({"scheme": r["scheme"], "trial": r["trial"], "seed": r["seed"], "step": r["step"],
             "time_s": f"{float(r['time_s']):.9g}",
             "val_accuracy": (None if r.get("val_accuracy") is None
                              else f"{float(r['val_accuracy']):.9g}")}
            for r in run.tuning_rows)
    return safe_csv_text(TUNING_COLUMNS, rows)


def curve_csv_text(summary: dict[str, Any]) -> str:
    """``curve.csv``: per scheme and grid time, the accuracy's mean and 95 % interval over
    seeds (:data:`CURVE_COLUMNS`; ``seeds``: how many)."""
    def fmt(v: float | None) -> str | None:
        return None if v is None else f"{v:.9g}"

    rows = ({"scheme": scheme, "time_s": fmt(t), "accuracy_mean": fmt(a["mean"]),
             "accuracy_lo": fmt(a["lo"]), "accuracy_hi": fmt(a["hi"]), "seeds": a["n"]}
            for scheme, e in summary["schemes"].items()
            for t, a in zip(e["curve"]["time_s"], e["curve"]["accuracy"], strict=True))
    return safe_csv_text(CURVE_COLUMNS, rows)


def plot_run(run: ArenaRun, path: Path, points: int = 200) -> Path | None:
    """Accuracy against virtual time per scheme: each seed's curve held constant between its
    aggregations, on a common time grid; mean and 95 % band over seeds (None without
    matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from mel_opt.plot import save_figure
    except ImportError:
        return None
    grid = np.linspace(0.0, run.horizon_s, points)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for scheme, seeds in _by_run(run).items():
        acc = [held_at(rows, grid) for rows in seeds.values()]
        mean, half = band(np.array(acc))
        line = ax.plot(grid, mean, label=scheme, lw=1.4)[0]
        ax.fill_between(grid, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1),
                        color=line.get_color(), alpha=0.18, linewidth=0)
    for target in run.settings.targets:
        ax.axhline(target, color="grey", lw=0.6, ls="--")
    ax.set_xlabel("virtual time [s]")
    ax.set_ylabel("validation accuracy")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    s = run.settings
    ax.set_title(f"{run.instance} ({run.problem}): {s.model} on {s.dataset}, {s.partition}, "
                 f"{s.seeds} seed(s)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)


def write_outputs(run: ArenaRun, out_dir: str | Path) -> dict[str, Any]:
    """Write ``arena.csv``, ``curve.csv``, ``summary.json`` and ``arena.png`` into ``out_dir``
    (and ``tuning.csv`` for a tuned run); returns the summary (``figure``: the figure's file
    name or None)."""
    out = Path(out_dir)
    summary = summarise(run)
    fig = plot_run(run, out / "arena.png") if run.rows else None
    summary["figure"] = None if fig is None else fig.name
    atomic_write(out / "arena.csv", csv_text(run))
    atomic_write(out / "curve.csv", curve_csv_text(summary))
    if run.tuning_rows:
        atomic_write(out / "tuning.csv", tuning_csv_text(run))
    atomic_write(out / "summary.json", json.dumps(summary, indent=1, allow_nan=False) + "\n")
    return summary
