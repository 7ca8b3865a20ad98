"""Plots of sweeps: a metric against the swept parameter, one line per method, with bands.

Needs matplotlib (``pip install 'mel_opt[plot]'``); drawn off-screen (Agg) to PNG, SVG or PDF.
The band is the mean +- 1.96 standard errors over seeds (an approximate 95% confidence
interval); points where a method had no verified answer are left out and counted in the legend.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mel_opt.errors import UsageError


def read_rows(path: str | Path) -> list[dict[str, str]]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None


def _num(text: str | None) -> float | None:
    try:
        v = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


Point = tuple[float, float, float, int, int]  # x, mean, band half-width, n ok, n failed


def aggregate(rows: Sequence[dict[str, str]], x: str, y: str, by: str = "method",
              facet: str | None = None) -> dict[tuple[str, str], list[Point]]:
    """{(facet value, series): [(x, mean, half-width of the band, n ok, n failed)]}."""
    cells: dict[tuple[str, str, float], list[float]] = defaultdict(list)
    failed: dict[tuple[str, str, float], int] = defaultdict(int)
    for r in rows:
        xv = _num(r.get(x))
        if xv is None:
            continue
        key = (r.get(facet, "") if facet else "", r.get(by, ""), xv)
        ok = r.get("status") in ("optimal", "locally_optimal", "feasible") and \
            r.get("feasible") in ("True", "true", "1")
        yv = _num(r.get(y))
        if ok and yv is not None:
            cells[key].append(yv)
        else:
            failed[key] += 1
    series: dict[tuple[str, str], list[Point]] = defaultdict(list)
    for key in sorted(set(cells) | set(failed), key=lambda k: (k[0], k[1], k[2])):
        vals = cells.get(key, [])
        n = len(vals)
        if n:
            mean = sum(vals) / n
            sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else 0.0
            half = 1.96 * sd / math.sqrt(n)
        else:
            mean, half = math.nan, math.nan
        series[(key[0], key[1])].append((key[2], mean, half, n, failed.get(key, 0)))
    return series


def plot_sweep(rows: Sequence[dict[str, str]], x: str, ys: Sequence[str], out: str | Path,
               by: str = "method", facet: str | None = None, title: str = "") -> Path:
    """Draw each metric in ``ys`` against ``x`` (a panel per metric and facet value)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("plotting needs matplotlib: pip install 'mel_opt[plot]'") from None
    if not rows:
        raise UsageError("nothing to plot: the table is empty")
    if x not in rows[0]:
        raise UsageError(f"column {x!r} not in the table; columns: {', '.join(rows[0])}")
    for y in ys:
        if y not in rows[0]:
            raise UsageError(f"metric {y!r} not in the table; columns: {', '.join(rows[0])}")
    facets = [""]
    if facet:
        facets = sorted({r.get(facet, "") for r in rows},
                        key=lambda v: (_num(v) is None, _num(v) or 0, v))
    fig, axes = plt.subplots(len(ys), len(facets), figsize=(5.2 * len(facets), 3.6 * len(ys)),
                             squeeze=False)
    for i, y in enumerate(ys):
        data = aggregate(rows, x, y, by, facet)
        for j, fv in enumerate(facets):
            ax: Any = axes[i][j]
            for (f, name), pts in sorted(data.items()):
                if f != fv:
                    continue
                xs = [p[0] for p in pts]
                ms = [p[1] for p in pts]
                hs = [p[2] for p in pts]
                nfail = sum(p[4] for p in pts)
                label = name + (f" ({nfail} without answer)" if nfail else "")
                line = ax.plot(xs, ms, marker="o", ms=3, label=label)[0]
                lo = [m - h for m, h in zip(ms, hs, strict=True)]
                hi = [m + h for m, h in zip(ms, hs, strict=True)]
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.18, linewidth=0)
            ax.set_xlabel(x)
            ax.set_ylabel(y)
            if facet:
                ax.set_title(f"{facet} = {fv}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp{out.suffix}")
    fig.savefig(tmp, dpi=130)
    plt.close(fig)
    tmp.replace(out)
    return out
