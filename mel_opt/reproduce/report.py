"""Running catalogue entries into a folder, and the Markdown report gathering them.

For every entry ``DIR/<id>/table.csv`` (the rows, the paper's numbers in their own columns),
``DIR/<id>/claims.csv`` (each claim: paper beside ours, rule, holds), ``DIR/<id>/figure.png``
(when matplotlib is installed) and ``DIR/<id>/outcome.json``; then ``DIR/report.md`` with each
entry's verdict, claims, figure and table. Text files go through the project's atomic writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mel_opt.errors import needs_extra
from mel_opt.io.atomic import atomic_write
from mel_opt.io.csvsafe import csv_text
from mel_opt.reproduce.catalogue import Context, Entry, Outcome, fmt_num, install_hint
from mel_opt.reproduce.figures import have_matplotlib


def write_entry(entry: Entry, outcome: Outcome, out_dir: Path) -> Path:
    """Write one entry's files into ``out_dir/<id>/`` (the figure too when possible)."""
    d = out_dir / entry.id
    atomic_write(d / "table.csv", csv_text(outcome.columns, outcome.rows), durable=False)
    claims = [c.to_dict() for c in outcome.claims]
    atomic_write(d / "claims.csv", csv_text(("text", "paper", "ours", "ok", "rule",
                                              "evaluable", "unevaluable"), claims),
                 durable=False)
    if entry.plot is not None:
        if have_matplotlib():
            fig = d / "figure.png"
            entry.plot(outcome.rows, fig)
            outcome.figures.append(fig)
        else:
            outcome.notes.append("figure skipped: " + needs_extra("a figure (matplotlib)",
                                                                  "plot"))
    doc = {"id": entry.id, "paper": entry.paper, "title": entry.title, "shows": entry.shows,
           "needs": list(entry.needs), **outcome.to_dict()}
    atomic_write(d / "outcome.json", json.dumps(doc, indent=1) + "\n", durable=False)
    return d


def run_entries(entries: Sequence[Entry], out_dir: str | Path, ctx: Context,
                on_done: Callable[[Entry, Outcome], None] | None = None,
                skipped: Sequence[tuple[Entry, list[str]]] = (),
                on_start: Callable[[Entry], None] | None = None
                ) -> list[tuple[Entry, Outcome]]:
    """Run each entry, write its files and finally ``report.md`` (which also lists the
    ``skipped`` entries with the extras they need); returns the outcomes. ``on_start`` and
    ``on_done`` are called around each entry (progress)."""
    out = Path(out_dir)
    done: list[tuple[Entry, Outcome]] = []
    for entry in entries:
        if on_start is not None:
            on_start(entry)
        outcome = entry.run(ctx)
        write_entry(entry, outcome, out)
        done.append((entry, outcome))
        if on_done is not None:
            on_done(entry, outcome)
    atomic_write(out / "report.md", render_report(done, ctx, skipped))
    return done


def _md_cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return fmt_num(v, 4)
    return str(v).replace("|", "\\|")


def _md_table(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_md_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return lines


def render_report(done: Sequence[tuple[Entry, Outcome]], ctx: Context,
                  skipped: Sequence[tuple[Entry, list[str]]] = ()) -> str:
    """The Markdown report: a summary of verdicts (skipped entries with the command that
    installs what they need), then each entry in full."""
    mode = "quick" if ctx.quick else "full"
    lines = ["# mel_opt reproduce: the papers' figures and tables regenerated", "",
             f"Mode: {mode}; first seed {ctx.seed}"
             + (f"; {ctx.seeds} seeds/trials per point" if ctx.seeds else "") + ".", "",
             "| id | paper | title | verdict | time (s) |", "|---|---|---|---|---|"]
    for e, o in done:
        lines.append(f"| [{e.id}](#{e.id}) | {e.paper} | {e.title} | "
                     f"{_md_cell(o.verdict)} | {o.seconds:.1f} |")
    for e, missing in skipped:
        lines.append(f"| {e.id} | {e.paper} | {e.title} | skipped: needs the "
                     f"{', '.join(missing)} extra (`{install_hint(missing)}`) | - |")
    for e, o in done:
        lines += ["", f"## {e.id}", "", f"**{e.paper}: {e.title}.** {e.shows}", "",
                  f"**Verdict:** {o.verdict}", ""]
        lines += _md_table(("claim", "paper", "ours", "holds", "rule"),
                           [{"claim": c.text, "paper": c.paper, "ours": c.ours,
                             "holds": c.holds, "rule": c.rule or c.unevaluable}
                            for c in o.claims])
        for fig in o.figures:
            lines += ["", f"![{e.id}]({e.id}/{fig.name})"]
        for note in o.notes:
            lines += ["", f"*Note: {note}*"]
        table = [r for r in o.rows if r.get("part") != "curve"]
        lines += ["", f"Table ({e.id}/table.csv):", ""]
        lines += _md_table(o.columns, table)
        if len(table) < len(o.rows):
            lines += ["", f"*{len(o.rows) - len(table)} learning-curve rows (part = curve, "
                          f"drawn in the figure) are in {e.id}/table.csv.*"]
    return "\n".join(lines) + "\n"
