"""Scalar root finders behind the closed form: exact, bracketed, vectorised over devices.

Every search of the closed form reduces to one of three monotone scalar equations:

- ``equalise``: sum_k w_k / (X - q_k) = total, the slot formula of Theorem 1 with the batches
  given, and Theorem 2 (convex and decreasing in X: Newton converges monotonically from the left);
- ``clipped_sum_root``: sum_k clip(alpha_k - beta_k z, lo_k, hi_k) = target, the two
  multiplier searches of Theorem 1 (piecewise linear and nonincreasing in z: a Newton step that
  stays inside its linear piece is exact, so the search ends after a few pieces);
- ``bracketed_root``: a sign change of a continuous function on a bracket (Brent's method),
  for the outer one-dimensional search.
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
    """Root of a continuous ``f`` with a sign change on [a, b] (Brent's method).

    Inverse quadratic interpolation or secant steps where they make progress, bisection
    otherwise (Brent 1973, in the form of scipy's ``brentq``), so the bracket always shrinks and
    smooth roots converge superlinearly.

    Parameters
    ----------
    xtol : float
        Relative width of the final bracket.
    ftol : float, optional
        Stop at a point with |f| <= ftol (default 1e-13 max(|f(a)|, |f(b)|)).

    Returns
    -------
    float
        A point within ``xtol`` (relative) of a sign change of f, or with |f| <= ftol.
    """
    xpre, xcur = a, b
    fpre = f(a) if fa is None else fa
    fcur = f(b) if fb is None else fb
    if ftol is None:
        ftol = 1e-13 * max(abs(fpre), abs(fcur))
    if abs(fpre) <= ftol:
        return xpre
    if abs(fcur) <= ftol:
        return xcur
    xblk, fblk, spre, scur = 0.0, 0.0, 0.0, 0.0
    for _ in range(max_iter):
        if fpre != 0 and fcur != 0 and (fpre > 0) != (fcur > 0):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = 0.5 * max(xtol * abs(xcur), 4.0 * EPS * abs(xcur), 1e-300)
        sbis = 0.5 * (xblk - xcur)
        if abs(fcur) <= ftol or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:  # secant
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:  # inverse quadratic interpolation
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
                spre, scur = scur, stry
            else:
                spre, scur = sbis, sbis
        else:
            spre, scur = sbis, sbis
        xpre, fpre = xcur, fcur
        if abs(scur) > delta:
            xcur += scur
        else:
            xcur += delta if sbis > 0 else -delta
        fcur = f(xcur)
    return xcur
