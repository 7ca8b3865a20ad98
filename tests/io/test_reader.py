"""The generic table reader: long lists read whole, vectorised checks worded like single
checks (its time against the list's length is measured in benchmarks/bench_end_to_end.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mel_opt import api
from mel_opt.errors import InstanceError
from mel_opt.io.fields import Field, number
from mel_opt.io.validate import Validator

BASE = json.loads((Path(__file__).resolve().parents[2] / "instances" / "mel-async"
                   / "k10_T15.json").read_text())


def many_learners(n: int) -> dict:
    learners = BASE["learners"]
    doc = {**BASE, "learners": [dict(learners[i % len(learners)], name=f"l{i}")
                                for i in range(n)]}
    doc["total_samples"] = doc["max_samples"] = 2 * n * BASE["min_samples"]
    return doc


def test_a_large_list_of_learners_is_read_whole() -> None:
    # Linear time is measured, not asserted here: `benchmarks/bench_end_to_end.py --cases
    # mel-async` reports the "validate" phase (document -> instance) of this same shipped
    # instance tiled to 10,000 / 100,000 / 1,000,000 learners.
    doc = many_learners(200_000)
    inst = api.parse_instance(doc)
    assert inst.K == 200_000
    assert list(inst.learner_names) == [f"l{i}" for i in range(200_000)]
    assert len(inst.c0) == len(inst.c1) == len(inst.c2) == 200_000


def test_a_late_duplicate_in_a_large_list_is_named_at_its_path() -> None:
    doc = many_learners(20_000)
    doc["learners"][19_999]["name"] = "l7"
    doc["learners"][12_345]["cpu_hz"] = -1.0
    with pytest.raises(InstanceError) as info:
        api.parse_instance(doc)
    assert [str(i) for i in info.value.issues] == [
        "learners[12345].cpu_hz: must be positive, got -1.0",
        "learners[19999].name: duplicate learner name 'l7'",
    ]


VALUES = [1.0, 0, -2, 2.5, float("nan"), float("inf"), "3", None, True, 10**400, 2**60, 7, 1e-9,
          3.0, 1e16]


@pytest.mark.parametrize("field", [
    number("x", 1e-6, 1e15, unit="s"),
    number("x", 1, 10**9, integer=True),
    number("x", 0, 1e9, sign="non-negative"),
    number("x", 0.0, 1.0, sign=None),
    Field("x", "number", minimum=1.0, maximum=5.0, exclusive_minimum=True,
          exclusive_maximum=True),
])
def test_column_check_words_every_failure_like_the_single_check(field: Field) -> None:
    """check_column (numpy, long lists) and check_value (one by one) agree on every entry."""
    values = VALUES * 5  # long enough for the vectorised path
    col, one = Validator(), Validator()
    got = col.check_column(values, lambda i: f"a[{i}]", field)
    want = [one.check_value(x, f"a[{i}]", field) for i, x in enumerate(values)]
    assert col.issues == one.issues and col.issues
    assert np.array_equal(got, np.array([np.nan if w is None else float(w) for w in want]),
                          equal_nan=True)


def test_range_messages() -> None:
    v = Validator()
    f = number("t", 1e-9, 1e9, unit="s")
    assert v.check_value(1e-9, "t", f) == 1e-9 and v.check_value(1e9, "t", f) == 1e9
    for value in (0, 1e-10, 2e9, 10**40):
        v.check_value(value, "t", f)
    assert [i.message for i in v.issues] == [
        "must be positive, got 0", "must be at least 1e-09, got 1e-10",
        "must be at most 1e+09, got 2000000000.0", "must be at most 1e+09, got an integer of 41 "
        "digits"]


def test_rows_of_form_marks_only_the_items_of_that_form() -> None:
    from mel_opt.io.reader import Rows

    mixed = Rows(4, forms=["physical", None, "coefficient", "physical"])
    assert mixed.of_form("physical").tolist() == [True, False, False, True]
    assert mixed.of_form("coefficient").tolist() == [False, False, True, False]
    same = Rows(3, forms=["coefficient"] * 3)
    assert same.of_form("coefficient").tolist() == [True] * 3
    assert same.of_form("physical").tolist() == [False] * 3
    assert Rows(0).of_form("physical").tolist() == []
