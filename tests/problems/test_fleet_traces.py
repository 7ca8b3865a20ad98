"""Fleets from a FedScale trace scaled to the run's model: the reference model's cost, the
model's cost from its layers, ``median_ops_per_s`` used, and instances that solve."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.cli.app import cli
from mel_opt.mlp import MLP, TWONN_LAYERS, forward_flops_per_sample, layers_for
from mel_opt.problems.dab.generate import TWONN_TRAIN_OPS
from mel_opt.problems.dab.generate import generate as dab_generate
from mel_opt.problems.fleet import REFERENCE_FLOPS_PER_SAMPLE
from mel_opt.problems.mel_async.generate import OPS_PER_SAMPLE
from mel_opt.problems.mel_async.generate import generate as async_generate


def _capacity(path: Path, computation_ms: list[float], kbps: float = 20_000.0) -> Path:
    path.write_bytes(pickle.dumps({i: {"computation": c, "communication": kbps}
                                   for i, c in enumerate(computation_ms)}))
    return path


def test_model_costs_from_layers_by_hand() -> None:
    assert forward_flops_per_sample(TWONN_LAYERS) == 2 * (784 * 50 + 50 * 20 + 20 * 10) == 80_800
    assert forward_flops_per_sample(layers_for("mlp000", 784, 10)) == 560_880
    # the training count of the same module: forward + weight gradient + input gradient but
    # for the first layer, i.e. 2 x forward + 2 x (1,000 + 200)
    assert MLP(TWONN_LAYERS).train_flops_per_sample() == 2 * 80_800 + 2 * 1_200
    assert REFERENCE_FLOPS_PER_SAMPLE == 2 * 300e6  # MobileNetV2's 300 M multiply-adds


def test_median_ops_per_s_keeps_the_traces_ratios(tmp_path: Path) -> None:
    # latencies 10, 20, 40 ms: the file's median client (20 ms) runs at 1e9 operations/s,
    # the 10 ms one twice as fast, the 40 ms one half as fast
    path = _capacity(tmp_path / "cap", [10.0, 20.0, 40.0])
    doc = async_generate("fleet", learners=3, params={"trace": f"fedscale:{path}",
                                                      "median_ops_per_s": "1e9"})
    assert [x["cpu_hz"] for x in doc["learners"]] == pytest.approx([2e9, 1e9, 5e8], rel=1e-12)
    doc = dab_generate("fleet", learners=3, params={"trace": f"fedscale:{path}",
                                                    "median_ops_per_s": "1e9"})
    want = np.array([2e9, 1e9, 5e8]) / (TWONN_TRAIN_OPS * 500)
    assert [x["train_rate"] for x in doc["learners"]] == pytest.approx(want, rel=1e-12)


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


@pytest.mark.parametrize(("params", "match"), [
    (["trace=fedscale:{cap}", "median_ops_per_s=1e9", "reference_flops_per_sample=1e9"],
     "both set a FedScale trace's speed scale; give one of them"),
    (["reference_flops_per_sample=1e9"], "scales a FedScale trace's compute; without"),
    (["trace=fedscale:{cap}", "reference_flops_per_sample=0"],
     "reference_flops_per_sample must lie in [1e3, 1e15]"),
])
def test_scale_params_refused_with_one_line(tmp_path: Path, params: list[str],
                                            match: str) -> None:
    cap = _capacity(tmp_path / "cap", [10.0, 20.0, 40.0])
    for problem in ("mel-async", "dab"):
        args = ["generate", problem, "--preset", "fleet", "--learners", "3"]
        for p in params:
            args += ["--param", p.format(cap=cap)]
        code, text = _run(*args)
        assert code == 2, text
        assert match in text and "Traceback" not in text and text.count("\n") == 1, text


def test_a_fedscale_fleet_at_the_defaults_solves(tmp_path: Path) -> None:
    # 40 clients around the 40 ms of MobileNetV2 inference of a median FedScale phone
    rng = np.random.default_rng(5)
    ms = np.exp(rng.normal(np.log(40.0), 0.6, 40))
    cap = _capacity(tmp_path / "client_device_capacity", [float(x) for x in ms])
    for problem in ("mel-async", "dab"):
        out = tmp_path / f"{problem}.json"
        code, text = _run("generate", problem, "--preset", "fleet", "--learners", "30",
                          "--param", f"trace=fedscale:{cap}", "-o", str(out))
        assert code == 0, text
        doc = json.loads(out.read_text())
        code, text = _run("solve", str(out), "--json")
        assert code == 0, text
        assert json.loads(text)["verification"]["feasible"] is True
        if problem == "dab":  # 6e8 / (c / 1000) FLOP/s of inference, 3 x per training pass
            ops = np.array([x["train_rate"] for x in doc["learners"]]) * TWONN_TRAIN_OPS * 500
            c = 1000 * 6e8 / ops * TWONN_TRAIN_OPS / (3 * 80_800)
        else:
            c = 1000 * 6e8 / np.array([x["cpu_hz"] for x in doc["learners"]]) \
                * OPS_PER_SAMPLE / (3 * 560_880)
        assert set(np.round(c, 9)) <= set(np.round(ms, 9))  # the file's clients, unscaled back


def test_a_huge_integer_in_a_trace_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "cap"
    path.write_bytes(pickle.dumps({1: {"computation": 10**400, "communication": 1.0}}))
    code, text = _run("generate", "dab", "--preset", "fleet", "--learners", "1",
                      "--param", f"trace=fedscale:{path}")
    assert code == 2, text
    assert text.count("\n") == 1 and "Traceback" not in text and "internal error" not in text
    assert f"{path}: client '1': 'computation' is an integer of about 401 digits" in text


def test_learners_are_named_by_client_ids_and_repeats_get_a_suffix(tmp_path: Path) -> None:
    from mel_opt.problems.fleet import _unique

    assert _unique(["u", "u", "u#2", "v", "u"]) == ("u", "u#3", "u#2", "v", "u#4")
    path = tmp_path / "cap"
    path.write_bytes(pickle.dumps({"u": {"computation": 1.0, "communication": 1.0},
                                   17: {"computation": 2.0, "communication": 1.0}}))
    doc = dab_generate("fleet", learners=2, params={"trace": f"fedscale:{path}"})
    assert sorted(x["name"] for x in doc["learners"]) == ["17", "u"]
    doc = dab_generate("fleet", learners=6, params={"trace": f"fedscale:{path}",
                                                    "trace_replace": "1"})
    names = [x["name"] for x in doc["learners"]]
    assert len(set(names)) == 6 and {n.split("#")[0] for n in names} <= {"u", "17"}
    assert [x["name"] for x in dab_generate("fleet", learners=2)["learners"]] == ["phone0",
                                                                                 "phone1"]


def test_an_instance_field_out_of_range_names_the_traces_client(tmp_path: Path) -> None:
    # 1 microsecond of MobileNetV2 inference (the reader's lowest) gives the TwoNN
    # 1 / (500 x 3e-6 x 80,800 / 6e8) = 4.95e6 shards/s, past dab's 1e6
    path = tmp_path / "cap"
    path.write_bytes(pickle.dumps({"lo": {"computation": 1e-3, "communication": 1e3}}))
    code, text = _run("generate", "dab", "--preset", "fleet", "--learners", "1", "--param",
                      f"trace=fedscale:{path}")
    assert code == 2 and text.count("\n") == 1 and "Traceback" not in text, text
    assert "learners[0].train_rate: must be at most 1e+06, got 4950495.0" in text
    assert text.rstrip().endswith("(learner 'lo')")
