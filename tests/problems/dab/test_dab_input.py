"""dab: input validation, the independent verifier, and the CLI (solve, generate, errors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mel_opt.api import parse_instance
from mel_opt.cli import cli
from mel_opt.errors import InstanceError
from mel_opt.problems.dab import verify

SHARD = 1_568_000


def good() -> dict:
    return {"problem": "dab", "schema_version": 1, "name": "g", "deadline_s": 15.0,
            "iterations": 1, "model_bytes": 6.156 * SHARD, "shard_bytes": SHARD,
            "total_shards": 92,
            "learners": [{"name": "w", "train_rate": 25.08, "bandwidth_Bps": 9.25 * SHARD}]}


@pytest.mark.parametrize(
    ("patch", "match"),
    [
        ({"deadline_s": -1}, r"deadline_s: must be positive"),
        ({"deadline_s": float("nan")}, r"deadline_s: must be a finite number"),
        ({"iterations": 1.5}, r"iterations: must be a whole number"),
        ({"model_bytes": "big"}, r"model_bytes: must be a number, got string"),
        ({"shard_bytes": 0}, r"shard_bytes: must be positive"),
        ({"learners": []}, r"learners: must not be empty"),
        ({"total_shards": 0}, r"total_shards: must be positive"),
        ({"min_shards": 5, "max_shards": 4}, r"min_shards = 5 exceeds max_shards = 4"),
        ({"learners": [{"name": "a", "train_rate": float("inf"), "bandwidth_Bps": 1}]},
         r"learners\[0\]\.train_rate: must be a finite number"),
        ({"learners": [{"name": "a", "train_rate": 1, "bandwidth_Bps": -2}]},
         r"learners\[0\]\.bandwidth_Bps: must be positive"),
        ({"learners": [{"name": "a", "train_rate": 1, "bandwidth_Bps": 2},
                       {"name": "a", "train_rate": 1, "bandwidth_Bps": 2}]},
         r"learners\[1\]\.name: duplicate learner name 'a'"),
        ({"learners": [{"name": "a", "bandwidth_Bps": 2}]},
         r"learners\[0\]\.train_rate: is required but missing"),
        ({"learners": [3]}, r"learners\[0\]: must be an object"),
    ],
)
def test_bad_input_is_rejected_with_its_path(patch: dict, match: str) -> None:
    doc = {**good(), **patch}
    with pytest.raises(InstanceError, match=match):
        parse_instance(doc)


def test_every_problem_is_reported_at_once() -> None:
    doc = {**good(), "deadline_s": 0, "iterations": 0, "shard_bytes": None}
    with pytest.raises(InstanceError) as info:
        parse_instance(doc)
    paths = {i.path for i in info.value.issues}
    assert paths == {"deadline_s", "iterations", "shard_bytes"}


def test_meta_is_free_and_arrays_read_only() -> None:
    with pytest.raises(InstanceError, match="provenance: unknown field"):
        parse_instance({**good(), "provenance": "tests"})
    inst = parse_instance({**good(), "meta": {"provenance": "tests", "extra": [1, 2]}})
    assert inst.total_shards == 92 and inst.max_shards is None and inst.min_shards == 1
    with pytest.raises(ValueError):
        inst.train_rate[0] = 1.0


def test_verifier_rejects_an_overshooting_allocation() -> None:
    inst = parse_instance(good())
    ok = verify(inst, {"shards": [92]})
    assert ok.verification.feasible and ok.objective == 92
    # 93 shards: eta = 1.331027 + 93 * 0.147980 = 15.0933 s > 15 s -> violation 0.0933/15
    bad = verify(inst, {"shards": [93]})
    assert not bad.verification.feasible
    assert bad.verification.checks["deadline eta_k <= D (3.4)"] == pytest.approx(
        0.0933 / 15, abs=1e-4)
    assert bad.metrics["truancy"] > 0


def test_verifier_checks_centralised_allocations() -> None:
    inst = parse_instance(good())
    # 92 shards with tau = 1 is the CSA answer; 91 shards misses total_shards
    assert verify(inst, {"shards": [92], "tau": [1]}).verification.feasible
    short = verify(inst, {"shards": [91], "tau": [1]})
    assert not short.verification.feasible
    assert short.verification.checks["total_shards"] == pytest.approx(1 / 92)
    zero = verify(inst, {"shards": [92], "tau": [0]})
    assert zero.verification.checks["at_least_one_pass"] == 1.0


@pytest.mark.parametrize("sol", [{}, {"shards": [1, 2]}, {"shards": ["x"]},
                                 {"shards": [float("nan")]}])
def test_verifier_handles_malformed_solutions(sol: dict) -> None:
    checked = verify(parse_instance(good()), sol)
    assert not checked.verification.feasible and checked.objective is None


def test_verifier_staleness_metrics_by_hand() -> None:
    # taus 1, 2, 4 over three used learners: max 3, pairs |1-2| + |1-4| + |2-4| = 6, / 3 = 2
    d = good()
    d["learners"] = [{"name": n, "train_rate": 100.0, "bandwidth_Bps": 100 * SHARD}
                     for n in "abcd"]
    d["total_shards"] = 6
    inst = parse_instance(d)
    chk = verify(inst, {"shards": [2, 2, 2, 0], "tau": [1, 2, 4, 0]})
    assert chk.verification.feasible
    assert chk.metrics["max_staleness"] == 3.0
    assert chk.metrics["avg_staleness"] == pytest.approx(2.0)
    assert chk.metrics["excluded"] == ["d"]
    assert chk.metrics["shard_passes_per_cycle"] == 2 + 4 + 8


def test_cli_solve_and_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    f = tmp_path / "we.json"
    f.write_text(json.dumps(good()))
    res = runner.invoke(cli, ["solve", str(f), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["solution"] == {"shards": [92]}
    res = runner.invoke(cli, ["solve", str(f), "-m", "csa", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["solution"]["tau"] == [1]

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**good(), "iterations": -3}))
    res = runner.invoke(cli, ["solve", str(bad)])
    assert res.exit_code == 2
    assert "iterations: must be positive" in res.output
    assert "Traceback" not in res.output

    no_total = tmp_path / "nt.json"
    d = good()
    del d["total_shards"]
    no_total.write_text(json.dumps(d))
    res = runner.invoke(cli, ["solve", str(no_total), "-m", "csa"])
    assert res.exit_code == 2 and "needs total_shards" in res.output


def test_cli_generate_presets(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "w.json"
    res = runner.invoke(cli, ["generate", "dab", "--preset", "worked-example", "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["solve", str(out), "--json"])
    assert json.loads(res.output)["solution"] == {"shards": [92]}
    res = runner.invoke(cli, ["generate", "dab", "--learners", "4", "--seed", "7",
                              "--param", "deadline_s=30"])
    assert res.exit_code == 0
    doc = json.loads(res.output)
    assert doc["deadline_s"] == 30.0 and len(doc["learners"]) == 4
    res = runner.invoke(cli, ["generate", "dab", "--param", "speed=3"])
    assert res.exit_code == 2 and "unknown dab parameter 'speed'" in res.output
