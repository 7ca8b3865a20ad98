"""`--json` prints one JSON document on standard output, whatever the libraries log meanwhile
(Pyomo logs to the current sys.stdout; a time limit hit while it builds a model makes it log)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _melopt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mel_opt.cli", *args], capture_output=True,
                          text=True, timeout=300)


def test_solve_json_stdout_parses_when_pyomo_logs(tmp_path: Path) -> None:
    inst = tmp_path / "f.json"
    assert _melopt("generate", "feel", "--devices", "20000", "-o", str(inst)).returncode == 0
    res = _melopt("solve", str(inst), "-m", "ipopt", "--time-limit", "0.5", "--json")
    doc = json.loads(res.stdout)  # the whole of stdout is one document
    assert doc["method"] == "ipopt" and doc["status"] in ("time_limit", "feasible", "optimal",
                                                          "locally_optimal")


def test_compare_json_stdout_parses(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    res = _melopt("compare", str(root / "instances/feel/ren2021_cpu_densenet121_k6.json"),
                  "--json", "--time-limit", "5")
    assert res.returncode == 0, res.stderr
    json.loads(res.stdout)


def test_a_load_stopped_by_the_time_limit_still_prints_one_result_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from click.testing import CliRunner

    from mel_opt.cli import cli
    from mel_opt.cli import solve as solve_cli

    inst = tmp_path / "slow.json"
    inst.write_text(json.dumps({"problem": "dab", "schema_version": 1, "name": "x"}))

    def slow_load(path: Path, timings: dict | None = None) -> None:
        time.sleep(30)  # the guard timer stops this

    monkeypatch.setattr(solve_cli, "load_instance", slow_load)
    monkeypatch.setattr(solve_cli, "LOAD_GRACE_S", 0.2)
    res = CliRunner().invoke(cli, ["solve", str(inst), "--time-limit", "0.1", "--json"])
    doc = json.loads(res.stdout)  # one document, not an error line
    assert res.exit_code == 1
    assert doc["status"] == "time_limit" and doc["solution"] == {}
    assert doc["problem"] == "dab" and doc["method"] == "dab"  # named by the file, default
    assert "while loading the instance" in doc["message"]
