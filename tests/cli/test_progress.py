"""The CLI's progress bar of batch-like runs (:func:`mel_opt.cli.app.run_with_progress`): its
last frame counts the results a stopped run kept, even where the stop landed between a row
being counted by the run and by the bar."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mel_opt.batch import BatchInterrupted, BatchReport
from mel_opt.cli import app


def _row(i: int) -> dict[str, Any]:
    return {"file": f"d{i}.json", "instance": f"d{i}", "method": "m", "status": "optimal",
            "error": "", "feasible": True}


def test_a_stopped_runs_last_frame_counts_every_result_it_kept(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "stderr.txt"
    with open(out, "w") as fh:
        monkeypatch.setattr(app, "err", Console(file=fh, width=120))

        def runner(on_plan: Any, on_result: Any) -> None:
            on_plan(10, 2)  # 2 of 10 done by an earlier run
            rows = [_row(0), _row(1)]
            for i in range(2, 5):  # 3 results announced to the bar
                rows.append(_row(i))
                on_result(rows[-1])
            rows.append(_row(5))  # a 6th counted, the Ctrl-C landing before the bar saw it
            raise BatchInterrupted(BatchReport(rows, 2, 1.0, tmp_path / "summary.csv"), 10)

        with pytest.raises(BatchInterrupted):
            app.run_with_progress(runner, "batch")
    counts = re.findall(r"(\d+)/10\b", out.read_text())
    assert counts and counts[-1] == "6"  # 2 earlier + 3 announced + 1 not announced


def test_a_run_that_ends_shows_the_results_it_announced(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "stderr.txt"
    with open(out, "w") as fh:
        monkeypatch.setattr(app, "err", Console(file=fh, width=120))

        def runner(on_plan: Any, on_result: Any) -> str:
            on_plan(4, 0)
            for i in range(4):
                on_result(_row(i))
            return "done"

        assert app.run_with_progress(runner, "batch") == "done"
    assert re.findall(r"(\d+)/4\b", out.read_text())[-1] == "4"
