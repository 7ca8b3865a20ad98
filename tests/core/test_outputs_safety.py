"""Outputs: never onto an input, one sweep per folder, umask modes, usage errors, safe CSV."""

from __future__ import annotations

import csv
import json
import os
import re
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

import mel_opt
from mel_opt.cli import cli
from mel_opt.io.csvsafe import csv_text, safe_cell

K3 = {"problem": "mel-async", "schema_version": 1, "cycle_time_s": 12.0, "total_samples": 17,
      "min_samples": 1, "max_samples": 17,
      "learners": [{"name": "a", "c2": 0.1, "c1": 0, "c0": 2.0},
                   {"name": "b", "c2": 0.2, "c1": 0, "c0": 2.0},
                   {"name": "c", "c2": 0.5, "c1": 0, "c0": 2.0}]}


def _run(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _k3(path: Path, **extra) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**K3, **extra}))
    return path


def _med(path: Path) -> Path:
    res = _run("generate", "med", "--learners", "3", "--tasks", "2", "-o", path)
    assert res.exit_code == 0, res.output
    return path


def test_output_never_replaces_an_input(tmp_path):
    k3 = _k3(tmp_path / "k3.json")
    original = k3.read_bytes()
    med = _med(tmp_path / "med.json")
    (tmp_path / "link.json").symlink_to(k3)
    cases = [
        ("solve", k3, "-o", k3),
        ("solve", tmp_path / "link.json", "-o", k3),  # the same file under another name
        ("solve", tmp_path, "-o", k3),  # one of the files found in a folder
        ("export", k3, "--format", "lp", "-o", k3),
        ("export", k3, "--format", "nl", "-o", tmp_path / "k3.nl"),  # writes k3.row/.col only
        ("simulate", med, "--trials", "1", "--cycles", "1", "-o", med),
    ]
    table = tmp_path / "t.csv"
    table.write_text("a,b\n1,2\n")
    cases.append(("plot", table, "--x", "a", "--y", "b", "-o", table))
    for case in cases[:4] + cases[5:]:
        res = _run(*case)
        assert res.exit_code == 2, (case, res.output)
        assert "is the input" in res.output and "Traceback" not in res.output
    assert k3.read_bytes() == original and json.loads(med.read_text())["problem"] == "med"
    assert table.read_text() == "a,b\n1,2\n"
    # an NL export beside the instance is fine: its label files are k3.row and k3.col
    assert _run(*cases[4]).exit_code == 0
    # ... but not when a label file would land on the instance
    (tmp_path / "m.col").write_text(json.dumps(K3))
    res = _run("export", tmp_path / "m.col", "--format", "nl", "-o", tmp_path / "m.nl")
    assert res.exit_code == 2 and "is the input" in res.output, res.output
    assert json.loads((tmp_path / "m.col").read_text()) == K3


def _sweep(out: Path, learners: str, *flags: str):
    return _run("sweep", "mel-async", "--preset", "mohammad2020", "--learners", learners,
                "--seeds", "1", "--methods", "exact", *flags, "-o", out)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_sweep_refuses_a_used_folder_and_tabulates_only_its_grid(tmp_path):
    out = tmp_path / "sw"
    assert _sweep(out, "5,6").exit_code == 0
    first = _csv_rows(out / "sweep.csv")
    assert sorted(r["learners"] for r in first) == ["5", "6"]
    again = _sweep(out, "7")
    assert again.exit_code == 2 and "not empty" in again.output and "--resume" in again.output
    stray = _k3(out / "instances" / "stray.json")
    res = _sweep(out, "6,7", "--resume")
    assert res.exit_code == 0, res.output
    rows = _csv_rows(out / "sweep.csv")
    assert sorted(r["learners"] for r in rows) == ["6", "7"]  # no row of the old grid's 5
    assert not list((out / "results").glob("stray*"))  # the stray file is not solved
    summary = _csv_rows(out / "summary.csv")
    assert sorted(Path(r["file"]).name.split("_")[0] for r in summary) == ["n6", "n7"]
    assert "resuming: 1 of 2" in res.output  # n6 was kept from the first sweep
    forced = _sweep(out, "6", "--force")
    assert forced.exit_code == 0 and "resuming" not in forced.output
    assert [r["learners"] for r in _csv_rows(out / "sweep.csv")] == ["6"]
    assert stray.exists()  # nothing of the user's is deleted


@pytest.fixture
def umask():
    saved = os.umask(0o022)
    yield os.umask
    os.umask(saved)


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_cli_outputs_follow_the_umask(tmp_path, umask, mask):
    umask(mask)
    k3 = _k3(tmp_path / "in" / "k3.json")
    outputs = [tmp_path / "r.json", tmp_path / "m.lp", tmp_path / "g.json",
               tmp_path / "b" / "summary.csv", tmp_path / "b" / "results" / "k3.default.json",
               tmp_path / "s.json"]
    for args in (("solve", k3, "-o", outputs[0]),
                 ("export", k3, "--format", "lp", "-m", "exact", "-o", outputs[1]),
                 ("generate", "mel-async", "-o", outputs[2]),
                 ("batch", k3.parent, "-o", tmp_path / "b")):
        res = _run(*args)
        assert res.exit_code == 0, (args, res.output)
    med = _med(tmp_path / "med.json")
    # exit code 1 when a scheme found no allocation; the result file is written either way
    assert _run("simulate", med, "--trials", "1", "--cycles", "1", "-o", outputs[5]) \
        .exit_code in (0, 1)
    for f in outputs:
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~mask, f


def test_unwritable_output_is_a_usage_error_naming_the_path(tmp_path):
    k3 = _k3(tmp_path / "k3.json")
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    cases = [("solve", k3, "-o", blocker / "r.json"),
             ("export", k3, "--format", "lp", "-o", blocker / "sub" / "m.lp"),
             ("generate", "mel-async", "-o", blocker / "g.json"),
             ("batch", tmp_path, "-o", blocker / "out"),
             ("sweep", "mel-async", "--learners", "3", "--seeds", "1", "-o", blocker / "sw")]
    if os.geteuid() != 0:  # root writes into a read-only folder anyway
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        cases.append(("solve", k3, "-o", ro / "r.json"))
    for args in cases:
        res = _run(*args)
        assert res.exit_code == 2, (args, res.output)
        assert "internal error" not in res.output and "Traceback" not in res.output
        named = str(args[-1])
        assert re.search(rf"error: .*({re.escape(str(blocker))}|{re.escape(named)})",
                         res.output), (args, res.output)


def test_csv_cells_cannot_become_formulas():
    assert safe_cell('=HYPERLINK("http://x","y")') == '\'=HYPERLINK("http://x","y")'
    for text in ("+cmd", "-1+A1", "@SUM(A1)", "\tx", "\rx", "-", "=1"):
        assert safe_cell(text) == "'" + text
    for value in (-1.5, -3, 0.0, True, "-1.5", "+3", "1e-3", "name", "", "a=b"):
        assert safe_cell(value) == value  # numbers (even as text) and plain text stay
    assert safe_cell(None) == ""
    text = csv_text(["a", "=b"], [{"a": "-2", "=b": "@x"}, {"a": -2.5}])
    assert text == "a,'=b\n-2,'@x\n-2.5,\n"


def test_batch_summary_and_sweep_csv_neutralise_names(tmp_path):
    name = '=HYPERLINK("http://example.invalid","click")'
    _k3(tmp_path / "in" / "k3.json", name=name)
    res = _run("batch", tmp_path / "in", "-o", tmp_path / "out")
    assert res.exit_code == 0, res.output
    (row,) = _csv_rows(tmp_path / "out" / "summary.csv")
    assert row["instance"] == "'" + name
    assert float(row["objective"]) == 0.0 and row["status"] == "optimal"


def test_every_csv_writer_goes_through_csv_text():
    """No module writes CSV with the csv module directly (csvsafe is the one place)."""
    root = Path(mel_opt.__file__).parent
    offenders = [p.relative_to(root).as_posix() for p in root.rglob("*.py")
                 if p.name != "csvsafe.py"
                 and re.search(r"csv\.(writer|DictWriter)\b", p.read_text(encoding="utf-8"))]
    assert offenders == []
