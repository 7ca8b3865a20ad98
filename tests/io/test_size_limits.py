"""Sizes are refused before the work: an input file past the documented limit is not read, a
simulation whose arrays would not fit is not drawn (one line with the numbers, exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mel_opt.cli import cli
from mel_opt.io.json_io import read_json_file, read_json_or_none
from mel_opt.limits import MAX_INPUT_BYTES, simulation_bytes

ROOT = Path(__file__).resolve().parents[2]
MED = str(ROOT / "instances" / "med" / "mays2023_n4_m2.json")
MEL = next((ROOT / "instances" / "mel-async").glob("*.json"))


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)  # a hole: no disk used, nothing to read but zeros
    return path


def test_a_file_past_the_limit_is_refused_unread(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    big = _sparse(tmp_path / "big.json", MAX_INPUT_BYTES + 1)
    read = []
    real_open = open

    def spy(file, mode="r", *a, **kw):  # type: ignore[no-untyped-def]
        fh = real_open(file, mode, *a, **kw)
        if str(file) == str(big):
            real_read = fh.read
            fh.read = lambda *x: read.append(x) or real_read(*x)  # type: ignore[method-assign]
        return fh

    monkeypatch.setattr("builtins.open", spy)
    res = CliRunner().invoke(cli, ["solve", str(big)])
    assert res.exit_code == 2, res.output
    assert f"{big}: {MAX_INPUT_BYTES + 1:,} bytes, larger than the {MAX_INPUT_BYTES:,}" in \
        res.output
    assert "malformed" not in res.output and read == []


def test_the_limit_is_configurable_and_applies_to_every_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MELOPT_MAX_INPUT_BYTES", "100")
    doc = tmp_path / "a.json"
    doc.write_text(json.dumps({"problem": "dab", "pad": "x" * 200}))
    with pytest.raises(Exception, match=r"a.json: 2\d\d bytes, larger than the 100 bytes"):
        read_json_file(doc)
    assert read_json_or_none(doc) is None
    # a device has no size: it is read up to the limit, then refused
    res = CliRunner().invoke(cli, ["validate", "/dev/zero"])
    assert res.exit_code == 2 and "/dev/zero: more than 100 bytes" in res.output, res.output
    # a batch records the refusal as the file's failure and goes on
    (tmp_path / "in").mkdir()
    doc.rename(tmp_path / "in" / "a.json")
    res = CliRunner().invoke(cli, ["batch", str(tmp_path / "in"), "-o", str(tmp_path / "o")])
    assert res.exit_code == 1 and "larger than the 100 bytes" in res.output, res.output
    monkeypatch.setenv("MELOPT_MAX_INPUT_BYTES", "lots")
    res = CliRunner().invoke(cli, ["validate", str(MEL)])
    assert res.exit_code == 2 and "MELOPT_MAX_INPUT_BYTES='lots'" in res.output
    monkeypatch.delenv("MELOPT_MAX_INPUT_BYTES")
    assert CliRunner().invoke(cli, ["validate", str(MEL)]).exit_code == 0


def test_a_simulation_too_large_is_refused_before_drawing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import mel_opt.problems.med.simulate as sim

    def never(*a: object, **kw: object) -> None:
        raise AssertionError("drew states")

    monkeypatch.setattr(sim, "draw_states", never)
    res = CliRunner().invoke(cli, ["simulate", MED, "--trials", "100000000"])
    assert res.exit_code == 2, res.output
    assert "--trials 100,000,000 x --cycles 5 x 4 learners would need about" in res.output
    assert "GiB of memory, more than the 2.0 GiB" in res.output


def test_the_simulation_limit_is_configurable(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MELOPT_MAX_SIMULATION_BYTES", str(2**20))
    trials = 2**20 // simulation_bytes(1, 5, 4, 2, 3) + 1
    res = CliRunner().invoke(cli, ["simulate", MED, "--trials", str(trials)])
    assert res.exit_code == 2 and "more than the 1.0 MiB" in res.output, res.output
    res = CliRunner().invoke(cli, ["sweep", "med", "--learners", "4", "--evaluate",
                                   "--trials", str(trials), "-o", str(tmp_path / "sw")])
    assert res.exit_code == 2 and "more than the 1.0 MiB" in res.output, res.output
    res = CliRunner().invoke(cli, ["sweep", "med", "--learners", "4:6", "--evaluate",
                                   "--trials", "400000", "-o", str(tmp_path / "sw2")])
    assert res.exit_code == 2 and "rows, more than the 1,000,000" in res.output, res.output
    for folder in ("sw", "sw2"):  # refused before the grid's files were written
        assert not list((tmp_path / folder).rglob("*.json")), folder


def test_running_out_of_memory_anyway_is_one_line_not_an_internal_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mel_opt.api
    import mel_opt.cli.simulate

    def exhausted(*a: object, **kw: object) -> None:
        raise MemoryError

    monkeypatch.setattr(mel_opt.cli.simulate, "simulate", exhausted)
    res = CliRunner().invoke(cli, ["simulate", MED])
    assert res.exit_code == 1, res.output
    assert res.output.startswith("error: out of memory") and "internal error" not in res.output
    monkeypatch.setattr(mel_opt.api, "solve", exhausted)
    res = CliRunner().invoke(cli, ["batch", str(ROOT / "instances" / "dab"), "-o",
                                   str(tmp_path / "o")])
    assert res.exit_code == 1 and "out of memory" in res.output, res.output
    assert "internal error" not in res.output
