"""The method contract, run over every method of every registered problem.

In the spirit of scikit-learn's ``parametrize_with_checks``: the cases come from the registry,
so a method is checked the day it is registered. Each method, on its problem's declared example
instance (``ProblemSpec.example``):

- gives an answer the problem's verifier accepts, or a clear non-solved status (exit code 1
  and a message);
- gives the same answer for the same seed;
- refuses an option it does not declare (UsageError, exit code 2 on the command line) and a
  bad value of each option it declares;
- returns at once with status ``time_limit`` when its deadline has already passed.
"""

from __future__ import annotations

import json
import math
import time
from functools import cache
from typing import Any

import pytest
from click.testing import CliRunner

from mel_opt import deadline
from mel_opt.api import solve
from mel_opt.cli import cli
from mel_opt.errors import UsageError
from mel_opt.examples import load_example, problem_example
from mel_opt.problems import all_problems, get_problem
from mel_opt.problems.options import Option
from mel_opt.status import Status

CASES = [(p, m) for p, spec in all_problems().items() for m in spec.methods]
IDS = [f"{p}/{m}" for p, m in CASES]


@cache
def example(problem: str) -> Any:
    return load_example(problem)


@cache
def answer(problem: str, method: str, seed: int = 0) -> Any:
    return solve(example(problem), method, time_limit=120, seed=seed)


def test_every_problem_declares_a_shipped_example() -> None:
    for name, spec in all_problems().items():
        assert spec.example, name
        assert problem_example(name).name == spec.example
        assert example(name).problem == name


@pytest.mark.parametrize(("problem", "method"), CASES, ids=IDS)
def test_answer_is_verified_or_clearly_not_solved(problem: str, method: str) -> None:
    res = answer(problem, method)
    doc = json.loads(res.to_json())
    assert doc["status"] == res.status.value and doc["method"] == method
    if res.status.has_solution:
        assert res.ok and res.exit_code == 0, res.message
        assert res.objective is not None and math.isfinite(res.objective)
        # the verifier again, on the solution as the result JSON carries it
        again = get_problem(problem).verify(example(problem), doc["solution"])
        assert again.verification.feasible
        assert again.objective == pytest.approx(res.objective, rel=1e-12, abs=1e-12)
    else:
        assert res.exit_code == 1 and res.message, res
        assert not res.ok


@pytest.mark.parametrize(("problem", "method"), CASES, ids=IDS)
def test_same_seed_same_answer(problem: str, method: str) -> None:
    first = answer(problem, method, seed=3)
    second = solve(example(problem), method, time_limit=120, seed=3)
    assert second.status is first.status
    assert second.solution == first.solution
    assert second.objective == first.objective


@pytest.mark.parametrize(("problem", "method"), CASES, ids=IDS)
def test_unknown_option_is_refused(problem: str, method: str) -> None:
    with pytest.raises(UsageError, match=f"unknown option no_such_option for {problem} method "
                                         f"{method} "):
        solve(example(problem), method, options={"no_such_option": 1})
    path = problem_example(problem).resource
    res = CliRunner().invoke(cli, ["solve", str(path), "-m", method, "--option",
                                   "no_such_option=1"])
    assert res.exit_code == 2, res.output
    assert "unknown option no_such_option" in res.output and "Traceback" not in res.output


def _bad_value(opt: Option) -> Any:
    if opt.kind is bool:
        return "perhaps"
    if opt.kind is str:
        return "no-such-choice" if opt.choices else 3
    if opt.minimum is not None:
        return opt.minimum - 1
    return "not a number"


OPTION_CASES = [(p, m, o) for p, spec in all_problems().items()
                for m, ms in spec.methods.items() for o in ms.options]


@pytest.mark.parametrize(("problem", "method", "opt"), OPTION_CASES,
                         ids=[f"{p}/{m}/{o.name}" for p, m, o in OPTION_CASES])
def test_declared_option_values_are_checked(problem: str, method: str, opt: Option) -> None:
    spec = get_problem(problem).methods[method]
    values = spec.read_options({}, problem)
    assert set(values) == {o.name for o in spec.options}
    assert values[opt.name] == opt.default
    with pytest.raises(UsageError, match=f"option {opt.name} must be "):
        solve(example(problem), method, options={opt.name: _bad_value(opt)})


@pytest.mark.parametrize(("problem", "method"), CASES, ids=IDS)
def test_a_deadline_already_passed_gives_time_limit(problem: str, method: str) -> None:
    # An outer limit already used up (as when loading a file took all of --time-limit): the
    # method is not started, whatever it is.
    with deadline.limit(1.0, start=time.perf_counter() - 10.0):
        res = solve(example(problem), method)
    assert res.status is Status.TIME_LIMIT and res.exit_code == 1
    assert res.solution == {} and res.verification is None
    assert "before the method started" in res.message


@pytest.mark.parametrize("problem", list(all_problems()))
def test_every_preset_has_a_line_and_methods_lists_it(problem: str) -> None:
    from click.testing import CliRunner

    from mel_opt.cli import cli

    spec = all_problems()[problem]
    assert spec.presets and set(spec.preset_docs) == set(spec.presets)
    res = CliRunner().invoke(cli, ["methods", problem], terminal_width=200)
    assert res.exit_code == 0
    for name, line in spec.preset_docs.items():
        assert name in res.output and line[:40] in res.output
    help_text = CliRunner().invoke(cli, ["generate", "--help"], terminal_width=200).output
    assert "melopt methods" in help_text and "PROBLEM" in help_text
