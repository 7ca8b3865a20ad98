"""Problem ``feel``: learning-efficiency maximisation in federated edge learning (paper 004).

Maximise xi sqrt(B) / T over whole per-device batches B_k, uplink and downlink TDMA slots and
the global batch B, for CPU (Section III-IV) or GPU (Section V) devices. See ``instance`` for
the instance, ``latency`` for the latency model in coefficient form, ``closed_form`` for
Theorems 1-2 and Algorithm 1, ``rounding`` for the rounding-and-repair step every method ends
with, ``formulation`` for the Pyomo models of P1 and P4 + P5, ``multistart`` for IPOPT on them
with several starts, ``methods`` for the entry point of every method (the closed form, IPOPT and the
baselines of Section VI).
"""

from __future__ import annotations

from mel_opt.problems.base import MethodSpec, ProblemSpec
from mel_opt.problems.feel import methods
from mel_opt.problems.feel.formulation import build_model
from mel_opt.problems.feel.generate import PRESET_DOCS, PRESETS, generate
from mel_opt.problems.feel.instance import FeelInstance, parse
from mel_opt.problems.feel.learning import CYCLE
from mel_opt.problems.feel.verify import verify

PROBLEM = ProblemSpec(
    name="feel",
    summary="max learning efficiency over batch sizes and TDMA slots in FEEL (paper 004)",
    parse=parse,
    verify=verify,
    methods={
        "closed-form": MethodSpec(
            "closed-form", methods.solve_closed_form,
            "Theorems 1-2, Algorithm 1, search over B; whole batches, certified", "analytical",
            proves_optimality=True, options=methods.CLOSED_FORM_OPTIONS),
        "ipopt": MethodSpec(
            "ipopt", methods.solve_ipopt,
            "P4+P5 (fixed B) or P1 multi-start by IPOPT, rounded and repaired", "numerical",
            backends=("ipopt",), options=methods.IPOPT_OPTIONS),
        "online": MethodSpec("online", methods.solve_online,
                             "online learning: B_k = 1, optimal slots", "baseline"),
        "full-batch": MethodSpec("full-batch", methods.solve_full_batch,
                                 "full batch: B_k = B_max, optimal slots", "baseline"),
        "random-batch": MethodSpec("random-batch", methods.solve_random_batch,
                                   "seeded random B_k in 1..B_max, optimal slots", "baseline"),
        "equal-slots": MethodSpec("equal-slots", methods.solve_equal_slots,
                                  "equal TDMA slots, best whole batches for them", "baseline"),
    },
    default_method="closed-form",
    sense="max",
    key_metrics=("learning_efficiency", "round_latency_s", "uplink_latency_s",
                 "downlink_latency_s", "global_batch"),
    generate=generate,
    presets=PRESETS,
    preset_docs=PRESET_DOCS,
    build_model=build_model,
    example="ren2021_cpu_densenet121_k6.json",
    learning=CYCLE,
)

__all__ = ["PROBLEM", "FeelInstance", "parse", "verify"]
