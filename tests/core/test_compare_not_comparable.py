"""compare: methods declared not comparable get no gap, never the reference, and a reason."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import mel_opt
from mel_opt.cli import cli
from mel_opt.compare import compare

ROOT = Path(__file__).resolve().parents[2]
# K = 2, tau = floor(1000/d1), floor(333.3/d2), d = 10 (test_mel_async_known): exact has
# staleness 31 with d = (7, 3); sync's common tau 125 has staleness 0 by letting learner 2 idle
K2 = {"problem": "mel-async", "schema_version": 1, "cycle_time_s": 10.0, "total_samples": 10,
      "min_samples": 1, "max_samples": 10,
      "learners": [{"name": "a", "c2": 0.01, "c1": 0, "c0": 0},
                   {"name": "b", "c2": 0.03, "c1": 0, "c0": 0}]}


def test_sync_is_not_compared_to_exact():
    cmp = compare(mel_opt.parse_instance(K2), ["exact", "eta", "sync"])
    assert cmp.reference is not None and cmp.reference.method == "exact"
    assert cmp.gaps["sync"] == (None, None)  # its 0 would read as a -100% gap
    assert cmp.gaps["exact"] == (0.0, 0.0)
    rows = {r["method"]: r for r in cmp.to_dict()["results"]}
    assert rows["sync"]["comparable"] is False and "idle" in rows["sync"]["reason"]
    assert rows["sync"]["gap_abs"] is None and rows["sync"]["objective"] == 0
    assert rows["eta"]["comparable"] is True and "reason" not in rows["eta"]


def test_sync_alone_has_no_reference():
    cmp = compare(mel_opt.parse_instance(K2), ["sync"])
    assert cmp.reference is None and cmp.not_comparable == {
        "sync": mel_opt.problems.get_problem("mel-async").methods["sync"].not_comparable}


def test_dab_csa_not_comparable():
    inst = mel_opt.load_instance(ROOT / "instances" / "dab" / "worked_example.json")
    cmp = compare(inst, ["dab", "csa"])
    assert cmp.reference is not None and cmp.reference.method == "dab"
    assert cmp.gaps["csa"] == (None, None)
    assert "csa" in cmp.not_comparable


def test_cli_compare_table_and_json(tmp_path):
    f = tmp_path / "k2.json"
    f.write_text(json.dumps(K2))
    res = CliRunner().invoke(cli, ["compare", str(f), "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["method"]: r for r in json.loads(res.output)["results"]}
    assert rows["sync"]["gap_abs"] is None and rows["sync"]["comparable"] is False
    table = CliRunner().invoke(cli, ["compare", str(f), "--methods", "exact,sync"],
                               env={"COLUMNS": "300"})
    assert "not comparable" in table.output
    assert "sync: not comparable: synchronous" in table.output


def test_cli_option_passed_and_checked(tmp_path):
    f = tmp_path / "k2.json"
    f.write_text(json.dumps(K2))
    ok = CliRunner().invoke(cli, ["solve", str(f), "-m", "kkt-sai", "--option",
                                  "rounding=paper", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["metrics"]["rounding"] == "paper"
    bad = CliRunner().invoke(cli, ["solve", str(f), "-m", "kkt-sai", "--option", "rounding=up"])
    assert bad.exit_code == 2 and "option rounding" in bad.output
    assert "Traceback" not in bad.output
    bad = CliRunner().invoke(cli, ["compare", str(f), "--option", "rounding"])
    assert bad.exit_code == 2 and "--option expects KEY=VALUE" in bad.output
