"""Methods for adaptive-tau: the control rule's scan and a fixed-tau baseline."""

from __future__ import annotations

from typing import Any

from mel_opt.problems.adaptive_tau.control import budget_rule, scan
from mel_opt.problems.adaptive_tau.instance import AdaptiveTauInstance
from mel_opt.problems.base import MethodOutput, SolveOptions
from mel_opt.problems.options import Option
from mel_opt.result import SolverInfo

_SCAN = SolverInfo("mel_opt vectorised tau scan", "1")
_FIXED = SolverInfo("mel_opt fixed tau", "1")


def solve_scan(inst: AdaptiveTauInstance, opts: SolveOptions) -> MethodOutput:
    """tau* = first minimiser of G over 1 .. search_factor * tau_current, capped at tau_max,
    then the end-of-budget rule (see :mod:`~mel_opt.problems.adaptive_tau.control`).

    Status ``optimal`` when the answer is the minimiser of G over the range; ``feasible`` when
    the cap or the end-of-budget rule moved it (the message says which).
    """
    sc = scan(inst)
    extras: dict[str, Any] = {
        "tau_unconstrained": sc.tau_first_min,
        "G_min": sc.G_min,
        "search_max": inst.search_max,
        "tau_best_within_cap": sc.tau_best_within_cap,
        "capped": sc.tau_first_min > inst.tau_max,
        "last_round": sc.last_round,
    }
    notes = [f"first minimiser of G over 1..{inst.search_max}: tau = {sc.tau_first_min}"]
    if sc.tau_first_min > inst.tau_max:
        notes.append(f"capped at tau_max = {inst.tau_max}")
    if sc.last_round:
        notes.append(f"end of budget: tau = {sc.tau} leaves room for the final round")
    answer = MethodOutput.optimal if sc.tau == sc.tau_first_min else MethodOutput.feasible
    return answer({"tau": sc.tau}, _SCAN, extras, "; ".join(notes))


FIXED_OPTIONS = (Option("tau", int, None, "the fixed number of local updates", minimum=1,
                        default_doc="the instance's tau_current"),)


def solve_fixed(inst: AdaptiveTauInstance, opts: SolveOptions) -> MethodOutput:
    """Baseline: keep a fixed tau (option ``tau``, default ``tau_current``), capped at tau_max
    and subject to the same end-of-budget rule (the authors' fixed-tau runs)."""
    raw = opts.options.get("tau") or inst.tau_current
    tau, last = budget_rule(min(raw, inst.tau_max), inst)
    msg = f"fixed tau = {raw}" + (f", end of budget: {tau}" if last else "")
    return MethodOutput.feasible({"tau": tau}, _FIXED, {"last_round": last}, msg)
