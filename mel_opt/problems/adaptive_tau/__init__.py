"""Problem ``adaptive-tau``: local updates between aggregations under a resource budget.

The control rule behind the demo of paper 003 (Wang et al., INFOCOM 2018 / JSAC 2019), as the
authors' published code implements it: tau* minimises the convergence-bound objective G(tau) over
a range, is capped at tau_max and shortened near the end of the budget. ``melopt tau-scan``
shows G over the range (terminal chart or ``--plot`` PNG).
"""

from __future__ import annotations

from mel_opt.problems.adaptive_tau import methods
from mel_opt.problems.adaptive_tau.control import Scan, objective_values, scan
from mel_opt.problems.adaptive_tau.generate import PRESET_DOCS, PRESETS, generate
from mel_opt.problems.adaptive_tau.instance import AdaptiveTauInstance, parse
from mel_opt.problems.adaptive_tau.learning import CYCLE
from mel_opt.problems.adaptive_tau.verify import verify
from mel_opt.problems.base import MethodSpec, ProblemSpec

PROBLEM = ProblemSpec(
    name="adaptive-tau",
    summary="number of local updates tau under a resource budget (paper 003 / Wang et al.)",
    parse=parse,
    verify=verify,
    methods={
        "scan": MethodSpec("scan", methods.solve_scan,
                           "first minimiser of G(tau) by a vectorised scan, capped, "
                           "end-of-budget rule", "exact", proves_optimality=True),
        "fixed": MethodSpec("fixed", methods.solve_fixed,
                            "keep tau_current (or option tau), with the end-of-budget rule",
                            "baseline", options=methods.FIXED_OPTIONS),
    },
    default_method="scan",
    sense="min",
    key_metrics=("G", "effective_iterations", "rounds_in_budget", "budget_left_fraction"),
    generate=generate,
    presets=PRESETS,
    preset_docs=PRESET_DOCS,
    example="svm_defaults.json",
    learning=CYCLE,
)

__all__ = ["PROBLEM", "AdaptiveTauInstance", "Scan", "objective_values", "parse", "scan",
           "verify"]
