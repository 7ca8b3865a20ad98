"""Independent re-check of an adaptive-tau solution: G(tau) recomputed in scalar arithmetic.

Written from the control rule's formulas only (the authors' G, T and h, restated in
:mod:`~mel_opt.problems.adaptive_tau.control`); it shares no code with the scan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mel_opt.problems.adaptive_tau.instance import AdaptiveTauInstance
from mel_opt.problems.base import Checked
from mel_opt.result import Verification

TOL = 1e-9


def control_objective(tau: float, inst: AdaptiveTauInstance) -> tuple[float, float, float]:
    """(G(tau), T(tau), h(tau)) by the authors' formulas, one tau at a time."""
    beta = max(inst.beta, 1e-5)
    eta, phi, rho, delta = inst.step_size, inst.phi, inst.rho, inst.delta
    try:
        power_minus_one = math.expm1(tau * math.log1p(eta * beta))  # (eta beta + 1)^tau - 1
    except OverflowError:
        power_minus_one = math.inf
    h = 0.0 if delta == 0 else max(0.0, delta / beta * power_minus_one - eta * delta * tau)
    T = math.inf
    for R, c, b in zip(inst.budget, inst.local_cost, inst.global_cost, strict=True):
        Rp = R - c - b if inst.use_min_loss else R
        T = min(T, tau * Rp / (c * tau + b))
    rh = 0.0 if rho == 0 else rho * h
    if math.isinf(rh):
        return math.inf, T, h
    G = (1 + math.sqrt(max(0.0, 1 + 4 * T * T * phi * rho * eta * h / tau))) / (
        2 * T * eta * phi
    ) + rh
    return G, T, h


def verify(inst: AdaptiveTauInstance, solution: Mapping[str, Any]) -> Checked:
    """Check that tau is a whole number in [1, tau_max] and recompute G(tau) (the objective,
    to minimise), T(tau) (``effective_iterations``), h(tau), ``rounds_in_budget``
    (T(tau) / tau) and ``budget_left_fraction`` (min over resources of the share of R_m left
    after a round of tau local updates and one aggregation)."""
    raw = solution.get("tau") if isinstance(solution, Mapping) else None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        v = Verification(False, math.inf, {"shape": math.inf},
                         (f"solution must hold a number tau, got {raw!r}",))
        return Checked(v, {}, None)
    tau = float(raw)
    checks = {
        "integrality": abs(tau - round(tau)),
        "range 1 <= tau <= tau_max": max(0.0, 1 - tau, tau - inst.tau_max) / inst.tau_max,
    }
    worst = max(checks.values())
    feasible = worst <= TOL
    notes = () if feasible else ("violated: " + ", ".join(k for k, x in checks.items()
                                                          if x > TOL),)
    if tau < 1:
        return Checked(Verification(False, worst, checks, notes), {}, None)
    G, T, h = control_objective(tau, inst)
    left = min(
        (R - s - c * tau - b) / R
        for R, c, b, s in zip(inst.budget, inst.local_cost, inst.global_cost, inst.used,
                              strict=True)
    )
    metrics: dict[str, Any] = {
        "G": G,
        "effective_iterations": T,
        "h": h,
        "rounds_in_budget": T / tau,
        "budget_left_fraction": float(left),
    }
    return Checked(Verification(feasible, worst, checks, notes), metrics, G)
