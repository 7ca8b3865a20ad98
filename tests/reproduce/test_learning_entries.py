"""The papers' learning experiments in their quick form, their claims on hand-made rows, and
one learning entry of the reproduce catalogue end to end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt import api
from mel_opt.cli import cli
from mel_opt.reproduce.catalogue import Claim, all_entries, verdict_of
from mel_opt.reproduce.learning import Experiment
from mel_opt.reproduce.paper000_training import judge_000, paper000_fig3
from mel_opt.reproduce.paper004_training import (
    judge_fig3,
    judge_gpu,
    judge_table2,
    paper004_fig3,
    paper004_gpu,
    paper004_table2,
)
from mel_opt.reproduce.thesis001_ch3_training import (
    jetson_cluster,
    judge_dab,
    judge_dab_curves,
    thesis_dab,
    thesis_dab_curves,
)
from mel_opt.training import load_dataset
from mel_opt.training.curves import CURVE_POINTS, time_curve

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("run", [paper000_fig3, paper004_table2, paper004_gpu, thesis_dab,
                                 thesis_dab_curves, paper004_fig3], ids=lambda f: f.__name__)
def test_quick_experiment_runs_and_writes(run: Experiment, tmp_path: Path) -> None:
    data = load_dataset("digits", max_train=300, max_test=150)
    out = run(tmp_path, seeds=1, quick=True, data=data)
    assert out.name == run.__name__
    assert out.rows and out.wall_s > 0
    assert out.figures and all(p.is_file() for p in out.figures)
    if run is paper004_table2:
        assert {r["paper_speedup"] for r in out.rows
                if r.get("part") != "curve"} == {1.0, 0.29, 0.53, 1.09}
    if run is thesis_dab:
        # csa cannot place the fixed data (sized for 34.4 s) before a 21 s deadline:
        # infeasible, not trained; the thesis' rule places it anyway and runs late
        assert {"deadline_s": 21.0, "scheme": "csa", "status": "infeasible"} in out.rows
        late = next(r for r in out.rows if r["scheme"] == "csa-thesis"
                    and r["deadline_s"] == 21.0)
        assert late["status"] == "trained" and late["truancy_pct"] > 30


def test_dab_experiment_trains_the_thesis_csa_rule() -> None:
    inst = jetson_cluster(105.0, 101)
    assert np.all(inst.time_cv == 0.06)
    sol = api.solve(inst, "csa-thesis").solution
    # four identical learners: shares 101 / 4 = 25.25 -> 25 each (the rule does not top up)
    assert sol["shards"] == [25, 25, 25, 25]
    dab = api.solve(inst, "dab").solution["shards"]
    assert len(set(dab)) == 1  # identical learners: the same bound


def test_a_learning_entry_end_to_end_quick(tmp_path: Path) -> None:
    entry = all_entries()["000-fig3"]
    assert entry.needs == ("train", "plot")
    out = tmp_path / "rep"
    # the digits, said here: the catalogue's default is Fashion-MNIST where it is installed
    res = CliRunner().invoke(cli, ["reproduce", "000-fig3", "--quick", "--dataset", "digits",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "000-fig3" / "outcome.json").read_text())
    assert re.match(r"^(reproduced|differs: .+|not evaluable: .+)", doc["verdict"])
    claims = [Claim(c["text"], c["paper"], c["ours"], c["ok"], c["rule"], c["unevaluable"])
              for c in doc["claims"]]
    assert doc["verdict"] == verdict_of(claims) and len(claims) == 2  # 95% and 97%
    curves = [r for r in doc["rows"] if r["part"] == "curve"]
    rows = [r for r in doc["rows"] if r["part"] == "to target"]
    assert len(rows) + len(curves) == len(doc["rows"])
    assert {r["scheme"] for r in rows} == {"exact", "kkt-sai", "eta", "sync"}
    assert {r["K"] for r in rows} == {10}
    # our learning curves are always in the table (and the figure): cycles 0..3 per scheme
    assert sorted(r["cycle"] for r in curves if r["scheme"] == "exact") == [0, 1, 2, 3]
    # the targets sit 3 and 1 points below the data set's measured centralised ceiling
    ceiling = rows[0]["ceiling"]
    assert 0.5 < ceiling <= 1.0 and rows[0]["dataset"] == "digits"
    assert sorted({r["target"] for r in rows}) == [round(ceiling - 0.03, 4),
                                                  round(ceiling - 0.01, 4)]
    assert {r["paper_target"] for r in rows} == {0.95, 0.97}
    # the claims are computed from the rows: recompute one from the table
    low = min(r["target"] for r in rows)
    c = {r["scheme"]: r["cycles"] for r in rows if r["target"] == low}
    beats = c["exact"] is not None and all(c[s] is None or c["exact"] < c[s]
                                           for s in ("sync", "eta"))
    if any(v is not None for v in c.values()):
        assert claims[0].ok == beats and claims[0].evaluable
    else:
        assert not claims[0].evaluable
    assert any(p.endswith(".png") for p in doc["figures"])


def test_learning_verdict_rules_on_hand_made_rows() -> None:
    rows = [{"K": 10, "target": 0.95, "scheme": s, "cycles": c}
            for s, c in (("exact", 3.0), ("sync", 5.0), ("eta", None), ("kkt-sai", 3.0))]
    assert judge_000(rows)[0].ok
    rows[0]["cycles"] = None  # the optimiser never reaches the target: the claim fails
    assert not judge_000(rows)[0].ok and judge_000(rows)[0].evaluable
    for r in rows:  # no scheme reaches it: not evaluable, with the reason
        r["cycles"] = None
    assert not judge_000(rows)[0].evaluable
    assert verdict_of(judge_000(rows)).startswith("not evaluable: ")
    dab = [{"deadline_s": d, "scheme": s, "status": "trained", "truancy_pct": t,
            "accuracy": a, "loss": lo}
           for d, s, t, a, lo in ((21.0, "dab", 4.0, 0.90, 1.53),
                                  (21.0, "csa-thesis", 60.0, 0.94, 1.50),
                                  (30.0, "dab", 2.0, 0.95, 1.50),
                                  (30.0, "csa-thesis", 20.0, 0.95, 1.50))]
    assert [c.ok for c in judge_dab(dab)] == [True] * 5
    dab[0]["truancy_pct"] = 20.0  # DAB 20% late: the first claim fails
    assert [c.ok for c in judge_dab(dab)] == [False, True, True, True, True]
    dab[0].update(truancy_pct=4.0, loss=1.80)  # DAB's loss 20 % above CSA's
    dab[2]["accuracy"] = 0.90  # and 5 points less accurate at the highest deadline
    assert [c.ok for c in judge_dab(dab)] == [True, True, True, False, False]


def test_table2_speedup_is_judged_only_where_every_scheme_reaches_a_common_target() -> None:
    def rows(target: float | None, speedups: dict[str, float | None]) -> list[dict]:
        return [{"K": 6, "partition": "iid", "scheme": s, "target": target,
                 "speedup": sp, "accuracy": 0.9} for s, sp in speedups.items()]

    good = {"individual": 1.0, "model-based": 0.4, "gradient-based": 0.6, "closed-form": 1.1}
    claims = judge_table2(rows(0.88, good))
    assert [c.ok for c in claims] == [True, True, True] and all(c.evaluable for c in claims)
    fast = judge_table2(rows(0.88, {**good, "model-based": 1.2}))
    assert [c.ok for c in fast][:2] == [True, False]
    none = judge_table2(rows(None, dict.fromkeys(good)))
    assert [c.evaluable for c in none] == [False, False, True]
    assert "no level down to the ceiling - 10 points" in none[0].unevaluable


def _curve_rows(two: tuple[float, float], four_early: float, four_late: float) -> list[dict]:
    """15 updates; DAB's loss and accuracy against CSA's 1.0 / 0.9: on two devices off by
    ``two`` (fractions), on four better by ``four_early`` early and worse by ``four_late``
    late (fractions)."""
    rows = []
    for u in range(1, 16):
        rows += [{"cluster": c, "scheme": "csa-thesis", "update": u, "loss": 1.0,
                  "accuracy": 0.9} for c in ("two devices", "four devices")]
        rows.append({"cluster": "two devices", "scheme": "dab", "update": u,
                     "loss": 1.0 + two[0], "accuracy": 0.9 * (1 - two[1])})
        f = four_early if u <= 5 else (-four_late if u > 10 else 0.0)
        rows.append({"cluster": "four devices", "scheme": "dab", "update": u,
                     "loss": 1.0 - f, "accuracy": 0.9 * (1 + 2 * f)})
    return rows


def test_dab_curve_claims_on_hand_made_rows() -> None:
    # the thesis's numbers: two devices within 5 % / 1 %, four 12 % better early (accuracy
    # 24 %), 5 % worse late (accuracy 10 %)
    good = judge_dab_curves(_curve_rows((0.05, 0.01), 0.12, 0.05))
    assert [c.ok for c in good] == [True] * 6
    bad = judge_dab_curves(_curve_rows((0.20, 0.01), 0.0, 0.05))
    assert [c.ok for c in bad] == [False, True, False, True, False, True]


def test_fig3_claims_on_hand_made_rows() -> None:
    def rows(acc: dict[float, float], reached: str = "2/2") -> list[dict]:
        return [{"model": m, "lr": lr, "target": 0.92, "accuracy": a, "reached": reached}
                for m in ("densenet121", "resnet18") for lr, a in acc.items()]

    assert [c.ok for c in judge_fig3(rows({0.05: 0.95, 0.1: 0.955, 0.2: 0.96}))] == [True, True]
    spread = judge_fig3(rows({0.05: 0.90, 0.1: 0.955, 0.2: 0.96}))
    assert [c.ok for c in spread] == [True, False]
    missed = judge_fig3(rows({0.05: 0.95, 0.1: 0.955}, reached="1/2"))
    assert not missed[0].ok and "not reached by densenet121 lr 0.05 (1/2)" in missed[0].ours


def test_time_curve_thins_evenly_and_averages_the_seeds() -> None:
    from mel_opt.training.run import TrainRun, TrainSettings

    # scheme "a": cycles 0..10, seed 0 at t = 2c with accuracy c/10, seed 1 at t = 2c + 1 with
    # accuracy c/10 + 0.1; scheme "b": cycles 0..1 only
    rows = [{"scheme": "a", "seed": sd, "cycle": c, "time_s": 2.0 * c + sd,
             "accuracy": c / 10 + 0.1 * sd, "loss": 1.0} for sd in (0, 1) for c in range(11)]
    rows += [{"scheme": "b", "seed": 0, "cycle": c, "time_s": 5.0 * c, "accuracy": 0.5,
              "loss": 1.0} for c in (0, 1)]
    run = TrainRun("i", "feel", TrainSettings(schemes=("a", "b"), seeds=2), rows)
    out = time_curve(run, {"K": 6}, points=3)
    a = [r for r in out if r["scheme"] == "a"]
    # 3 of 11 cycles: the first, the middle (round(5.0) = 5) and the last
    assert [r["cycle"] for r in a] == [0, 5, 10]
    assert [r["time_s"] for r in a] == [0.5, 10.5, 20.5]  # (2c + 2c + 1) / 2
    assert [r["curve_accuracy"] for r in a] == pytest.approx([0.05, 0.55, 1.05])
    assert all(r["part"] == "curve" and r["K"] == 6 for r in out)
    assert [r["cycle"] for r in out if r["scheme"] == "b"] == [0, 1]  # fewer than 3: all kept


@pytest.mark.parametrize("run", [paper004_table2, paper004_gpu], ids=lambda f: f.__name__)
def test_paper004_entries_keep_their_learning_curves(run: Experiment) -> None:
    data = load_dataset("digits", max_train=300, max_test=150)
    out = run(None, seeds=1, quick=True, data=data)
    curves = [r for r in out.rows if r.get("part") == "curve"]
    table = [r for r in out.rows if r.get("part") != "curve"]
    schemes = {r["scheme"] for r in table}
    assert {r["scheme"] for r in curves} == schemes
    case = ("K", "partition") if run is paper004_table2 else ("preset", "partition")
    for key in {tuple(r[k] for k in case) + (r["scheme"],) for r in table}:
        mine = [r for r in curves if tuple(r[k] for k in case) + (r["scheme"],) == key]
        cyc = [r["cycle"] for r in mine]  # from cycle 0, at most CURVE_POINTS, time ascending
        assert cyc[0] == 0 and cyc == sorted(cyc) and len(cyc) <= CURVE_POINTS
        times = [r["time_s"] for r in mine]
        assert times[0] == 0.0 and times == sorted(times)
    # the claims are judged on the table alone: the curve rows change nothing
    judge = judge_table2 if run is paper004_table2 else judge_gpu
    assert [c.to_dict() for c in judge(out.rows)] == [c.to_dict() for c in judge(table)]


def test_each_learning_entry_holds_its_run_itself() -> None:
    """The catalogue holds the run functions, not their names (a rename fails at import)."""
    runs = {"000-fig3": paper000_fig3, "004-table2": paper004_table2,
            "004-fig4-5-training": paper004_gpu, "001-fig3.6-3.8-training": thesis_dab,
            "001-fig3.4-3.5": thesis_dab_curves, "004-fig3": paper004_fig3}
    entries = all_entries()
    for entry_id, run in runs.items():
        held = [c.cell_contents for c in entries[entry_id].compute.__closure__ or ()]
        assert run in held, entry_id
