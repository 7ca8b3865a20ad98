"""IPOPT keeps its time limit: Ipopt's own max_wall_time, the deadline guard in the intermediate
callback, and the shared deadline of mel_opt.deadline.

Rosenbrock's function from (-1.2, 1) needs a few dozen iterations; every gradient evaluation is
slowed by 80 ms here, so a solve takes well over a second and cannot finish within 0.4 s.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyomo.environ as pyo
import pytest

from mel_opt import deadline
from mel_opt.solvers import ipopt
from mel_opt.solvers.base import TerminationCondition

pytestmark = pytest.mark.skipif(not ipopt.available(), reason="cyipopt unavailable")

LIMIT = 0.4
SLOW_S = 0.08


def rosenbrock() -> pyo.ConcreteModel:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=-1.2)
    m.y = pyo.Var(initialize=1.0)
    m.o = pyo.Objective(expr=100 * (m.y - m.x**2) ** 2 + (1 - m.x) ** 2)
    return m


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> None:
    original = ipopt._Callbacks.gradient

    def gradient(self: Any, x: np.ndarray) -> np.ndarray:
        time.sleep(SLOW_S)
        return original(self, x)

    monkeypatch.setattr(ipopt._Callbacks, "gradient", gradient)


def test_unlimited_solve_is_slow_and_converges(slow: None) -> None:
    t = time.perf_counter()
    res = ipopt.solve_nlp(rosenbrock())
    assert res.termination is TerminationCondition.LOCALLY_OPTIMAL
    assert abs(res.values["x"] - 1.0) < 1e-6  # the minimum is (1, 1)
    assert time.perf_counter() - t > 3 * LIMIT  # the model really cannot finish in LIMIT


@pytest.mark.parametrize("options", [None, {"max_wall_time": 1e6, "max_cpu_time": 1e6}],
                         ids=["max_wall_time", "callback-guard-only"])
def test_time_limit_is_kept(slow: None, options: dict[str, float] | None) -> None:
    t = time.perf_counter()
    res = ipopt.solve_nlp(rosenbrock(), time_limit=LIMIT, options=options)
    elapsed = time.perf_counter() - t
    assert res.termination is TerminationCondition.TIME_LIMIT, res.message
    assert elapsed < LIMIT + 0.5


def test_shared_deadline_holds_without_a_time_limit_argument(slow: None) -> None:
    t = time.perf_counter()
    with deadline.limit(LIMIT):
        res = ipopt.solve_nlp(rosenbrock())
    assert res.termination is TerminationCondition.TIME_LIMIT
    assert time.perf_counter() - t < LIMIT + 0.5


def test_expired_deadline_raises_before_the_compile() -> None:
    with deadline.limit(1.0, start=time.perf_counter() - 2.0):
        with pytest.raises(deadline.TimeLimitReached, match="model build"):
            ipopt.solve_nlp(rosenbrock())
