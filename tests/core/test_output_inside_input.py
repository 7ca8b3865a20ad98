"""A command that writes a folder refuses, before any work, a target that would replace a
file it reads (issue: `batch in -o in` overwrote an instance in in/results/ with a result;
`train in/summary.json -o in` replaced its input)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mel_opt.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DAB = (ROOT / "instances/dab/worked_example.json").read_text()


def test_batch_refuses_to_write_a_result_over_an_instance_it_reads(tmp_path: Path) -> None:
    src = tmp_path / "in"
    (src / "results").mkdir(parents=True)
    (src / "a.json").write_text(DAB)
    # an instance exactly where the batch would put a.json's result
    victim = src / "results" / "a.dab.json"
    victim.write_text(DAB)
    res = CliRunner().invoke(cli, ["batch", str(src), "-o", str(src), "--methods", "dab"])
    assert res.exit_code == 2, res.output
    assert "is an instance file, and the batch would write a result over it" in res.output
    assert victim.read_text() == DAB  # untouched
    assert not (src / "summary.csv").exists()


def test_train_refuses_an_output_folder_that_holds_its_input_name(tmp_path: Path) -> None:
    inst = tmp_path / "summary.json"
    inst.write_text(DAB)
    res = CliRunner().invoke(cli, ["train", str(inst), "--schemes", "dab", "--cycles", "1",
                                   "-o", str(tmp_path)])
    assert res.exit_code == 2, res.output
    assert "would replace the input" in res.output
    assert json.loads(inst.read_text())["problem"] == "dab"
