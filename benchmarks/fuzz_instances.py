"""Hostile input through the command line: N seeded mutants of the shipped instances.

Each mutant is one shipped instance (``instances/*/*.json``) with one to three mutations:
a number replaced by an extreme value (0, -1, 5e-324, 1e-300, 1e300, 1e308, a 30-digit integer,
NaN / Infinity as strings, a fraction where a whole number is expected), a list item dropped or
duplicated, a field deleted, or a value's type swapped (string, list, object, null, bool). Every
mutant goes through ``melopt solve FILE --json --time-limit 10`` in a subprocess (a few at a
time) and is classified:

- exit code (0 solved, 1 no solution, 2 invalid input, anything else);
- ``internal error`` on stderr (a bug that escaped the error handling);
- hang: still running after ``--hang`` seconds (killed);
- unverified: exit 0 without ``verification.feasible`` true in the result JSON;
- traceback or RuntimeWarning text on stderr.

Mutants of the last five kinds are saved under ``benchmarks/fuzz_out/`` (git-ignored) with the
stderr tail, to be replayed with ``melopt solve``.

    python benchmarks/fuzz_instances.py [-n 2000] [--seed 0] [--jobs 3] [--hang 60]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "fuzz_out"

EXTREMES: list[Any] = [0, -1, 5e-324, 1e-300, 1e300, 1e308, -1e308,
                       123456789012345678901234567890, -9223372036854775808, 9223372036854775807,
                       2**63, "NaN", "Infinity", "-Infinity", 0.5, 1.5, 1e19, 1e-9, 2**53 + 1]
SWAPS: list[Any] = ["x", [], {}, None, True, [1, 2], {"a": 1}]
# Keys whose values are structure, not data: mutating them only tests the problem selector.
KEEP = frozenset({"problem", "schema_version"})


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location in the document (dict keys and list indices), depth first."""
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if not prefix and key in KEEP:
                continue
            out.append((*prefix, key))
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out.append((*prefix, i))
            out.extend(_paths(value, (*prefix, i)))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def _parent(doc: Any, path: tuple[Any, ...]) -> tuple[Any, Any]:
    return _get(doc, path[:-1]), path[-1]


def _label(path: tuple[Any, ...]) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def mutate(doc: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], list[str]]:
    """One to three mutations of a copy of ``doc``; returns it and what was done."""
    doc = copy.deepcopy(doc)
    done: list[str] = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        paths = _paths(doc)
        if not paths:
            break
        numeric = [p for p in paths if isinstance(_get(doc, p), (int, float))
                   and not isinstance(_get(doc, p), bool)]
        lists = [p for p in paths if isinstance(_get(doc, p), list) and _get(doc, p)]
        kind = rng.choices(("extreme", "list", "delete", "swap"), weights=(6, 2, 1, 1))[0]
        if kind == "extreme" and numeric:
            path = rng.choice(numeric)
            parent, key = _parent(doc, path)
            value = rng.choice(EXTREMES)
            parent[key] = value
            done.append(f"{_label(path)} = {value!r}")
        elif kind == "list" and lists:
            path = rng.choice(lists)
            items = _get(doc, path)
            i = rng.randrange(len(items))
            if rng.random() < 0.5:
                del items[i]
                done.append(f"{_label(path)}: item {i} dropped")
            else:
                items.insert(i, copy.deepcopy(items[i]))
                done.append(f"{_label(path)}: item {i} duplicated")
        elif kind == "delete":
            path = rng.choice(paths)
            parent, key = _parent(doc, path)
            del parent[key]
            done.append(f"{_label(path)} deleted")
        else:
            path = rng.choice(paths)
            parent, key = _parent(doc, path)
            value = rng.choice(SWAPS)
            parent[key] = value
            done.append(f"{_label(path)} = {value!r}")
    return doc, done


@dataclass
class Outcome:
    index: int
    source: str
    mutations: list[str]
    code: int
    internal: bool
    hang: bool
    unverified: bool
    traceback: bool
    warning: bool
    seconds: float
    stderr: str

    @property
    def bad(self) -> bool:
        return self.internal or self.hang or self.unverified or self.traceback or self.warning


def run_one(index: int, source: Path, doc: dict[str, Any], mutations: list[str], folder: Path,
            hang: float) -> Outcome:
    path = folder / f"mutant_{index:05d}.json"
    # allow_nan: the strings "NaN"/"Infinity" are one mutation; real NaN tokens are another.
    path.write_text(json.dumps(doc, allow_nan=True))
    cmd = [sys.executable, "-m", "mel_opt.cli", "solve", str(path), "--json", "--time-limit",
           "10"]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=hang, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return Outcome(index, str(source), mutations, -1, False, True, False, False, False,
                       time.perf_counter() - t, "")
    seconds = time.perf_counter() - t
    stderr = proc.stderr
    unverified = False
    if proc.returncode == 0:
        try:
            res = json.loads(proc.stdout)
            unverified = not (res.get("verification") or {}).get("feasible", False)
        except json.JSONDecodeError:
            unverified = True
    return Outcome(index, str(source), mutations, proc.returncode, "internal error" in stderr,
                   False, unverified, "Traceback (most recent call last)" in stderr,
                   "RuntimeWarning" in stderr, seconds, stderr[-2000:])


def _save(o: Outcome, folder: Path) -> None:
    OUT.mkdir(exist_ok=True)
    mutant = folder / f"mutant_{o.index:05d}.json"
    target = OUT / mutant.name
    target.write_text(mutant.read_text())
    kinds = [k for k in ("internal", "hang", "unverified", "traceback", "warning")
             if getattr(o, k)]
    (OUT / f"mutant_{o.index:05d}.txt").write_text(
        f"source: {o.source}\nmutations: {'; '.join(o.mutations)}\nkinds: {', '.join(kinds)}\n"
        f"exit: {o.code}\n\n{o.stderr}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200, help="number of mutants")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=3, help="mutants run at the same time")
    ap.add_argument("--hang", type=float, default=60.0, help="seconds before a run is a hang")
    args = ap.parse_args()
    sources = sorted((ROOT / "instances").glob("*/*.json"))
    docs = {p: json.loads(p.read_text()) for p in sources}
    rng = random.Random(args.seed)
    plan = []
    for i in range(args.n):
        src = rng.choice(sources)
        mutant, what = mutate(docs[src], rng)
        plan.append((i, src.relative_to(ROOT), mutant, what))
    con = Console(width=200, stderr=True)
    outcomes: list[Outcome] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        folder = Path(tmp)
        futures = [pool.submit(run_one, i, src, doc, what, folder, args.hang)
                   for i, src, doc, what in plan]
        for n, fut in enumerate(futures, 1):
            o = fut.result()
            outcomes.append(o)
            if o.bad:
                _save(o, folder)
                con.print(f"[red]{o.index}[/] {o.source}: {'; '.join(o.mutations)} -> exit "
                          f"{o.code} {o.stderr.strip().splitlines()[-1:] if o.stderr else ''}",
                          highlight=False)
            if n % 100 == 0:
                con.print(f"{n}/{args.n} done, {time.perf_counter() - t0:.0f} s", highlight=False)
    report(outcomes, args, time.perf_counter() - t0)


def report(outcomes: list[Outcome], args: argparse.Namespace, seconds: float) -> None:
    codes = Counter(o.code for o in outcomes)
    table = Table(title=f"{len(outcomes)} mutants (seed {args.seed}, --time-limit 10, hang at "
                        f"{args.hang:g} s), {seconds:.0f} s")
    table.add_column("outcome")
    table.add_column("count", justify="right")
    for code in sorted(codes):
        name = {0: "exit 0 (solved)", 1: "exit 1 (no solution)", 2: "exit 2 (invalid input)",
                -1: "killed (hang)"}.get(code, f"exit {code}")
        table.add_row(name, str(codes[code]))
    for label, attr in (("internal errors", "internal"), ("hangs", "hang"),
                        ("unverified answers (exit 0)", "unverified"),
                        ("tracebacks on stderr", "traceback"),
                        ("RuntimeWarnings on stderr", "warning")):
        table.add_row(label, str(sum(getattr(o, attr) for o in outcomes)))
    slowest = max((o.seconds for o in outcomes if not o.hang), default=0.0)
    table.add_row("slowest run (s)", f"{slowest:.1f}")
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
