"""adaptive-tau: validation messages, generator presets and the tau-scan command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.api import parse_instance
from mel_opt.cli import cli
from mel_opt.errors import InstanceError
from mel_opt.plot import terminal_chart
from mel_opt.problems.adaptive_tau import verify


def good() -> dict:
    return {"problem": "adaptive-tau", "schema_version": 1, "name": "g", "beta": 1.0,
            "delta": 0.1, "rho": 1.0, "step_size": 0.01, "phi": 0.025, "tau_current": 10,
            "resources": [{"budget": 15.0, "local_cost": 0.013, "global_cost": 0.13}]}


@pytest.mark.parametrize(
    ("patch", "match"),
    [
        ({"beta": -1}, r"beta: must be non-negative"),
        ({"step_size": 0}, r"step_size: must be positive"),
        ({"phi": float("inf")}, r"phi: must be a finite number"),
        ({"tau_current": 2.5}, r"tau_current: must be a whole number"),
        ({"tau_max": 0}, r"tau_max: must be positive"),
        ({"use_min_loss": "yes"}, r"use_min_loss: must be true or false"),
        ({"resources": []}, r"resources: must not be empty"),
        ({"resources": [{"budget": 0.1, "local_cost": 0.013, "global_cost": 0.13}]},
         r"resources\[0\]\.budget: must exceed local_cost \+ global_cost"),
        ({"resources": [{"budget": 15, "local_cost": 0, "global_cost": 0.13}]},
         r"resources\[0\]\.local_cost: must be positive"),
        ({"resources": [{"budget": 15, "local_cost": 0.01, "global_cost": 0.1, "used": 16}]},
         r"resources\[0\]\.used: consumption 16 exceeds the budget 15"),
        ({"tau_current": 200_000}, r"search range"),
        ({"rho": None}, r"rho: must be a number, got null"),
    ],
)
def test_bad_input_is_rejected_with_its_path(patch: dict, match: str) -> None:
    with pytest.raises(InstanceError, match=match):
        parse_instance({**good(), **patch})


def test_defaults_and_read_only() -> None:
    inst = parse_instance({**good(), "meta": {"note": "free-form metadata is ignored"}})
    assert (inst.tau_max, inst.use_min_loss, inst.search_factor, inst.search_max) == (
        100, True, 10, 100)
    assert inst.resource_names == ("time",) and inst.used.tolist() == [0.0]
    with pytest.raises(ValueError):
        inst.budget[0] = 1.0


def test_small_budget_is_fine_without_min_loss() -> None:
    inst = parse_instance({**good(), "use_min_loss": False,
                           "resources": [{"budget": 0.1, "local_cost": 0.013,
                                          "global_cost": 0.13}]})
    assert inst.budget.tolist() == [0.1]


def test_verifier_rejects_out_of_range_tau() -> None:
    inst = parse_instance(good())
    assert verify(inst, {"tau": 5}).verification.feasible
    assert not verify(inst, {"tau": 101}).verification.feasible
    assert not verify(inst, {"tau": 2.5}).verification.feasible
    bad = verify(inst, {"tau": 0})
    assert not bad.verification.feasible and bad.objective is None
    assert not verify(inst, {"tau": "7"}).verification.feasible


@pytest.mark.parametrize("preset", ["svm", "cnn", "end-of-budget", "two-resources"])
def test_presets_generate_valid_solvable_instances(preset: str, tmp_path: Path) -> None:
    runner = CliRunner()
    f = tmp_path / "i.json"
    res = runner.invoke(cli, ["generate", "adaptive-tau", "--preset", preset, "--seed", "2",
                              "-o", str(f)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["solve", str(f), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["verification"]["feasible"] and 1 <= out["solution"]["tau"] <= 100
    if preset == "end-of-budget":
        assert out["metrics"]["last_round"] is True


def test_tau_scan_terminal_json_and_png(tmp_path: Path) -> None:
    f = tmp_path / "i.json"
    f.write_text(json.dumps(good()))
    runner = CliRunner()
    res = runner.invoke(cli, ["tau-scan", str(f)])
    assert res.exit_code == 0, res.output
    assert "* = chosen tau" in res.output and "tau_unconstrained" in res.output
    res = runner.invoke(cli, ["tau-scan", str(f), "--json"])
    data = json.loads(res.output)
    assert len(data["curve"]["tau"]) == 100 and len(data["curve"]["G"]) == 100
    G = np.array(data["curve"]["G"])
    assert data["tau_unconstrained"] == int(np.argmin(G)) + 1
    png = tmp_path / "plots" / "g.png"
    res = runner.invoke(cli, ["tau-scan", str(f), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in png.parent.iterdir() if p.name.startswith(".")]  # no temp left


def test_tau_scan_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    f = tmp_path / "i.json"
    f.write_text(json.dumps(good()))
    res = runner.invoke(cli, ["tau-scan", str(f), "--plot", str(tmp_path / "g.jpg")])
    assert res.exit_code == 2 and "PNG" in res.output
    dab = tmp_path / "d.json"
    dab.write_text(json.dumps({"problem": "dab", "schema_version": 1, "deadline_s": 1,
                               "iterations": 1, "model_bytes": 1, "shard_bytes": 1,
                               "learners": [{"train_rate": 1, "bandwidth_Bps": 1}]}))
    res = runner.invoke(cli, ["tau-scan", str(dab)])
    assert res.exit_code == 2 and "needs an adaptive-tau instance" in res.output
    bad = tmp_path / "b.json"
    bad.write_text(json.dumps({**good(), "phi": -1}))
    res = runner.invoke(cli, ["tau-scan", str(bad)])
    assert res.exit_code == 2 and "phi: must be positive" in res.output
    assert "Traceback" not in res.output


def test_terminal_chart_marks_the_chosen_tau_and_overflow() -> None:
    taus = np.arange(1, 11)
    G = np.array([9.0, 5, 3, 2, 1, 2, 3, np.inf, np.inf, np.inf])
    text = terminal_chart(taus, G, 5, width=10, height=5)
    rows = text.splitlines()
    assert rows[4].split("|")[1][4] == "*"  # tau = 5 is the minimum: bottom row, column 5
    assert rows[0].split("|")[1][7:] == "^^^"  # infinite G drawn on the top row
    assert "linear scale" in text
    # 20 values: the two largest (above the 90th percentile) go to the top row as '|'
    G = np.concatenate([[1000.0, 500.0], np.linspace(10, 1, 18)])
    rows = terminal_chart(np.arange(1, 21), G, 20, width=20, height=6).splitlines()
    assert rows[0].split("|", 1)[1][:2] == "||"
    assert rows[5].split("|", 1)[1][19] == "*"
