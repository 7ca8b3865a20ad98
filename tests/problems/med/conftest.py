"""Fixtures for med tests: small instances whose answers are worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

MB = 1_000_000


def med_doc(tasks: list[dict[str, Any]], learners: list[dict[str, Any]], *,
            budget: float = 1000.0, states: list[str] | None = None, **extra: Any
            ) -> dict[str, Any]:
    """A med document; tasks default to Omega = alpha = 1 MB, iterations 1, deadline 100 s."""
    h = len(learners[0]["state_probs"]) if learners else 1
    full_tasks = []
    for i, t in enumerate(tasks):
        full_tasks.append({"name": f"t{i}", "model_bytes": MB, "shard_bytes": MB,
                           "deadline_s": 100.0, "iterations": 1, **t})
    full_learners = []
    for j, lr in enumerate(learners):
        full_learners.append({"name": f"w{j}", "price": 1.0, **lr})
    return {
        "problem": "med",
        "schema_version": 1,
        "name": extra.pop("name", "hand"),
        "budget": budget,
        "states": states or [f"s{k}" for k in range(h)],
        "tasks": full_tasks,
        "learners": full_learners,
        **extra,
    }


def one_state(rate: float | list[float], *, bw: float = MB, price: float = 1.0,
              tasks: int = 1) -> dict[str, Any]:
    """A learner with a single certain state; ``rate`` per task (shards/s)."""
    rates = rate if isinstance(rate, list) else [rate] * tasks
    return {"price": price, "state_probs": [1.0], "bandwidth_Bps": [bw],
            "train_rate": [[r] for r in rates]}


@pytest.fixture
def make_doc():
    return med_doc


@pytest.fixture
def learner():
    return one_state
