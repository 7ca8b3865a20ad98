"""The strengthened MILP of ``formulation``: its symmetry breaking keeps the optimum, and
Gurobi on the same model agrees with ``exact``."""

from __future__ import annotations

import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.problems.med.generate import generate


def test_gurobi_on_the_same_model_agrees():
    gp = pytest.importorskip("gurobipy")
    del gp
    import pyomo.environ as pyo

    from mel_opt.problems.med import formulation

    inst = parse_instance(generate("mays2023", learners=8, tasks=3, seed=2))
    model = formulation.build_milp_model(inst)
    opt = pyo.SolverFactory("gurobi_direct")
    if not opt.available(exception_flag=False):
        pytest.skip("gurobi_direct not usable")
    opt.options["Threads"] = 1
    opt.solve(model)
    assert pyo.value(model.obj) == pytest.approx(solve(inst, "exact").objective, rel=1e-6)


@pytest.mark.parametrize("params", [
    {"budget": "100"},  # binding (optimum 90.5 vs 41.6 without): the "cheaper" rule
    {"min_shards": "0"},  # unused learners allowed: their "task index" sorts last
    {},
])
def test_symmetry_breaking_keeps_the_optimum(params):
    from mel_opt.problems.base import SolveOptions
    from mel_opt.problems.med import methods

    inst = parse_instance(generate("mays2023", learners=6, tasks=2, seed=5, params=params))
    want = solve(inst, "exact")
    for symmetry in (True, False):
        out = methods.solve_highs(inst, SolveOptions(time_limit=60,
                                                     options={"symmetry": symmetry}))
        assert out.termination.value == want.status.value
        if want.ok:
            from mel_opt.problems.med.verify import verify

            assert verify(inst, out.solution).objective == pytest.approx(want.objective,
                                                                         rel=1e-6)
