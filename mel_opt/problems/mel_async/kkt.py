"""Theorem 1 of paper 000: its KKT point of the relaxation (8), and the multipliers at a point.

:func:`kkt_point` is the analytical route's starting point (``kkt-sai``): the point of (8)
whose staleness rows (8b) are all active. :func:`analyse` checks any point against the KKT
conditions.

Paper 000 writes the Lagrangian (9) of (8) and solves its stationarity conditions (14)-(16) for
tau_k and d_k, which gives Theorem 1, (11)-(12). The paper does not say how the multipliers are
found. Here they are computed at a given point (z, tau, d) of (8): every constraint that is not
active there gets a zero multiplier (complementary slackness), and the multipliers of the active
ones solve the stationarity system of (9) in the least-squares sense under their sign
constraints (a bounded least-squares problem; the multipliers of the pairwise rows (8b) are not
unique when several pairs are active, the aggregates u, u' of Appendix B are what (12) uses).

Sign conventions (those of (9)):

- lambda_k (free): time equality (8c), C2 tau d + C1 d + C0 - T = 0;
- omega (free): total samples (8d), sum d - d = 0;
- alpha_k: term + alpha_k tau_k of (9) for tau_k >= 0 (8e), so alpha_k <= 0;
- nu_k >= 0: nu_k (d_l - d_k); nu'_k >= 0: nu'_k (d_k - d_u)   (8f);
- mu_n, mu'_n >= 0: (tau_k - tau_l - z) and (tau_l - tau_k - z) for pair n = (k, l), k < l (8b).

Stationarity of (9): dL/dz = 1 - sum(mu + mu') = 0;
dL/dtau_k = lambda_k C2_k d_k + u_k + u'_k + alpha_k = 0 (16), with u, u' of (19)-(20);
dL/dd_k = lambda_k (C2_k tau_k + C1_k) + omega - nu_k + nu'_k = 0.
The last is (15) of the paper up to the sign of nu_k: (15) prints + nu_k, while (9) gives - nu_k.
Both forms of (11) are reported; they differ only for learners at d_l.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.instance import MelAsyncInstance

ACTIVE_RTOL = 1e-7  # a constraint within this (relative) distance of its bound counts as active
MAX_ACTIVE_PAIRS = 20_000  # active (8b) rows beyond which the system is not built
MAX_DENSE = 4_000_000  # entries of the dense least-squares matrix beyond which it is not built
KKT_TOL = 1e-6  # stationarity below this (the z-row has unit scale) counts as satisfied


@dataclass(frozen=True)
class _Active:
    """The constraints of (8) active at a point, as index arrays.

    ``ii``, ``jj`` are the pairs (k < l) whose (8b) rows may be active; ``up`` / ``dn`` index
    those with tau_k - tau_l = z / tau_l - tau_k = z; ``at_zero``, ``at_dl``, ``at_du`` the
    learners at tau_k = 0, d_k = d_l, d_k = d_u.
    """

    z: float
    diff: np.ndarray
    ii: np.ndarray
    jj: np.ndarray
    up: np.ndarray
    dn: np.ndarray
    at_zero: np.ndarray
    at_dl: np.ndarray
    at_du: np.ndarray


def analyse(inst: MelAsyncInstance, tau: np.ndarray, d: np.ndarray) -> dict[str, Any]:
    """Multipliers of (9) at the point (z = max tau - min tau, tau, d) and the residuals.

    Returns a JSON-safe dict (documented on the mel-async page of the docs):
    ``lambda``, ``omega``, ``alpha``, ``nu``, ``nu_prime``, ``u``, ``u_prime`` (per learner
    where a list), ``mu_total`` (sum of mu + mu', 1 at a KKT point), ``active_pairs``,
    ``stationarity`` (largest |component of grad L|), ``primal`` (largest violation of (8b)-(8f),
    each relative to its scale: T, d, d_u, 1), ``complementarity`` (largest
    |multiplier * constraint|), ``is_kkt_point`` (stationarity and primal within 1e-6),
    ``eq11_rhs``, ``eq12_rhs`` (right-hand sides of (11), (12) per learner, None where
    lambda_k = 0 and the formulae are 0/0), ``eq11_residual`` (max |tau_k - rhs| with the sign of
    nu_k that (9) implies), ``eq11_residual_as_printed`` (with + nu_k as printed in (11)),
    ``eq12_residual``, ``theorem1_defined`` (learners with lambda_k != 0). If more than
    ``MAX_ACTIVE_PAIRS`` rows of (8b) are active or the dense system would exceed ``MAX_DENSE``
    entries (large K), only ``skipped`` (the reason) and ``active_pairs``. Pairs whose rows are
    inactive are left out (their multipliers are 0); ``mu`` lists are not reported.
    """
    from scipy.optimize import lsq_linear

    tau = np.asarray(tau, dtype=float)
    d = np.asarray(d, dtype=float)
    act = _active(inst, tau, d)
    if isinstance(act, dict):
        return act
    A, lb, ub = _stationarity_system(inst, tau, d, act)
    grad_f = np.zeros(1 + 2 * inst.K)
    grad_f[0] = 1.0  # objective (8a): z
    sol = lsq_linear(A, -grad_f, bounds=(lb, ub), method="bvls", tol=1e-14,
                     lsq_solver="exact")
    grad_L = grad_f + A @ sol.x
    return _report(inst, tau, d, act, sol.x, float(np.abs(grad_L).max()))


def _active(inst: MelAsyncInstance, tau: np.ndarray, d: np.ndarray) -> _Active | dict[str, Any]:
    """The active set at (tau, d), or the ``skipped`` report when the system would be too big."""
    K = inst.K
    dl, du = float(inst.min_samples), float(inst.max_samples)
    z = float(np.ptp(tau))
    tol_t = ACTIVE_RTOL * max(1.0, float(np.abs(tau).max()))
    # (8b) rows active at the point: tau_k - tau_l = z needs k on top and l at the bottom, or
    # every pair when z = 0; counted before any pair list is built (K may be large)
    top = np.flatnonzero(tau >= tau.max() - tol_t)
    bot = np.flatnonzero(tau <= tau.min() + tol_t)
    n_active = K * (K - 1) if z <= tol_t else top.size * bot.size
    size = (1 + 2 * K) * (K + 1 + 3 * K + n_active)
    if n_active > MAX_ACTIVE_PAIRS or size > MAX_DENSE:
        return {"skipped": f"{n_active} active staleness rows with K = {K}: the dense "
                           f"least-squares system would have {size} entries (limit "
                           f"{MAX_DENSE})", "active_pairs": int(n_active)}
    if z <= tol_t:
        ii, jj = np.triu_indices(K, 1)
    else:
        kk, ll = np.meshgrid(top, bot, indexing="ij")
        ii, jj = np.minimum(kk, ll).ravel(), np.maximum(kk, ll).ravel()
    diff = tau[ii] - tau[jj]
    return _Active(
        z=z, diff=diff, ii=ii, jj=jj,
        up=np.flatnonzero(diff - z >= -tol_t),  # mu_n active: tau_k - tau_l = z
        dn=np.flatnonzero(-diff - z >= -tol_t),  # mu'_n active: tau_l - tau_k = z
        at_zero=np.flatnonzero(tau <= tol_t),
        at_dl=np.flatnonzero(d - dl <= ACTIVE_RTOL * du),
        at_du=np.flatnonzero(du - d <= ACTIVE_RTOL * du))


def _stationarity_system(inst: MelAsyncInstance, tau: np.ndarray, d: np.ndarray,
                         act: _Active) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Columns of grad L of (9) per multiplier, with the multipliers' sign bounds.

    Rows: z, tau_0..tau_{K-1}, d_0..d_{K-1}. Columns, in order: lambda, omega, alpha (active
    tau_k = 0), nu (at d_l), nu' (at d_u), mu (up pairs), mu' (down pairs).
    """
    K = inst.K
    c2, c1 = inst.c2, inst.c1
    cols: list[np.ndarray] = []
    lb: list[float] = []
    ub: list[float] = []

    def col(lower: float, upper: float) -> np.ndarray:
        c = np.zeros(1 + 2 * K)
        cols.append(c)
        lb.append(lower)
        ub.append(upper)
        return c

    for k in range(K):  # lambda_k
        c = col(-np.inf, np.inf)
        c[1 + k] = c2[k] * d[k]
        c[1 + K + k] = c2[k] * tau[k] + c1[k]
    c = col(-np.inf, np.inf)  # omega
    c[1 + K:] = 1.0
    for j in act.at_zero.tolist():  # alpha_k (9): + alpha_k tau_k, alpha_k <= 0
        col(-np.inf, 0.0)[1 + j] = 1.0
    for j in act.at_dl.tolist():  # nu_k
        col(0.0, np.inf)[1 + K + j] = -1.0
    for j in act.at_du.tolist():  # nu'_k
        col(0.0, np.inf)[1 + K + j] = 1.0
    for n in act.up:  # mu_n: tau_k - tau_l - z
        c = col(0.0, np.inf)
        c[0], c[1 + act.ii[n]], c[1 + act.jj[n]] = -1.0, 1.0, -1.0
    for n in act.dn:  # mu'_n: tau_l - tau_k - z
        c = col(0.0, np.inf)
        c[0], c[1 + act.ii[n]], c[1 + act.jj[n]] = -1.0, -1.0, 1.0
    return np.stack(cols, axis=1), np.array(lb), np.array(ub)


def _report(inst: MelAsyncInstance, tau: np.ndarray, d: np.ndarray, act: _Active,
            y: np.ndarray, stationarity: float) -> dict[str, Any]:
    """Unpack the multipliers ``y`` (in the column order of :func:`_stationarity_system`) and
    compute the residuals of (8), of complementarity and of Theorem 1's (11)-(12)."""
    K = inst.K
    c2, c1, c0, T = inst.c2, inst.c1, inst.c0, inst.cycle_time
    dl, du = float(inst.min_samples), float(inst.max_samples)
    ii, jj, up, dn, z = act.ii, act.jj, act.up, act.dn, act.z
    sizes = (K, 1, act.at_zero.size, act.at_dl.size, act.at_du.size, up.size, dn.size)
    lam, omega_, a_, n_, np_, mu, mu_p = np.split(y, np.cumsum(sizes)[:-1])
    omega = float(omega_[0])
    alpha = np.zeros(K)
    alpha[act.at_zero] = a_
    nu = np.zeros(K)
    nu[act.at_dl] = n_
    nu_p = np.zeros(K)
    nu_p[act.at_du] = np_
    u = (np.bincount(ii[up], mu, K) - np.bincount(jj[up], mu, K)).astype(float)  # (19), (21)
    u_p = (np.bincount(jj[dn], mu_p, K) - np.bincount(ii[dn], mu_p, K)).astype(float)  # (20), (24)

    primal = max(
        float(np.abs(c2 * tau * d + c1 * d + c0 - T).max()) / T,  # (8c)
        abs(float(d.sum()) - inst.total_samples) / inst.total_samples,  # (8d)
        float(max(0.0, -tau.min())) / max(1.0, float(np.abs(tau).max())),  # (8e)
        float(max(0.0, (dl - d).max(), (d - du).max())) / du,  # (8f)
    )
    comp = max(
        float(np.abs(mu * (act.diff[up] - z)).max(initial=0.0)),
        float(np.abs(mu_p * (-act.diff[dn] - z)).max(initial=0.0)),
        float(np.abs(alpha * tau).max()),
        float(np.abs(nu * (dl - d)).max()),
        float(np.abs(nu_p * (d - du)).max()),
    )
    defined = np.abs(lam) > 1e-9 * max(1.0, float(np.abs(lam).max()))
    with np.errstate(divide="ignore", invalid="ignore"):
        rhs11 = -(lam * c1 + omega - nu + nu_p) / (lam * c2)  # (11) with (9)'s sign of nu
        rhs11_printed = -(lam * c1 + nu + nu_p + omega) / (lam * c2)  # (11) as printed
        rhs12 = -(u + u_p + alpha) / (lam * c2)  # (12)

    def residual(rhs: np.ndarray, x: np.ndarray) -> float | None:
        return float(np.abs(rhs - x)[defined].max()) if defined.any() else None

    def listed(a: np.ndarray) -> list[float | None]:
        return [float(v) if ok else None for v, ok in zip(a, defined, strict=True)]

    return {
        "lambda": lam.tolist(),
        "omega": omega,
        "alpha": alpha.tolist(),
        "nu": nu.tolist(),
        "nu_prime": nu_p.tolist(),
        "u": u.tolist(),
        "u_prime": u_p.tolist(),
        "mu_total": float(mu.sum() + mu_p.sum()),
        "active_pairs": int(up.size + dn.size),
        "stationarity": stationarity,
        "primal": primal,
        "complementarity": comp,
        "is_kkt_point": bool(stationarity <= KKT_TOL and primal <= KKT_TOL),
        "eq11_rhs": listed(rhs11),
        "eq12_rhs": listed(rhs12),
        "eq11_residual": residual(rhs11, tau),
        "eq11_residual_as_printed": residual(rhs11_printed, tau),
        "eq12_residual": residual(rhs12, d),
        "theorem1_defined": int(defined.sum()),
    }


def kkt_point(inst: MelAsyncInstance) -> tuple[float, np.ndarray]:
    """The KKT point of (8) with every staleness constraint (8b) active (Theorem 1).

    With z = 0 the stationarity conditions (15)-(16) hold with tau_k = tau_bar for all k, and
    (8c) gives d_k = (T - C0_k)/(C2_k tau_bar + C1_k). Where that violates (8f) the bound
    multiplier nu_k (nu'_k) becomes active and d_k sits at d_l (d_u), its tau_k following from
    (8c). The multiplier omega of (8d) is matched by choosing tau_bar so that
    sum_k clip(d_k) = d (a monotone equation, solved by bisection). Returns (tau_bar, d).
    """
    K, d_tot = inst.K, float(inst.total_samples)
    dl, du = inst.min_samples, inst.max_samples

    def total(t: float) -> float:
        return float(np.clip(W.relaxed_d(inst, np.full(K, t)), dl, du).sum())

    hi = float(W.relaxed_tau(inst, np.full(K, float(dl))).max())
    if total(0.0) < d_tot:
        t_bar = 0.0
    elif total(hi) >= d_tot:
        t_bar = hi
    else:
        lo_t, hi_t = 0.0, hi
        for _ in range(200):
            mid = 0.5 * (lo_t + hi_t)
            if total(mid) >= d_tot:
                lo_t = mid
            else:
                hi_t = mid
        t_bar = 0.5 * (lo_t + hi_t)
    return t_bar, np.clip(W.relaxed_d(inst, np.full(K, t_bar)), dl, du)
