"""Problem ``mel-async``: staleness-aware task allocation for asynchronous MEL (paper 000)."""

from __future__ import annotations

from mel_opt.problems.base import MethodSpec, ProblemSpec
from mel_opt.problems.mel_async import methods
from mel_opt.problems.mel_async.formulation import build_model
from mel_opt.problems.mel_async.generate import PRESET_DOCS, PRESETS, generate
from mel_opt.problems.mel_async.instance import MelAsyncInstance, parse, solvable
from mel_opt.problems.mel_async.learning import CYCLE
from mel_opt.problems.mel_async.verify import verify

PROBLEM = ProblemSpec(
    name="mel-async",
    summary="min max staleness of local updates in asynchronous MEL (paper 000)",
    parse=parse,
    verify=verify,
    methods={
        "exact": MethodSpec("exact", methods.solve_exact,
                            "window algorithm + MILP: proven lexicographic optimum (6) then (13)",
                            "exact", proves_optimality=True),
        "ipopt": MethodSpec("ipopt", methods.solve_ipopt,
                            "relaxed QCLP (8) by IPOPT, floored and repaired", "numerical",
                            backends=("ipopt",), options=methods.IPOPT_OPTIONS),
        "kkt-sai": MethodSpec("kkt-sai", methods.solve_kkt_sai,
                              "KKT point (Theorem 1) then suggest-and-improve", "analytical",
                              options=methods.KKT_SAI_OPTIONS, imports=("scipy.optimize",)),
        "eta": MethodSpec("eta", methods.solve_eta,
                          "equal task allocation, asynchronous updates", "baseline"),
        "sync": MethodSpec("sync", methods.solve_sync,
                           "synchronous: one common tau, maximised", "baseline",
                           not_comparable="synchronous: learners may idle, so its staleness is 0 "
                                          "by construction (not a solution of (7))"),
    },
    default_method="exact",
    sense="min",
    key_metrics=("max_staleness", "avg_staleness", "min_tau", "max_tau", "learners_not_busy"),
    generate=generate,
    presets=PRESETS,
    preset_docs=PRESET_DOCS,
    build_model=build_model,
    example="k5_T15.json",
    learning=CYCLE,
    solvable=solvable,
)

__all__ = ["PROBLEM", "MelAsyncInstance", "parse", "verify"]
