"""Scalar root finders behind the closed form: exact, bracketed, vectorised over devices.

Every search of the closed form reduces to one of three monotone scalar equations:

- ``equalise``: sum_k w_k / (X - q_k) = total, the slot formula of Theorem 1 with the batches
  given, and Theorem 2 (convex and decreasing in X: Newton converges monotonically from the left);
- ``clipped_sum_root``: sum_k clip(alpha_k - beta_k z, lo_k, hi_k) = target, the two
  multiplier searches of Theorem 1 (piecewise linear and nonincreasing in z: a Newton step that
  stays inside its linear piece is exact, so the search ends after a few pieces);
- ``bracketed_root``: a sign change of a continuous function on a bracket (Brent's method,
  by ``scipy.optimize.brentq``), for the outer one-dimensional search.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

EPS = float(np.finfo(float).eps)


def equalise(w: np.ndarray, q: np.ndarray, total: float, right: float | None = None,
             left: float | None = None) -> float:
    """Solve sum_k w_k / (X - q_k) = total for X > max_k q_k.

    Parameters
    ----------
    w : ndarray
        Positive numerators (a_k or b_k) [s^2].
    q : ndarray
        Fixed latency parts (compute or update times) [s].
    total : float
        Frame length [s].
    right : float, optional
        A known point right of the root (warm start); Newton from it lands left of the root.
    left : float, optional
        A known point left of the root (warm start), used when it beats the built-in bounds.

    Returns
    -------
    float
        X [s], the common finishing time of every device (the latency of the phase).
    """
    qmax = float(q.max())
    sw = float(w.sum())
    # Two lower bounds of the root: the device that sets qmax alone, and all devices as slow
    # as the fastest one. Newton on a convex decreasing function converges monotonically
    # from any point left of the root.
    start = max(float((q + w / total).max()), float(q.min()) + sw / total)
    if left is not None and left > start:
        if float((w / (left - q)).sum()) >= total:
            start = left
        elif right is None or left < right:
            right = left  # not left of the root after all: use it from the right
    x = start
    if right is not None and right > qmax:
        inv = w / (right - q)
        s = float(inv.sum())
        if s <= total:
            x1 = right + (s - total) / float((inv * inv / w).sum())
            if x1 > start:
                x = x1
    for _ in range(200):
        inv = w / (x - q)
        s = float(inv.sum())
        if s <= total:
            break
        step = (s - total) / float((inv * inv / w).sum())
        x += step
        if step <= 4.0 * EPS * x:
            break
    return x


def clipped_sum_root(
    alpha: np.ndarray,
    beta: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    target: float,
    zl: float,
    zr: float,
    z0: float | None = None,
) -> float:
    """Solve G(z) = sum_k clip(alpha_k - beta_k z, lo_k, hi_k) = target on [zl, zr].

    G is continuous, piecewise linear and nonincreasing (beta_k > 0); the caller guarantees
    G(zl) >= target >= G(zr). ``lo`` may hold -inf and ``hi`` +inf.

    Each iteration takes the linear piece of G on the side where the root lies; if its root
    falls inside that piece it is the exact answer. Otherwise the point becomes the next
    iterate (or the bracket midpoint when it leaves the bracket), so the search always ends.

    Returns
    -------
    float
        z with G(z) = target (to rounding).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        z_hi = (alpha - hi) / beta  # z <= z_hi: device at hi
        z_lo = (alpha - lo) / beta  # z >= z_lo: device at lo
    scale = max(abs(target), EPS)
    events = np.concatenate([z_hi, z_lo])
    events = events[np.isfinite(events)]
    z = 0.5 * (zl + zr) if z0 is None or not (zl <= z0 <= zr) else float(z0)
    for it in range(300):
        v = float(np.clip(alpha - beta * z, lo, hi).sum())
        diff = v - target
        if abs(diff) <= 4.0 * EPS * scale * max(1.0, np.sqrt(alpha.size)):
            return z
        if diff > 0:  # root to the right: the right-hand piece
            zl = z
            inner = (z_hi <= z) & (z < z_lo)
            slope = float(beta[inner].sum())
            edge = z_lo[inner]
            after = z_hi[z_hi > z]
            end = min(edge.min() if edge.size else np.inf, after.min() if after.size else np.inf)
            if slope > 0:
                zn = z + diff / slope
                if zn <= end:
                    return min(max(zn, zl), zr)
            else:
                zn = end
        else:  # root to the left: the left-hand piece
            zr = z
            inner = (z_hi < z) & (z <= z_lo)
            slope = float(beta[inner].sum())
            edge = z_hi[inner]
            before = z_lo[z_lo < z]
            start = max(edge.max() if edge.size else -np.inf,
                        before.max() if before.size else -np.inf)
            if slope > 0:
                zn = z + diff / slope
                if zn >= start:
                    return min(max(zn, zl), zr)
            else:
                zn = start
        if it >= 6 and it % 2 == 0:
            # Many pieces crossed: step to the median breakpoint inside the bracket, which
            # halves the breakpoints left, so the search ends within O(log K) such steps.
            inside = events[(events > zl) & (events < zr)]
            if inside.size:
                zn = float(np.partition(inside, inside.size // 2)[inside.size // 2])
        if not (zl < zn < zr) or not np.isfinite(zn):
            zn = 0.5 * (zl + zr)
        if zr - zl <= 4.0 * EPS * max(abs(zl), abs(zr), 1e-300):
            return 0.5 * (zl + zr)
        z = zn
    return z


def bracketed_root(
    f: Callable[[float], float],
    a: float,
    b: float,
    fa: float | None = None,
    fb: float | None = None,
    xtol: float = 1e-15,
    ftol: float | None = None,
    max_iter: int = 200,
) -> float:
    """Root of a continuous ``f`` with a sign change on [a, b], by ``scipy.optimize.brentq``.

    Brent's method (Brent 1973): inverse quadratic interpolation or a secant step where it
    makes progress, bisection otherwise, so the bracket always shrinks and smooth roots
    converge superlinearly. Two things are added around scipy's routine: known end values are
    not evaluated again, and the search also stops at the first point with |f| <= ``ftol``
    (brentq alone stops only at an exact zero).

    Parameters
    ----------
    f : callable
        The function; called once per iteration, never at ``a`` or ``b`` when ``fa`` / ``fb``
        are given.
    a, b : float
        Ends of the bracket.
    fa, fb : float, optional
        f(a) and f(b) when the caller already has them (evaluated here otherwise).
    xtol : float
        Relative width of the final bracket (never below 4 machine epsilons, the least
        brentq accepts).
    ftol : float, optional
        Stop at a point with |f| <= ftol (default 1e-13 max(|f(a)|, |f(b)|)).
    max_iter : int
        Most evaluations after the two ends; the last point is returned when they run out.

    Returns
    -------
    float
        ``a`` if |f(a)| <= ftol, else ``b`` if |f(b)| <= ftol; otherwise a point within
        ``xtol`` (relative) of a sign change of f, or with |f| <= ftol. Without a sign change
        (f(a) and f(b) of one sign, which callers rule out up to rounding) there is no search:
        the end with the smaller |f| is returned.

    Raises
    ------
    ValueError
        If f is NaN at a point of the search.
    """
    from scipy.optimize import brentq

    fa = f(a) if fa is None else fa
    fb = f(b) if fb is None else fb
    tol = 1e-13 * max(abs(fa), abs(fb)) if ftol is None else ftol
    if abs(fa) <= tol:
        return a
    if abs(fb) <= tol:
        return b
    if (fa > 0) == (fb > 0):
        return a if abs(fa) <= abs(fb) else b
    known = {a: fa, b: fb}

    def g(x: float) -> float:
        fx = known[x] if x in known else f(x)
        # An exact zero ends brentq at this point: that is how the |f| <= ftol stop is passed.
        return 0.0 if abs(fx) <= tol else fx

    return float(brentq(g, a, b, xtol=1e-300, rtol=max(xtol, 4.0 * EPS), maxiter=max_iter,
                        disp=False))
