"""bracketed_root (scipy's brentq behind the closed form's outer search): evaluations, root,
end points and the ftol stop."""

from __future__ import annotations

import math

import pytest
from scipy.optimize import brentq

from mel_opt.problems.feel.roots import bracketed_root

# Wallis's cubic x^3 - 2x - 5 has one real root; this is it to double precision.
WALLIS_ROOT = 2.0945514815423265


class Counted:
    """A function of one variable that records every point it is evaluated at."""

    def __init__(self, f) -> None:
        self.f = f
        self.points: list[float] = []

    def __call__(self, x: float) -> float:
        self.points.append(x)
        return self.f(x)


def wallis(x: float) -> float:
    return x**3 - 2.0 * x - 5.0


def test_bracketed_root_counts_evaluations_on_a_cubic() -> None:
    f = Counted(wallis)
    x = bracketed_root(f, 2.0, 3.0, wallis(2.0), wallis(3.0), ftol=0.0)
    assert x == pytest.approx(WALLIS_ROOT, rel=4e-15)
    # Known end values are not evaluated again, and scipy's brentq on the same bracket and
    # tolerance needs just as many evaluations besides the two ends.
    assert 2.0 not in f.points and 3.0 not in f.points
    _, info = brentq(wallis, 2.0, 3.0, xtol=1e-300, rtol=1e-15, full_output=True)
    assert len(f.points) == info.function_calls - 2
    # Superlinear: bisection would need about log2(1 / 1e-15) = 50 halvings.
    assert len(f.points) <= 8


def test_bracketed_root_evaluates_each_end_once_when_not_given() -> None:
    f = Counted(wallis)
    x = bracketed_root(f, 2.0, 3.0)
    assert x == pytest.approx(WALLIS_ROOT, rel=4e-15)
    assert f.points[:2] == [2.0, 3.0]
    assert 2.0 not in f.points[2:] and 3.0 not in f.points[2:]


def test_bracketed_root_stops_at_ftol() -> None:
    exact, loose = Counted(wallis), Counted(wallis)
    bracketed_root(exact, 2.0, 3.0, ftol=0.0)
    x = bracketed_root(loose, 2.0, 3.0, ftol=1e-6)
    assert abs(wallis(x)) <= 1e-6
    assert x == pytest.approx(WALLIS_ROOT, abs=1e-6)
    assert len(loose.points) < len(exact.points)
    assert loose.points[-1] == x  # the point that met ftol is the answer


def test_bracketed_root_returns_an_end_that_is_a_root_without_searching() -> None:
    f = Counted(lambda x: (x - 2.0) ** 3)
    assert bracketed_root(f, 2.0, 3.0, 0.0, 1.0) == 2.0
    assert bracketed_root(f, 1.0, 2.0, -1.0, 0.0) == 2.0
    assert f.points == []
    # |f(b)| <= ftol counts as a root too; a is checked first.
    assert bracketed_root(f, 1.0, 2.0 + 1e-3, -1.0, 1e-9, ftol=1e-6) == 2.0 + 1e-3
    assert bracketed_root(f, 2.0 - 1e-3, 2.0 + 1e-3, -1e-9, 1e-9, ftol=1e-6) == 2.0 - 1e-3
    assert f.points == []


def test_bracketed_root_without_a_sign_change_returns_the_nearer_end() -> None:
    f = Counted(lambda x: x * x + 1.0)
    assert bracketed_root(f, -1.0, 0.5, 2.0, 1.25) == 0.5
    assert bracketed_root(f, -0.5, 1.0) == -0.5
    assert f.points == [-0.5, 1.0]


def test_bracketed_root_rejects_nan() -> None:
    with pytest.raises(ValueError, match="NaN"):
        bracketed_root(lambda x: math.nan if x > 0 else x - 0.5, -1.0, 1.0, -1.5, 0.5)
