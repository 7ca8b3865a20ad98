"""The outputs of a live run read back as they were written."""

from __future__ import annotations

from pathlib import Path

import pytest

from mel_opt.live.report import draw, round_counts, rows_from_csv, write_files
from mel_opt.plot import pyplot


def test_rounds_csv_keeps_64_bit_node_ids_and_numbers(tmp_path: Path) -> None:
    node = 15612842300963721777  # a SuperNode id seen in a deployment: above 2**63
    rows = [{"round": 1, "learner": 0, "name": "n0", "node": node, "status": "ok",
             "measured_s": 0.25, "deadline_met": True, "d": 120, "tau": 3},
            {"round": 1, "learner": 1, "name": "n1", "node": 7, "status": "ignored",
             "reason": "compute_s must be a finite number, got nan", "measured_s": None}]
    write_files(tmp_path, rows, {"rounds": []})
    back = rows_from_csv(tmp_path / "rounds.csv")
    assert back[0]["node"] == node and isinstance(back[0]["node"], int)
    assert back[0]["measured_s"] == 0.25 and back[0]["deadline_met"] is True
    assert back[0]["d"] == 120 and back[0]["tau"] == 3
    assert back[1]["reason"] == "compute_s must be a finite number, got nan"
    assert back[1]["measured_s"] is None


def rows_of(rounds: int) -> list[dict]:
    """Two learners per round; in the last round learner 0 is late and learner 1 missing."""
    rows = []
    for r in range(1, rounds + 1):
        last = r == rounds
        rows.append({"round": r, "learner": 0, "name": "a", "status": "late" if last else "ok",
                     "compute_predicted_s": 1.0, "compute_measured_s": 1.5 if last else 1.1})
        rows.append({"round": r, "learner": 1, "name": "b",
                     "status": "missing" if last else "ok", "compute_predicted_s": 0.8,
                     "compute_measured_s": None if last else 0.7})
    return rows


@pytest.mark.parametrize("rounds", [1, 3])
def test_the_round_axis_has_whole_rounds_only(rounds: int) -> None:
    pytest.importorskip("matplotlib")
    summary = {"rounds": [{"round": r, "wall_s": float(r), "accuracy": 0.5}
                          for r in range(rounds + 1)]}
    fig = draw(rows_of(rounds), summary)
    ticks = fig.axes[0].get_xticks()
    assert list(ticks) == list(range(1, rounds + 1))  # not 0.96, 0.98, 1.00, ...
    lo, hi = fig.axes[0].get_xlim()
    assert all(lo <= t <= hi for t in ticks)
    pyplot().close(fig)


def test_late_and_missing_learners_are_drawn_not_dropped() -> None:
    pytest.importorskip("matplotlib")
    rows = rows_of(3)
    fig = draw(rows, {"rounds": []})
    ax = fig.axes[0]
    marked = {c.get_label(): c.get_offsets().tolist() for c in ax.collections}
    assert marked["late"] == [[3.0, 1.5]]  # at its measured time
    assert marked["missing"] == [[3.0, 0.8]]  # at its predicted time
    assert [t.get_text() for t in ax.texts] == ["1 late, 1 missing"]
    assert round_counts(rows) == {1: {"ok": 2}, 2: {"ok": 2}, 3: {"late": 1, "missing": 1}}
    pyplot().close(fig)
