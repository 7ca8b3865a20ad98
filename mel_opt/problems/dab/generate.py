"""Instance generator for dab (``melopt generate dab --preset P``).

Presets
-------
``random`` (default)
    The thesis Chapter 3 set-up (deadline 15 s, mu = 5 passes, 500-sample MNIST shards of
    500 x 784 float32 = 1,568,000 bytes, the TwoNN model [784, 50, 20, 10]: 40,480 float32
    parameters = 161,920 bytes) with K heterogeneous learners. Our documented choice for the
    spread: train rates log-uniform in [1, 30] shards/s (a Raspberry Pi to a desktop GPU) and
    bandwidths log-uniform in [1, 10] shards/s (WiFi to Ethernet). ``total_shards`` (for csa)
    is the number of shards DAB itself allocates, so both schemes place the same data. Every
    learner carries ``time_cv`` = 0.06, the run-to-run spread of its time around Eq. (3.4)
    that the training emulator adds (the methods ignore it): the noise law's default
    (:data:`~mel_opt.stats.DEFAULT_TIME_CV`, med's too), which was calibrated from this
    chapter's own subset-benchmarking errors on the Jetson Nanos (Figs. 3.2-3.3).
``fleet``
    The same set-up on K phones (default 100) whose speeds come from
    :func:`mel_opt.problems.fleet.population`: drawn from published spreads (AI Benchmark CPU
    scores, FLASH's user speeds) or from a trace (``--param trace=fedscale:PATH`` or
    ``flash:PATH``, ``trace_replace``, ``median_ops_per_s``, ``reference_flops_per_sample``).
    Conversions: ``train_rate`` = operations per second / (:data:`TWONN_TRAIN_OPS` x 500
    samples) shards/s, or 1 / (500 s) where a FedScale trace gives s seconds per sample and
    pass (the trace's latency scaled from FedScale's reference model to the TwoNN's 80,800
    FLOPs per inference, :mod:`mel_opt.problems.fleet`); ``bandwidth_Bps`` = the link
    rate in bytes/s. ``time_cv`` 0.06 as ``random``.
``worked-example``
    The single learner of the worked example in the thesis author's published DAB code:
    Omega_m = 6.156 shards, b = 9.25 shards/s, c = 25.08 shards/s, mu = 1, D = 15 s, which
    gives a_k = 92 shards. No ``time_cv``: the example runs exactly to its time model.

Any top-level number can be overridden with ``--param KEY=VALUE`` (``deadline_s``,
``iterations``, ``model_bytes``, ``shard_bytes``, ``total_shards``, ``min_shards``,
``max_shards``); ``--param time_cv=CV`` sets every learner's ``time_cv`` (in [0, 2]).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.mlp import TWONN_LAYERS, forward_flops_per_sample
from mel_opt.problems.base import param_value
from mel_opt.problems.dab.latency import shard_bound
from mel_opt.problems.fleet import FLEET_PARAMS, population
from mel_opt.stats import DEFAULT_TIME_CV

PRESETS = ("random", "worked-example", "fleet")
PRESET_DOCS = {
    "random": "thesis Ch. 3 set-up (D = 15 s, mu = 5, MNIST shards, TwoNN), K random learners",
    "worked-example": "the single learner of the thesis author's worked example (a_k = 92)",
    "fleet": "thesis Ch. 3 set-up on a mobile fleet: compute and links drawn from published "
             "spreads (AI Benchmark, FLASH), or from a trace (--param trace=fedscale:PATH, "
             "flash:PATH)",
}

SHARD_BYTES = 500 * 784 * 4  # one 500-sample MNIST shard as float32
TWONN_BYTES = 4 * (784 * 50 + 50 + 50 * 20 + 20 + 20 * 10 + 10)  # 40,480 parameters
SHARD_SAMPLES = 500
#: Operations of one training pass over one sample of the TwoNN: 2 per parameter forward
#: (a multiply and an add), three times that with the backward pass (FedScale's factor 3).
TWONN_TRAIN_OPS = 3 * 2 * (TWONN_BYTES // 4)

_INT_PARAMS = {"iterations", "total_shards", "min_shards", "max_shards"}
_FLOAT_PARAMS = {"deadline_s", "model_bytes", "shard_bytes"}


def _override(doc: dict[str, Any], params: Mapping[str, str]) -> None:
    if params:
        doc["description"] += " Overridden with --param: " + ", ".join(
            f"{k}={v}" for k, v in params.items()) + "."
    known = _INT_PARAMS | _FLOAT_PARAMS | {"time_cv"}
    for key in params:
        if key not in known:
            raise UsageError(f"unknown dab parameter {key!r}; choose from "
                             f"{', '.join(sorted(known))}")
        if key == "time_cv":
            cv = float(param_value(params, key))
            if not 0.0 <= cv <= 2.0:
                raise UsageError(f"--param time_cv must lie in [0, 2], got {cv:g}")
            for learner in doc["learners"]:
                learner["time_cv"] = cv
            continue
        value: float = param_value(params, key)
        doc[key] = int(value) if key in _INT_PARAMS and value.is_integer() else value


def generate(
    preset: str | None,
    *,
    learners: int | None = None,
    tasks: int | None = None,
    seed: int = 0,
    params: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Build a dab instance document (validated by the caller before it is written).

    Parameters
    ----------
    preset : str or None
        One of :data:`PRESETS` (None: ``random``).
    learners : int, optional
        Number of learners for ``random`` (default 5); ``worked-example`` has exactly one.
    tasks : int, optional
        Not used by dab (single task).
    seed : int
        Seed of the random draws.
    params : mapping of str to str
        Overrides of top-level numbers.
    """
    preset = preset or "random"
    params = dict(params or {})
    if preset == "worked-example":
        return _worked_example(learners, params)
    if preset == "fleet":
        return _fleet(100 if learners is None else int(learners), seed, params)
    if preset != "random":
        raise UsageError(f"unknown preset {preset!r} for dab; choose one of {', '.join(PRESETS)}")
    return _random(5 if learners is None else int(learners), seed, params)


def _worked_example(learners: int | None, params: Mapping[str, str]) -> dict[str, Any]:
    """Preset ``worked-example``: one learner with a_k = 92 shards (module docstring)."""
    if learners not in (None, 1):
        raise UsageError("the worked-example preset has exactly one learner")
    doc: dict[str, Any] = {
        "problem": "dab",
        "schema_version": 1,
        "name": "dab-worked-example",
        "description": (
            "Worked example of the thesis author's published DAB code: "
            "Omega_m = 6.156 shards, b = 9.25 shards/s, c = 25.08 shards/s, mu = 1, "
            "D = 15 s -> a_k = 92 shards. Shard = 500 x 784 float32 = 1,568,000 bytes, so "
            "model_bytes = 6.156 shards and bandwidth_Bps = 9.25 shards/s in bytes. "
            "total_shards = 92 (our choice, so csa places the same data)."
        ),
        "deadline_s": 15.0,
        "iterations": 1,
        "model_bytes": 6.156 * SHARD_BYTES,
        "shard_bytes": SHARD_BYTES,
        "total_shards": 92,
        "learners": [{"name": "learner", "train_rate": 25.08,
                      "bandwidth_Bps": 9.25 * SHARD_BYTES}],
    }
    _override(doc, params)
    return doc


def _random(K: int, seed: int, params: Mapping[str, str]) -> dict[str, Any]:
    """Preset ``random``: K learners of the thesis set-up with log-uniform rates (docstring)."""
    rng = np.random.default_rng(seed)
    rate = np.exp(rng.uniform(np.log(1.0), np.log(30.0), K))
    bw = np.exp(rng.uniform(np.log(1.0), np.log(10.0), K)) * SHARD_BYTES
    doc: dict[str, Any] = {
        "problem": "dab",
        "schema_version": 1,
        "name": f"dab-random-k{K}-s{seed}",
        "description": (
            f"Generated by `melopt generate dab --preset random --learners {K} --seed {seed}`: "
            "thesis Chapter 3 set-up (D = 15 s, mu = 5, 500-sample MNIST shards of "
            "1,568,000 bytes, TwoNN model of 161,920 bytes); train rates log-uniform in "
            "[1, 30] shards/s and bandwidths log-uniform in [1, 10] shards/s (our choice); "
            "total_shards = the shards DAB allocates; run-to-run time_cv 0.06 per learner "
            "(the training emulator's noise)."
        ),
        "deadline_s": 15.0,
        "iterations": 5,
        "model_bytes": float(TWONN_BYTES),
        "shard_bytes": SHARD_BYTES,
        "learners": [
            {"name": f"learner{k}", "train_rate": round(float(rate[k]), 4),
             "bandwidth_Bps": round(float(bw[k]), 1), "time_cv": DEFAULT_TIME_CV}
            for k in range(K)
        ],
    }
    _override(doc, params)
    _total_shards(doc, params, K)
    return doc


def _total_shards(doc: dict[str, Any], params: Mapping[str, str], K: int) -> None:
    """``total_shards`` = the shards DAB allocates (so csa places the same data)."""
    if "total_shards" not in params:
        try:
            a = shard_bound(float(doc["deadline_s"]), float(doc["iterations"]),
                            float(doc["model_bytes"]), float(doc["shard_bytes"]),
                            [x["train_rate"] for x in doc["learners"]],
                            [x["bandwidth_Bps"] for x in doc["learners"]])
            doc["total_shards"] = max(int(a.sum()), K)
        except (TypeError, ValueError, ZeroDivisionError):
            pass  # a bad override: the caller's validation names it


def _fleet(K: int, seed: int, params: Mapping[str, str]) -> dict[str, Any]:
    """Preset ``fleet``: the ``random`` set-up on K phones of a mobile fleet (docstring)."""
    rng = np.random.default_rng(seed)
    own = {k: v for k, v in params.items() if k in FLEET_PARAMS}
    pop = population(own, K, rng, forward_flops_per_sample(TWONN_LAYERS))
    if pop.ops_per_s is not None:
        rate = pop.ops_per_s / (TWONN_TRAIN_OPS * SHARD_SAMPLES)
    else:
        assert pop.seconds_per_sample is not None
        rate = 1.0 / (SHARD_SAMPLES * pop.seconds_per_sample)
    source = "trace" if "trace" in params else "published"
    doc: dict[str, Any] = {
        "problem": "dab",
        "schema_version": 1,
        "name": f"dab-fleet-{source}-k{K}-s{seed}",
        "description": (
            "Thesis Chapter 3 set-up (D = 15 s, mu = 5, 500-sample MNIST shards of "
            "1,568,000 bytes, TwoNN model of 161,920 bytes) on a mobile fleet. "
            f"{pop.source} train_rate = operations/s / ({TWONN_TRAIN_OPS:,} x 500) shards/s "
            "(or 1 / (500 x seconds per sample)), bandwidth_Bps = bytes/s; run-to-run "
            f"time_cv 0.06 per learner. Generated with seed {seed}."
        ),
        "deadline_s": 15.0,
        "iterations": 5,
        "model_bytes": float(TWONN_BYTES),
        "shard_bytes": SHARD_BYTES,
        "learners": [
            {"name": pop.names[k], "train_rate": float(rate[k]),
             "bandwidth_Bps": float(pop.link_Bps[k]), "time_cv": DEFAULT_TIME_CV}
            for k in range(K)
        ],
    }
    _override(doc, {k: v for k, v in params.items() if k not in FLEET_PARAMS})
    _total_shards(doc, params, K)
    return doc
