"""CSA: the mel-async exact allocation of total_shards, mapped back to shards and passes."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.errors import UsageError
from mel_opt.problems.dab.methods import mel_async_instance
from mel_opt.result import Status

SHARD = 1_568_000
MODEL = 161_920


def dab_doc(rates: list[float], bws: list[float], total: int, **top: object) -> dict:
    d = {"problem": "dab", "schema_version": 1, "name": "c", "deadline_s": 15.0,
         "iterations": 5, "model_bytes": MODEL, "shard_bytes": SHARD, "total_shards": total,
         "learners": [{"name": f"l{k}", "train_rate": r, "bandwidth_Bps": b}
                      for k, (r, b) in enumerate(zip(rates, bws, strict=True))]}
    d.update(top)
    return d


def mel_async_doc(rates: list[float], bws: list[float], total: int, dmin: int = 1,
                  dmax: int | None = None) -> dict:
    """The same instance written by hand in mel-async's coefficient form:
    t_k = tau d / c_k + d shard_bytes / b_k + 2 model_bytes / b_k."""
    return {"problem": "mel-async", "schema_version": 1, "name": "m", "cycle_time_s": 15.0,
            "total_samples": total, "min_samples": dmin,
            "max_samples": total if dmax is None else dmax,
            "learners": [{"name": f"l{k}", "c2": 1.0 / r, "c1": SHARD / b, "c0": 2.0 * MODEL / b}
                         for k, (r, b) in enumerate(zip(rates, bws, strict=True))]}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_csa_equals_mel_async_exact_on_the_mapped_instance(seed: int) -> None:
    rng = np.random.default_rng(seed)
    K = 6
    rates = rng.uniform(1.0, 30.0, K).round(3).tolist()
    bws = (rng.uniform(1.0, 10.0, K) * SHARD).round(0).tolist()
    total = 40 + 10 * seed
    res = solve(parse_instance(dab_doc(rates, bws, total)), "csa")
    ref = solve(parse_instance(mel_async_doc(rates, bws, total)), "exact")
    assert res.ok and ref.ok
    assert res.solution == {"shards": ref.solution["d"], "tau": ref.solution["tau"]}
    assert res.metrics["max_staleness"] == ref.metrics["max_staleness"]
    assert res.metrics["avg_staleness"] == pytest.approx(ref.metrics["avg_staleness"])
    assert res.metrics["mel_async_max_staleness"] == ref.metrics["max_staleness"]
    assert res.metrics["shards_per_cycle"] == total
    # the dab verifier's eta_k is mel-async's t_k: T - idle
    assert np.allclose(res.metrics["eta_s"], 15.0 - np.asarray(ref.metrics["idle_s"]))


def test_coefficient_mapping_by_hand() -> None:
    # c = 4 shards/s, b = 2 shards/s = 3,136,000 B/s, model 161,920 B:
    # C2 = 1/4 = 0.25 s/(shard pass); C1 = 1,568,000 / 3,136,000 = 0.5 s/shard;
    # C0 = 2 * 161,920 / 3,136,000 = 0.103265... s
    inst = parse_instance(dab_doc([4.0], [2 * SHARD], 10))
    m = mel_async_instance(inst)
    assert m.c2.tolist() == [0.25] and m.c1.tolist() == [0.5]
    assert m.c0[0] == pytest.approx(2 * MODEL / (2 * SHARD))
    assert (m.cycle_time, m.total_samples, m.min_samples, m.max_samples) == (15.0, 10, 1, 10)


def test_single_learner_known_answer() -> None:
    # one learner must take all 10 shards; eta = 10 tau / 4 + 10 * 0.5 + 0.10327 <= 15
    # -> tau <= (15 - 5.10327) / 2.5 = 3.9587 -> tau = 3, eta = 12.6033 s
    res = solve(parse_instance(dab_doc([4.0], [2 * SHARD], 10)), "csa")
    assert res.solution == {"shards": [10], "tau": [3]}
    assert res.metrics["max_eta_s"] == pytest.approx(7.5 + 5 + 2 * MODEL / (2 * SHARD))


def test_csa_leaves_out_learners_that_cannot_do_one_pass() -> None:
    # l1 trains 0.05 shard/s: one pass over one shard alone takes 20 s > 15 s
    inst = parse_instance(dab_doc([10.0, 0.05, 8.0], [5 * SHARD] * 3, 20))
    res = solve(inst, "csa")
    assert res.ok
    assert res.solution["shards"][1] == 0 and res.solution["tau"][1] == 0
    assert sum(res.solution["shards"]) == 20
    assert res.metrics["excluded"] == ["l1"]
    assert "l1" in res.message


def test_csa_infeasible_when_total_cannot_be_placed() -> None:
    # one learner, c = 1 shard/s, b = 1 shard/s: one pass over d shards costs ~2d s > 15 s for
    # d = 10, so the 10 shards cannot be placed
    res = solve(parse_instance(dab_doc([1.0], [SHARD], 10)), "csa")
    assert res.status is Status.INFEASIBLE
    assert res.solution == {}
    assert "mel-async" in res.message or "samples" in res.message


def test_csa_infeasible_when_max_shards_too_small() -> None:
    res = solve(parse_instance(dab_doc([10.0, 10.0], [5 * SHARD] * 2, 20, max_shards=5)), "csa")
    assert res.status is Status.INFEASIBLE
    assert "max_shards = 5" in res.message


def test_csa_needs_total_shards() -> None:
    d = dab_doc([10.0], [SHARD], 10)
    del d["total_shards"]
    with pytest.raises(UsageError, match="needs total_shards"):
        solve(parse_instance(d), "csa")


def test_csa_and_dab_on_the_same_data_random_seed3() -> None:
    # the generator's random preset sets total_shards = the shards DAB allocates, so CSA places
    # the same data; on this instance (6 learners, seed 3) it keeps DAB's split and lets the
    # two learners with slack do a 6th pass: 306 shard passes against DAB's 60 x 5 = 300,
    # at the price of staleness 1 (DAB has none)
    from mel_opt.problems.dab.generate import generate

    inst = parse_instance(generate("random", learners=6, seed=3))
    dab = solve(inst, "dab")
    csa = solve(inst, "csa")
    assert dab.ok and csa.ok
    assert csa.metrics["shards_per_cycle"] == dab.metrics["shards_per_cycle"]
    assert dab.metrics["shard_passes_per_cycle"] == 300
    assert csa.metrics["shard_passes_per_cycle"] == 306
    assert (dab.metrics["max_staleness"], csa.metrics["max_staleness"]) == (0.0, 1.0)
