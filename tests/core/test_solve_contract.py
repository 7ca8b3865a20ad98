"""api.solve's contract for every method: a solved status only for an answer the verifier
accepts; a method's exception, a rejected answer or a passed deadline is a clear status.

The methods here are fakes registered as a problem ``contract-fake`` for one test each, so every
branch of the contract is reached on purpose (the real methods reach them only on hostile
input, which the fuzz benchmark covers).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mel_opt import deadline
from mel_opt.api import solve
from mel_opt.errors import UsageError
from mel_opt.problems import Checked, MethodOutput, MethodSpec, ProblemSpec, all_problems
from mel_opt.result import SolverInfo, Status, Verification

FAKE = "contract-fake"
INFO = SolverInfo("fake")


@dataclass(frozen=True)
class FakeInstance:
    name: str = "fake"
    problem: str = FAKE


def _parse(doc: Mapping[str, Any], source: str | None) -> FakeInstance:
    return FakeInstance(str(doc.get("name", "fake")))


def _accepting(inst: Any, solution: Mapping[str, Any]) -> Checked:
    """Feasible, objective = sum of x (an honest verifier for the fakes that should pass)."""
    x = [float(v) for v in solution.get("x", [])]
    return Checked(Verification(True, 0.0, {"bound": 0.0}), {"n": len(x)}, float(sum(x)))


@pytest.fixture
def register() -> Iterator[Callable[..., None]]:
    """Register ``contract-fake`` with one method ``m`` and a verifier, for one test."""
    problems = all_problems()

    def make(func: Callable[..., MethodOutput],
             verify: Callable[[Any, Mapping[str, Any]], Checked] = _accepting) -> None:
        problems[FAKE] = ProblemSpec(
            name=FAKE, summary="fake", parse=_parse, verify=verify,
            methods={"m": MethodSpec("m", func, "fake", "baseline")}, default_method="m")

    yield make
    problems.pop(FAKE, None)


def _optimal(solution: dict[str, Any]) -> Callable[..., MethodOutput]:
    return lambda inst, opts: MethodOutput.optimal(solution, INFO)


def test_accepted_answer_stands(register: Callable[..., None]) -> None:
    register(_optimal({"x": [1.0, 2.0]}))
    res = solve(FakeInstance())
    assert res.status is Status.OPTIMAL and res.exit_code == 0 and res.ok
    assert res.objective == 3.0


def test_rejected_answer_is_an_error_with_the_failing_check(register: Callable[..., None]) -> None:
    def reject(inst: Any, solution: Mapping[str, Any]) -> Checked:
        return Checked(Verification(False, 0.25, {"bound": 0.25, "sum": 0.0}), {}, 5.0)

    register(_optimal({"x": [5.0]}), reject)
    res = solve(FakeInstance())
    assert res.status is Status.ERROR and res.exit_code == 1
    assert res.message == "method returned an answer that fails verification: bound = 0.25"
    assert res.verification is not None and not res.verification.feasible  # kept for the user


@pytest.mark.parametrize(("checks", "objective", "solution", "why"), [
    ({"bound": math.nan}, 1.0, {"x": [1.0]}, "bound = nan"),  # NaN compares false to any tol
    ({"bound": 0.0}, None, {"x": [1.0]}, "no finite objective (got None)"),
    ({"bound": 0.0}, math.inf, {"x": [1.0]}, "no finite objective (got inf)"),
    ({"bound": 0.0}, 1.0, {"x": [1.0, math.nan]}, "solution.x holds a non-finite number"),
    ({"bound": 0.0}, 1.0, {"x": [3, -9223372036854775808]}, "negative quantity"),
])
def test_feasible_verdicts_that_cannot_stand(register: Callable[..., None],
                                             checks: dict[str, float], objective: float | None,
                                             solution: dict[str, Any], why: str) -> None:
    def lenient(inst: Any, sol: Mapping[str, Any]) -> Checked:
        return Checked(Verification(True, 0.0, checks), {}, objective)

    register(_optimal(solution), lenient)
    res = solve(FakeInstance())
    assert res.status is Status.ERROR and res.exit_code == 1
    assert why in res.message


def test_assignment_sentinel_is_not_a_negative_quantity(register: Callable[..., None]) -> None:
    register(_optimal({"x": [1.0], "assignment": [0, -1, 2]}))
    assert solve(FakeInstance()).status is Status.OPTIMAL


@pytest.mark.parametrize("exc", [ZeroDivisionError("float division by zero"),
                                 OverflowError("math range error"),
                                 FloatingPointError("overflow"), ValueError("bad"),
                                 np.linalg.LinAlgError("singular")])
def test_method_exception_is_an_error_status(register: Callable[..., None],
                                             exc: Exception) -> None:
    def boom(inst: Any, opts: Any) -> MethodOutput:
        raise exc

    register(boom)
    res = solve(FakeInstance())
    assert res.status is Status.ERROR and res.exit_code == 1
    assert res.message == f"the method failed: {type(exc).__name__}: {exc}"
    assert res.solution == {} and res.verification is None


def test_usage_error_still_raises(register: Callable[..., None]) -> None:
    def bad_option(inst: Any, opts: Any) -> MethodOutput:
        raise UsageError("option x must be positive")

    register(bad_option)
    with pytest.raises(UsageError):
        solve(FakeInstance())


def test_verifier_exception_is_an_error_status(register: Callable[..., None]) -> None:
    def crash(inst: Any, sol: Mapping[str, Any]) -> Checked:
        return Checked(Verification(True, 0.0, {}), {}, 1.0 / 0.0)

    register(_optimal({"x": [1.0]}), crash)
    res = solve(FakeInstance())
    assert res.status is Status.ERROR
    assert res.message == "the verifier failed: ZeroDivisionError: float division by zero"


def test_runtime_warning_becomes_a_note(register: Callable[..., None]) -> None:
    def noisy(inst: Any, opts: Any) -> MethodOutput:
        with np.errstate(all="warn"):
            y = float(np.log(np.float64(0.0)))  # -inf with "divide by zero" warning
        return MethodOutput.optimal({"x": [1.0]}, INFO, {"y": y})

    register(noisy)
    with warnings.catch_warnings(record=True) as outer:
        warnings.simplefilter("always")
        res = solve(FakeInstance())
    assert res.status is Status.OPTIMAL
    assert "numerical warnings: divide by zero encountered in log" in res.message
    assert not [w for w in outer if issubclass(w.category, RuntimeWarning)]


def test_time_limit_with_and_without_incumbent(register: Callable[..., None]) -> None:
    found = MethodOutput.feasible({"x": [2.0]}, INFO, {}, "incumbent")

    def stops(inst: Any, opts: Any) -> MethodOutput:
        raise deadline.TimeLimitReached("time limit of 1 s reached", incumbent=found)

    register(stops)
    res = solve(FakeInstance(), time_limit=1.0)
    assert res.status is Status.FEASIBLE and res.ok and res.objective == 2.0

    def stops_empty(inst: Any, opts: Any) -> MethodOutput:
        raise deadline.TimeLimitReached("time limit of 1 s reached")

    register(stops_empty)
    res = solve(FakeInstance(), time_limit=1.0)
    assert res.status is Status.TIME_LIMIT and res.exit_code == 1
    assert res.message == "time limit of 1 s reached"


def test_cooperative_loop_stops_at_the_deadline(register: Callable[..., None]) -> None:
    # Behaviour, not time: the method first waits until its deadline has passed, so the loop's
    # own first check must stop it (the guard timer, 0.4 s later, would name itself instead).
    checks = {"n": 0}

    def loop(inst: Any, opts: Any) -> MethodOutput:
        until = deadline.current()
        while not until.expired():
            pass
        while True:
            checks["n"] += 1
            deadline.check("the fake loop")

    register(loop)
    res = solve(FakeInstance(), time_limit=0.2)
    assert res.status is Status.TIME_LIMIT and res.exit_code == 1
    assert res.message == "time limit of 0.2 s reached during the fake loop"
    assert checks["n"] == 1 and res.solution == {}


def test_a_deadline_already_over_does_not_start_the_method(register: Callable[..., None]) -> None:
    calls = {"n": 0}

    def method(inst: Any, opts: Any) -> MethodOutput:
        calls["n"] += 1
        return MethodOutput.optimal({"x": [1.0]}, INFO)

    register(method)
    res = solve(FakeInstance(), time_limit=1e-9)
    assert res.status is Status.TIME_LIMIT and calls["n"] == 0
    assert res.message == "time limit of 1e-09 s reached before the method started"
    assert solve(FakeInstance(), time_limit=60).status is Status.OPTIMAL and calls["n"] == 1


@pytest.mark.skipif(not hasattr(__import__("signal"), "setitimer"), reason="no SIGALRM")
def test_guard_timer_stops_a_loop_that_never_checks(register: Callable[..., None]) -> None:
    def spin(inst: Any, opts: Any) -> MethodOutput:
        n = 0
        end = time.perf_counter() + 30.0  # bounded: an unarmed guard fails the test, not hangs
        while time.perf_counter() < end:
            n += 1
        raise AssertionError("the guard timer did not stop the loop")

    register(spin)
    t = time.perf_counter()
    res = solve(FakeInstance(), time_limit=0.4)
    elapsed = time.perf_counter() - t
    assert res.status is Status.TIME_LIMIT and "guard timer" in res.message
    # Wall clock by nature: a loop that never checks is stopped only by the guard's timer.
    # Not before the limit; the upper bound is generous (a loaded machine) yet far below the
    # loop's own 30 s, so a guard that fires far too late fails too.
    assert 0.4 <= elapsed < 0.4 + 5.0


SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    sys.path.insert(0, {tests!r})
    from core.test_solve_contract import FAKE, INFO, _accepting, _parse
    from mel_opt.problems import MethodOutput, MethodSpec, ProblemSpec, all_problems

    def boom(inst, opts):
        return 1 / 0

    def noisy(inst, opts):
        with np.errstate(all="warn"):
            x = np.array([1e308]) * 10.0
        return MethodOutput.optimal({{"x": [1.0]}}, INFO, {{"x": float(x[0])}})

    all_problems()[FAKE] = ProblemSpec(
        name=FAKE, summary="fake", parse=_parse, verify=_accepting,
        methods={{"boom": MethodSpec("boom", boom, "", "baseline"),
                  "noisy": MethodSpec("noisy", noisy, "", "baseline")}},
        default_method="boom")
    from mel_opt.cli import main
    main()
''')


@pytest.mark.parametrize(("method", "code"), [("boom", 1), ("noisy", 0)])
def test_cli_shows_no_traceback_and_no_warning(tmp_path: Path, method: str, code: int) -> None:
    tests = str(Path(__file__).resolve().parent.parent)
    script = tmp_path / "run.py"
    script.write_text(SCRIPT.format(tests=tests))
    inst = tmp_path / "fake.json"
    inst.write_text(json.dumps({"problem": FAKE, "schema_version": 1}))
    proc = subprocess.run([sys.executable, str(script), "solve", str(inst), "--method", method,
                           "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr == ""  # no traceback, no "internal error", no RuntimeWarning
    if method == "boom":
        assert '"message": "the method failed: ZeroDivisionError: division by zero"' in proc.stdout
    else:
        assert "overflow encountered in multiply" in proc.stdout
