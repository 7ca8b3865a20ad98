"""Problem ``dab``: Data Allocation via Benchmarking (thesis Chapter 3, paper 002).

Each learner turns its own benchmark scores (training rate c_k, bandwidth b_k) into the largest
number of shards a_k it can train for mu passes before the deadline (Eq. 3.5), so the
orchestrator never learns device characteristics. The centralised staleness-aware baseline
``csa`` reuses the mel-async solver; ``csa-thesis`` is the rounded CSA rule of the thesis
author's experiment code, whose deadline misses (truancy) the thesis reports. Subset
benchmarking itself (measuring c_k and b_k on this machine) lives in
:mod:`mel_opt.subset_benchmarking`.
"""

from __future__ import annotations

from mel_opt.problems.base import MethodSpec, ProblemSpec
from mel_opt.problems.dab import methods
from mel_opt.problems.dab.generate import PRESET_DOCS, PRESETS, generate
from mel_opt.problems.dab.instance import DabInstance, parse, solvable
from mel_opt.problems.dab.latency import eta, shard_bound
from mel_opt.problems.dab.learning import CYCLE
from mel_opt.problems.dab.verify import verify

PROBLEM = ProblemSpec(
    name="dab",
    summary="decentralised data allocation from local benchmarks (thesis Ch. 3)",
    parse=parse,
    verify=verify,
    methods={
        "dab": MethodSpec("dab", methods.solve_dab,
                          "each learner's largest shard count a_k with eta_k < D (Eq. 3.5)",
                          "analytical", proves_optimality=True),
        "csa": MethodSpec("csa", methods.solve_csa,
                          "centralised staleness-aware split of total_shards (mel-async exact)",
                          "baseline", not_comparable="minimises staleness of a fixed total"),
        "csa-thesis": MethodSpec("csa-thesis", methods.solve_csa_thesis,
                                 "the thesis code's CSA rule: (c_k + b_k)-weighted rounded "
                                 "shares of total_shards, rounded passes (may miss D)",
                                 "baseline",
                                 not_comparable="splits a fixed total by a rounded rule and may "
                                                "miss the deadline (truancy)"),
    },
    default_method="dab",
    sense="max",
    key_metrics=("shards_per_cycle", "max_eta_s", "truancy", "deadline_met", "learners_used",
                 "max_staleness"),
    generate=generate,
    presets=PRESETS,
    preset_docs=PRESET_DOCS,
    example="worked_example.json",
    learning=CYCLE,
    solvable=solvable,
)

__all__ = ["PROBLEM", "DabInstance", "eta", "parse", "shard_bound", "verify"]
