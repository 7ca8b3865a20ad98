"""csa-thesis: the thesis code's rounded CSA rule, worked by hand, and how the verifier reports
its deadline misses (soft targets) without accepting them from other solutions."""

from __future__ import annotations

import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.errors import UsageError
from mel_opt.problems.dab import verify
from mel_opt.result import Status

MB = 1_000_000


def doc(rates: list[float], bws_shards: list[float], total: int | None, deadline: float) -> dict:
    """Omega = one shard (1 MB), shards of 1 MB: b_k in shards/s is bandwidth / 1 MB."""
    d: dict = {"problem": "dab", "schema_version": 1, "name": "h", "deadline_s": deadline,
               "iterations": 1, "model_bytes": MB, "shard_bytes": MB,
               "learners": [{"train_rate": c, "bandwidth_Bps": b * MB}
                            for c, b in zip(rates, bws_shards, strict=True)]}
    if total is not None:
        d["total_shards"] = total
    return d


def test_three_learners_by_hand_truant():
    # c = (1, 0.5, 2), b = (2, 0.5, 2) shards/s: c + b = (3, 1, 4), weights (3, 1, 4) / 8;
    # total 10: shares (3.75, 1.25, 5) -> d = (4, 1, 5).
    # D = 6, Omega = 1 shard; tau_k = max(1, round(c_k / d_k (D - (2 + d_k) / b_k))):
    #   k0: 6 - 6/2 = 3 -> round(3/4) = 1;  k1: 6 - 3/0.5 = 0 -> max(1, 0) = 1;
    #   k2: 6 - 7/2 = 2.5 -> round(2/5 * 2.5) = 1.
    # eta_k = (1 + d)/b + tau d / c + 1/b: k0 2.5 + 4 + 0.5 = 7; k1 4 + 2 + 2 = 8;
    #   k2 3 + 2.5 + 0.5 = 6. Completion 8 s, truancy (8 - 6) / 6 = 33.3%.
    inst = parse_instance(doc([1.0, 0.5, 2.0], [2.0, 0.5, 2.0], 10, 6.0))
    res = solve(inst, "csa-thesis")
    assert res.solution["shards"] == [4, 1, 5] and res.solution["tau"] == [1, 1, 1]
    assert res.status is Status.FEASIBLE and res.ok and res.exit_code == 0
    assert res.metrics["eta_s"] == pytest.approx([7.0, 8.0, 6.0])
    assert res.metrics["max_eta_s"] == pytest.approx(8.0)
    assert res.metrics["truancy_pct"] == pytest.approx(100 / 3)
    assert res.metrics["deadline_met"] is False
    assert res.metrics["shards_off_total"] == 0
    assert any("missed by 33.3% of D" in n for n in res.verification.notes)
    # the same answer without the soft-target declaration is rejected for the deadline
    hard = verify(inst, {"shards": [4, 1, 5], "tau": [1, 1, 1]})
    assert not hard.verification.feasible
    assert hard.verification.checks["deadline eta_k <= D (3.4)"] == pytest.approx(2 / 6)


def test_half_to_even_rounding_and_a_zero_share():
    # same learners, total 4: shares (1.5, 0.5, 2) -> round half to even (2, 0, 2); learner 1
    # takes no part. k0: 6 - 4/2 = 4 -> round(1/2 * 4) = 2 passes, eta 1.5 + 4 + 0.5 = 6;
    # k2: round(2/2 * 4) = 4 passes, eta 1.5 + 4 + 0.5 = 6: the deadline is met exactly.
    inst = parse_instance(doc([1.0, 0.5, 2.0], [2.0, 0.5, 2.0], 4, 6.0))
    res = solve(inst, "csa-thesis")
    assert res.solution["shards"] == [2, 0, 2] and res.solution["tau"] == [2, 0, 4]
    assert res.metrics["eta_s"] == pytest.approx([6.0, 0.0, 6.0])
    assert res.metrics["deadline_met"] is True and res.metrics["truancy_pct"] == pytest.approx(0)
    assert res.metrics["learners_used"] == 2


def test_rounded_shares_may_miss_the_total():
    # c + b equal for three learners, total 10: shares 3.33 -> (3, 3, 3), one shard short
    inst = parse_instance(doc([1.0] * 3, [1.0] * 3, 10, 100.0))
    res = solve(inst, "csa-thesis")
    assert res.solution["shards"] == [3, 3, 3]
    assert res.ok and res.metrics["shards_off_total"] == -1
    assert not verify(inst, {"shards": [3, 3, 3], "tau": [1, 1, 1]}).verification.feasible


def test_soft_targets_only_for_centralised_allocations_and_other_checks_stay():
    inst = parse_instance(doc([1.0, 1.0], [1.0, 1.0], 4, 10.0))
    bad = verify(inst, {"shards": [2, 2], "soft_targets": True})
    assert not bad.verification.feasible and "tau" in bad.verification.notes[0]
    no_pass = verify(inst, {"shards": [2, 2], "tau": [0, 1], "soft_targets": True})
    assert no_pass.verification.checks["at_least_one_pass"] == pytest.approx(1.0)
    assert not no_pass.verification.feasible


def test_csa_thesis_needs_total_shards():
    with pytest.raises(UsageError, match="total_shards"):
        solve(parse_instance(doc([1.0], [1.0], None, 10.0)), "csa-thesis")


def test_dab_and_csa_report_deadline_met():
    inst = parse_instance(doc([1.0, 0.5, 2.0], [2.0, 0.5, 2.0], 10, 20.0))
    for method in ("dab", "csa"):
        res = solve(inst, method)
        assert res.ok and res.metrics["deadline_met"] is True
        assert res.metrics["soft_targets"] is False and res.metrics["truancy_pct"] <= 1e-7
