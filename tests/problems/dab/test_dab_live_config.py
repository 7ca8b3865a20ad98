"""What the orchestrator of a live, decentralised DAB run tells each learner."""

from __future__ import annotations

from mel_opt.api import parse_instance, solve
from mel_opt.problems.dab.learning import DabCycle


def _doc(total: int | None) -> dict:
    d = {"problem": "dab", "schema_version": 1, "name": "live", "deadline_s": 15.0,
         "iterations": 5, "model_bytes": 161_920, "shard_bytes": 1_568_000,
         "learners": [{"name": f"l{k}", "train_rate": r, "bandwidth_Bps": 1e7}
                      for k, r in enumerate((2.0, 4.0, 6.0))]}
    if total is not None:
        d["total_shards"] = total
    return d


def test_samples_per_shard_without_total_shards_come_from_what_eq_3_5_places() -> None:
    inst = parse_instance(_doc(None))
    # Eq. (3.5) by hand, b = 1e7 B/s: a < (15 - 2 x 0.016192) / (0.1568 + 5 / c_k), i.e.
    # 5.63 -> 5 (c = 2), 10.64 -> 10 (c = 4), 15.12 -> 15 (c = 6): 30 shards placed
    assert solve(inst, "dab").solution["shards"] == [5, 10, 15]
    cfg = [DabCycle().learner_config(inst, k, 1000) for k in range(3)]
    # 1000 samples over 30 shards: 33 per shard (it was the whole data set, 1000, per shard)
    assert {c["per_shard"] for c in cfg} == {33}


def test_samples_per_shard_follow_total_shards_when_given() -> None:
    inst = parse_instance(_doc(40))
    assert DabCycle().learner_config(inst, 0, 1000)["per_shard"] == 25


def test_a_shard_is_its_bytes_of_samples_where_the_data_set_holds_them() -> None:
    import numpy as np

    from mel_opt.problems.learning import RunContext, sample_bytes

    inst = parse_instance(_doc(15))
    # 28 x 28 images in float32: 3,136 bytes, so a 1,568,000-byte shard is 500 of them (the
    # thesis's shard); 60,000 images over 15 shards would give 4,000
    assert sample_bytes(784) == 3136.0
    assert DabCycle().learner_config(inst, 0, 60_000, sample_bytes(784))["per_shard"] == 500
    # 8 x 8 digits: a shard's bytes would be 6,125 of them, more than the 1,437 there are:
    # the data set over the 15 shards, 95 (as without the sample size)
    assert DabCycle().learner_config(inst, 0, 1_437, sample_bytes(64))["per_shard"] == 95
    assert DabCycle().learner_config(inst, 0, 1_437)["per_shard"] == 95
    # the emulator's plan reads the same rule from its run context
    sol = {"shards": [5, 10, 0], "tau": [5, 5, 5]}
    ctx = RunContext("dab", sol, 0, np.full(3, 20_000), sample_bytes=sample_bytes(784))
    plan = DabCycle().configure_cycle(inst, ctx, 1)
    assert [p.samples for p in plan.learners] == [5 * 500, 10 * 500]
