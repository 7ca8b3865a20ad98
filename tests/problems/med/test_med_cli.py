"""The command line for med: generate, solve, methods, and the shipped instances."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mel_opt.api import load_instance, solve
from mel_opt.cli import cli

INSTANCES = sorted((Path(__file__).parents[3] / "instances" / "med").glob("*.json"))


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_generate_is_seeded_and_valid(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for f in (a, b):
        res = run("generate", "med", "--preset", "mays2023", "--learners", "6", "--tasks", "3",
                  "--seed", "9", "-o", str(f))
        assert res.exit_code == 0, res.output
    assert a.read_text() == b.read_text()
    doc = json.loads(a.read_text())
    assert [t["name"] for t in doc["tasks"]] == ["mnist_ffn", "mnist_cnn", "fashion"]
    assert doc["budget"] == 300 and len(doc["learners"]) == 6
    other = run("generate", "med", "--preset", "mays2023", "--learners", "6", "--tasks", "3",
                "--seed", "10")
    assert other.exit_code == 0 and other.stdout != a.read_text()


def test_generate_tasks_experiment_and_hetero():
    res = run("generate", "med", "--preset", "mays2023", "--tasks", "4", "--param",
              "experiment=tasks")
    doc = json.loads(res.stdout)
    assert doc["budget"] == 200
    # Table 4.1 + 5 s (Section 4.3.1.2)
    assert [t["deadline_s"] for t in doc["tasks"]] == [60.0, 45.0, 45.0, 45.0]
    res = run("generate", "med", "--preset", "hetero", "--learners", "20", "--tasks", "5",
              "--seed", "1")
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert len({lr["price"] for lr in doc["learners"]}) == 20


def test_generate_rejects_five_thesis_tasks():
    res = run("generate", "med", "--preset", "mays2023", "--tasks", "5")
    assert res.exit_code == 2
    assert "preset mays2023 has 4 tasks" in res.stderr


def test_methods_lists_med():
    res = run("methods", "med")
    assert res.exit_code == 0
    for name in ("exact", "highs", "mmtt-uncertain"):
        assert name in res.stdout


def test_solve_json_and_baseline(tmp_path):
    path = tmp_path / "i.json"
    run("generate", "med", "--learners", "5", "--tasks", "2", "--seed", "4", "-o", str(path))
    res = run("solve", str(path), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["status"] == "optimal" and data["verification"]["feasible"]
    assert len(data["solution"]["assignment"]) == 5 and len(data["solution"]["d"]) == 2
    base = json.loads(run("solve", str(path), "-m", "mmtt-uncertain", "--seed", "2",
                          "--json").stdout)
    assert base["status"] == "feasible"
    assert base["objective"] >= data["objective"] - 1e-9  # MED minimises this objective
    assert len(base["solution"]["planning_states"]) == 5


def test_simulate_rejects_other_problems(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"problem": "nonesuch", "schema_version": 1}))
    res = run("simulate", str(path))
    assert res.exit_code == 2 and "problem" in res.stderr


def test_shipped_instances_cover_the_thesis_grid():
    names = {p.stem for p in INSTANCES}
    for n in range(4, 11):
        for m in range(1, 5):
            assert f"mays2023_n{n}_m{m}" in names


@pytest.mark.parametrize("path", INSTANCES, ids=lambda p: p.stem)
def test_shipped_instances_solve_optimally(path):
    doc = json.loads(path.read_text())
    assert doc["problem"] == "med" and doc["schema_version"] == 1
    assert doc["name"] and "description" in doc
    res = solve(load_instance(path), time_limit=30)
    # the time to proven optimality on this grid is measured by
    # `benchmarks/bench_med_solvers.py --part preset`, not here
    assert res.status.value == "optimal" and res.ok


@pytest.mark.parametrize("preset, key", [("mays2023", "budget_factor"), ("hetero", "budget")])
def test_generate_rejects_a_parameter_the_preset_does_not_read(preset, key):
    # each preset reads its own keys: the other preset's key is a typo here, not ignored
    res = run("generate", "med", "--preset", preset, "--param", f"{key}=2")
    assert res.exit_code == 2
    assert f"unknown --param {key} for med preset {preset}" in res.stderr
