"""mel_opt.export.export: the Pyomo model of an instance as LP, MPS, NL or GMS, from Python."""

from __future__ import annotations

import subprocess
import sys

import pyomo.environ as pyo
import pytest

import mel_opt
from mel_opt import parse_instance
from mel_opt.errors import UsageError
from mel_opt.export import FORMATS, Exported, export
from mel_opt.problems import get_problem

K3 = {"problem": "mel-async", "schema_version": 1, "cycle_time_s": 12.0, "total_samples": 17,
      "min_samples": 1, "max_samples": 17,
      "learners": [{"name": "a", "c2": 0.1, "c1": 0, "c0": 2.0},
                   {"name": "b", "c2": 0.2, "c1": 0, "c0": 2.0},
                   {"name": "c", "c2": 0.5, "c1": 0, "c0": 2.0}]}


@pytest.fixture
def k3():
    return parse_instance(K3, name="k3")


def test_default_method_lp(tmp_path, k3):
    done = export(k3, "lp", tmp_path / "out" / "k3.lp")
    spec = get_problem("mel-async")
    assert done == Exported(tmp_path / "out" / "k3.lp", "lp", "mel-async", spec.default_method)
    text = done.path.read_text()
    # symbolic names: the three learners' tau and d appear (tau(0) in CPLEX LP spelling)
    assert all(f"tau({k})" in text and f"d({k})" in text for k in range(3))
    assert "\nmin \n" in text and "\ngeneral\n" in text  # an integer program, minimised
    assert [p.name for p in done.path.parent.iterdir()] == ["k3.lp"]


# HiGHS reads an exported file in a child process: a highspy.Highs run in this process leaves
# state behind that makes later solves through Pyomo's HiGHS interface fail.
_READ_WITH_HIGHS = """
import sys, highspy
h = highspy.Highs()
h.setOptionValue("output_flag", False)
assert h.readModel(sys.argv[1]) == highspy.HighsStatus.kOk
h.run()
assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
print(repr(h.getInfo().objective_function_value))
"""


@pytest.mark.parametrize("fmt", ["lp", "mps"])
def test_exported_med_ilp_solved_by_highs_matches_the_solver(tmp_path, fmt):
    pytest.importorskip("highspy")
    spec = get_problem("med")
    inst = parse_instance(spec.generate(spec.presets[0], learners=4, tasks=2, seed=0, params={}))
    done = export(inst, fmt, tmp_path / f"med.{fmt}", method="exact")
    run = subprocess.run([sys.executable, "-c", _READ_WITH_HIGHS, str(done.path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    exact = mel_opt.solve(inst, "exact")
    assert float(run.stdout.strip().splitlines()[-1]) == pytest.approx(exact.objective, rel=1e-9)


def test_nl_label_files_name_the_model_rows_and_columns(tmp_path, k3):
    done = export(k3, "nl", tmp_path / "m.nl", method="ipopt")
    assert done.label_files == (tmp_path / "m.row", tmp_path / "m.col")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.col", "m.nl", "m.row"]
    model = get_problem("mel-async").build_model(k3, "ipopt")
    variables = {v.name for v in model.component_data_objects(pyo.Var)}
    rows = {c.name for c in model.component_data_objects(pyo.Constraint, active=True)}
    cols = (tmp_path / "m.col").read_text().split()
    row_lines = (tmp_path / "m.row").read_text().split()
    assert set(cols) == variables and len(cols) == len(variables)
    assert set(row_lines[:-1]) == rows and row_lines[-1] == "obj"  # constraints, then objective
    # the NL header counts the same variables and constraints
    header = (tmp_path / "m.nl").read_text().splitlines()[1].split()
    assert (int(header[0]), int(header[1])) == (len(variables), len(rows))


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_writes_one_complete_file(tmp_path, k3, fmt):
    done = export(k3, fmt, tmp_path / f"m.{fmt}", method="exact")
    assert done.method == "exact" and done.path.stat().st_size > 0
    expected = {f"m.{fmt}", *(["m.row", "m.col"] if fmt == "nl" else [])}
    assert {p.name for p in tmp_path.iterdir()} == expected


def test_format_that_cannot_express_the_model_keeps_old_file(tmp_path):
    spec = get_problem("feel")
    inst = parse_instance(spec.generate(spec.presets[0], learners=3, tasks=None, seed=1,
                                        params={}))
    target = tmp_path / "f.lp"
    target.write_text("old")
    with pytest.raises(UsageError, match="cannot write feel/closed-form as lp"):
        export(inst, "lp", target)  # feel's objective is nonlinear
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.lp"]


def test_usage_errors(tmp_path, k3):
    with pytest.raises(UsageError, match="unknown export format 'xls'"):
        export(k3, "xls", tmp_path / "m.xls")
    with pytest.raises(UsageError, match="nope"):
        export(k3, "lp", tmp_path / "m.lp", method="nope")
    spec = get_problem("adaptive-tau")
    tau = parse_instance(spec.generate(None, learners=None, tasks=None, seed=1, params={}))
    with pytest.raises(UsageError, match="no Pyomo formulation"):
        export(tau, "lp", tmp_path / "t.lp")
    assert list(tmp_path.iterdir()) == []
