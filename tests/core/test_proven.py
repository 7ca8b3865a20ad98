"""What a result proves: ``metrics.proven`` and summary.csv's ``proven`` column name the
objectives an answer is proven optimal for."""

from __future__ import annotations

import csv
from pathlib import Path

from click.testing import CliRunner

import mel_opt
from mel_opt.cli import cli
from mel_opt.problems.mel_async import lexicographic

ROOT = Path(__file__).resolve().parents[2]
K20 = ROOT / "instances/mel-async/k20_T7p5.json"


def test_exact_proves_both_stages_and_says_so() -> None:
    res = mel_opt.solve(mel_opt.load_instance(K20), "exact")
    assert res.status.value == "optimal"
    assert res.metrics["proven"] == ["max_staleness", "avg_staleness"]


def test_a_skipped_second_stage_proves_only_the_maximum(monkeypatch) -> None:
    monkeypatch.setattr(lexicographic, "MAX_BINARIES", 0)  # stage 2 "too large": its
    monkeypatch.setattr(lexicographic, "MAX_DP_WORK", 0)  # MILP, and the DP that avoids it
    # s* = 2 here: the MILP stage (s* = 1 is solved without it, at any size)
    res = mel_opt.solve(mel_opt.load_instance(ROOT / "instances/mel-async/k20_T15.json"),
                        "exact")
    assert res.metrics["max_staleness"] == 2
    assert res.status.value == "optimal" and res.metrics["proven"] == ["max_staleness"]
    assert "second stage too large" in res.message


def test_heuristics_prove_nothing_and_exact_methods_their_objective() -> None:
    inst = mel_opt.load_instance(K20)
    assert mel_opt.solve(inst, "eta").metrics["proven"] == []
    med = mel_opt.load_instance(ROOT / "instances/med/mays2023_n4_m2.json")
    assert mel_opt.solve(med, "exact").metrics["proven"] == ["task_delay"]


def test_summary_csv_has_a_proven_column(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "k20.json").write_text(K20.read_text())
    res = CliRunner().invoke(cli, ["batch", str(src), "-o", str(tmp_path / "out"),
                                   "--methods", "exact,eta"])
    assert res.exit_code == 0, res.output
    with open(tmp_path / "out" / "summary.csv", newline="") as fh:
        rows = {r["method"]: r for r in csv.DictReader(fh)}
    assert rows["exact"]["proven"] == "max_staleness;avg_staleness"
    assert rows["eta"]["proven"] == ""


def test_a_first_call_imports_outside_the_methods_clock() -> None:
    import json
    import subprocess
    import sys

    code = (
        "import json, sys, mel_opt\n"
        "assert 'scipy.optimize' not in sys.modules\n"
        f"inst = mel_opt.load_instance({str(K20)!r})\n"
        "r = mel_opt.solve(inst, 'kkt-sai')\n"
        "print(json.dumps({'timings': r.timings, 'solve': r.solve_time_s}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    doc = json.loads(out.strip().splitlines()[-1])
    # scipy was imported before the method's clock started, and reported apart
    assert "import" in doc["timings"] and doc["timings"]["solve"] == doc["solve"]
