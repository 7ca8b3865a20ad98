"""Problem ``med``: multi-task data allocation under uncertainty (thesis 001, Chapter 4).

MED (Minimise Expected Delay) assigns each learner to one task and splits every task's shards
among its learners to minimise the sum over tasks of the maximum expected delay (4.4), under
deadlines, one budget and a minimum number of shards per learner. Methods: ``exact`` (type
programme / Lagrangian search, proven optimum), ``highs`` (the strengthened MILP) and the
``mmtt-uncertain`` baseline; ``simulate`` evaluates schemes under random learner states.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mel_opt.problems.base import MethodSpec, ProblemSpec
from mel_opt.problems.med import formulation, methods
from mel_opt.problems.med.generate import PRESET_DOCS, PRESETS, generate
from mel_opt.problems.med.instance import MedInstance, parse
from mel_opt.problems.med.learning import CYCLE
from mel_opt.problems.med.verify import verify


def evaluate(inst: MedInstance, seed: int, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Rows of the Monte-Carlo evaluation (thesis 4.3): one per (scheme, trial).

    Options: ``trials`` (40), ``cycles`` (5), ``schemes`` (all), ``time_limit``.
    """
    from mel_opt.problems.med.simulate import SCHEMES, simulate

    res = simulate(inst, schemes=tuple(options.get("schemes") or SCHEMES),
                   cycles=int(options.get("cycles", 5)), trials=int(options.get("trials", 40)),
                   seed=seed, time_limit=options.get("time_limit"))
    rows = []
    for scheme in res.schemes:
        for t in range(res.trials):
            row: dict[str, Any] = {"method": scheme.name, "trial": t}
            for key, values in scheme.per_trial.items():
                row[key] = float(values[t])
            rows.append(row)
    return rows


def build_model(inst: MedInstance, method: str) -> Any:
    """The Pyomo model (4.4) behind ``highs`` (strengthened, with symmetry breaking)."""
    return formulation.build_milp_model(inst)


PROBLEM = ProblemSpec(
    name="med",
    summary="min sum of max expected task delays, learners with uncertain states (thesis Ch. 4)",
    parse=parse,
    verify=verify,
    methods={
        "exact": MethodSpec("exact", methods.solve_exact,
                            "type programme + budget search (Lagrangian B&B when many types)",
                            "exact", proves_optimality=True),
        "highs": MethodSpec("highs", methods.solve_highs,
                            "strengthened MILP (4.4) with symmetry breaking, HiGHS",
                            "numerical", proves_optimality=True, backends=("highs",),
                            options=methods.HIGHS_OPTIONS),
        "mmtt-uncertain": MethodSpec("mmtt-uncertain", methods.solve_mmtt_uncertain,
                                     "MMTT: one sampled state per learner taken as certain",
                                     "baseline", options=methods.MMTT_OPTIONS),
    },
    default_method="exact",
    sense="min",
    key_metrics=("task_delay", "cost", "budget_used", "learners_per_task"),
    generate=generate,
    presets=PRESETS,
    preset_docs=PRESET_DOCS,
    evaluate=evaluate,
    build_model=build_model,
    example="mays2023_n4_m2.json",
    learning=CYCLE,
)

__all__ = ["PROBLEM", "MedInstance", "parse", "verify"]
