"""Bad input for mel-async: one clear message naming the field, exit code 2; fuzzed JSON."""

from __future__ import annotations

import copy
import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mel_opt
from mel_opt.cli import cli
from mel_opt.errors import InstanceError

GOOD = {
    "problem": "mel-async",
    "schema_version": 1,
    "cycle_time_s": 15.0,
    "total_samples": 60000,
    "min_samples": 500,
    "max_samples": 30000,
    "model": {"cycles_per_sample": 1123736, "sample_bits": 6272, "model_bits": 8974080},
    "learners": [
        {"name": "laptop0", "cpu_hz": 2.8e9, "rate_bps": 2.0e8},
        {"name": "pi1", "cpu_hz": 1.4e9, "rate_bps": 1.2e8},
        {"name": "laptop2", "cpu_hz": 3.0e9, "rate_bps": 3.0e8},
        {"name": "pi3", "cpu_hz": 1.3e9, "rate_bps": 1.0e8},
    ],
}


def mutated(path, value):
    doc = copy.deepcopy(GOOD)
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def test_good_instance_coefficients():
    inst = mel_opt.parse_instance(GOOD)
    # Eq. (2): C2 = 1,123,736 / 2.8e9; Eq. (4): C1 = 6272 / 2e8; C0 = 2 * 8,974,080 / 2e8
    assert inst.c2[0] == pytest.approx(1123736 / 2.8e9)
    assert inst.c1[0] == pytest.approx(6272 / 2.0e8)
    assert inst.c0[0] == pytest.approx(2 * 8974080 / 2.0e8)


def test_distributed_data_mode_drops_sample_upload():
    inst = mel_opt.parse_instance({**GOOD, "mode": "distributed-data"})
    assert inst.c1[0] == 0.0  # footnote 2: no sample term
    doc = copy.deepcopy(GOOD)
    doc["model"]["model_bits_per_sample"] = 10.0
    doc["mode"] = "distributed-data"
    assert mel_opt.parse_instance(doc).c1[1] == pytest.approx(20.0 / 1.2e8)


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("cycle_time_s",), KeyError, r"cycle_time_s: is required"),
        (("cycle_time_s",), "15", r"cycle_time_s: must be a number, got string"),
        (("cycle_time_s",), -1.0, r"cycle_time_s: must be positive"),
        (("cycle_time_s",), math.nan, r"cycle_time_s: must be a finite number"),
        (("total_samples",), 10.5, r"total_samples: must be a whole number"),
        (("total_samples",), True, r"total_samples: must be a whole number, got boolean"),
        (("min_samples",), 0, r"min_samples: must be positive"),
        (("min_samples",), 40000, r"d_l = 40000 exceeds max_samples"),
        (("max_samples",), 1000, r"K \* d_u = 4 \* 1000 = 4000 < total_samples"),
        (("learners",), [], r"learners: must not be empty"),
        (("learners",), {}, r"learners: must be a list"),
        (("learners", 1, "cpu_hz"), -5, r"learners\[1\]\.cpu_hz: must be positive"),
        (("learners", 2, "rate_bps"), math.inf, r"learners\[2\]\.rate_bps: must be a finite"),
        (("learners", 3, "rate_bps"), KeyError, r"learners\[3\]\.rate_bps: is required"),
        (("learners", 0, "name"), "pi1", r"learners\[1\]\.name: duplicate learner name"),
        (("model", "model_bits"), 0, r"model\.model_bits: must be positive"),
        (("model",), KeyError, r"model: is required when learners"),
        (("mode",), "federated", r"mode: must be one of"),
        (("schema_version",), 2, r"schema_version: must be at most 1"),
        (("problem",), "mel", r"problem: must be one of"),
    ],
)
def test_bad_field_named(path, value, match):
    with pytest.raises(InstanceError, match=match):
        mel_opt.parse_instance(mutated(path, value))


def test_infeasible_cycle_time_is_input_error():
    doc = mutated(("cycle_time_s",), 0.5)
    with pytest.raises(InstanceError, match=r"learners\[\d\]: cannot finish one update on "
                       r"min_samples = 500 within cycle_time_s = 0.5"):
        mel_opt.parse_instance(doc)


def test_every_problem_listed_at_once():
    doc = mutated(("cycle_time_s",), -1)
    doc["learners"][0]["cpu_hz"] = "fast"
    doc["min_samples"] = 1.5
    with pytest.raises(InstanceError) as info:
        mel_opt.parse_instance(doc)
    paths = {i.path for i in info.value.issues}
    assert paths == {"cycle_time_s", "learners[0].cpu_hz", "min_samples"}


def test_mixed_forms_rejected():
    doc = copy.deepcopy(GOOD)
    doc["learners"][0]["c2"] = 0.001
    with pytest.raises(InstanceError, match=r"learners\[0\]: give either the physical form"):
        mel_opt.parse_instance(doc)


def test_unknown_fields_are_errors_meta_is_free():
    doc = {**GOOD, "description": "x", "meta": {"tool": "y"}}
    assert mel_opt.parse_instance(doc).K == 4
    doc["learners"] = [{**GOOD["learners"][0], "location": [1, 2]}, *GOOD["learners"][1:]]
    with pytest.raises(InstanceError, match=r"learners\[0\]\.location: unknown field"):
        mel_opt.parse_instance(doc)


# -- the CLI: one line on stderr, exit 2 for bad input, 1 for infeasible ------------------------
def run(args, tmp_path=None):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "malformed JSON at line 1"),
        ("[1, 2]", "$: must be an object"),
        (json.dumps(mutated(("learners", 0, "cpu_hz"), None)), "learners[0].cpu_hz"),
        (json.dumps(mutated(("total_samples",), KeyError)), "total_samples: is required"),
        ('{"problem": "mel-async", "schema_version": 1, "cycle_time_s": NaN}', "cycle_time_s"),
    ],
)
def test_cli_bad_input_exit_2(tmp_path, text, needle):
    path = write(tmp_path, "bad.json", text)
    res = CliRunner().invoke(cli, ["solve", path])
    assert res.exit_code == 2
    assert needle in res.output
    assert "Traceback" not in res.output
    assert res.output.count("error:") == 1


def test_cli_missing_file_and_unknown_method(tmp_path):
    res = CliRunner().invoke(cli, ["solve", str(tmp_path / "nope.json")])
    assert res.exit_code == 2 and "no such file" in res.output
    path = write(tmp_path, "good.json", json.dumps(GOOD))
    res = CliRunner().invoke(cli, ["solve", path, "--method", "magic"])
    assert res.exit_code == 2 and "has no method 'magic'" in res.output


def test_cli_infeasible_exit_1_and_json(tmp_path):
    doc = {"problem": "mel-async", "schema_version": 1, "cycle_time_s": 1.0, "total_samples": 10,
           "min_samples": 1, "max_samples": 10,
           "learners": [{"name": "a", "c2": 0.2, "c1": 0.1, "c0": 0.0},
                        {"name": "b", "c2": 0.2, "c1": 0.1, "c0": 0.0}]}
    path = write(tmp_path, "inf.json", json.dumps(doc))
    res = CliRunner().invoke(cli, ["solve", path, "--json"])
    assert res.exit_code == 1
    body = json.loads(res.output)
    assert body["status"] == "infeasible" and body["verification"] is None


def test_cli_solve_writes_json_atomically(tmp_path):
    path = write(tmp_path, "good.json", json.dumps(GOOD))
    out = tmp_path / "out" / "res.json"
    res = CliRunner().invoke(cli, ["solve", path, "-o", str(out)])
    assert res.exit_code == 0, res.output
    body = json.loads(out.read_text())
    assert set(body) >= {"instance", "problem", "method", "status", "objective", "solution",
                         "metrics", "verification", "solve_time_s", "solver"}
    assert body["verification"]["feasible"] is True
    assert [p.name for p in out.parent.iterdir()] == ["res.json"]  # no temp file left


def test_cli_validate_and_methods(tmp_path):
    good = write(tmp_path, "good.json", json.dumps(GOOD))
    bad = write(tmp_path, "bad.json", json.dumps(mutated(("min_samples",), -3)))
    res = CliRunner().invoke(cli, ["validate", good, bad])
    assert res.exit_code == 2
    assert "valid mel-async instance" in res.output and "min_samples" in res.output
    res = CliRunner().invoke(cli, ["methods", "mel-async"])
    assert res.exit_code == 0
    for m in ("exact", "ipopt", "kkt-sai", "eta", "sync"):
        assert m in res.output


# -- property test: random and mutated JSON never gives anything but an instance or an error ----
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**12) | st.floats(allow_nan=True)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


ALL_PATHS = [p for p in _paths(GOOD) if p]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), json_values | st.just(KeyError)),
                min_size=1, max_size=4))
def test_fuzz_mutated_documents(mutations):
    doc = copy.deepcopy(GOOD)
    for path, value in mutations:
        node = doc
        try:
            for key in path[:-1]:
                node = node[key]
            if value is KeyError:
                del node[path[-1]]
            else:
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    try:
        inst = mel_opt.parse_instance(doc)
    except InstanceError as exc:
        assert exc.issues and all(i.path and i.message for i in exc.issues)
        return
    res = mel_opt.solve(inst, "exact")
    assert res.status.value in ("optimal", "infeasible")
    if res.status.value == "optimal":
        assert res.verification.feasible


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_fuzz_random_json(value):
    try:
        mel_opt.parse_instance(value)
    except InstanceError as exc:
        assert exc.issues


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_fuzz_random_text(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fz") / "x.json"
    path.write_text(text)
    try:
        mel_opt.load_instance(path)
    except InstanceError as exc:
        assert exc.issues


@pytest.mark.parametrize("preset, key", [("mohammad2020", "cycle_time"),
                                         ("random", "min_samples")])
def test_generate_rejects_unknown_params(preset, key):
    res = CliRunner().invoke(cli, ["generate", "mel-async", "--preset", preset,
                                   "--param", f"{key}=10"])
    assert res.exit_code == 2
    assert f"unknown --param {key} for mel-async preset {preset}" in res.stderr
    ok = CliRunner().invoke(cli, ["generate", "mel-async", "--preset", preset,
                                  "--param", "cycle_time_s=10"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["cycle_time_s"] == 10
