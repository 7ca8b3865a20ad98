"""Documented ranges: extreme numbers are refused with their JSON path (exit 2), never crash.

Each regression case below once ended in an internal error or a wrong answer (OverflowError,
Python's 4300-digit limit, C long overflow, ZeroDivisionError, NaN cast to an integer, an
interval fill that could not add up, a huge deadline called infeasible).
"""

from __future__ import annotations

import copy
import importlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mel_opt import api
from mel_opt.cli import cli
from mel_opt.errors import InstanceError
from mel_opt.io.fields import Field, walk
from mel_opt.problems import get_problem

ROOT = Path(__file__).resolve().parents[2] / "instances"
BASES = {
    "mel-async": ROOT / "mel-async" / "k5_T15.json",
    "dab": ROOT / "dab" / "worked_example.json",
    "med": ROOT / "med" / "mays2023_n4_m2.json",
    "feel-cpu": ROOT / "feel" / "ren2021_cpu_densenet121_k6.json",
    "feel-gpu": ROOT / "feel" / "ren2021_gpu_densenet121_k6.json",
    "adaptive-tau": ROOT / "adaptive-tau" / "svm_defaults.json",
}


def base(name: str) -> dict:
    return json.loads(BASES[name].read_text())


def put(doc: dict, path: str, value: object) -> dict:
    """A deep copy of ``doc`` with ``value`` at ``a.b[0].c`` (``[0][1]`` indexes lists)."""
    out = copy.deepcopy(doc)
    keys: list[object] = []
    for part in path.split("."):
        name, *idx = part.replace("]", "").split("[")
        keys.append(name)
        keys.extend(int(i) for i in idx)
    node = out
    for k in keys[:-1]:
        node = node[k]  # type: ignore[index]
    node[keys[-1]] = value  # type: ignore[index]
    return out


BIG = 10**400
CASES = [
    ("mel-async", "cycle_time_s", BIG, r"cycle_time_s: must be at most 1e\+09, got an integer "
     r"of 401 digits"),
    ("dab", "iterations", BIG, r"iterations: must be at most 1000000, got an integer of 401"),
    ("med", "tasks[0].shards", 2**63, r"tasks\[0\]\.shards: must be at most 1000000000, "
     r"got 9223372036854775808"),
    ("med", "tasks[1].iterations", 10**19, r"tasks\[1\]\.iterations: must be at most 1000000"),
    ("med", "tasks[0].iterations", 1e19, r"tasks\[0\]\.iterations: must be at most 1000000, "
     r"got 1e\+19"),
    ("feel-cpu", "frame_s.uplink", 5e-324, r"frame_s\.uplink: must be at least 1e-06, "
     r"got 5e-324"),
    ("feel-cpu", "devices[0].uplink_bps", 1e308, r"devices\[0\]\.uplink_bps: must be at most "
     r"1e\+13, got 1e\+308"),
    ("feel-cpu", "cycles_per_sample", 1e-300, r"cycles_per_sample: must be at least 1, "
     r"got 1e-300"),
    ("mel-async", "cycle_time_s", 1e308, r"cycle_time_s: must be at most 1e\+09, got 1e\+308"),
    ("mel-async", "learners[2].cpu_hz", 1e308, r"learners\[2\]\.cpu_hz: must be at most "
     r"1e\+15, got 1e\+308"),
    ("dab", "deadline_s", 1e300, r"deadline_s: must be at most 1e\+09, got 1e\+300"),
    ("dab", "total_shards", -(2**63), r"total_shards: must be positive, "
     r"got -9223372036854775808"),
    ("adaptive-tau", "resources[0].budget", -BIG, r"resources\[0\]\.budget: must be positive, "
     r"got a negative integer of 401 digits"),
]


@pytest.mark.parametrize(("problem", "path", "value", "match"), CASES)
def test_extreme_value_is_one_issue_with_its_path(problem, path, value, match) -> None:
    with pytest.raises(InstanceError, match=match) as info:
        api.parse_instance(put(base(problem), path, value))
    assert len(info.value.issues) == 1


@pytest.mark.parametrize(("problem", "path", "value", "match"), CASES)
def test_cli_exit_2_one_line(problem, path, value, match, tmp_path) -> None:
    f = tmp_path / "x.json"
    f.write_text(json.dumps(put(base(problem), path, value)))
    res = CliRunner().invoke(cli, ["solve", str(f)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert re.search(match, res.output)


@pytest.mark.parametrize("digits", [400, 5000, 100_000])
def test_huge_integer_literal_is_read_without_conversion(tmp_path, digits) -> None:
    """Past 4300 digits Python itself refuses int(str); the JSON reader keeps a marker."""
    text = json.dumps(base("med")).replace('"budget": ', '"budget": 1' + "0" * (digits - 1)
                                           + ", \"x\": ", 1)
    f = tmp_path / "huge.json"
    f.write_text(text)
    with pytest.raises(InstanceError, match=rf"budget: must be at most 1e\+15, got an integer "
                       rf"of {digits} digits"):
        api.load_instance(f)
    res = CliRunner().invoke(cli, ["solve", str(f)])
    assert res.exit_code == 2 and f"integer of {digits} digits" in res.output


def test_huge_integer_in_free_form_meta_is_ignored(tmp_path) -> None:
    doc = base("dab")
    text = json.dumps(doc)[:-1] + ', "meta": {"provenance": ' + "7" * 6000 + "}}"
    f = tmp_path / "ok.json"
    f.write_text(text)
    assert api.load_instance(f).K == len(doc["learners"])


def test_unknown_fields_are_errors_naming_the_closest_known_one(tmp_path) -> None:
    doc = base("dab")
    doc["deadlin_s"] = 3.0  # a typo at the top
    doc["learners"][0]["train_rte"] = 1.0  # and inside an item
    doc["meta"] = {"anything": [1, "two"]}  # free-form metadata is fine
    try:
        api.parse_instance(doc)
    except InstanceError as exc:
        text = str(exc)
    else:
        raise AssertionError("a misspelt field was accepted")
    assert "deadlin_s: unknown field 'deadlin_s'; did you mean 'deadline_s'?" in text
    assert "learners[0].train_rte: unknown field 'train_rte'; did you mean 'train_rate'?" in text
    assert "meta:" not in text and "(2 problems)" in text


# -- every numeric field of every problem, at extreme magnitudes -------------------------------
def _numeric_fields(name: str) -> list[tuple[str, Field]]:
    problem = "feel" if name.startswith("feel") else name
    module = importlib.import_module(f"mel_opt.problems.{problem.replace('-', '_')}.instance")
    return [(p.replace("[]", "[0]"), f) for p, f in walk(module.FIELDS) if f.numeric]


EXTREMES = [0, -1, 5e-324, 1e-300, 1e-9, 1e9, 1e300, 1e308, 2**53 + 1, 2**63, 10**400,
            -(10**400)]
#: (base file, JSON path, value): the extremes above and each field's own documented bounds
FIELD_CASES = [(name, path, value) for name in BASES for path, f in _numeric_fields(name)
               for value in [*EXTREMES, f.minimum, f.maximum]]


def test_the_tables_cover_every_problem() -> None:
    covered = {"feel" if n.startswith("feel") else n for n, _, _ in FIELD_CASES}
    assert covered == {"mel-async", "dab", "med", "feel", "adaptive-tau"}
    assert len({(n, p) for n, p, _ in FIELD_CASES}) > 50


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(BASES)), data=st.data())
def test_extreme_magnitudes_are_refused_or_solved_soundly(name, data) -> None:
    """One to three numeric fields at once at extreme magnitudes or at their range bounds:
    either an InstanceError naming paths, or a default solve whose solution verifies."""
    cases = [c for c in FIELD_CASES if c[0] == name]
    doc = base(name)
    for _, path, value in data.draw(st.lists(st.sampled_from(cases), min_size=1, max_size=3)):
        doc = put(doc, path, value)
    try:
        inst = api.parse_instance(doc)
    except InstanceError as exc:
        assert exc.issues and all(i.path and i.message for i in exc.issues)
        return
    res = api.solve(inst, time_limit=20)
    assert res.problem == get_problem(inst.problem).name
    if res.status.has_solution:
        assert res.verification is not None and res.verification.feasible, (doc, res)
