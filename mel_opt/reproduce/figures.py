"""Line-panel figures of the catalogue: our curves, with the paper's stated levels beside them.

Needs matplotlib (the ``plot`` extra); :func:`have_matplotlib` lets callers skip figures with a
note instead of failing. Drawn off-screen (Agg) to PNG.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mel_opt.io.atomic import atomic_write


@dataclass
class Line:
    """One curve: ``paper=True`` draws it as the paper's points (crosses, dashed)."""

    label: str
    xs: Sequence[float]
    ys: Sequence[float | None]
    paper: bool = False
    dashed: bool = False  # ours, drawn dashed (a curve shown beside the judged ones)


@dataclass
class Panel:
    title: str
    xlabel: str
    ylabel: str
    lines: list[Line] = field(default_factory=list)
    band: tuple[float, float] | None = None  # a range the paper states, shaded
    #: a range of ours per x (label, xs, lows, highs), shaded: e.g. a sensitivity band over
    #: readings of what the paper leaves unstated
    spread: tuple[str, Sequence[float], Sequence[float], Sequence[float]] | None = None
    xlog: bool = False  # a logarithmic x axis (points at x <= 0 are left out)
    #: names of the cases at x = 0, 1, ... (an axis of cases rather than numbers)
    cases: Sequence[str] | None = None


#: Readable axis labels (with units) of the column names the entries plot.
LABELS = {
    "cycle_time_s": "time of a global cycle [s]", "truancy_pct": "truancy [% of the deadline]",
    "accuracy": "validation accuracy", "loss": "validation loss",
    "seconds_to_target": "virtual seconds to the target [s]",
    "accuracy_at_horizon": "accuracy at a common virtual time", "speedup": "speedup [x]",
    "final_accuracy": "final validation accuracy",
}


def readable(key: str) -> str:
    """The axis label of column ``key`` (itself when none is known)."""
    return LABELS.get(key, key)


def whole_numbers(values: Sequence[Any]) -> bool:
    """Every finite value is a whole number (an axis of counts: K, cycles, tasks, cases)."""
    nums = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return bool(nums) and all(v.is_integer() for v in nums)


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def draw(panels: Sequence[Panel], path: Path, title: str = "", ncols: int = 3) -> None:
    """Draw ``panels`` in a grid and write the PNG to ``path``.

    The PNG is rendered in memory and written atomically (:func:`mel_opt.io.atomic.atomic_write`),
    so a reader never sees half a file.
    """
    import matplotlib.pyplot as plt

    fig = figure(panels, title, ncols)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buf.getvalue())


def figure(panels: Sequence[Panel], title: str = "", ncols: int = 3) -> Any:
    """The matplotlib figure of ``panels`` (see :func:`draw`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(panels)
    cols = min(ncols, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    for i, panel in enumerate(panels):
        ax: Any = axes[i // cols][i % cols]
        if panel.band is not None:
            ax.axhspan(*panel.band, color="grey", alpha=0.15, label="paper's stated range")
        if panel.spread is not None:
            label, sx, lo, hi = panel.spread
            ax.fill_between(sx, lo, hi, color="tab:blue", alpha=0.12, label=label)
        ours = 0  # our lines take colours in order, drawn or not: a scheme keeps its colour
        for line in panel.lines:
            pts = [(x, y) for x, y in zip(line.xs, line.ys, strict=True)
                   if y is not None and math.isfinite(y) and (x > 0 or not panel.xlog)]
            colour = f"C{ours % 10}"
            ours += 0 if line.paper else 1
            if not pts:
                continue
            xs, ys = zip(*pts, strict=True)
            if line.paper:
                style = "--" if len(set(xs)) > 1 else "none"
                ax.plot(xs, ys, marker="x", ls=style, color="black", alpha=0.7,
                        label=line.label)
            else:
                ax.plot(xs, ys, marker="o", ms=3, label=line.label, color=colour,
                        ls="--" if line.dashed else "-", lw=1.0 if line.dashed else 1.5)
        ax.set_title(panel.title, fontsize=9)
        ax.set_xlabel(readable(panel.xlabel))
        ax.set_ylabel(readable(panel.ylabel))
        if panel.xlog:
            ax.set_xscale("log")
        if panel.cases is not None:
            ax.set_xticks(range(len(panel.cases)), list(panel.cases), fontsize=7)
        elif not panel.xlog and whole_numbers([x for line in panel.lines for x in line.xs]):
            ax.xaxis.get_major_locator().set_params(integer=True)  # counts: no 12.5 learners
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        else:  # every value of the panel is missing (say, a target never reached)
            ax.text(0.5, 0.5, "no finite values", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8, color="grey")
    for j in range(n, rows * cols):
        axes[j // cols][j % cols].axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
