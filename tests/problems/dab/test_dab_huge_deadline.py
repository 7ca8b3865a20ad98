"""A deadline so long that a_k leaves the exact whole numbers is an error, not 'infeasible'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mel_opt.api import parse_instance, solve
from mel_opt.result import Status

DOC = json.loads((Path(__file__).resolve().parents[3] / "instances/dab/worked_example.json")
                 .read_text())


@pytest.mark.parametrize("deadline", [1e19, 1e300])
def test_huge_deadline_is_a_clear_error(deadline: float) -> None:
    res = solve(parse_instance({**DOC, "deadline_s": deadline}), "dab")
    assert res.status is Status.ERROR and res.exit_code == 1
    assert "beyond 2^53" in res.message and res.solution == {}


def test_long_but_exact_deadline_is_solved() -> None:
    # 1e12 s leaves a_k near 6.8e12 < 2^53 (about 9.0e15): still exact, verified.
    res = solve(parse_instance({**DOC, "deadline_s": 1e12}), "dab")
    assert res.status is Status.OPTIMAL and res.ok
    assert 1e12 < res.solution["shards"][0] < 2.0**53
