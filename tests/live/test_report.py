"""The outputs of a live run read back as they were written."""

from __future__ import annotations

from pathlib import Path

from mel_opt.live.report import rows_from_csv, write_files


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
