"""004-theorem1: the paper's analysis checked on IPOPT's optima (which know nothing of it)."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.problems.feel.generate import generate
from mel_opt.reproduce import paper004_theory as T
from mel_opt.reproduce.catalogue import Context


def test_ipopt_optimum_has_the_structure_of_theorem_1() -> None:
    inst = parse_instance(generate("ren2021", learners=6, seed=0,
                                   params={"processor": "cpu", "global_batch": "96"}))
    res = solve(inst, "ipopt")
    row = T.check_point(inst, np.asarray(res.metrics["continuous_batch"]),
                        np.asarray(res.metrics["continuous_uplink_slots"]))
    assert row["B"] == pytest.approx(96.0) and row["interior"] == 6
    assert row["theta_spread"] < 1e-6 and row["slot_error"] < 1e-6
    assert row["latency_spread"] < 1e-6
    assert row["cor1_lower"] * (1 - 1e-6) <= row["L_s"] <= row["cor1_upper"]
    assert row["batch_pairs"] == row["slot_pairs"] == "3/3"


def test_the_quick_entry_reports_where_corollary_2_fails() -> None:
    rows, _ = T.compute(Context(quick=True))
    claims = T.judge(rows)
    assert [c.ok for c in claims[:4]] == [True, True, True, True]
    assert "lower bound fails at" in claims[4].ours


def _row(**kw: object) -> dict:
    base = {"setting": "s", "B": 10.0, "L_s": 2.0, "interior": 3, "theta_spread": 1e-9,
            "slot_error": 1e-9, "latency_spread": 1e-9, "cor1_lower": 1.0, "cor1_upper": 3.0,
            "mu": 5.0, "cor2_lower": 1.0, "cor2_upper": 10.0, "batch_pairs": "2/2",
            "slot_pairs": "2/2"}
    return {**base, **kw}


def test_each_check_can_fail() -> None:
    assert [c.ok for c in T.judge([_row()])] == [True] * 5
    assert not T.judge([_row(theta_spread=0.01)])[0].ok
    assert not T.judge([_row(latency_spread=0.01)])[1].ok
    assert not T.judge([_row(batch_pairs="1/2")])[2].ok
    assert not T.judge([_row(L_s=0.5)])[3].ok
    assert not T.judge([_row(mu=0.5)])[4].ok
    # without a device strictly inside its bounds Corollary 2 has no premise: not evaluable
    none = T.judge([_row(interior=0, mu=float("nan"))])[4]
    assert not none.evaluable
