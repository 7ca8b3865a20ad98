"""The paper experiments in their quick form: they run, write figures and give a verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from mel_opt.training import experiments as E
from mel_opt.training import load_dataset

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("name", ["paper000_fig3", "paper004_table2", "paper004_gpu",
                                  "thesis_dab"])
def test_quick_experiment_runs_and_reports(name: str, tmp_path: Path) -> None:
    data = load_dataset("digits", max_train=300, max_test=150)
    out = getattr(E, name)(tmp_path, seeds=1, quick=True, data=data)
    assert out.rows and out.wall_s > 0
    assert out.verdict == "reproduced" or out.verdict.startswith(("reproduced:", "differs: "))
    assert out.figures and all(p.is_file() for p in out.figures)
    if name == "paper004_table2":
        assert {r["paper_speedup"] for r in out.rows} == {1.0, 0.29, 0.53, 1.09}
    if name == "thesis_dab":
        # csa cannot place the fixed data before a 15 s deadline: infeasible, not trained
        assert {"deadline_s": 15.0, "scheme": "csa", "status": "infeasible"} in out.rows


def test_jetson_cluster_and_fixed_csa_split() -> None:
    from mel_opt import api
    from mel_opt.training.run import csa_fixed_shards

    inst = E.jetson_cluster(55.0, 101)
    a = csa_fixed_shards(inst)
    assert a.sum() == 101 and a.max() - a.min() <= 1  # identical learners: an even split
    dab = api.solve(inst, "dab").solution["shards"]
    assert len(set(dab)) == 1  # identical learners: the same bound
