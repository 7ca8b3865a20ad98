"""feel instances: validation (every issue with its JSON path), the model, the generator."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.api import parse_instance
from mel_opt.cli import cli
from mel_opt.errors import InstanceError, UsageError
from mel_opt.problems.feel.generate import average_rate, exp_e1, generate
from mel_opt.problems.feel.instance import parse
from mel_opt.problems.feel.latency import coefficients

CPU_DOC = {
    "problem": "feel",
    "schema_version": 1,
    "name": "two-cpu",
    "processor": "cpu",
    "frame_s": {"uplink": 0.01, "downlink": 0.01},
    "gradient_bits": 1e6,
    "loss_decay_coeff": 1.0,
    "max_batch": 128,
    "cycles_per_sample": 1e8,
    "update_cycles": 0.0,
    "devices": [
        {"name": "fast", "cpu_hz": 1e9, "uplink_bps": 1e6, "downlink_bps": 1e6},
        {"name": "slow", "cpu_hz": 2.5e8, "uplink_bps": 1e6, "downlink_bps": 1e6},
    ],
}

GPU_DOC = {
    "problem": "feel",
    "schema_version": 1,
    "processor": "gpu",
    "frame_s": {"uplink": 0.01, "downlink": 0.01},
    "gradient_bits": 1e6,
    "loss_decay_coeff": 1.0,
    "max_batch": 64,
    "devices": [
        {"uplink_bps": 1e6, "downlink_bps": 2e6, "t_low_s": 0.5, "slope_s_per_sample": 0.01,
         "batch_threshold": 16, "update_s": 0.1},
        {"uplink_bps": 3e6, "downlink_bps": 1e6, "t_low_s": 0.2, "slope_s_per_sample": 0.02,
         "batch_threshold": 100, "update_s": 0.0},
        {"uplink_bps": 2e6, "downlink_bps": 1e6, "t_low_s": 0.1, "slope_s_per_sample": 0.05,
         "batch_threshold": 0, "update_s": 0.2},
    ],
}


def with_(doc: dict, path: str, value: object) -> dict:
    """A deep copy of ``doc`` with the value at ``a.b[2].c`` replaced (or removed: ...)."""
    out = copy.deepcopy(doc)
    keys: list[object] = []
    for part in path.replace("]", "").split("."):
        name, *idx = part.split("[")
        keys.append(name)
        keys.extend(int(i) for i in idx)
    target = out
    for k in keys[:-1]:
        target = target[k]  # type: ignore[index]
    if value is ...:
        del target[keys[-1]]  # type: ignore[arg-type]
    else:
        target[keys[-1]] = value  # type: ignore[index]
    return out


def test_valid_cpu_instance_is_frozen_and_read_only() -> None:
    inst = parse_instance(CPU_DOC)
    assert inst.problem == "feel" and inst.K == 2 and not inst.is_gpu
    assert inst.device_names == ("fast", "slow")
    with pytest.raises(ValueError):
        inst.uplink_bps[0] = 1.0
    with pytest.raises(AttributeError):
        inst.max_batch = 3  # type: ignore[misc]


def test_informational_fields_and_meta_are_accepted_unknown_ones_are_not() -> None:
    doc = with_(CPU_DOC, "devices[0].distance_m", 42.0)
    doc["meta"] = {"anything": [1, 2]}
    assert parse_instance(doc).K == 2
    doc["generator_notes"] = {"anything": [1, 2]}
    with pytest.raises(InstanceError, match="generator_notes: unknown field"):
        parse_instance(doc)


def test_gpu_coefficients_follow_eq_27() -> None:
    co = coefficients(parse_instance(GPU_DOC))
    # device 0: threshold 16 inside [1, 64]: lo = 16, t(lo) = t_low = 0.5
    # device 1: threshold 100 > B_max = 64: data bound everywhere, lo = hi = 64, t = 0.2
    # device 2: threshold 0: lo = 1, t(1) = 0.1 + 0.05 * (1 - 0) = 0.15
    np.testing.assert_array_equal(co.lo, [16.0, 64.0, 1.0])
    np.testing.assert_allclose(co.compute_time(np.array([1.0, 1.0, 1.0])), [0.5, 0.2, 0.15])
    np.testing.assert_allclose(co.compute_time(np.array([20.0, 64.0, 3.0])),
                               [0.5 + 0.01 * 4, 0.2, 0.1 + 0.05 * 3])
    np.testing.assert_allclose(co.m, [0.1, 0.0, 0.2])
    # a_k = s T_f / R_k
    np.testing.assert_allclose(co.a, [1e6 * 0.01 / 1e6, 1e6 * 0.01 / 3e6, 1e6 * 0.01 / 2e6])


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("processor", "tpu", r"processor: must be one of 'cpu', 'gpu', got 'tpu'"),
        ("frame_s", ..., r"frame_s: is required but missing"),
        ("frame_s.uplink", -0.01, r"frame_s.uplink: must be positive, got -0.01"),
        ("frame_s", [0.01], r"frame_s: must be an object"),
        ("gradient_bits", float("nan"), r"gradient_bits: must be a finite number"),
        ("loss_decay_coeff", "1", r"loss_decay_coeff: must be a number, got string '1'"),
        ("max_batch", 12.5, r"max_batch: must be a whole number, got 12.5"),
        ("max_batch", 0, r"max_batch: must be at least 1, got 0"),
        ("global_batch", 1, r"global_batch: must lie in \[K, K \* max_batch\] = \[2, 256\]"),
        ("global_batch", 257, r"global_batch: must lie in"),
        ("cycles_per_sample", ..., r"cycles_per_sample: is required but missing"),
        ("update_cycles", -1.0, r"update_cycles: must be non-negative, got -1.0"),
        ("devices", [], r"devices: must not be empty"),
        ("devices[1].cpu_hz", float("inf"), r"devices\[1\].cpu_hz: must be a finite number"),
        ("devices[0].uplink_bps", 0, r"devices\[0\].uplink_bps: must be positive, got 0"),
        ("devices[1].name", "fast", r"devices\[1\].name: duplicate device name 'fast'"),
        ("devices[1]", "dev", r"devices\[1\]: must be an object"),
        ("gradient_bits", 1e300, r"gradient_bits: must be at most 1e\+12, got 1e\+300"),
    ],
)
def test_bad_cpu_input_names_the_path(path: str, value: object, message: str) -> None:
    with pytest.raises(InstanceError, match=message):
        parse_instance(with_(CPU_DOC, path, value))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("devices[0].t_low_s", ..., r"devices\[0\].t_low_s: is required but missing"),
        ("devices[1].batch_threshold", 2.5,
         r"devices\[1\].batch_threshold: must be a whole number, got 2.5"),
        ("devices[2].slope_s_per_sample", -1, r"devices\[2\].slope_s_per_sample: must be positive"),
        ("devices[2].update_s", None, r"devices\[2\].update_s: must be a number, got null"),
    ],
)
def test_bad_gpu_input_names_the_path(path: str, value: object, message: str) -> None:
    with pytest.raises(InstanceError, match=message):
        parse_instance(with_(GPU_DOC, path, value))


def test_every_issue_is_reported_at_once() -> None:
    doc = with_(with_(CPU_DOC, "max_batch", -3), "devices[1].downlink_bps", "fast")
    with pytest.raises(InstanceError) as err:
        parse(doc)
    paths = {i.path for i in err.value.issues}
    assert paths == {"max_batch", "devices[1].downlink_bps"}


def test_cli_rejects_bad_file_with_one_line_and_exit_2(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(with_(CPU_DOC, "devices[0].cpu_hz", -1.0)))
    res = CliRunner().invoke(cli, ["solve", str(bad)])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "devices[0].cpu_hz: must be positive, got -1.0" in lines[0]
    assert "Traceback" not in res.output


# --------------------------------------------------------------------------------------------
# generator (Table I)
# --------------------------------------------------------------------------------------------


def test_exp_e1_matches_quadrature_in_both_branches() -> None:
    # e^x E_1(x) = int_0^inf e^{-t} / (x + t) dt: Gauss-Laguerre is accurate for x >~ 1;
    # for small x compare E[ln(1 + X / x)] = e^x E_1(x) by a fine substitution t = u^4.
    x = np.array([2.0, 5.0, 30.0])
    t, w = np.polynomial.laguerre.laggauss(80)
    quad = np.array([(w / (xi + t)).sum() for xi in x])
    np.testing.assert_allclose(exp_e1(x), quad, rtol=1e-9)
    for xi in (1e-6, 1e-3, 0.5, 1.0):
        u = np.linspace(0.0, 40.0 ** 0.25, 400_001)
        tt = u**4
        f = np.log1p(tt / xi) * np.exp(-tt) * 4 * u**3
        val = float(np.sum((f[1:] + f[:-1]) * np.diff(u)) / 2)
        assert exp_e1(np.array([xi]))[0] == pytest.approx(val, rel=1e-7)


def test_average_rate_is_below_the_rate_at_average_snr() -> None:
    # Jensen: E[log2(1 + snr X)] < log2(1 + snr) (E X = 1); at 200 m the SNR is about 30 dB
    # (28 dBm - 101.8 dB path loss + 104 dBm of noise over 10 MHz) and the gap is < 1 bit/s/Hz.
    d = np.array([200.0])
    pl = 128.1 + 37.6 * math.log10(0.2)
    snr = 10 ** ((28 - pl - (-174 + 70)) / 10)
    r = average_rate(d)[0]
    top = 10e6 * math.log2(1 + snr)
    assert top - 10e6 < r < top


def test_generator_follows_table_one() -> None:
    doc = generate("ren2021", learners=12, seed=3, params={})
    inst = parse_instance(doc)
    assert inst.K == 12 and inst.max_batch == 128
    assert inst.frame_up == inst.frame_down == 0.01
    assert inst.gradient_bits == 32 * 8_062_504
    assert inst.cpu_hz is not None
    ghz = sorted(set((inst.cpu_hz / 1e9).round(3)))
    assert ghz == [0.7, 1.4, 2.1] and list(inst.cpu_hz).count(0.7e9) == 4
    dist = np.array([d["distance_m"] for d in doc["devices"]])
    assert np.all((dist >= 10.0) & (dist <= 200.0))
    np.testing.assert_allclose(inst.uplink_bps, average_rate(dist))
    assert generate(None, learners=12, seed=3, params={}) == doc  # seeded
    gpu = parse_instance(generate(None, learners=6, seed=3, params={"processor": "gpu",
                                                                   "model": "resnet18"}))
    assert gpu.is_gpu and gpu.gradient_bits == 32 * 33_161_024


def test_generator_rejects_bad_requests() -> None:
    with pytest.raises(UsageError, match="single learning task"):
        generate(None, learners=3, tasks=2, params={})
    with pytest.raises(UsageError, match="unknown --param colour"):
        generate(None, learners=3, params={"colour": "red"})
    with pytest.raises(UsageError, match="model must be one of"):
        generate(None, learners=3, params={"model": "vgg"})


def test_cli_generate_writes_a_valid_instance(tmp_path) -> None:
    out = tmp_path / "k6.json"
    res = CliRunner().invoke(cli, ["generate", "feel", "--preset", "ren2021", "--devices", "6",
                                   "--seed", "4", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert parse_instance(json.loads(out.read_text())).K == 6
    res = CliRunner().invoke(cli, ["generate", "feel", "--preset", "ren2021", "--devices", "6",
                                   "--param", "processor=fpga"])
    assert res.exit_code == 2 and "processor must be cpu or gpu" in res.output
