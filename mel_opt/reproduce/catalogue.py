"""The catalogue of reproducible figures and tables: entries, claims, outcomes, the registry.

An :class:`Entry` regenerates one figure or table of a paper from presets and seeds. It is three
pieces kept apart so that each can be checked on its own:

- ``compute(ctx) -> rows``: our numbers, one dict per table row, with the paper's numbers in
  columns of their own where the paper gives them per point (the paper's numbers are data in
  the entry modules, each saying where it was read: the text, or "read from Fig. N");
- ``judge(rows) -> [Claim]``: the paper's claims tested on the rows by explicit rules (trends,
  levels within stated ranges); never a hard-coded answer;
- ``plot(rows, path)``: the figure (optional; needs matplotlib).

:meth:`Entry.run` joins them into an :class:`Outcome` whose verdict is ``"reproduced"`` when
every claim holds, else ``"differs: <claim: paper ..., ours ...; ...>"``.

Entries register themselves with :func:`register` when their module is imported; the modules of
this package other than ``catalogue``, ``report``, ``figures`` and ``_*`` are the entry modules
and are imported by :func:`all_entries`.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from mel_opt.errors import UsageError

Row = dict[str, Any]
REPRODUCED = "reproduced"
DIFFERS = "differs: "
NOT_EVALUABLE = "not evaluable: "


@dataclass(frozen=True)
class Context:
    """How an entry is run.

    Attributes
    ----------
    quick : bool
        Fewer trials / points, for tests and smoke runs (the verdict is then indicative).
    seeds : int or None
        Seeds or trials per point when given (overrides the entry's default).
    seed : int
        First seed.
    dataset : str or None
        Data set of the training entries (``digits``, ``fashion-mnist``, ``mnist``,
        ``idx:DIR``); None: Fashion-MNIST where installed, else the digits.
    device : str
        Where the training entries train (``cpu``, ``cuda``:
        :mod:`mel_opt.training.device`); the other entries run on the host whatever it says.
    """

    quick: bool = False
    seeds: int | None = None
    seed: int = 0
    dataset: str | None = None
    device: str = "cpu"

    def training_data(self) -> str:
        """The data set of the training entries: ``dataset`` when given, else Fashion-MNIST
        at full size where it can be read (mel_opt's cache, ``melopt data fetch``, or
        Debian's package), else the digits."""
        if self.dataset:
            return self.dataset
        from mel_opt.training.data import dataset_dir

        return "fashion-mnist" if dataset_dir("fashion-mnist") is not None else "digits"

    def trials(self, full: int, quick: int) -> int:
        """Trials per point: ``--seeds`` if given, else the entry's full or quick default."""
        if self.seeds is not None:
            return self.seeds
        return quick if self.quick else full


@dataclass(frozen=True)
class Claim:
    """One claim of the paper tested on our rows.

    Attributes
    ----------
    text : str
        The claim, short (e.g. "max staleness at T = 7.5 s stays <= ~1").
    paper : str
        The paper's number(s) or statement, with where they were read.
    ours : str
        Our number(s) the rule was applied to.
    ok : bool
        Whether the rule holds.
    rule : str
        The rule, explicit (e.g. "every K: mean max staleness <= 1.5").
    unevaluable : str
        Why the claim cannot be judged on our data (e.g. no scheme reaches the target); empty
        when it can. An unevaluable claim neither holds nor fails.
    """

    text: str
    paper: str
    ours: str
    ok: bool
    rule: str = ""
    unevaluable: str = ""

    @property
    def evaluable(self) -> bool:
        return not self.unevaluable

    @property
    def holds(self) -> str:
        """``yes``, ``no`` or ``not evaluable`` (the tables' column)."""
        return "not evaluable" if self.unevaluable else ("yes" if self.ok else "no")

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "paper": self.paper, "ours": self.ours,
                "ok": self.ok and self.evaluable, "rule": self.rule,
                "evaluable": self.evaluable, "unevaluable": self.unevaluable}


def verdict_of(claims: Sequence[Claim]) -> str:
    """``"reproduced"`` if every evaluable claim holds, else ``"differs: "`` and each failed
    claim; ``"not evaluable: "`` and the reasons when no claim can be judged. Claims that
    cannot be judged are listed after a reproduced verdict ("reproduced; not evaluable:
    ...")."""
    if not claims:
        return DIFFERS + "no claim could be tested"
    judged = [c for c in claims if c.evaluable]
    if not judged:
        return NOT_EVALUABLE + "; ".join(f"{c.text} ({c.unevaluable})" for c in claims)
    failed = [c for c in judged if not c.ok]
    if failed:
        return DIFFERS + "; ".join(f"{c.text} (paper {c.paper}, ours {c.ours})"
                                   for c in failed)
    skipped = [c for c in claims if not c.evaluable]
    if skipped:
        return REPRODUCED + "; not evaluable: " + "; ".join(
            f"{c.text} ({c.unevaluable})" for c in skipped)
    return REPRODUCED


@dataclass
class Outcome:
    """What an entry run produced.

    Attributes
    ----------
    columns : tuple of str
        The table's columns, in order (every row has these keys; missing values are None).
    rows : list of dict
    claims : list of Claim
    verdict : str
        ``"reproduced"`` or ``"differs: ..."``, computed from ``claims``.
    figures : list of Path
        Written by the report (empty when matplotlib is missing).
    notes : list of str
        What the reader must know (a generator parameter not available, quick mode, ...).
    seconds : float
        Wall time of the computation [s].
    """

    columns: tuple[str, ...]
    rows: list[Row]
    claims: list[Claim]
    verdict: str
    figures: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "claims": [c.to_dict() for c in self.claims],
            "columns": list(self.columns),
            "rows": [{k: _plain(r.get(k)) for k in self.columns} for r in self.rows],
            "figures": [p.name for p in self.figures],
            "notes": list(self.notes),
            "seconds": self.seconds,
        }


def _plain(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):  # numpy scalar
        return _plain(v.item())
    return v


Computed = tuple[list[Row], list[str]]  # rows, notes


@dataclass(frozen=True)
class Entry:
    """One figure or table of a paper that mel_opt regenerates.

    Attributes
    ----------
    id : str
        ``"<paper>-<figure>"``, e.g. ``"000-fig2"``.
    paper : str
        The paper, short (e.g. "000 Mohammad & Sorour").
    title : str
        The figure or table and what is varied.
    shows : str
        What the entry computes and how it relates to the paper's experiment.
    columns : tuple of str
        The table's columns.
    compute : callable
        ``compute(ctx) -> (rows, notes)``.
    judge : callable
        ``judge(rows) -> [Claim]``: the verdict rules.
    plot : callable or None
        ``plot(rows, path)`` draws the figure (matplotlib imported inside).
    needs : tuple of str
        Optional extras the entry needs beyond the base install, by their pip extra names
        (``train``, ``plot``).
    """

    id: str
    paper: str
    title: str
    shows: str
    columns: tuple[str, ...]
    compute: Callable[[Context], Computed]
    judge: Callable[[Sequence[Row]], list[Claim]]
    plot: Callable[[Sequence[Row], Path], None] | None = None
    needs: tuple[str, ...] = ()

    @property
    def expected_s(self) -> float | None:
        """Wall time of a full run measured on a quiet 2-core machine with the digits data
        (:data:`EXPECTED_S`); None when not measured."""
        return self.expected("digits")

    def expected(self, dataset: str) -> float | None:
        """Wall time of a full run on ``dataset`` (``digits`` or ``fashion-mnist``) measured
        on a quiet 2-core machine (:data:`EXPECTED_S`); None when not measured. An entry that
        trains nothing takes its time whatever the data set."""
        times = EXPECTED_S.get(self.id)
        return times.get(dataset) if isinstance(times, dict) else times

    def run(self, ctx: Context) -> Outcome:
        """Compute the rows, test the claims on them, return the outcome (no files)."""
        start = time.perf_counter()
        rows, notes = computed_rows(self, ctx)
        claims = self.judge(rows)
        notes = list(notes)
        if ctx.quick:
            notes.append("quick mode: fewer trials or points than the full entry")
        rows = [{k: r.get(k) for k in self.columns} for r in rows]
        return Outcome(self.columns, rows, claims, verdict_of(claims), notes=notes,
                       seconds=time.perf_counter() - start)


def _compute(entry: Entry, ctx: Context) -> list[Any]:
    """An entry's rows and notes: the unit of :func:`computed_rows` (run in this process)."""
    rows, notes = entry.compute(ctx)
    return [rows, list(notes)]


def computed_rows(entry: Entry, ctx: Context) -> Computed:
    """``entry.compute(ctx)`` as a unit of work (:mod:`mel_opt.units`): kept in the command's
    output folder once computed, and read back by a rerun with the same context, data and code
    (its training runs are units of their own, kept as each finishes, so an entry stopped
    half-way resumes from its finished runs)."""
    import dataclasses

    from mel_opt import units

    key = {"kind": "entry", "id": entry.id, "context": ctx, "code": units.code_version(),
           "data": ctx.training_data() if "train" in entry.needs else None}
    unit = units.Unit(key, f"entry {entry.id}", _compute, (ctx,))
    here = dataclasses.replace(units.current(), jobs=1, cluster=None, progress=None)
    rows, notes = units.run_units([unit], entry, here)[0]
    return rows, notes


#: Seconds of a full run of each entry (``benchmarks/bench_reproduce.py [--dataset ...]``, quiet
#: 2-core machine): one number for an entry that trains nothing (it takes the same on any data
#: set), one per data set for a training entry. Shown by ``--list``.
EXPECTED_S: dict[str, float | dict[str, float]] = {
    "000-fig2": 23, "000-fig3": {"digits": 40, "fashion-mnist": 1283}, "001-fig3.2": 19,
    "001-fig3.3": 9, "001-fig3.4-3.5": {"digits": 3, "fashion-mnist": 36}, "001-fig3.6": 1,
    "001-fig3.6-3.8-training": {"digits": 1, "fashion-mnist": 54}, "001-fig4.1": 12,
    "001-fig4.6": 12, "003-fig3": {"digits": 13, "fashion-mnist": 48},
    "004-fig3": {"digits": 7, "fashion-mnist": 166}, "004-fig4-5": 1,
    "004-fig4-5-training": {"digits": 8, "fashion-mnist": 146},
    "004-table2": {"digits": 16, "fashion-mnist": 745}, "004-theorem1": 1,
}

_REGISTRY: dict[str, Entry] = {}
_NOT_ENTRY_MODULES = {"catalogue", "report", "figures"}


def register(entry: Entry) -> Entry:
    """Add an entry to the catalogue (ids must be unique)."""
    if entry.id in _REGISTRY and _REGISTRY[entry.id] is not entry:
        raise ValueError(f"duplicate reproduce entry id {entry.id!r}")
    _REGISTRY[entry.id] = entry
    return entry


@cache
def _load() -> None:
    import mel_opt.reproduce as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name in _NOT_ENTRY_MODULES or info.name.startswith("_"):
            continue
        importlib.import_module(f"{pkg.__name__}.{info.name}")


def all_entries() -> dict[str, Entry]:
    """Every entry of the catalogue, by id, in id order."""
    _load()
    return dict(sorted(_REGISTRY.items()))


def select(ids: Iterable[str]) -> list[Entry]:
    """The entries named by ``ids`` (all of them when empty), in catalogue order.

    Raises
    ------
    UsageError
        An id is not in the catalogue (the message names the known ids).
    """
    entries = all_entries()
    wanted = list(dict.fromkeys(ids))
    unknown = [i for i in wanted if i not in entries]
    if unknown:
        raise UsageError(f"unknown reproduce id {', '.join(map(repr, unknown))}; known: "
                         f"{', '.join(entries)}")
    if not wanted:
        return list(entries.values())
    return [e for i, e in entries.items() if i in wanted]


def install_hint(extras: Sequence[str]) -> str:
    """The command that installs ``extras`` (in a clone, and from a wheel or the index)."""
    from mel_opt.errors import install_hint as hint

    return hint(*extras)


def missing_needs(entry: Entry) -> list[str]:
    """The extras of ``entry.needs`` that are not installed ("plot" only costs the figure)."""
    import importlib.util

    probes = {"plot": "matplotlib", "train": "sklearn"}  # train: the digits data
    missing = []
    for need in entry.needs:
        module = probes.get(need, need)
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(need)
    return missing


# ---- helpers for the verdict rules of the entry modules -------------------------------------

def fmt_num(v: float | None, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.{digits}g}"


def within(value: float | None, lo: float, hi: float) -> bool:
    """``lo <= value <= hi`` (False for a missing or non-finite value)."""
    return value is not None and math.isfinite(value) and lo <= value <= hi


def series(rows: Sequence[Row], x: str, y: str, where: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    """``[(row[x], row[y])]`` of the rows matching ``where``, sorted by x."""
    out = [(r[x], r.get(y)) for r in rows if all(r.get(k) == v for k, v in where.items())]
    return sorted(out, key=lambda p: p[0])
