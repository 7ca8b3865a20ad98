"""A deadline so long that a_k leaves the exact whole numbers is an error, not 'infeasible'.

Instance files cannot carry such a deadline any more (``deadline_s`` is at most 1e9 s, and
within the documented ranges a_k stays below 1e15 < 2^53); the method keeps its own guard for
instances built in Python, which is what these tests exercise.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.errors import InstanceError
from mel_opt.result import Status

DOC = json.loads((Path(__file__).resolve().parents[3] / "instances/dab/worked_example.json")
                 .read_text())
BASE = parse_instance(DOC)


@pytest.mark.parametrize("deadline", [1e19, 1e300])
def test_huge_deadline_is_refused_in_a_file(deadline: float) -> None:
    with pytest.raises(InstanceError, match="deadline_s: must be at most 1e\\+09"):
        parse_instance({**DOC, "deadline_s": deadline})


@pytest.mark.parametrize("deadline", [1e19, 1e300])
def test_huge_deadline_is_a_clear_error(deadline: float) -> None:
    res = solve(dataclasses.replace(BASE, deadline=deadline), "dab")
    assert res.status is Status.ERROR and res.exit_code == 1
    assert "beyond 2^53" in res.message and res.solution == {}


def test_long_but_exact_deadline_is_solved() -> None:
    # 1e12 s leaves a_k near 6.8e12 < 2^53 (about 9.0e15): still exact, verified.
    res = solve(dataclasses.replace(BASE, deadline=1e12), "dab")
    assert res.status is Status.OPTIMAL and res.ok
    assert 1e12 < res.solution["shards"][0] < 2.0**53
