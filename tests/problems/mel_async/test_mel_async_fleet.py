"""mel-async's ``fleet`` preset: published spreads, traces, hand-worked unit conversions."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.api import parse_instance
from mel_opt.cli.app import cli
from mel_opt.problems.fleet import (
    AI_BENCHMARK_CPU_SCORE,
    FLASH_DOWN_KBPS,
    FLASH_UP_KBPS,
    MEDIAN_OPS_PER_S,
    QUANTILE_PROBS,
    harmonic_rate,
)
from mel_opt.problems.mel_async.generate import MODEL_BITS, OPS_PER_SAMPLE, generate


def _fedscale(tmp_path: Path, clients: dict[str, tuple[float, float]]) -> Path:
    path = tmp_path / "client_device_capacity"
    path.write_bytes(pickle.dumps({k: {"computation": c, "communication": b}
                                   for k, (c, b) in clients.items()}))
    return path


def test_a_fedscale_client_gives_hand_worked_coefficients(tmp_path: Path) -> None:
    # 20 ms of MobileNetV2 inference per sample -> 3 x 20 / 1000 = 0.06 s per sample and
    # update of MobileNetV2 (6e8 FLOPs per inference); the DNN [784, 300, 124, 60, 10] costs
    # 2 x (235,200 + 37,200 + 7,440 + 600) = 560,880 FLOPs: C2 = 0.06 x 560,880 / 6e8
    # = 5.6088e-5 s. 8,000 kbit/s of FedScale's 1,024 bits -> 8.192e6 bit/s:
    # C1 = 6,272 / 8.192e6 = 7.65625e-4 s, C0 = 2 x 8,974,080 / 8.192e6 = 2.19094 s.
    path = _fedscale(tmp_path, {"only": (20.0, 8000.0)})
    doc = generate("fleet", learners=1, params={"trace": f"fedscale:{path}", "min_samples": "60000",
                                                "cycle_time_s": "5000"})  # all 60,000 samples fit
    (learner,) = doc["learners"]
    assert learner["rate_bps"] == pytest.approx(8.192e6, rel=1e-12)
    assert learner["name"] == "only"  # the trace's client id
    assert learner["cpu_hz"] == pytest.approx(OPS_PER_SAMPLE / 5.6088e-5, rel=1e-12)
    inst = parse_instance(doc, "<fleet>")
    assert inst.c2[0] == pytest.approx(5.6088e-5, rel=1e-12)
    # declaring the reference to cost what the DNN costs leaves FedScale's latency unscaled
    doc = generate("fleet", learners=1, params={"trace": f"fedscale:{path}", "min_samples": "60000",
                                                "cycle_time_s": "5000",
                                                "reference_flops_per_sample": "560880"})
    assert parse_instance(doc, "<fleet>").c2[0] == pytest.approx(0.06, rel=1e-12)
    assert inst.c1[0] == pytest.approx(7.65625e-4, rel=1e-12)
    assert inst.c0[0] == pytest.approx(2 * MODEL_BITS / 8.192e6, rel=1e-12)
    assert "client_device_capacity" in doc["description"]


def test_a_flash_user_gives_the_harmonic_rate(tmp_path: Path) -> None:
    # up 1,000 KB/s, down 3,000 KB/s: 2 / (1/1000 + 1/3000) = 1,500 KB/s = 1,536,000 B/s
    # = 12,288,000 bit/s; compute from the published spread.
    path = tmp_path / "speed_distri.json"
    path.write_text(json.dumps({"u": {"down_u": 3000, "down_sigma": 50, "up_u": 1000,
                                      "up_sigma": 20}}))
    doc = generate("fleet", learners=2, params={"trace": f"flash:{path}", "trace_replace": "1"})
    assert [x["rate_bps"] for x in doc["learners"]] == pytest.approx([12_288_000.0] * 2)
    assert "FLASH speed file speed_distri.json" in doc["description"]


def test_trace_draws_are_seeded_and_without_replacement(tmp_path: Path) -> None:
    path = _fedscale(tmp_path, {f"c{i}": (10.0 + i, 1000.0 * (i + 1)) for i in range(20)})
    spec = {"trace": f"fedscale:{path}"}
    a = generate("fleet", learners=20, seed=3, params=spec)
    b = generate("fleet", learners=20, seed=3, params=spec)
    assert a == b
    rates = sorted(x["rate_bps"] for x in a["learners"])  # all 20 clients, each once
    assert rates == pytest.approx([1.024e6 * (i + 1) for i in range(20)])
    assert sorted(x["name"] for x in a["learners"]) == sorted(f"c{i}" for i in range(20))
    c = generate("fleet", learners=5, seed=4, params=spec)
    assert len({x["rate_bps"] for x in c["learners"]}) == 5


def test_published_spreads_match_the_quantiles_claimed() -> None:
    K = 200_000
    doc = generate("fleet", learners=K, seed=11)
    cpu = np.array([x["cpu_hz"] for x in doc["learners"]])
    rate = np.array([x["rate_bps"] for x in doc["learners"]]) / 8 / 1024  # KB/s
    probs = QUANTILE_PROBS[1:-1]
    got = np.quantile(cpu, probs) / MEDIAN_OPS_PER_S
    want = np.array(AI_BENCHMARK_CPU_SCORE[1:-1]) / AI_BENCHMARK_CPU_SCORE[3]
    np.testing.assert_allclose(got, want, rtol=0.02)
    assert np.quantile(cpu, 0.9) / np.quantile(cpu, 0.1) == pytest.approx(3413.6 / 274.2,
                                                                          rel=0.03)
    assert cpu.min() >= MEDIAN_OPS_PER_S * 105 / 1548 * (1 - 1e-12)
    assert cpu.max() <= MEDIAN_OPS_PER_S * 4310 / 1548 * (1 + 1e-12)
    # up and down at one quantile: the rate's quantiles are the harmonic rates of the table's
    want_rate = harmonic_rate(np.array(FLASH_UP_KBPS[1:-1]), np.array(FLASH_DOWN_KBPS[1:-1]))
    np.testing.assert_allclose(np.quantile(rate, probs), want_rate, rtol=0.02)


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def test_fleet_instance_of_phones_solves_and_verifies(tmp_path: Path) -> None:
    # 30 phones: the preset's 100 take the exact method several seconds (a benchmark's
    # size, not a test's)
    out = tmp_path / "fleet.json"
    code, text = _run("generate", "mel-async", "--preset", "fleet", "--learners", "30",
                      "--seed", "0", "-o", str(out))
    assert code == 0, text
    assert len(json.loads(out.read_text())["learners"]) == 30
    code, text = _run("solve", str(out), "--json")
    assert code == 0, text
    result = json.loads(text)
    assert result["status"] == "optimal"
    assert result["verification"]["feasible"] is True
    assert result["verification"]["max_violation"] == 0.0


@pytest.mark.parametrize(("params", "match"), [
    (["trace=fedscale:{dir}/missing"], r"missing: cannot read the trace file"),
    (["trace=oort:{dir}/x"], r"--param trace expects fedscale:PATH or flash:PATH"),
    (["trace=fedscale:{cap}"], r"capacity: 3 clients, fewer than the 4 learners asked; draw "
                               r"with replacement with --param trace_replace=1"),
    (["trace=fedscale:{bad}"], r"bad: client 'c1': 'computation' must be a positive finite "
                               r"number, got -5"),
    (["trace_replace=2"], r"--param trace_replace must be 0 or 1"),
    (["median_ops_per_s=-1"], r"--param median_ops_per_s must be > 0"),
    (["bits_per_pixel=8"], r"unknown --param bits_per_pixel for mel-async preset fleet"),
])
def test_bad_traces_and_params_exit_2_with_one_line(tmp_path: Path, params: list[str],
                                                    match: str) -> None:
    cap = tmp_path / "capacity"
    cap.write_bytes(pickle.dumps({f"c{i}": {"computation": 5.0, "communication": 100.0}
                                  for i in range(3)}))
    bad = tmp_path / "bad"
    bad.write_bytes(pickle.dumps({"c1": {"computation": -5, "communication": 100.0}}))
    args = ["generate", "mel-async", "--preset", "fleet", "--learners", "4"]
    for p in params:
        args += ["--param", p.format(dir=tmp_path, cap=cap, bad=bad)]
    code, text = _run(*args)
    assert code == 2, text
    assert "Traceback" not in text
    assert re.search(match, text), text
