"""Fixtures for the search tests: small random med documents and a brute-force optimum."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest


def _random_doc(rng: np.random.Generator, n: int, m: int) -> dict:
    """Small random instances: 2 states, deadlines and budgets that sometimes bind."""
    h = 2
    tasks = [{"name": f"t{i}", "model_bytes": float(rng.uniform(0.2e6, 2e6)),
              "shard_bytes": 1e6, "shards": int(rng.integers(n, 9)),
              "deadline_s": float(rng.uniform(8, 30)), "iterations": int(rng.integers(1, 3))}
             for i in range(m)]
    learners = []
    for j in range(n):
        p = rng.dirichlet([1.0] * h)
        learners.append({
            "name": f"w{j}", "price": float(rng.choice([0.5, 1.0, 1.5])),
            "state_probs": p.tolist(),
            "bandwidth_Bps": rng.uniform(0.5e6, 3e6, h).tolist(),
            "train_rate": rng.uniform(0.3, 3.0, (m, h)).tolist(),
        })
    total = sum(t["shards"] for t in tasks)
    return {"problem": "med", "schema_version": 1, "name": "rnd",
            "budget": float(total * rng.uniform(0.7, 1.6)),
            "min_shards_per_learner": int(rng.choice([0, 1, 1, 1])),
            "states": ["a", "b"], "tasks": tasks, "learners": learners}


def delay(doc: dict, i: int, j: int, d: int) -> float:
    """Expected delay (4.3) with the iterations, from the raw document (independent code)."""
    t, lr = doc["tasks"][i], doc["learners"][j]
    total = 0.0
    for k, g in enumerate(lr["state_probs"]):
        b, r = lr["bandwidth_Bps"][k], lr["train_rate"][i][k]
        total += g * ((2 * t["model_bytes"] + t["shard_bytes"] * d) / b
                      + t["iterations"] * d / r)
    return total


def compositions(total: int, parts: int, low: int):
    if parts == 1:
        if total >= low:
            yield (total,)
        return
    for first in range(low, total - low * (parts - 1) + 1):
        for rest in compositions(total - first, parts - 1, low):
            yield (first, *rest)


def _brute_force(doc: dict) -> float:
    """min sum_i max delay over every assignment and every whole split (inf if none)."""
    m, n = len(doc["tasks"]), len(doc["learners"])
    L = max(1, doc.get("min_shards_per_learner", 1))
    choices = range(m) if doc.get("min_shards_per_learner", 1) > 0 else range(-1, m)
    best = math.inf
    for assign in itertools.product(choices, repeat=n):
        groups = [[j for j in range(n) if assign[j] == i] for i in range(m)]
        if any(not g for g in groups):
            continue
        options = []  # per task: list of (max delay, cost)
        for i, g in enumerate(groups):
            opts = []
            for split in compositions(doc["tasks"][i]["shards"], len(g), L):
                delays = [delay(doc, i, j, d) for j, d in zip(g, split, strict=True)]
                if max(delays) <= doc["tasks"][i]["deadline_s"] * (1 + 1e-12):
                    cost = sum(doc["learners"][j]["price"] * d
                               for j, d in zip(g, split, strict=True))
                    opts.append((max(delays), cost))
            if not opts:
                break
            options.append(opts)
        else:
            for combo in itertools.product(*options):
                if sum(c for _, c in combo) <= doc["budget"] * (1 + 1e-12):
                    best = min(best, sum(h for h, _ in combo))
    return best


@pytest.fixture
def random_doc():
    """``random_doc(rng, n, m)``: a random med document (2 states, n learners, m tasks)."""
    return _random_doc


@pytest.fixture
def brute_force():
    """``brute_force(doc)``: the optimum of (4.4) by enumeration (inf if infeasible)."""
    return _brute_force


def _tiny_case(seed: int) -> tuple[object, float]:
    """A random instance of 3-5 learners and 1-2 tasks drawn from ``seed``, and its optimum by
    enumeration (inf if infeasible)."""
    from mel_opt.api import parse_instance

    rng = np.random.default_rng(seed)
    doc = _random_doc(rng, int(rng.integers(3, 6)), int(rng.integers(1, 3)))
    return parse_instance(doc), _brute_force(doc)


@pytest.fixture
def tiny_case():
    """``tiny_case(seed)``: (instance, its brute-force optimum) of 3-5 learners, 1-2 tasks."""
    return _tiny_case
