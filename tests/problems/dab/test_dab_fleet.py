"""dab's ``fleet`` preset: hand-worked conversions from a FedScale trace, a fleet that solves."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from click.testing import CliRunner

from mel_opt.cli.app import cli
from mel_opt.problems.dab.generate import TWONN_TRAIN_OPS, generate
from mel_opt.problems.fleet import MEDIAN_OPS_PER_S


def test_a_fedscale_client_gives_hand_worked_rates(tmp_path: Path) -> None:
    # 20 ms of MobileNetV2 inference (6e8 FLOPs) per sample -> 0.06 s per sample and pass of
    # MobileNetV2; the TwoNN's inference is 2 x (39,200 + 1,000 + 200) = 80,800 FLOPs:
    # 0.06 x 80,800 / 6e8 = 8.08e-6 s per sample, 500 x that = 4.04e-3 s per shard:
    # train_rate = 1 / 4.04e-3 = 247.52 shards/s; 8,000 kbit/s of FedScale's 1,024 bits ->
    # 8,000 x 1,024 / 8 = 1,024,000 bytes/s.
    path = tmp_path / "cap"
    path.write_bytes(pickle.dumps({"x": {"computation": 20.0, "communication": 8000.0}}))
    doc = generate("fleet", learners=1, params={"trace": f"fedscale:{path}"})
    (learner,) = doc["learners"]
    assert learner["train_rate"] == pytest.approx(1 / 4.04e-3, rel=1e-12)
    assert learner["bandwidth_Bps"] == pytest.approx(1_024_000.0, rel=1e-12)
    assert learner["name"] == "x"
    assert TWONN_TRAIN_OPS == 6 * 40_480
    # a reference declared as costly as the TwoNN: FedScale's 30 s per shard, unscaled
    doc = generate("fleet", learners=1, params={"trace": f"fedscale:{path}",
                                                "reference_flops_per_sample": "80800"})
    assert doc["learners"][0]["train_rate"] == pytest.approx(1 / 30, rel=1e-12)


def test_published_fleet_median_and_solve(tmp_path: Path) -> None:
    doc = generate("fleet", learners=4001, seed=2)
    rates = sorted(x["train_rate"] for x in doc["learners"])
    # median phone: 1.5e9 / (242,880 x 500) = 12.35 shards/s
    assert rates[2000] == pytest.approx(MEDIAN_OPS_PER_S / (TWONN_TRAIN_OPS * 500), rel=0.05)
    out = tmp_path / "fleet.json"
    res = CliRunner().invoke(cli, ["generate", "dab", "--preset", "fleet", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert len(json.loads(out.read_text())["learners"]) == 100
    res = CliRunner().invoke(cli, ["solve", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["verification"]["feasible"] is True
    res = CliRunner().invoke(cli, ["generate", "dab", "--preset", "fleet", "--param",
                                   "trace=flash:" + str(tmp_path / "none.json")])
    assert res.exit_code == 2 and "none.json" in res.output and "Traceback" not in res.output
