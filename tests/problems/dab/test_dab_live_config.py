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
