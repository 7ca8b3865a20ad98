"""feel methods end to end: verification, baselines, the verifier itself and the CLI."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.api import load_instance, parse_instance, solve
from mel_opt.cli import cli
from mel_opt.errors import UsageError
from mel_opt.problems import get_problem
from mel_opt.problems.feel import PROBLEM, verify
from mel_opt.problems.feel.generate import generate

SHIPPED = sorted((Path(__file__).parents[3] / "instances" / "feel").glob("*.json"))
FAST = ("closed-form", "online", "full-batch", "random-batch", "equal-slots")


def test_problem_is_registered() -> None:
    assert get_problem("feel") is PROBLEM
    assert PROBLEM.default_method == "closed-form" and PROBLEM.sense == "max"
    assert PROBLEM.presets == ("ren2021", "ren2021-compressed")


def test_ships_k6_and_k12_for_cpu_and_gpu() -> None:
    kinds = {(load_instance(p).processor, load_instance(p).K) for p in SHIPPED}
    assert {("cpu", 6), ("cpu", 12), ("gpu", 6), ("gpu", 12)} <= kinds
    for p in SHIPPED:
        doc = json.loads(p.read_text())
        assert doc["schema_version"] == 1 and doc["name"] and "Table I" in doc["description"]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_method_passes_verification_on_shipped_instances(path: Path) -> None:
    inst = load_instance(path)
    results = {m: solve(inst, m, seed=3) for m in FAST}
    best = results["closed-form"]
    # its speed is measured by benchmarks/bench_feel_methods.py ("time ms"), not here
    assert best.status.value == "optimal"
    for m, res in results.items():
        if inst.global_batch is not None and m in ("online", "full-batch"):
            assert res.status.value == "infeasible" and "global_batch" in res.message
            continue
        assert res.ok, (m, res.message, res.verification)
        sol = res.solution
        assert all(isinstance(b, int) and 1 <= b <= inst.max_batch for b in sol["batch"])
        assert sum(sol["batch"]) == sol["global_batch"]
        assert sum(sol["uplink_slots"]) <= inst.frame_up * (1 + 1e-9)  # (17b)
        assert sum(sol["downlink_slots"]) <= inst.frame_down * (1 + 1e-9)  # (17c)
        assert min(sol["uplink_slots"]) > 0 and min(sol["downlink_slots"]) > 0
        assert res.objective <= best.objective * (1 + 1e-12), m


def test_baselines_do_what_they_say() -> None:
    inst = parse_instance(generate(None, learners=6, seed=5, params={}))
    assert solve(inst, "online").solution["batch"] == [1] * 6
    assert solve(inst, "full-batch").solution["batch"] == [128] * 6
    r1 = solve(inst, "random-batch", seed=1).solution["batch"]
    assert r1 == solve(inst, "random-batch", seed=1).solution["batch"]
    assert r1 != solve(inst, "random-batch", seed=2).solution["batch"]
    eq = solve(inst, "equal-slots").solution
    assert eq["uplink_slots"] == pytest.approx([0.01 / 6] * 6, rel=1e-15)
    assert eq["downlink_slots"] == pytest.approx([0.01 / 6] * 6, rel=1e-15)


def test_random_batch_meets_a_fixed_global_batch() -> None:
    doc = generate(None, learners=6, seed=5, params={"global_batch": "100"})
    res = solve(parse_instance(doc), "random-batch", seed=4)
    assert res.ok and res.solution["global_batch"] == 100


def test_equal_slots_picks_the_best_whole_batches_for_equal_slots() -> None:
    # Two CPU devices, equal slots T/2: upload K a_k / T = 2 s/R_k-scaled; exhaustive search.
    doc = {
        "problem": "feel", "schema_version": 1, "processor": "cpu",
        "frame_s": {"uplink": 0.01, "downlink": 0.01}, "gradient_bits": 1e6,
        "loss_decay_coeff": 1.0, "max_batch": 40, "cycles_per_sample": 1e8,
        "update_cycles": 5e7,
        "devices": [{"cpu_hz": 1e9, "uplink_bps": 1e6, "downlink_bps": 2e6},
                    {"cpu_hz": 3e8, "uplink_bps": 4e6, "downlink_bps": 1e6}],
    }
    inst = parse_instance(doc)
    res = solve(inst, "equal-slots")
    c = np.array([0.1, 1 / 3])
    up = 2 * 1e6 / np.array([1e6, 4e6])  # s T / (T/2 R) = 2 s / R
    D = max(0.05 + 2 * 1e6 / 2e6, 1 / 6 + 2 * 1e6 / 1e6)
    best = max(math.sqrt(x1 + x2) / (max(c[0] * x1 + up[0], c[1] * x2 + up[1]) + D)
               for x1, x2 in itertools.product(range(1, 41), repeat=2))
    assert res.objective == pytest.approx(best, rel=1e-13)
    fixed = solve(parse_instance({**doc, "global_batch": 33}), "equal-slots")
    best33 = max(math.sqrt(33) / (max(c[0] * x1 + up[0], c[1] * (33 - x1) + up[1]) + D)
                 for x1 in range(1, 33) if 1 <= 33 - x1 <= 40)
    assert fixed.solution["global_batch"] == 33
    assert fixed.objective == pytest.approx(best33, rel=1e-13)


def test_closed_form_options_are_checked() -> None:
    inst = load_instance(SHIPPED[0])
    with pytest.raises(UsageError, match="max_candidates must be a whole number >= 2"):
        solve(inst, "closed-form", options={"max_candidates": 1})
    with pytest.raises(UsageError, match="starts must be a whole number >= 1"):
        solve(inst, "ipopt", options={"starts": 0})
    with pytest.raises(UsageError, match="starts must be a whole number >= 1, got 2.5"):
        solve(inst, "ipopt", options={"starts": 2.5})
    with pytest.raises(UsageError, match=r"unknown option start for feel method ipopt "
                                         r"\(its options: starts, tol\)"):
        solve(inst, "ipopt", options={"start": 2})


def test_closed_form_reports_an_honest_bound_when_not_certified() -> None:
    inst = parse_instance(generate(None, learners=40, seed=8, params={"bits_per_element": "2"}))
    full = solve(inst, "closed-form")
    capped = solve(inst, "closed-form", options={"max_candidates": 2})
    assert full.metrics["integer_B_certified"] is True
    if full.solution["global_batch"] not in (
            math.floor(full.metrics["continuous_global_batch"]),
            math.ceil(full.metrics["continuous_global_batch"])):
        assert capped.status.value == "feasible"
    assert capped.metrics["efficiency_upper_bound"] >= full.objective * (1 - 1e-12)
    assert capped.objective <= full.objective * (1 + 1e-12)


# --------------------------------------------------------------------------------------------
# the verifier
# --------------------------------------------------------------------------------------------


def test_verifier_recomputes_the_metrics_from_the_paper() -> None:
    inst = load_instance(SHIPPED[0])
    res = solve(inst, "closed-form")
    m = res.metrics
    assert m["round_latency_s"] == pytest.approx(m["uplink_latency_s"] + m["downlink_latency_s"])
    assert res.objective == pytest.approx(
        inst.loss_decay_coeff * math.sqrt(res.solution["global_batch"]) / m["round_latency_s"])
    idle = np.array(m["idle_s"])
    busy = (np.array(m["compute_s"]) + np.array(m["upload_s"]) + np.array(m["download_s"])
            + np.array(m["update_s"]))
    np.testing.assert_allclose(idle + busy, m["round_latency_s"])
    assert idle.min() >= -1e-9 * m["round_latency_s"]
    assert m["max_idle_s"] == pytest.approx(idle.max())


@pytest.mark.parametrize(
    ("change", "check"),
    [
        (lambda s: s["uplink_slots"].__setitem__(0, s["uplink_slots"][0] * 1.01),
         "uplink budget (17b)"),
        (lambda s: s["downlink_slots"].__setitem__(1, s["downlink_slots"][1] + 0.001),
         "downlink budget (17c)"),
        (lambda s: s["batch"].__setitem__(0, s["batch"][0] + 0.5), "whole batches"),
        (lambda s: s.__setitem__("global_batch", s["global_batch"] + 1), "batch sum (17d)"),
        (lambda s: s["batch"].__setitem__(2, 0), "batch bounds (17e)"),
        (lambda s: s["uplink_slots"].__setitem__(3, 0.0), "slots positive (17f)"),
    ],
)
def test_verifier_catches_each_violation(change, check: str) -> None:
    inst = load_instance(SHIPPED[0])
    sol = json.loads(json.dumps(solve(inst, "closed-form").solution))
    change(sol)
    checked = verify(inst, sol)
    assert not checked.verification.feasible
    assert checked.verification.checks[check] > 1e-9


def test_verifier_rejects_malformed_solutions() -> None:
    inst = load_instance(SHIPPED[0])
    assert not verify(inst, {"batch": [1, 2]}).verification.feasible
    sol = solve(inst, "closed-form").solution
    assert not verify(inst, {**sol, "batch": [float("nan")] * inst.K}).verification.feasible
    assert not verify(inst, {**sol, "global_batch": "many"}).verification.feasible


def test_fixed_global_batch_is_enforced_by_the_verifier() -> None:
    doc = generate(None, learners=6, seed=5, params={"global_batch": "100"})
    inst = parse_instance(doc)
    free = solve(parse_instance({k: v for k, v in doc.items() if k != "global_batch"}),
                 "closed-form")
    assert free.solution["global_batch"] != 100
    assert not verify(inst, free.solution).verification.feasible


def test_build_model_exports_p1_or_p4() -> None:
    inst = load_instance(SHIPPED[0])
    m = PROBLEM.build_model(inst, "ipopt")  # type: ignore[misc]
    assert "P1" in m.name and len(m.uplink) == inst.K
    fixed = parse_instance(generate(None, learners=6, seed=5, params={"global_batch": "100"}))
    assert "P4" in PROBLEM.build_model(fixed, "ipopt").name  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------


def test_cli_solves_and_lists_methods() -> None:
    runner = CliRunner()
    res = runner.invoke(cli, ["solve", str(SHIPPED[0]), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["problem"] == "feel" and out["verification"]["feasible"] is True
    res = runner.invoke(cli, ["methods", "feel"])
    assert res.exit_code == 0
    for m in PROBLEM.methods:
        assert m in res.output
    res = runner.invoke(cli, ["solve", str(SHIPPED[0]), "--method", "magic"])
    assert res.exit_code == 2 and "has no method 'magic'" in res.output


def test_cli_infeasible_baseline_exits_1(tmp_path) -> None:
    doc = generate(None, learners=6, seed=5, params={"global_batch": "100"})
    f = tmp_path / "fixed.json"
    f.write_text(json.dumps(doc))
    res = CliRunner().invoke(cli, ["solve", str(f), "--method", "online"])
    assert res.exit_code == 1 and "infeasible" in res.output
