"""The closed-form solution of paper 004 (Theorems 1-2, Corollaries 1-2, Algorithm 1), in numpy.

Notation: L = Delta L E^U is the uplink-phase latency max_k (t_k^L + t_k^U) [s] and
D = Delta L E^D the downlink-phase latency max_k (t_k^D + t_k^M) [s], with Delta L = xi sqrt(B)
(Eq. (8)); the efficiency is E = Delta L / (L + D) (Eq. (16)). Coefficients as in
:mod:`mel_opt.problems.feel.latency` (t_k^L = e_k + c_k B_k on [lo_k, hi_k], t_k^U = a_k / tau_k).

Theorem 1, written with theta = sqrt(Delta L mu sum_k V_k) and V_k = 1 / c_k (so that
rho_k = V_k / sum V, the paper's training priority ratio):

    B_k   = clip((L - e_k) / c_k - g_k theta, lo_k, hi_k),    g_k = sqrt(a_k / c_k)   (22)
    tau_k = a_k / (L - e_k - c_k B_k)                                               (22)

(for a CPU, (L - e_k)/c_k = Delta L E^U V_k and g_k theta = (Delta L s T_f^U mu /
(rho_k R_k^U))^(1/2) V_k, which is (22) term by term). The KKT conditions of P4 give this
form for every device whose batch is not at a bound, with one common theta; when some B_k sit at
lo_k or hi_k the paper's normalisation of mu (Appendix A, Eq. (33)) changes, but theta remains a
single free scalar, so a search over (L, theta) is exact (the tests check it against IPOPT).

The slot of an interior device is g_k / theta > 0; the [.]^+ of (22) never binds: a point with
Delta L E^U <= B_k / V_k is infeasible, not a zero-slot upload.

Algorithm 1 (fixed B): if the relaxation's batches respect their bounds, Corollary 1's lower
bound is attained and is the answer. Otherwise the outer search over L = Delta L E^U is
bracketed by Corollary 1; for each L the inner search over theta (mu) meets sum_k B_k = B and
is bracketed by [0, theta_h], theta_h from the upper bound of Corollary 2. The paper's lower
bound of Corollary 2 fails in practice (it squares a negative number when a slow device cannot
reach B^max) and is only reported, never used. Both searches are exact root finders rather
than bisection: the inner function is piecewise linear, the outer one, min slot sum at latency
L minus T_f^U, is convex and decreasing in L (a partial minimum of the jointly convex
a_k / (L - e_k - c_k B_k)), so safeguarded Newton converges quadratically.

Free B (P1): without (17e), L_up(B) is Corollary 1's lower bound, affine in B, so the best B
has a closed form; when its batches respect their bounds (Corollary 1 attained, the common case
on Table-I instances) that is the answer. Otherwise the outer one-dimensional search over the
global batch B is carried out over the uplink latency L instead, a monotone
reparametrisation: B_up(L), the largest global batch whose uplink phase fits in L, is the
inverse of L_up(B), concave and increasing (L_up is convex), so E(L) = xi sqrt(B_up(L)) /
(L + D) is quasiconcave, and its stationary point solves 2 B_up(L) = (L + D) B_up'(L), with
B_up'(L) = theta^2 sum_k tau_k^2 / a_k by the envelope theorem. For one L, B_up(L) is
Theorem 1 with the inner search on the slot budget (17b).

Theorem 2 (downlink): D solves sum_k b_k / (D - m_k) = T_f^D, tau_k^D = b_k / (D - m_k).
It does not depend on B (Delta L only rescales E^D), so it is computed once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from mel_opt.problems.feel.latency import Coeffs
from mel_opt.problems.feel.roots import EPS, bracketed_root, clipped_sum_root, equalise


@dataclass(frozen=True)
class Phase:
    """One phase of the round solved for continuous batches.

    Attributes
    ----------
    latency : float
        L (uplink) or D (downlink) [s].
    slots : ndarray
        tau_k [s], summing to the frame.
    batch : ndarray or None
        B_k (uplink only) [samples].
    global_batch : float
        sum_k B_k (uplink only) [samples].
    theta : float
        The scalar of Theorem 1 (nan when no device is interior, e.g. every B_k at a bound).
    info : dict
        Search details (iterations, bounds and whether they held).
    """

    latency: float
    slots: np.ndarray
    batch: np.ndarray | None = None
    global_batch: float = float("nan")
    theta: float = float("nan")
    info: dict[str, Any] = field(default_factory=dict)


def _normalised(tau: np.ndarray, frame: float) -> np.ndarray:
    """Scale slots down by the rounding excess so that sum tau <= frame holds exactly."""
    total = float(tau.sum())
    return tau * (frame / total) if total > frame else tau


# --------------------------------------------------------------------------------------------
# Theorem 2: downlink
# --------------------------------------------------------------------------------------------


def downlink(co: Coeffs) -> Phase:
    """Theorem 2, Eq. (26): equal finishing times of download + update under (17c)."""
    D = equalise(co.b, co.m, co.frame_down)
    tau = _normalised(co.b / (D - co.m), co.frame_down)
    return Phase(latency=D, slots=tau)


# --------------------------------------------------------------------------------------------
# Given batches: the slot formula of Theorem 1 (also the slot recomputation after rounding)
# --------------------------------------------------------------------------------------------


def uplink_for_batches(co: Coeffs, batch: np.ndarray, right: float | None = None,
                       left: float | None = None) -> Phase:
    """Optimal uplink slots for fixed batches: tau_k = a_k / (L - t_k^L), sum tau = T_f^U.

    ``right`` / ``left``: known latencies on either side of the answer (warm starts) [s].
    """
    x = np.asarray(batch, dtype=float)
    t = co.compute_time(x)
    L = equalise(co.a, t, co.frame_up, right=right, left=left)
    tau = _normalised(co.a / (L - t), co.frame_up)
    return Phase(latency=L, slots=tau, batch=x, global_batch=float(x.sum()))


def data_bound_split(co: Coeffs, B: float) -> np.ndarray:
    """A split of B < sum lo_k with 1 <= B_k <= lo_k (GPU data-bound region, t_k^L = t_k^l).

    Every such split has the same latencies; this one fills each device in proportion to its
    room lo_k - 1.
    """
    room = co.lo - 1.0
    extra = B - co.K
    share = extra / float(room.sum()) if room.sum() > 0 else 0.0
    return 1.0 + room * share


# --------------------------------------------------------------------------------------------
# Corollaries 1 and 2
# --------------------------------------------------------------------------------------------


def corollary1(co: Coeffs, B: float) -> tuple[float, float]:
    """Bounds (23) on L = Delta L E^U for a fixed B [s].

    Lower: the relaxation without (17e) (Case B of Appendix B), for the linear compute model
    e_k + c_k B_k, which never exceeds t_k^L:
    L_l = (B + sum e_k / c_k + (sum g_k)^2 / T_f^U) / sum 1 / c_k; for a CPU this is
    B C / sum f_k + s (sum sqrt(rho_k / R_k^U))^2 of (23).
    Upper: equal slots and equal batches (Case A): L_h = max_k t_k^L(B / K) + K a_k / T_f^U.
    """
    V = 1.0 / co.c
    G = float(co.g.sum())
    lower = (B + float((co.e * V).sum()) + G * G / co.frame_up) / float(V.sum())
    upper = float(np.max(co.compute_time(np.full(co.K, B / co.K)) + co.K * co.a / co.frame_up))
    return lower, upper


def relaxation(co: Coeffs, B: float) -> tuple[Phase, bool]:
    """Theorem 1 without (17e) (Case B of Corollary 1) at global batch B.

    With every batch free, theta = sum_k g_k / T_f^U, L = L_l of Corollary 1 and
    B_k = (L - e_k) / c_k - g_k theta. Returns the phase and whether every B_k lies within its
    bounds, in which case Corollary 1's lower bound is attained and this is the optimum of P4.
    """
    G = float(co.g.sum())
    theta = G / co.frame_up
    L = (B + float((co.e * co.V).sum()) + G * theta) / float(co.V.sum())
    x = (L - co.e) * co.V - co.g * theta
    inside = bool(np.all(x >= co.lo) and np.all(x <= co.hi))
    tau = _normalised(co.g / theta, co.frame_up)
    return Phase(latency=L, slots=tau, batch=x, global_batch=float(B), theta=theta), inside


def corollary2(co: Coeffs, L: float, B: float) -> tuple[float, float]:
    """The paper's bounds (24) on mu for a given L = Delta L E^U (with Delta L = xi sqrt(B)).

    Returns (mu_l, mu_h) in the paper's normalisation mu = theta^2 / (Delta L sum_k V_k).
    mu_h (every device at its least batch beyond it) is valid; mu_l is the paper's formula,
    which squares (L - e_k)/c_k - B^max even when it is negative and so is not a bound in
    general; it is reported, not used.
    """
    dl = co.xi * np.sqrt(B)
    alpha = (L - co.e) / co.c
    norm = dl * float((1.0 / co.c).sum())
    g2 = co.g**2
    mu_h = float(np.max((alpha - co.lo) ** 2 / g2)) / norm
    mu_l = float(np.min((alpha - co.hi) ** 2 / g2)) / norm
    return mu_l, mu_h


def paper_mu(co: Coeffs, theta: float, B: float) -> float:
    """mu of Theorem 1 from theta: mu = theta^2 / (Delta L sum_k V_k)."""
    return float(theta * theta / (co.xi * np.sqrt(B) * float((1.0 / co.c).sum())))


# --------------------------------------------------------------------------------------------
# Algorithm 1: fixed global batch (P4)
# --------------------------------------------------------------------------------------------


def _inner_theta(co: Coeffs, L: float, B: float, theta0: float | None) -> tuple[float, bool]:
    """theta with sum_k B_k(L, theta) = B (Theorem 1); False if L is too short for B."""
    alpha = (L - co.e) / co.c
    if np.any(alpha <= co.lo) or float(np.clip(alpha, co.lo, co.hi).sum()) <= B:
        return float("nan"), False
    g = co.g
    theta_h = float(np.max((alpha - co.lo) / g))  # Corollary 2, upper bound (in theta)
    theta = clipped_sum_root(alpha, g, co.lo, co.hi, B, 0.0, theta_h, theta0)
    return theta, True


def _decreasing_convex_root(F: Callable[[float], tuple[float, float]], zl: float, zr: float,
                            tol: float) -> tuple[float, int]:
    """Root of a convex decreasing F on the bracket [zl, zr]; returns (root, evaluations).

    ``F(z)`` returns (value, derivative), and (inf, -inf) where it is not defined (left of its
    domain). Newton steps: for a convex decreasing F a step from either side lands at or left
    of the root, so the best of the two steps is a new left end; the bisection fallback covers
    a left end where F is still infinite. Stops at ``|F| <= tol`` or a bracket of a few ulps.
    """
    fl, dfl = F(zl)
    fr, dfr = F(zr)
    its = 2
    if np.isfinite(fl) and fl <= tol:
        return zl, its
    if fr >= -tol:
        return zr, its
    z, fz = zr, fr
    while its < 200:
        cands = [zr - fr / dfr]
        if np.isfinite(fl):
            cands.append(zl - fl / dfl)
        zn = max(cands)
        if not (zl < zn < zr):
            zn = 0.5 * (zl + zr)
        z = zn
        fz, dfz = F(z)
        its += 1
        if fz >= 0:
            zl, fl, dfl = z, fz, dfz
        else:
            zr, fr, dfr = z, fz, dfz
        if abs(fz) <= tol or zr - zl <= 4 * EPS * zr:
            break
    if not np.isfinite(fz):  # pragma: no cover - the bracket keeps a finite right end
        z = zr
    return z, its


def uplink_fixed(co: Coeffs, B: float) -> Phase:
    """Solve P4 for a fixed global batch B by Algorithm 1 (exact 2-D search over (E^U, mu)).

    Parameters
    ----------
    co : Coeffs
    B : float
        Global batch in [K, K B^max] [samples] (need not be a whole number).

    Returns
    -------
    Phase
        With ``info``: ``iterations``, ``corollary1`` (L bounds [s]) and ``corollary1_holds``,
        ``mu`` (paper normalisation), ``corollary2`` (mu_l, mu_h) and which of them held.
    """
    lo_sum, hi_sum = float(co.lo.sum()), float(co.hi.sum())
    if B <= lo_sum * (1.0 + 4 * EPS):
        x = co.lo.copy() if B >= lo_sum else data_bound_split(co, B)
        ph = uplink_for_batches(co, x)
        return Phase(ph.latency, ph.slots, x, float(B), info={"case": "all at the least batch"})
    if B >= hi_sum * (1.0 - 4 * EPS):
        ph = uplink_for_batches(co, co.hi.copy())
        return Phase(ph.latency, ph.slots, co.hi.copy(), hi_sum, info={"case": "full batch"})

    L_l, L_h = corollary1(co, B)
    fast, inside = relaxation(co, B)
    if inside:  # Corollary 1's lower bound is attained: no batch at a bound
        return _with_info(co, fast, B, L_l, L_h, 0)
    g = co.g
    state: dict[str, float] = {"theta": float("nan")}

    def F(L: float) -> tuple[float, float]:
        theta, ok = _inner_theta(co, L, B, state["theta"] if np.isfinite(state["theta"])
                                 else None)
        if not ok:
            return np.inf, -np.inf
        state["theta"] = theta
        x = np.clip((L - co.e) / co.c - g * theta, co.lo, co.hi)
        slack = L - co.e - co.c * x
        if np.any(slack <= 0):
            return np.inf, -np.inf
        tau = co.a / slack
        return float(tau.sum()) - co.frame_up, -float((tau * tau / co.a).sum())

    # F(L) = sum of slots at latency L minus the frame: convex, decreasing; bracket from
    # Corollary 1.
    zl = max(L_l, float(np.max(co.t_floor)))
    z, its = _decreasing_convex_root(F, zl, L_h, 1e-14 * co.frame_up)
    F(z)  # leave the inner state (theta) at z
    L = z
    theta = state["theta"]
    x = np.clip((L - co.e) / co.c - g * theta, co.lo, co.hi)
    tau = _normalised(co.a / (L - co.e - co.c * x), co.frame_up)
    ph = Phase(latency=L, slots=tau, batch=x, global_batch=float(x.sum()), theta=theta)
    return _with_info(co, ph, B, L_l, L_h, its)


def _with_info(co: Coeffs, ph: Phase, B: float, L_l: float, L_h: float, its: int) -> Phase:
    """Attach the search details and the checks of Corollaries 1-2 to a P4 answer."""
    L, theta = ph.latency, ph.theta
    mu = paper_mu(co, theta, B)
    mu_l, mu_h = corollary2(co, L, B)
    info = {
        "iterations": its,
        "corollary1": (L_l, L_h),
        "corollary1_holds": bool(L_l <= L * (1 + 1e-12) and L <= L_h * (1 + 1e-12)),
        "mu": mu,
        "corollary2": (mu_l, mu_h),
        "corollary2_upper_holds": bool(mu <= mu_h * (1 + 1e-9)),
        "corollary2_lower_holds": bool(mu >= mu_l * (1 - 1e-9)),
    }
    return Phase(latency=L, slots=ph.slots, batch=ph.batch, global_batch=ph.global_batch,
                 theta=theta, info=info)


# --------------------------------------------------------------------------------------------
# Free global batch: B_up(L) and the outer search (P1)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _AtLatency:
    """Theorem 1 for a given uplink latency L with the slot budget (17b) active."""

    L: float
    B: float  # B_up(L)
    dB: float  # B_up'(L)
    batch: np.ndarray
    slots: np.ndarray
    theta: float


def _at_latency(co: Coeffs, L: float, phi0: float | None = None) -> _AtLatency:
    """Largest global batch whose uplink phase fits in L, with its batches and slots.

    Writing phi = 1/theta, the slot of device k is clip(g_k phi, tau_k(lo_k), tau_k(hi_k)),
    piecewise linear in phi; phi meets sum_k tau_k = T_f^U.
    """
    slack_lo = L - co.e - co.c * co.lo
    slack_hi = L - co.e - co.c * co.hi
    t_lo = co.a / slack_lo
    with np.errstate(divide="ignore"):
        t_hi = np.where(slack_hi > 0, co.a / np.where(slack_hi > 0, slack_hi, 1.0), np.inf)
    g = co.g
    T = co.frame_up
    if float(t_hi.sum()) <= T:
        x = co.hi.copy()
        return _AtLatency(L, float(x.sum()), 0.0, x, _normalised(t_hi, T), 0.0)
    zl = float(np.min(t_lo / g))
    finite = np.isfinite(t_hi)
    if np.all(finite):
        zr = float(np.max(t_hi / g))
    else:
        zr = T / float(np.min(g[~finite]))
    phi = clipped_sum_root(np.zeros_like(g), g, -t_hi, -t_lo, -T, zl, zr, phi0)
    x = np.clip((L - co.e) / co.c - g / phi, co.lo, co.hi)
    tau = np.clip(g * phi, t_lo, t_hi)
    theta = 1.0 / phi
    dB = theta * theta * float((tau * tau / co.a).sum())
    return _AtLatency(L, float(x.sum()), dB, x, tau, theta)


@dataclass(frozen=True)
class Continuous:
    """The continuous optimum of P1 (or of P4 + P5 for a fixed B).

    Attributes
    ----------
    efficiency : float
        xi sqrt(B) / (L + D) [loss/s].
    uplink, downlink : Phase
    global_batch : float
    info : dict
    """

    efficiency: float
    uplink: Phase
    downlink: Phase
    global_batch: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def bound_slope(self) -> float:
        """A subgradient s of the convex L_up(B) at the optimum B_c [s/sample], on the side
        where other global batches lie: L_up(B) >= L* + s (B - B_c) for every B considered.

        For an interior optimum the optimality condition of xi sqrt(B) / (L_up(B) + D) makes
        s = (L* + D) / (2 B_c) a subgradient; at an end of the range the one-sided derivative.
        """
        slope = self.info.get("bound_slope")
        if slope is None:
            return (self.uplink.latency + self.downlink.latency) / (2.0 * self.global_batch)
        return float(slope)


class FreeBatchSearch:
    """The outer search over B (as L = L_up(B)) for one instance, with reusable pieces.

    Parameters
    ----------
    co : Coeffs
    down : Phase, optional
        Theorem 2's downlink phase (computed when not given).
    """

    def __init__(self, co: Coeffs, down: Phase | None = None) -> None:
        self.co = co
        self.down = downlink(co) if down is None else down
        self.D = self.down.latency
        self.evaluations = 0
        self._phi: float | None = None

    @cached_property
    def L_min(self) -> float:
        """Uplink latency with every batch at lo_k: B_up(L_min) = sum lo [s]."""
        return uplink_for_batches(self.co, self.co.lo).latency

    @cached_property
    def L_full(self) -> float:
        """Uplink latency with every batch at hi_k: B_up(L_full) = sum hi [s]."""
        return uplink_for_batches(self.co, self.co.hi).latency

    def at(self, L: float) -> _AtLatency:
        """Theorem 1 at latency L (warm-started from the previous call)."""
        self.evaluations += 1
        r = _at_latency(self.co, L, self._phi)
        if r.theta > 0:
            self._phi = 1.0 / r.theta
        return r

    def _rises_before(self, a: float) -> bool:
        """True when the efficiency at latency ``a`` beats that of the least batches (by more
        than rounding), though both ends lie within a hair of L_min."""
        co, D = self.co, self.D
        at_min = co.xi * np.sqrt(float(co.lo.sum())) / (self.L_min + D)
        return bool(co.xi * np.sqrt(self.at(a).B) / (a + D) > at_min * (1.0 + 1e-9))

    def solve(self) -> Continuous:
        """Maximise the continuous efficiency over B (quasiconcave, one-dimensional)."""
        co = self.co
        D = self.D
        lo_sum, hi_sum = float(co.lo.sum()), float(co.hi.sum())
        # Without (17e), L(B) = (B + sum e_k V_k + (sum g)^2 / T_f) / sum V is affine
        # (Corollary 1, lower bound), so xi sqrt(B) / (L(B) + D) peaks at B = (gamma + D) / alpha
        # for L = alpha B + gamma. If those batches respect their bounds they solve P1.
        alpha = 1.0 / float(co.V.sum())
        G = float(co.g.sum())
        gamma = (float((co.e * co.V).sum()) + G * G / co.frame_up) * alpha
        B_free = (gamma + D) / alpha
        if lo_sum <= B_free <= hi_sum:
            ph, inside = relaxation(co, B_free)
            if inside:
                eff = co.xi * np.sqrt(B_free) / (ph.latency + D)
                return Continuous(float(eff), ph, self.down, B_free,
                                  {"case": "Corollary 1 attained (no batch at a bound)",
                                   "evaluations": 0})
        if hi_sum - lo_sum <= 0.5 or self.L_full - self.L_min <= 4 * EPS * self.L_full:
            up = uplink_fixed(co, hi_sum)
            eff = co.xi * np.sqrt(hi_sum) / (up.latency + D)
            return Continuous(float(eff), up, self.down, hi_sum, {"case": "B fixed by bounds"})

        def h(L: float) -> float:
            r = self.at(L)
            return 2.0 * r.B - (L + D) * r.dB

        span = self.L_full - self.L_min
        a = self.L_min + 1e-12 * span
        b = self.L_full - 1e-12 * span
        ha, hb = h(a), h(b)
        if ha >= 0 and self._rises_before(a):
            # B_up(L) can climb steeply just above L_min (devices with slack take samples for a
            # vanishing slot), so the efficiency may still rise on [L_min, a]: its peak is there.
            L = bracketed_root(h, self.L_min, a, h(self.L_min), ha)
            case = "interior optimum"
        elif ha >= 0:  # efficiency decreasing from the least batches on
            L = self.L_min
            case = "optimum at the least global batch"
        elif hb <= 0:  # still increasing at the full batch
            L = self.L_full
            case = "optimum at the full batch"
        else:
            L = bracketed_root(h, a, b, ha, hb)
            case = "interior optimum"
        if case == "interior optimum":
            r = self.at(L)
            up = Phase(latency=L, slots=r.slots, batch=r.batch, global_batch=r.B,
                       theta=r.theta)
            B = r.B
        else:
            x = co.lo.copy() if L == self.L_min else co.hi.copy()
            ph = uplink_for_batches(co, x)
            up = Phase(latency=ph.latency, slots=ph.slots, batch=x, global_batch=float(x.sum()))
            B = float(x.sum())
        eff = co.xi * np.sqrt(B) / (up.latency + D)
        # A supporting slope of the convex L_up at B (see bound_slope in Continuous). At an
        # end of the range the one-sided derivative, measured just inside, is tighter than the
        # stationary slope (L* + D) / (2 B); the 1e-6 margin covers the step inside.
        slope = (up.latency + D) / (2.0 * B)
        if case != "interior optimum":
            dB = self.at(b if case == "optimum at the full batch" else a).dB
            if dB > 0 and case == "optimum at the full batch":
                slope = min(slope, (1.0 + 1e-6) / dB)
            elif dB > 0:
                slope = max(slope, (1.0 - 1e-6) / dB)
        info = {"case": case, "evaluations": self.evaluations, "bound_slope": slope}
        return Continuous(float(eff), up, self.down, B, info)


def solve_continuous(co: Coeffs, B: float | None = None) -> Continuous:
    """Continuous optimum: P4 + Theorem 2 for a fixed B, or P1 (outer search) otherwise."""
    if B is None:
        return FreeBatchSearch(co).solve()
    down = downlink(co)
    up = uplink_fixed(co, float(B))
    eff = co.xi * np.sqrt(B) / (up.latency + down.latency)
    return Continuous(float(eff), up, down, float(B), {"case": "fixed global batch"})
