"""The result type, status mapping, validator and atomic writes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mel_opt.errors import InstanceError, Issue
from mel_opt.io.atomic import atomic_write as atomic_write_text
from mel_opt.io.json_io import parse_json_text
from mel_opt.io.validate import Validator
from mel_opt.problems import all_problems
from mel_opt.result import Result, SolverInfo, Status, Verification
from mel_opt.status import SolutionStatus, TerminationCondition

TC, SS = TerminationCondition, SolutionStatus


def test_result_json_contract_and_numpy_values():
    res = Result(
        instance="i", problem="mel-async", method="exact", termination=TC.CONVERGED,
        solution_status=SS.OPTIMAL,
        objective=np.float64(1.0), solution={"d": np.array([1, 2]), "tau": [np.int64(3), 4]},
        metrics={"x": np.float32(0.5), "nan": math.nan}, solve_time_s=0.01,
        verification=Verification(True, 0.0, {"c": 0.0}), solver=SolverInfo("s", "1"),
    )
    body = json.loads(res.to_json())
    assert body["solution"] == {"d": [1, 2], "tau": [3, 4]}
    assert body["metrics"] == {"x": 0.5, "nan": None}  # JSON has no NaN
    assert body["verification"]["feasible"] is True
    assert body["solver"] == {"name": "s", "version": "1"}
    assert res.ok and "verified" in repr(res)
    assert res.status is Status.OPTIMAL and body["status"] == "optimal"


@pytest.mark.parametrize(
    ("term", "point", "status", "code"),
    [
        (TC.CONVERGED, SS.OPTIMAL, Status.OPTIMAL, 0),
        (TC.LOCALLY_OPTIMAL, SS.OPTIMAL, Status.LOCALLY_OPTIMAL, 0),
        (TC.CONVERGED, SS.FEASIBLE, Status.FEASIBLE, 0),
        (TC.TIME_LIMIT, SS.FEASIBLE, Status.FEASIBLE, 0),
        (TC.TIME_LIMIT, SS.NONE, Status.TIME_LIMIT, 1),
        (TC.INFEASIBLE, SS.NONE, Status.INFEASIBLE, 1),
        (TC.ITERATION_LIMIT, SS.NONE, Status.ITERATION_LIMIT, 1),
        (TC.NUMERICAL, SS.NONE, Status.ERROR, 1),
        (TC.UNKNOWN, SS.NONE, Status.ERROR, 1),
        (TC.ERROR, SS.INFEASIBLE, Status.ERROR, 1),  # an answer rejected by the verifier
    ],
)
def test_status_is_derived_from_the_two_axes(term, point, status, code):
    res = Result(instance="i", problem="mel-async", method="exact", termination=term,
                 solution_status=point, objective=None, solution={}, metrics={},
                 verification=None, solve_time_s=0.0, solver=SolverInfo("s"))
    assert res.status is status and Status.of(term, point) is status
    assert res.exit_code == status.exit_code == code
    assert json.loads(res.to_json())["status"] == status.value


def test_validator_collects_every_issue_with_paths():
    v = Validator("f.json")
    doc = {"a": -1, "b": "x", "c": [1, "2", math.nan], "d": True}
    v.number(doc, "a", "$", positive=True)
    v.number(doc, "b", "$")
    v.numbers(doc["c"], "c", nonnegative=True)
    v.number(doc, "d", "$", integer=True)
    v.number(doc, "missing", "$")
    assert v.number(doc, "absent", "$", default=7) == 7
    with pytest.raises(InstanceError) as info:
        v.finish()
    paths = [i.path for i in info.value.issues]
    assert paths == ["a", "b", "c[1]", "c[2]", "d", "missing"]
    assert str(info.value).startswith("f.json: invalid instance (6 problems)")


def test_malformed_json_position():
    with pytest.raises(InstanceError, match=r"line 2, column 3"):
        parse_json_text('{\n  x}')


def test_instance_error_needs_an_issue():
    with pytest.raises(ValueError):
        InstanceError([])
    assert "a.b: bad" in str(InstanceError(Issue("a.b", "bad")))


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "r.json"
    atomic_write_text(target, "old")
    atomic_write_text(target, "new" * 1000)
    assert target.read_text() == "new" * 1000
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_atomic_write_failure_keeps_old_file(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    atomic_write_text(target, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # temp file cleaned up


def test_registry_discovers_mel_async():
    problems = all_problems()
    assert "mel-async" in problems
    spec = problems["mel-async"]
    assert spec.default_method in spec.methods
    assert spec.methods["exact"].proves_optimality
