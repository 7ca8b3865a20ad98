"""Catalogue entries of thesis 001, Chapter 4 (MED): the five metrics vs learners and tasks.

``001-fig4.1`` (Figs. 4.1-4.5, n = 4..10 learners) and ``001-fig4.6`` (Figs. 4.6-4.10,
m = 1..4 tasks) run the thesis experiments in mel_opt's simulator
(:func:`mel_opt.reproduce.med_trials.fresh_trials`: fresh learners per trial, states drawn
per cycle with each learner's run-to-run noise, the three schemes paired). The thesis states
its results as trends and "up to" gaps in the text of Section 4.3.2; those are the claims. The
tasks table also carries the thesis testbed's values behind Figs. 4.6-4.10 at m = 1, 3, 4
(``paper_*`` columns, as logged by the thesis' experiments). Gaps of time and drop rate are
relative (% of the worse scheme), gaps of satisfaction, fulfilment and occupancy are in
percentage points.

Satisfaction is judged per learner (``learner_satisfaction_pct``: the share of learners that
finished their training before the deadline), as the thesis argues it ("the fewer the shards
allocated to each learner ... complete before the deadline") and logs it, per (learner, global
update cycle); the task-level reading (every learner of a task finished) stays in the table.

Rules: an "up to X" claim holds when our largest gap is within a third of X (44.5 % does not
meet "up to 32 %"; 40 % does); a trend holds when
every scheme's curve moves that way over the whole range: its last value beyond its first, and
no step against the trend larger than the noise of the two points (twice the standard error
of their difference over the trials).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mel_opt.reproduce.catalogue import (
    Claim,
    Computed,
    Context,
    Entry,
    Row,
    fmt_num,
    register,
    within,
)
from mel_opt.reproduce.figures import Line, Panel, draw
from mel_opt.reproduce.med_trials import fresh_trials

SCHEMES = ("mmtt-ideal", "med", "mmtt-uncertain")
# metric -> (column, label, scale to the table's unit, higher is better)
METRICS = {
    "training_time_s": ("time_s", "training time (s)", 1.0, False),
    "satisfaction": ("satisfaction_pct", "task satisfaction (%)", 100.0, True),
    "learner_satisfaction": ("learner_satisfaction_pct", "learner satisfaction (%)", 100.0,
                             True),
    "fulfilment": ("fulfilment_pct", "task fulfilment (%)", 100.0, True),
    "drop_rate": ("drop_pct", "data drop rate (%)", 100.0, False),
    "occupancy": ("occupancy_pct", "occupancy (%)", 100.0, True),
}
RELATIVE = {"time_s", "drop_pct"}  # gaps of these are relative, the others in points
#: A relative gap is not taken where the worse scheme's value is below this: a drop rate of
#: 0.001 % against 0 is a 100 % gap of nothing (the testbed's smallest logged drop is 0.5 %).
RELATIVE_FLOOR = {"drop_pct": 0.5}
COLUMNS_OUT = tuple(c for c, *_ in METRICS.values())
SE_COLUMNS = tuple(f"{c}_se" for c in COLUMNS_OUT)  # standard errors over the trials
#: Relative tolerance of an "up to X" claim: our largest gap within X (1 +- UP_TO).
UP_TO = 1.0 / 3.0
#: The satisfaction the claims judge (see the module docstring).
SATISFACTION = "learner_satisfaction_pct"
# The thesis testbed's values behind Figs. 4.6-4.10 (10 learners, 40 trials), per number of
# tasks and scheme: training time [s], satisfaction, fulfilment, occupancy [%].
PAPER_TASKS: dict[int, dict[str, tuple[float, float, float, float]]] = {
    1: {"mmtt-ideal": (25.2, 100.0, 99.5, 77.0), "med": (37.0, 99.3, 99.4, 65.2),
        "mmtt-uncertain": (42.9, 97.5, 98.6, 57.2)},
    3: {"mmtt-ideal": (38.1, 95.4, 98.4, 83.0), "med": (40.4, 89.1, 96.1, 83.0),
        "mmtt-uncertain": (41.6, 88.5, 93.9, 79.7)},
    4: {"mmtt-ideal": (42.0, 83.7, 93.6, 87.9), "med": (42.5, 77.5, 91.5, 88.5),
        "mmtt-uncertain": (44.0, 76.1, 88.8, 84.9)},
}
PAPER_COLUMNS = ("paper_time_s", "paper_satisfaction_pct", "paper_fulfilment_pct",
                 "paper_occupancy_pct")


#: The two readings every entry runs: the thesis's benchmark numbers as written, and the preset
#: calibrated to its testbed's logged times (``mays2023-testbed``).
READINGS = {"literal": "mays2023", "testbed": "mays2023-testbed"}


def _compute(ctx: Context, axis: str, points: Sequence[int], experiment: str) -> Computed:
    trials = ctx.trials(full=40, quick=3)
    rows: list[Row] = []
    for reading, preset in READINGS.items():
        rows += _reading_rows(ctx, axis, points, experiment, trials, reading, preset)
    notes = [f"mel_opt's simulator, {trials} trials per point, 5 cycles each; learners "
             "redrawn per trial (distributions and prices, Section 4.3.1); run-to-run "
             "time CV 0.06 per learner (the instance default)",
             "two readings: literal (preset mays2023: the thesis's Jetson Nano benchmark "
             "numbers) and testbed (preset mays2023-testbed: rates and bandwidths fitted to "
             "the testbed's logged times at one task, MMTT-Ideal 25.2 s and MED 37.0 s); "
             "claims of the testbed reading are marked [testbed]"]
    empty = sorted({r[axis] for r in rows if r["reading"] == "testbed"
                    and r.get("time_s") is None})
    if empty:
        notes.append(f"testbed reading: no feasible allocation at {axis} = "
                     f"{', '.join(map(str, empty))} (learners as slow as the testbed's logs "
                     "cannot meet these deadlines in expectation); its claims are not judged "
                     "for this figure")
    return rows, notes


def _reading_rows(ctx: Context, axis: str, points: Sequence[int], experiment: str,
                  trials: int, reading: str, preset: str) -> list[Row]:
    rows: list[Row] = []
    for p in points:
        n, m = (p, 3) if axis == "learners" else (10, p)
        vals = fresh_trials(n, m, experiment, trials, cycles=5, seed=ctx.seed, preset=preset)
        for s in SCHEMES:
            row: Row = {"reading": reading, axis: p, "scheme": s, "trials": trials}
            for key, (col, _, scale, _) in METRICS.items():
                v = vals[s][key]
                ok = v[np.isfinite(v)]
                row[col] = float(ok.mean()) * scale if ok.size else None
                row[f"{col}_se"] = float(ok.std(ddof=1) / np.sqrt(ok.size)) * scale \
                    if ok.size > 1 else None
            if axis == "tasks":
                paper = PAPER_TASKS.get(p, {}).get(s)
                row.update(zip(PAPER_COLUMNS, paper or (None,) * 4, strict=True))
            rows.append(row)
    return rows


def compute_learners(ctx: Context) -> Computed:
    return _compute(ctx, "learners", (4, 7, 10) if ctx.quick else range(4, 11), "learners")


def compute_tasks(ctx: Context) -> Computed:
    return _compute(ctx, "tasks", (1, 4) if ctx.quick else range(1, 5), "tasks")


@dataclass(frozen=True)
class Table:
    rows: Sequence[Row]
    axis: str

    def xs(self) -> list[int]:
        return sorted({int(r[self.axis]) for r in self.rows})

    def se(self, x: int, scheme: str, col: str) -> float:
        """Standard error of a value over the trials (0 when not recorded)."""
        value = self.v(x, scheme, f"{col}_se")
        return 0.0 if value is None else value

    def v(self, x: int, scheme: str, col: str) -> float | None:
        for r in self.rows:
            if r[self.axis] == x and r["scheme"] == scheme:
                return None if r.get(col) is None else float(r[col])
        return None

    def advantage(self, col: str, better: str, worse: str) -> list[tuple[int, float]]:
        """Per x, how much ``better`` beats ``worse`` (positive: it does)."""
        higher = next(h for c, _, _, h in METRICS.values() if c == col)
        out = []
        for x in self.xs():
            b, w = self.v(x, better, col), self.v(x, worse, col)
            if b is None or w is None:
                continue
            if col in RELATIVE:
                if abs(w) < RELATIVE_FLOOR.get(col, 1e-9):
                    continue  # a relative gap to (almost) nothing is meaningless
                out.append((x, 100 * (w - b) / w))
            else:
                out.append((x, b - w if higher else w - b))
        return out


def trend(t: Table, col: str, rising: bool, paper: str) -> Claim:
    """Every scheme's curve moves that way over the whole range: its last value beyond its
    first, and no step against the trend beyond the two points' noise (2 standard errors of
    the difference); a percentage pinned at 0 % or 100 % throughout is saturated, not
    contrary."""
    xs = t.xs()
    x0, x1 = xs[0], xs[-1]
    sign = 1.0 if rising else -1.0
    parts, ok = [], True
    for s in SCHEMES:
        vals = [t.v(x, s, col) for x in xs]
        a, b = vals[0], vals[-1]
        against = []
        for i in range(len(xs) - 1):
            va, vb = vals[i], vals[i + 1]
            if va is None or vb is None:
                continue
            noise = 2.0 * float(np.hypot(t.se(xs[i], s, col), t.se(xs[i + 1], s, col)))
            if sign * (vb - va) < -noise:
                against.append(f"{xs[i]}->{xs[i + 1]}")
        parts.append(f"{s} {fmt_num(a)} -> {fmt_num(b)}" +
                     (f" (against at {', '.join(against)})" if against else ""))
        known = [v for v in vals if v is not None]
        saturated = col != "time_s" and bool(known) and len(set(known)) == 1 and \
            known[0] in (0.0, 100.0)
        ok = ok and a is not None and b is not None and (
            (sign * (b - a) > 0 and not against) or saturated)
    word = "rises" if rising else "falls"
    return Claim(f"{col} {word} with {t.axis}", paper, "; ".join(parts), ok,
                 f"every scheme: value at {t.axis} = {x1} {'>' if rising else '<'} at {x0}, "
                 "no step against it beyond 2 standard errors (or pinned at 0% / 100%)")


def up_to(t: Table, col: str, better: str, worse: str, paper: float, source: str) -> Claim:
    """The largest advantage of ``better`` over ``worse`` is within a factor 2 of the paper's."""
    adv = t.advantage(col, better, worse)
    best = max(adv, key=lambda p: p[1]) if adv else None
    unit = "%" if col in RELATIVE else " points"
    return Claim(f"{better} beats {worse} in {col} by up to {paper:g}{unit}",
                 f"up to {paper:g}{unit} ({source})",
                 f"up to {fmt_num(best[1])}{unit} at {t.axis} = {best[0]}" if best else "-",
                 best is not None and within(best[1], paper * (1 - UP_TO), paper * (1 + UP_TO)),
                 f"largest gap in [{paper * (1 - UP_TO):.3g}, {paper * (1 + UP_TO):.3g}]{unit} "
                 f"(+-{100 * UP_TO:.0f} %)")


def always(t: Table, col: str, better: str, worse: str, source: str) -> Claim:
    adv = t.advantage(col, better, worse)
    worst = min(adv, key=lambda p: p[1]) if adv else None
    return Claim(f"{better} beats {worse} in {col} at every {t.axis}", source,
                 f"smallest gap {fmt_num(worst[1])} at {t.axis} = {worst[0]}" if worst else "-",
                 worst is not None and len(adv) == len(t.xs()) and worst[1] > 0,
                 "gap > 0 at every point")


def level(t: Table, x: int | None, scheme: str, col: str, lo: float, hi: float,
          paper: str) -> Claim:
    xs = t.xs() if x is None else [x]
    vals = [t.v(xx, scheme, col) for xx in xs]
    known = [v for v in vals if v is not None]
    where = f"at {t.axis} = {x}" if x is not None else "at every point"
    return Claim(f"{scheme} {col} {where} in [{lo:g}, {hi:g}]", paper,
                 f"{fmt_num(min(known))}..{fmt_num(max(known))}" if known else "-",
                 len(known) == len(xs) and all(lo <= v <= hi for v in known),
                 f"{where}: {lo:g} <= value <= {hi:g}")


def _of(rows: Sequence[Row], reading: str) -> list[Row]:
    return [r for r in rows if r.get("reading", "literal") == reading]


def _complete(rows: Sequence[Row]) -> bool:
    """Every point has every scheme's time (a reading without answers is not judged)."""
    return bool(rows) and all(r.get("time_s") is not None for r in rows)


def _tagged(claims: list[Claim], tag: str) -> list[Claim]:
    return [Claim(f"[{tag}] {c.text}", c.paper, c.ours, c.ok, c.rule, c.unevaluable)
            for c in claims]


def judge_learners(rows: Sequence[Row]) -> list[Claim]:
    claims = _learner_claims(_of(rows, "literal"))
    testbed = _of(rows, "testbed")
    if _complete(testbed):
        claims += _tagged(_learner_claims(testbed), "testbed")
    return claims


def judge_tasks(rows: Sequence[Row]) -> list[Claim]:
    claims = _task_claims(_of(rows, "literal"))
    testbed = _of(rows, "testbed")
    if _complete(testbed):
        t = Table(testbed, "tasks")
        claims += _tagged(_task_claims(testbed), "testbed")
        big = [x for x in t.xs() if x >= 3]
        ideal = [t.v(x, "mmtt-ideal", SATISFACTION) for x in big]
        claims.append(Claim(
            "[testbed] MMTT-Ideal is imperfect: it knows the states, not the run-to-run noise",
            "95.4 % and 83.7 % of learners satisfied at 3 and 4 tasks (the testbed's log)",
            ", ".join(f"{fmt_num(v)}% at {x}" for x, v in zip(big, ideal, strict=True)) or "-",
            bool(big) and all(v is not None and v < 100.0 for v in ideal),
            "MMTT-Ideal's per-learner satisfaction below 100 % at 3 tasks and more"))
    return claims


def _learner_claims(rows: Sequence[Row]) -> list[Claim]:
    t = Table(rows, "learners")
    src = "Sec. 4.3.1.1"
    return [
        trend(t, "time_s", False, f"decreases for all schemes ({src}, Fig. 4.1)"),
        up_to(t, "time_s", "med", "mmtt-uncertain", 11, f"{src}, Fig. 4.1"),
        up_to(t, "time_s", "mmtt-ideal", "med", 32, f"{src}, Fig. 4.1"),
        trend(t, SATISFACTION, True, f"increases for all schemes ({src}, Fig. 4.2)"),
        level(t, None, "mmtt-ideal", SATISFACTION, 95, 100,
              f"near perfect ({src}, Fig. 4.2)"),
        up_to(t, SATISFACTION, "med", "mmtt-uncertain", 10, f"{src}, Fig. 4.2"),
        up_to(t, "fulfilment_pct", "mmtt-ideal", "med", 4, f"largest at n = 4 ({src}, Fig. 4.3)"),
        up_to(t, "fulfilment_pct", "med", "mmtt-uncertain", 4.3, f"{src}, Fig. 4.3"),
        always(t, "drop_pct", "med", "mmtt-uncertain", f"for all cluster sizes ({src}, Fig. 4.4)"),
        up_to(t, "drop_pct", "med", "mmtt-uncertain", 41, f"{src}, Fig. 4.4"),
        trend(t, "occupancy_pct", False, f"declines for all schemes ({src}, Fig. 4.5)"),
        up_to(t, "occupancy_pct", "mmtt-ideal", "med", 14, f"at most 14 ({src}, Fig. 4.5)"),
        up_to(t, "occupancy_pct", "med", "mmtt-uncertain", 4.3, f"{src}, Fig. 4.5"),
    ]


def _task_claims(rows: Sequence[Row]) -> list[Claim]:
    t = Table(rows, "tasks")
    src = "Sec. 4.3.1.2"
    last = t.xs()[-1]
    return [
        trend(t, "time_s", True, f"increases to a plateau ({src}, Fig. 4.6)"),
        level(t, last, "med", "time_s", 28, 63, f"plateau around 42 s ({src}, Fig. 4.6)"),
        up_to(t, "time_s", "mmtt-ideal", "med", 33, f"MED at most 33% slower ({src})"),
        level(t, 3, "mmtt-ideal", SATISFACTION, 90, 99,
              "95.4% at 3 tasks (the testbed's value behind Fig. 4.7)"),
        up_to(t, "time_s", "med", "mmtt-uncertain", 16, f"{src}, Fig. 4.6"),
        trend(t, SATISFACTION, False, f"declines for all schemes ({src}, Fig. 4.7)"),
        always(t, SATISFACTION, "med", "mmtt-uncertain", f"consistently ({src})"),
        up_to(t, SATISFACTION, "med", "mmtt-uncertain", 4, f"{src}, Fig. 4.7"),
        trend(t, "fulfilment_pct", False, f"drops as tasks grow ({src}, Fig. 4.8)"),
        up_to(t, "fulfilment_pct", "med", "mmtt-uncertain", 3, f"{src}, Fig. 4.8"),
        up_to(t, "fulfilment_pct", "mmtt-ideal", "med", 2,
              f"largest at 3 tasks ({src}, Fig. 4.8)"),
        trend(t, "drop_pct", True, f"increases for all schemes ({src}, Fig. 4.9)"),
        up_to(t, "drop_pct", "mmtt-ideal", "med", 58, f"a gap of at most 58% ({src}, "
              "Fig. 4.9)"),
        up_to(t, "drop_pct", "med", "mmtt-uncertain", 32, f"{src}, Fig. 4.9"),
        trend(t, "occupancy_pct", True, f"increases to a plateau ({src}, Fig. 4.10)"),
        level(t, last, "med", "occupancy_pct", 75, 95, f"plateau around 85% ({src})"),
        always(t, "occupancy_pct", "med", "mmtt-uncertain", f"at all numbers of tasks ({src})"),
        up_to(t, "occupancy_pct", "mmtt-ideal", "med", 15, f"at most 15, at 1 task ({src})"),
    ]


def _plot(rows: Sequence[Row], path: Path, axis: str, title: str) -> None:
    panels = []
    for col, label, _, _ in METRICS.values():
        panel = Panel(label, f"number of {axis}", label)
        for reading in READINGS:
            for s in SCHEMES:
                pts = sorted((r[axis], r[col]) for r in _of(rows, reading) if r["scheme"] == s)
                if any(v is not None for _, v in pts):
                    panel.lines.append(Line(s if reading == "literal" else f"{s} (testbed)",
                                            [p[0] for p in pts], [p[1] for p in pts],
                                            dashed=reading == "testbed"))
        paper_col = {"time_s": "paper_time_s",
                     # the testbed logged satisfaction per (learner, cycle)
                     "learner_satisfaction_pct": "paper_satisfaction_pct",
                     "fulfilment_pct": "paper_fulfilment_pct",
                     "occupancy_pct": "paper_occupancy_pct"}.get(col)
        if paper_col:  # the thesis testbed's values the table carries (tasks experiment)
            pts = sorted((r[axis], r[paper_col]) for r in _of(rows, "literal")
                         if r.get(paper_col) is not None and r["scheme"] == "med")
            if pts:
                panel.lines.append(Line("thesis testbed, MED", [p[0] for p in pts],
                                        [p[1] for p in pts], paper=True))
        panels.append(panel)
    draw(panels, path, title)


def plot_learners(rows: Sequence[Row], path: Path) -> None:
    _plot(rows, path, "learners", "Thesis Figs. 4.1-4.5: MED metrics vs learners (3 tasks)")


def plot_tasks(rows: Sequence[Row], path: Path) -> None:
    _plot(rows, path, "tasks", "Thesis Figs. 4.6-4.10: MED metrics vs tasks (10 learners)")


register(Entry(
    id="001-fig4.1", paper="001 Mays (thesis)",
    title="Figs. 4.1-4.5: the five metrics vs number of learners",
    shows=("n = 4..10 learners, 3 tasks, budget 300, Table 4.1 deadlines: MED, MMTT-Ideal "
           "and MMTT-Uncertain simulated over 5 cycles with fresh learners per trial "
           "(redrawn distributions and prices) and run-to-run noise."),
    columns=("reading", "learners", "scheme", *COLUMNS_OUT, "trials", *SE_COLUMNS),
    compute=compute_learners, judge=judge_learners, plot=plot_learners))

register(Entry(
    id="001-fig4.6", paper="001 Mays (thesis)",
    title="Figs. 4.6-4.10: the five metrics vs number of tasks",
    shows=("10 learners, m = 1..4 tasks, budget 200 and Table 4.1 deadlines + 5 s (Section "
           "4.3.1.2): the three schemes simulated over 5 cycles with fresh learners per trial "
           "(redrawn distributions and prices) and run-to-run noise."),
    columns=("reading", "tasks", "scheme", *COLUMNS_OUT, "trials", *PAPER_COLUMNS,
             *SE_COLUMNS),
    compute=compute_tasks, judge=judge_tasks, plot=plot_tasks))
