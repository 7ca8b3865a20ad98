"""Plots: sweeps, and the adaptive-tau objective G(tau) as a text chart or a figure.

Sweeps: a metric against the swept parameter, one line per method, with bands. The band is the
95% Student-t confidence interval of the mean over seeds (:mod:`mel_opt.stats`); points where
a method had no verified answer are left out and counted in the legend.

Figures need matplotlib (``pip install 'mel_opt[plot]'``); they are drawn off-screen (Agg) to
PNG, SVG or PDF and written atomically. The text chart needs nothing beyond numpy.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mel_opt.errors import UsageError, needs_extra
from mel_opt.io.atomic import atomic_path
from mel_opt.stats import mean_interval

if TYPE_CHECKING:
    from mel_opt.problems.adaptive_tau import Scan


def pyplot() -> Any:
    """matplotlib.pyplot drawing off-screen (Agg); a usage error if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(needs_extra("plotting (matplotlib)", "plot")) from None
    return plt


def save_figure(fig: Any, path: str | Path, dpi: int) -> Path:
    """Save a matplotlib figure atomically (format from the suffix) and close it, even on error.

    A failed ``savefig`` leaves neither a partial file nor a temporary one behind.
    """
    out = Path(path)
    try:
        with atomic_path(out) as tmp:
            fig.savefig(tmp, dpi=dpi)  # the temporary name keeps the suffix: same format
    finally:
        pyplot().close(fig)
    return out


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
        iv = mean_interval(vals)
        mean = math.nan if iv.mean is None else iv.mean
        half = math.nan if iv.mean is None else (iv.half_width or 0.0)
        series[(key[0], key[1])].append((key[2], mean, half, n, failed.get(key, 0)))
    return series


def plot_sweep(rows: Sequence[dict[str, str]], x: str, ys: Sequence[str], out: str | Path,
               by: str = "method", facet: str | None = None, title: str = "") -> Path:
    """Draw each metric in ``ys`` against ``x`` (a panel per metric and facet value)."""
    plt = pyplot()
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
                if all(m >= 0 for m in ms if m == m):  # a count, time or share: not below 0
                    lo = [max(v, 0.0) for v in lo]
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.18, linewidth=0)
            ax.set_xlabel(x)
            ax.set_ylabel(y)
            if all(float(p[0]).is_integer() for pts in data.values() for p in pts):
                ax.xaxis.get_major_locator().set_params(integer=True)
            if facet:
                ax.set_title(f"{facet} = {fv}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, out, dpi=130)


# ------------------------------------------------------------------------------------------
# adaptive tau: G(tau) over the search range
# ------------------------------------------------------------------------------------------
def _chart_range(G: np.ndarray) -> tuple[float, float, bool]:
    """(lowest, highest value shown, log scale?) of the finite values of G."""
    finite = G[np.isfinite(G)]
    lo_v = float(finite.min())
    hi_v = float(np.percentile(finite, 90)) if finite.size >= 10 else float(finite.max())
    hi_v = max(hi_v, lo_v)
    return lo_v, hi_v, lo_v > 0 and hi_v / lo_v > 100


def _chart_grid(taus: np.ndarray, G: np.ndarray, mark: int, cols: int,
                height: int) -> list[list[str]]:
    """The cells of :func:`terminal_chart`, row 0 at the top."""
    lo_v, hi_v, use_log = _chart_range(G)

    def y(v: float) -> float:
        return math.log10(v) if use_log else v

    y_lo = y(lo_v)
    span = (y(hi_v) - y_lo) or 1.0
    edges = np.linspace(0, taus.size, cols + 1).astype(int)
    grid = [[" "] * cols for _ in range(height)]
    mark_col = None
    for j in range(cols):
        seg = G[edges[j]:edges[j + 1]]
        if seg.size == 0:
            continue
        if taus[edges[j]] <= mark <= taus[edges[j + 1] - 1]:
            mark_col = j
        if not np.isfinite(seg).any():
            grid[0][j] = "^"
            continue
        v = float(seg[np.isfinite(seg)].min())
        if v > hi_v:
            grid[0][j] = "|"
            continue
        r = height - 1 - int(round((y(v) - y_lo) / span * (height - 1)))
        grid[r][j] = "•"
    if mark_col is not None:
        for r in range(height):
            if grid[r][mark_col] == "•":
                grid[r][mark_col] = "*"
    return grid


def terminal_chart(taus: np.ndarray, G: np.ndarray, mark: int, *, width: int = 72,
                   height: int = 14) -> str:
    """G(tau) as a text chart: one column per bin of tau (bin minimum), '*' at tau = mark.

    G is steep at the ends of the range and flat near its minimum, so the y axis spans the
    minimum up to the 90th percentile of the finite values (values above are drawn as '|' on
    the top row) and is logarithmic when that span exceeds a factor of 100; infinite values
    (h overflow) are drawn as '^' on the top row.
    """
    if not np.isfinite(G).any():
        return "(G is infinite over the whole range)"
    cols = max(1, min(width, taus.size))
    grid = _chart_grid(taus, G, mark, cols, height)
    lo_v, hi_v, use_log = _chart_range(G)
    top = f"{hi_v:.4g}"
    bottom = f"{lo_v:.4g}"
    pad = max(len(top), len(bottom))
    lines: list[str] = []
    for i, cells in enumerate(grid):
        label = top if i == 0 else bottom if i == height - 1 else ""
        lines.append(f"{label:>{pad}} |" + "".join(cells))
    lines.append(" " * pad + " +" + "-" * cols)
    left, right = f"tau={int(taus[0])}", f"{int(taus[-1])}"
    lines.append(" " * (pad + 2) + left + " " * max(1, cols - len(left) - len(right)) + right)
    scale = "log scale" if use_log else "linear scale"
    lines.append(f"G(tau), {scale}; * = chosen tau {mark}; | = above the chart; "
                 "^ = overflow (G infinite)")
    return "\n".join(lines)


def plot_tau_scan(sc: Scan, path: str | Path, *, name: str, tau_max: int) -> Path:
    """Draw G(tau) of a scan with the chosen tau, the first minimiser and the cap tau_max.

    The y axis is logarithmic when the finite values span more than a factor of 100; infinite
    values (h overflow) are left out. The format follows the suffix of ``path``.
    """
    plt = pyplot()
    taus, G = sc.taus, sc.G
    fig, ax = plt.subplots(figsize=(8, 4.5))
    finite = np.isfinite(G)
    ax.plot(taus[finite], G[finite], lw=1.5, label="G(tau)")
    g = G[finite]
    if g.size and g.min() > 0 and g.max() / g.min() > 100:
        ax.set_yscale("log")
    ax.axvline(sc.tau, color="C3", ls="--", label=f"chosen tau = {sc.tau}")
    if sc.tau_first_min != sc.tau:
        ax.axvline(sc.tau_first_min, color="C2", ls=":",
                   label=f"first minimiser = {sc.tau_first_min}")
    if tau_max < taus[-1]:
        ax.axvline(tau_max, color="grey", ls="-.", lw=1, label=f"tau_max = {tau_max}")
    ax.set_xlabel("tau (local updates between aggregations)")
    ax.set_ylabel("G(tau)")
    ax.set_title(f"{name}: control objective over 1..{int(taus[-1])}")
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, path, dpi=120)
