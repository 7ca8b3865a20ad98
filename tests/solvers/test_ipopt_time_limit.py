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
# A forked child stuck in one step can only be ended by the parent's wall-clock wait, so the
# tests of it bound the wall time: at least the limit (the deadline is honoured), at most the
# limit + SLACK_S (generous: a loaded machine; the stuck step itself would last 60 s).
SLACK_S = 5.0
# The limit of the test whose child must get through three iterations first: long enough for
# the compile, the fork and three iterations on a loaded machine.
CHILD_LIMIT = 2.0


def rosenbrock() -> pyo.ConcreteModel:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(initialize=-1.2)
    m.y = pyo.Var(initialize=1.0)
    m.o = pyo.Objective(expr=100 * (m.y - m.x**2) ** 2 + (1 - m.x) ** 2)
    return m


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Slow every gradient evaluation by SLOW_S; the returned dict counts them."""
    original = ipopt._Callbacks.gradient
    calls = {"gradient": 0}

    def gradient(self: Any, x: np.ndarray) -> np.ndarray:
        calls["gradient"] += 1
        time.sleep(SLOW_S)
        return original(self, x)

    monkeypatch.setattr(ipopt._Callbacks, "gradient", gradient)
    return calls


def test_unlimited_solve_is_slow_and_converges(slow: dict[str, int]) -> None:
    res = ipopt.solve_nlp(rosenbrock())
    assert res.termination is TerminationCondition.LOCALLY_OPTIMAL
    assert abs(res.values["x"] - 1.0) < 1e-6  # the minimum is (1, 1)
    # the model really cannot finish in LIMIT: it needs this many gradients of SLOW_S each
    # (counted, not timed, so a loaded machine cannot change the answer)
    assert slow["gradient"] * SLOW_S > 3 * LIMIT


@pytest.mark.parametrize("options", [None, {"max_wall_time": 1e6, "max_cpu_time": 1e6}],
                         ids=["max_wall_time", "callback-guard-only"])
def test_time_limit_is_kept(slow: dict[str, int], options: dict[str, float] | None) -> None:
    # Behaviour, not time: the solve needs well over 3 x LIMIT (test above), so only the
    # limit can end it with TIME_LIMIT, whatever the machine's load; how close to the limit a
    # solve stops is measured by benchmarks/bench_time_limits.py.
    res = ipopt.solve_nlp(rosenbrock(), time_limit=LIMIT, options=options)
    assert res.termination is TerminationCondition.TIME_LIMIT, res.message
    assert res.is_usable and res.x is not None and np.all(np.isfinite(res.x))  # point kept
    if options:  # only the callback guard could stop it, and the message names it
        assert res.message == ("Maximum_WallTime_Exceeded: the iteration callback stopped "
                               "Ipopt at the time limit")


def test_shared_deadline_holds_without_a_time_limit_argument(slow: dict[str, int]) -> None:
    # as above: only the shared deadline can end this solve with TIME_LIMIT
    with deadline.limit(LIMIT):
        res = ipopt.solve_nlp(rosenbrock())
    assert res.termination is TerminationCondition.TIME_LIMIT


def test_expired_deadline_raises_before_the_compile() -> None:
    with deadline.limit(1.0, start=time.perf_counter() - 2.0):
        with pytest.raises(deadline.TimeLimitReached, match="model build"):
            ipopt.solve_nlp(rosenbrock())


# --- Ipopt in a child process -----------------------------------------------------------------
# Under a finite deadline Ipopt runs in a forked child that the parent ends at the limit; that
# covers one step of Ipopt taking seconds in C code. pytest's own timeout thread would make
# can_fork() refuse (it is not a daemon), so these tests allow the fork explicitly.


def test_small_models_stay_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ipopt.forked, "can_fork", lambda: True)

    def no_fork(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a 2-variable model must not be forked")

    monkeypatch.setattr(ipopt.forked, "run_forked", no_fork)
    res = ipopt.solve_nlp(rosenbrock(), time_limit=30.0)
    assert res.termination is TerminationCondition.LOCALLY_OPTIMAL


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ipopt.forked, "can_fork", lambda: True)
    monkeypatch.setattr(ipopt, "FORK_FROM", 0)  # Rosenbrock is far below the size rule


def stuck_at_call(monkeypatch: pytest.MonkeyPatch, name: str, call: int) -> None:
    """Make callback ``name`` hang (as a long factorisation would) from its ``call``-th call."""
    cls = ipopt._CallbacksWithHessian
    original = getattr(cls, name)
    calls = {"n": 0}

    def stuck(self: Any, *args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] >= call:
            time.sleep(60.0)
        return original(self, *args)

    monkeypatch.setattr(cls, name, stuck)


def test_forked_solve_matches_the_in_process_solve(forking: None) -> None:
    inside = ipopt.solve_nlp(rosenbrock())
    child = ipopt.solve_nlp(rosenbrock(), time_limit=30.0)
    assert child.termination is TerminationCondition.LOCALLY_OPTIMAL, child.message
    assert child.iterations == inside.iterations > 0
    assert child.values == pytest.approx(inside.values, abs=1e-12)
    assert abs(child.values["x"] - 1.0) < 1e-6


def test_a_step_stuck_in_the_child_is_ended_at_the_limit(
        forking: None, monkeypatch: pytest.MonkeyPatch) -> None:
    stuck_at_call(monkeypatch, "hessian", 4)  # three iterations go through, the fourth hangs
    t = time.perf_counter()
    res = ipopt.solve_nlp(rosenbrock(), time_limit=CHILD_LIMIT)
    elapsed = time.perf_counter() - t
    # wall clock by nature: only the parent's wait can end the stuck child (see SLACK_S)
    assert CHILD_LIMIT <= elapsed < CHILD_LIMIT + SLACK_S
    assert res.termination is TerminationCondition.TIME_LIMIT
    assert "its process was ended and its last iterate kept" in res.message
    assert res.iterations == 3
    assert res.x is not None and np.all(np.isfinite(res.x))
    # the last iterate is a real point of the path: moved from the start, objective evaluated
    assert not np.allclose(res.x, [-1.2, 1.0])
    assert res.objective == pytest.approx(
        100 * (res.x[1] - res.x[0] ** 2) ** 2 + (1 - res.x[0]) ** 2)


def test_stuck_before_the_first_iterate_gives_no_point(
        forking: None, monkeypatch: pytest.MonkeyPatch) -> None:
    stuck_at_call(monkeypatch, "gradient", 1)
    t = time.perf_counter()
    res = ipopt.solve_nlp(rosenbrock(), time_limit=LIMIT)
    elapsed = time.perf_counter() - t
    # wall clock by nature: only the parent's wait can end the stuck child (see SLACK_S)
    assert LIMIT <= elapsed < LIMIT + SLACK_S
    assert res.termination is TerminationCondition.TIME_LIMIT
    assert "with no iterate yet" in res.message
    assert res.objective is None and not res.is_usable


def test_bad_option_in_the_child_is_still_a_usage_error(forking: None) -> None:
    from mel_opt.errors import UsageError

    with pytest.raises(UsageError, match="no_such_option"):
        ipopt.solve_nlp(rosenbrock(), time_limit=10.0, options={"no_such_option": 1})
