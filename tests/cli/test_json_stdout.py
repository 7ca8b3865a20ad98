"""`--json` prints one JSON document on standard output, whatever the libraries log meanwhile
(Pyomo logs to the current sys.stdout; a time limit hit while it builds a model makes it log)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


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
