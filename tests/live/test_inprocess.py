"""Live rounds with the learners in this process (no Flower), on a virtual clock: the same
learner function as the Flower client, so learners that plan their own work (dab) run here too,
and their own speed estimates follow the clock with the run's alpha."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mel_opt.io.json_io import parse_json_text
from mel_opt.live.inprocess import Clock, run_in_process
from mel_opt.live.rounds import LiveRun, LiveSettings
from mel_opt.training import load_dataset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits").astype(np.dtype("float32"))


def test_dab_learners_decide_in_process_from_their_own_clocked_speeds(digits: Any) -> None:
    doc = parse_json_text((ROOT / "instances/dab/mnist_ffn_testbed.json").read_text())
    run = LiveRun(LiveSettings(instance=doc, rounds=2, seed=0, model="softmax", alpha=0.25),
                  digits)
    inst = run.inst
    N = digits.y_train.size
    per_shard = N // 60  # the data set over total_shards
    probe = 1.0 / (per_shard * inst.iterations)  # about one second of training per shard
    sigma = probe * np.array([1.0, 2.0, 4.0, 8.0, 16.0])  # what the clock says they take
    pools = np.array_split(np.arange(N), run.K)
    clock = Clock(compute_s=lambda r, k, work: sigma[k] * work, overhead_s=lambda r: 0.0,
                  probe_s_per_sample=probe)
    run_in_process(run, pools, clock)

    def shards(speed: float, k: int) -> int:  # Eq. (3.5) by hand: the largest a, eta(a) < D
        c, b = 1.0 / (speed * per_shard), inst.bandwidth[k]

        def eta(a: int) -> float:
            return ((inst.model_bytes + inst.shard_bytes * a) / b
                    + inst.iterations * a / c + inst.model_bytes / b)

        a = 0
        while eta(a + 1) < inst.deadline:
            a += 1
        return a

    rows = {(r["round"], r["learner"]): r for r in run.rows}
    for k in range(run.K):
        # round 1: every learner knows only its probe; round 2: its own average, moved a
        # quarter (alpha) of the way to what the clock measured
        own = 0.75 * probe + 0.25 * sigma[k]
        assert rows[(1, k)]["shards"] == shards(probe, k)
        assert rows[(2, k)]["shards"] == shards(own, k)
        assert rows[(2, k)]["samples"] == rows[(2, k)]["shards"] * per_shard
    assert rows[(2, 0)]["shards"] > rows[(2, 4)]["shards"]
    # the fastest stays within the deadline; the slowest, planned on its probe, does not
    assert rows[(1, 0)]["status"] == "ok" and rows[(1, 4)]["status"] == "late"
    assert np.isnan(run.estimates.seconds).all()  # the server never learned a speed
    assert run.rounds[-1]["method"] == "decentralised"
