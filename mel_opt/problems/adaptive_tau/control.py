"""The adaptive-tau control rule, vectorised over the scanned range of tau.

Paper 003 demonstrates the control algorithm of S. Wang et al. (INFOCOM 2018 / IEEE JSAC 2019);
the formulas below are those of the authors' published code (as we read it), for M resource
types:

    h(tau)  = max(0, (delta / beta) ((eta beta + 1)^tau - 1) - eta delta tau)
    T(tau)  = tau min_m R'_m / (c_m tau + b_m),  R'_m = R_m - c_m - b_m with use_min_loss,
              R'_m = R_m otherwise (M = 1: the authors' T(tau))
    G(tau)  = (1 + sqrt(1 + 4 T^2 phi rho eta h / tau)) / (2 T eta phi) + rho h

tau* is the first minimiser of G over tau = 1 .. search_factor * tau_current (the strict "<"
of a linear scan), then capped at tau_max. End-of-budget rule (authors' server loop), with s_m
consumed so far: if s_m + c_m (tau + 1) + 2 b_m >= R_m for some m (with use_min_loss; else
s_m + c_m tau + b_m >= R_m), tau becomes min_m floor((R_m - s_m - 2 b_m - c_m) / c_m) (else
floor((R_m - s_m - b_m) / c_m)), clipped to [1, tau*], and this is the last round.

Numerics (ours): (eta beta + 1)^tau - 1 is evaluated as expm1(tau log1p(eta beta)), which keeps
the digits that the literal power loses when eta beta is tiny (beta is floored at 1e-5);
overflow gives h = inf and G = inf (never a minimiser, since h(1) = 0); a zero delta or rho
makes the h terms exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mel_opt.convergence import BETA_FLOOR, h_values
from mel_opt.problems.adaptive_tau.instance import AdaptiveTauInstance

__all__ = ["BETA_FLOOR", "Scan", "budget_rule", "effective_iterations", "h_values",
           "objective_values", "scan"]


def effective_iterations(tau: np.ndarray, inst: AdaptiveTauInstance) -> np.ndarray:
    """T(tau) = tau min_m R'_m / (c_m tau + b_m) for an array of tau."""
    tau = np.asarray(tau, dtype=float)
    R = inst.budget - (inst.local_cost + inst.global_cost if inst.use_min_loss else 0.0)
    per = R[None, :] / (inst.local_cost[None, :] * tau[:, None] + inst.global_cost[None, :])
    return tau * per.min(axis=1)


def objective_values(tau: np.ndarray, inst: AdaptiveTauInstance) -> np.ndarray:
    """G(tau) for an array of tau (inf where h overflows)."""
    tau = np.asarray(tau, dtype=float)
    eta, phi = inst.step_size, inst.phi
    T = effective_iterations(tau, inst)
    if inst.rho == 0.0:
        rh = np.zeros_like(tau)
    else:
        rh = inst.rho * h_values(tau, inst.beta, inst.delta, eta)
    with np.errstate(over="ignore", invalid="ignore"):
        root = np.sqrt(np.maximum(0.0, 1.0 + 4.0 * T**2 * phi * eta * rh / tau))
        G = (1.0 + root) / (2.0 * T * eta * phi) + rh
    return np.where(np.isnan(G), np.inf, G)


def budget_rule(tau: int, inst: AdaptiveTauInstance) -> tuple[int, bool]:
    """Apply the end-of-budget rule to ``tau``: (tau to use, whether this is the last round)."""
    R, c, b, s = inst.budget, inst.local_cost, inst.global_cost, inst.used
    if inst.use_min_loss:
        needed = s + c * (tau + 1) + 2.0 * b
        cap = np.floor((R - s - 2.0 * b - c) / c)
    else:
        needed = s + c * tau + b
        cap = np.floor((R - s - b) / c)
    if not np.any(needed >= R):
        return tau, False
    return int(min(max(float(cap.min()), 1.0), float(tau))), True


@dataclass(frozen=True)
class Scan:
    """Outcome of the scan (arrays over tau = 1 .. search_max).

    Attributes
    ----------
    taus, G : ndarray
        The scanned tau values and G(tau).
    tau_first_min : int
        First minimiser of G over the whole range.
    tau_capped : int
        min(tau_first_min, tau_max).
    tau_best_within_cap : int
        First minimiser of G over tau <= tau_max (differs from tau_capped when G is not
        monotone beyond the cap; reported, not used by the control rule).
    tau : int
        The tau the control rule sets, after the end-of-budget rule.
    last_round : bool
        The end-of-budget rule fired.
    """

    taus: np.ndarray
    G: np.ndarray
    tau_first_min: int
    tau_capped: int
    tau_best_within_cap: int
    tau: int
    last_round: bool

    @property
    def G_min(self) -> float:
        return float(self.G[self.tau_first_min - 1])


def scan(inst: AdaptiveTauInstance) -> Scan:
    """Evaluate G over the whole range at once and apply the cap and the end-of-budget rule."""
    taus = np.arange(1, inst.search_max + 1, dtype=np.int64)
    G = objective_values(taus.astype(float), inst)
    first = int(np.argmin(G)) + 1  # argmin returns the first minimum: the strict "<" scan
    capped = min(first, inst.tau_max)
    within = int(np.argmin(G[: min(inst.tau_max, G.size)])) + 1
    tau, last = budget_rule(capped, inst)
    return Scan(taus, G, first, capped, within, tau, last)
