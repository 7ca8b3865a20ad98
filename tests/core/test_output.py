"""The fast JSON path writes the documented result contract; timings; bounded result tables."""

from __future__ import annotations

import enum
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from rich.console import Console

import mel_opt
from mel_opt.api import load_instance, solve, solve_file
from mel_opt.cli import cli
from mel_opt.cli.app import SHOWN_FIELDS, SHOWN_ITEMS, fmt, result_panel
from mel_opt.result import Result, SolverInfo, Verification, _plain, dumps
from mel_opt.status import SolutionStatus, TerminationCondition

ROOT = Path(mel_opt.__file__).resolve().parent.parent
FEEL_K6 = str(ROOT / "instances" / "feel" / "ren2021_cpu_densenet121_k6.json")
DAB = str(ROOT / "instances" / "dab" / "worked_example.json")


class Colour(enum.Enum):
    RED = "red"


def _result(solution: dict, metrics: dict, **kw) -> Result:
    return Result(
        instance="t", problem="feel", method="closed-form",
        termination=TerminationCondition.CONVERGED, solution_status=SolutionStatus.OPTIMAL,
        objective=kw.pop("objective", np.float64(0.5)), solution=solution, metrics=metrics,
        verification=Verification(True, np.float64(0.0), {"c": np.float64(1e-12)}, ("n",)),
        solve_time_s=0.25, solver=SolverInfo("s", "1"), **kw)


def _old_contract(res: Result) -> object:
    """The document of the reference path: to_dict() through the standard encoder."""
    return json.loads(json.dumps(res.to_dict(), allow_nan=False))


def test_fast_json_equals_the_reference_document():
    strided = np.arange(10.0)[::3]  # not C-contiguous: goes through the default hook
    res = _result(
        solution={"x": np.array([1.0, np.nan, np.inf, -2.5]), "k": np.arange(3, dtype=np.int64),
                  "on": np.array([True, False]), "grid": np.array([[1, 2], [3, 4]], np.int32),
                  "strided": strided, "nested": [[np.float64(-np.inf), 1], (np.int64(7),)],
                  "tuple": (1.5, np.float32(2.0))},
        metrics={"n": np.int64(12), "flag": np.bool_(True), "r": float("nan"),
                 "colour": Colour.RED, "empty": np.zeros(0), "f32": np.float32(0.5)},
        timings={"solve": 0.25, "verify": 0.125})
    fast = json.loads(res.to_json())
    assert fast == _old_contract(res)
    # worked out by hand: non-finite floats are null, numpy scalars plain, tuples lists
    assert fast["solution"]["x"] == [1.0, None, None, -2.5]
    assert fast["solution"]["k"] == [0, 1, 2] and fast["solution"]["on"] == [True, False]
    assert fast["solution"]["grid"] == [[1, 2], [3, 4]]
    assert fast["solution"]["strided"] == [0.0, 3.0, 6.0, 9.0]
    assert fast["solution"]["nested"] == [[None, 1], [7]]
    assert fast["metrics"] == {"n": 12, "flag": True, "r": None, "colour": "red", "empty": [],
                               "f32": 0.5}
    assert fast["verification"] == {"feasible": True, "max_violation": 0.0,
                                    "checks": {"c": 1e-12}, "notes": ["n"]}
    assert fast["timings"] == {"solve": 0.25, "verify": 0.125}
    assert list(fast) == list(res.to_dict())  # same keys, same order
    text = res.to_json()
    assert "NaN" not in text and "Infinity" not in text


@pytest.mark.parametrize("indent", [None, 2, 4])
def test_dumps_matches_the_standard_encoder_at_every_indent(indent):
    value = {"a": np.array([0.1, 1e-7, 1e16, np.nan]), "b": [np.int64(2**62), True, None, "s"]}
    expected = json.dumps(_plain(value), indent=indent, allow_nan=False)
    assert json.loads(dumps(value, indent)) == json.loads(expected)
    if indent:  # same layout: one element per line, as the standard encoder
        assert dumps(value, indent).decode().count("\n") == expected.count("\n")


def test_dumps_falls_back_where_orjson_refuses():
    # integer keys and integers past 64 bits: orjson refuses, the standard path writes them
    value = {1: np.array([1.0, np.inf]), "big": 2**70}
    assert json.loads(dumps(value)) == {"1": [1.0, None], "big": 2**70}
    with pytest.raises(TypeError):
        dumps({"x": object()})


@pytest.mark.parametrize("indent", [None, 2])
def test_to_json_timed_appends_the_write_time(indent):
    res = _result({"x": np.linspace(0, 1, 5)}, {}, timings={"load": 0.5, "solve": 0.25})
    timed, data = res.to_json_timed(indent)
    doc = json.loads(data)
    assert list(doc["timings"]) == ["load", "solve", "write"]
    assert doc["timings"]["write"] == timed.timings["write"] >= 0.0
    assert doc == json.loads(timed.to_json(indent))
    assert doc == _old_contract(timed)
    assert res.timings == {"load": 0.5, "solve": 0.25}  # the input result is unchanged


def test_api_records_solve_and_verify_times():
    inst = load_instance(FEEL_K6)
    res = solve(inst)
    assert list(res.timings) == ["solve", "verify"]
    assert res.timings["solve"] == res.solve_time_s
    assert 0.0 <= res.timings["verify"] < 10.0
    timings: dict[str, float] = {}
    load_instance(FEEL_K6, timings=timings)
    assert list(timings) == ["load", "validate"] and min(timings.values()) >= 0.0
    assert list(solve_file(FEEL_K6).timings) == ["load", "validate", "solve", "verify"]


def test_cli_solve_json_has_every_phase(tmp_path):
    out = tmp_path / "r.json"
    run = CliRunner().invoke(cli, ["solve", FEEL_K6, "--json", "-o", str(out)])
    assert run.exit_code == 0, run.output
    printed, written = json.loads(run.output), json.loads(out.read_text())
    assert printed == written
    assert list(written["timings"]) == ["load", "validate", "solve", "verify", "write"]
    assert written["timings"]["solve"] == written["solve_time_s"]
    assert all(v >= 0 for v in written["timings"].values())
    assert written["verification"]["feasible"] is True


def test_cli_solve_many_writes_one_document_per_file(tmp_path):
    out = tmp_path / "all.json"
    files = [FEEL_K6, DAB]
    run = CliRunner().invoke(cli, ["solve", *files, "-o", str(out)])
    assert run.exit_code == 0, run.output
    docs = json.loads(out.read_text())
    assert [d["problem"] for d in docs] == ["feel", "dab"]
    assert all(list(d["timings"]) == ["load", "validate", "solve", "verify"] for d in docs)


def test_fmt_cuts_long_values():
    assert fmt(list(range(100_000))) == "[0, 1, 2, 3, 4, 5, 6, 7, ... (100000 items)]"
    assert fmt(np.arange(3.0)) == "[0, 1, 2]"
    assert fmt(np.float64(1 / 3), 3) == "0.333" and fmt(np.bool_(False)) == "no"
    assert fmt(np.array(2.5)) == "2.5"
    big = {f"k{i}": i for i in range(20)}
    assert fmt(big) == "{" + ", ".join(f"k{i}: {i}" for i in range(SHOWN_ITEMS)) \
        + ", ... (20 keys)}"


def test_result_table_does_not_grow_with_the_instance():
    K = 100_000
    solution = {f"v{i}": np.arange(K, dtype=float) for i in range(30)}
    metrics = {f"m{i}": float(i) for i in range(30)} | {"idle_s": np.zeros(K),
                                                       "per": list(range(K))}
    res = _result(solution, metrics, timings={"load": 1.0, "validate": 2.0})
    table = result_panel(res, ("m0",))
    # status, objective, SHOWN_FIELDS fields, the "... more" row, verification, solver,
    # solve time, timings
    assert table.row_count == SHOWN_FIELDS + 7
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(table)
    text = console.export_text()
    assert "20 more fields in the result JSON" in text  # 30 metrics + 30 solution rows - 40
    assert "(100000 items)" in text and "idle_s" not in text
    assert len(text) < 20_000
    assert "load 1 s, validate 2 s" in text


def test_small_result_table_shows_every_field():
    res = _result({"batch": [1, 2]}, {"a": 1.0, "b": math.pi})
    table = result_panel(res, ())
    assert table.row_count == 2 + 3 + 3  # status, objective, a, b, solution.batch, ver., ...
