"""A bad value deep in a long column of learners is named at its exact JSON path, through the
whole reading of a file (orjson, or the reference reading where the text needs it, then the
column-wise checks): 130,000 learners in the coefficient form, as issue 37's file of
1,000,000 (its time is measured in benchmarks/bench_end_to_end.py, not here)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mel_opt import api
from mel_opt.errors import InstanceError

N = 130_000
DEEP = 123_456
GOOD = '"c2": 5e-05, "c1": 0.0003, "c0": 0.1'


@pytest.fixture(scope="module")
def text() -> str:
    """The file's text, learners DEEP, DEEP + 1, ... written as markers ``"@0"``, ``"@1"``..."""
    rng = np.random.default_rng(0)
    c2, c1, c0 = (rng.uniform(lo, hi, N).tolist()
                  for lo, hi in ((2e-5, 8e-5), (1e-4, 5e-4), (0.05, 0.3)))
    learners = [{"name": f"n{k}", "c2": c2[k], "c1": c1[k], "c0": c0[k]} for k in range(N)]
    for j in range(8):
        learners[DEEP + j] = f"@{j}"
    doc = {"problem": "mel-async", "schema_version": 1, "cycle_time_s": 10.0,
           "total_samples": 40 * N, "min_samples": 10, "max_samples": 200,
           "learners": learners}
    return json.dumps(doc)


def _load(tmp_path, text: str, bad: list[str]):
    for j in range(8):
        text = text.replace(f'"@{j}"', bad[j] if j < len(bad) else
                            f'{{"name": "x{j}", {GOOD}}}')
    f = tmp_path / "deep.json"
    f.write_text(text)
    return api.load_instance(f)


def _issues(tmp_path, text: str, bad: list[str]) -> list[str]:
    with pytest.raises(InstanceError) as info:
        _load(tmp_path, text, bad)
    return [str(i) for i in info.value.issues]


def test_bad_values_deep_in_the_columns_are_named_at_their_paths(tmp_path, text):
    # a text orjson reads: the column-wise checks word each failure at its item's path
    got = _issues(tmp_path, text, [
        '{"name": "x", "c2": -1.5e-05, "c1": 0.0003, "c0": 0.1}',
        '{"name": "y", "c2": 5e-05, "c1": "0.0003", "c0": 0.1}',
        '{"name": "z", "c2": 5e-05, "c1": 0.0003}',
        '{"name": "w", "c22": 5e-05, "c1": 0.0003, "c0": 0.1}',
        '{"name": "n7", ' + GOOD + '}',
        "[1, 2]",
    ])
    assert got == [
        f"learners[{DEEP}].c2: must be positive, got -1.5e-05",
        f"learners[{DEEP + 1}].c1: must be a number, got string '0.0003'",
        f"learners[{DEEP + 2}].c0: is required but missing",
        f"learners[{DEEP + 3}].c22: unknown field 'c22'; did you mean 'c2'? (free-form notes "
        "belong in 'meta' or 'description')",
        f"learners[{DEEP + 3}].c2: is required but missing",
        f"learners[{DEEP + 4}].name: duplicate learner name 'n7'",
        f"learners[{DEEP + 5}]: must be an object, got a list of 2",
    ]


def test_values_only_the_reference_reads_are_named_at_their_paths(tmp_path, text):
    # NaN, 1e400 and a 33-digit integer: orjson refuses the text or would change the value,
    # the reference reading keeps them for the validator to name
    got = _issues(tmp_path, text, [
        '{"name": "x", "c2": 5e-05, "c1": 0.0003, "c0": NaN}',
        '{"name": "y", "c2": 5e-05, "c1": 0.0003, "c0": 1e400}',
        '{"name": "z", "c2": 5e-05, "c1": 0.0003, "c0": 123456789012345678901234567890123}',
    ])
    assert got == [
        f"learners[{DEEP}].c0: must be a finite number, got nan",
        f"learners[{DEEP + 1}].c0: must be a finite number, got inf",
        f"learners[{DEEP + 2}].c0: must be at most 1e+09, got an integer of 33 digits",
    ]


def test_the_same_file_without_the_bad_values_is_read(tmp_path, text):
    inst = _load(tmp_path, text, [])
    assert inst.K == N and inst.learner_names[DEEP] == "x0" and inst.c1[DEEP] == 0.0003
