"""A batch reads every file it only peeks into through one tolerant reader: a deeply nested
JSON file (instance or earlier result) is reported and the batch goes on."""

from __future__ import annotations

import csv
from pathlib import Path

from click.testing import CliRunner

from mel_opt.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def test_deeply_nested_files_do_not_stop_a_batch(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "ok.json").write_text((ROOT / "instances/dab/worked_example.json").read_text())
    (src / "deep.json").write_text("[" * 200_000)
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["batch", str(src), "-o", str(out)])
    assert res.exit_code == 1 and "internal error" not in res.output  # one failure, reported
    with open(out / "summary.csv", newline="") as fh:
        rows = {Path(r["file"]).name: r for r in csv.DictReader(fh)}
    assert rows["deep.json"]["status"] == "invalid"
    assert "nested too deeply" in rows["deep.json"]["error"]
    assert rows["ok.json"]["status"] == "optimal"
    # a nested file where a result should be: --resume runs the job again instead of failing
    result = Path(rows["ok.json"]["result_file"])
    result.write_text("{" * 200_000)
    res = CliRunner().invoke(cli, ["batch", str(src), "-o", str(out), "--resume"])
    assert res.exit_code == 1 and "internal error" not in res.output
    assert '"status": "optimal"' in result.read_text()
