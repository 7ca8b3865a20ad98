"""003-fig3: the adaptive-tau control loop run in process over paper 003's data cases, with the
demonstration's SVM (judged) and logistic regression (the comparison)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from mel_opt.reproduce import paper003
from mel_opt.reproduce.catalogue import REPRODUCED, Context, verdict_of

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def digits():  # type: ignore[no-untyped-def]
    from mel_opt.training import load_dataset

    return load_dataset("digits", max_train=600, max_test=300).astype(np.dtype("float32"))


def test_the_data_cases_are_those_of_section_ii(digits) -> None:  # type: ignore[no-untyped-def]
    y = digits.y_train
    two = paper003.case_pools("case 2", y, 10, 0)
    assert all(np.unique(y[p]).size <= 2 for p in two)  # two digits per node
    assert all(p.size == y.size for p in paper003.case_pools("case 3", y, 10, 0))
    four = paper003.case_pools("case 4", y, 10, 0)
    assert all(np.all(y[p] < 5) for p in four[:3]) and all(np.all(y[p] >= 5) for p in four[3:])
    assert not set(y[four[3]].tolist()) & set(y[four[4]].tolist()) - {7}  # split by label
    assert sum(p.size for p in four) == y.size


@pytest.mark.parametrize("model", paper003.MODELS)
def test_replicated_data_has_no_gradient_deviation_so_tau_goes_to_its_cap(
        digits: Any, model: str) -> None:
    rows = paper003.run_case("case 3", digits, seed=0, rounds=4, model=model)
    assert all(r["model"] == model for r in rows)
    assert [r["round"] for r in rows] == [1, 2, 3, 4]
    # every node computes its statistics on the same rows at the same global model
    assert all(abs(r["delta"]) < 1e-9 for r in rows)
    assert rows[0]["tau"] == 66  # round 1: the file's starting estimates (scan of G)
    assert all(r["tau"] == 100 for r in rows[1:])  # h = 0: G falls with tau; capped
    assert rows[-1]["accuracy"] > rows[0]["initial_accuracy"] + 0.3


@pytest.mark.parametrize("model", paper003.MODELS)
def test_non_iid_data_aggregates_more_often(digits: Any, model: str) -> None:
    iid = paper003.run_case("case 1", digits, seed=0, rounds=4, model=model)
    non = paper003.run_case("case 2", digits, seed=0, rounds=4, model=model)
    assert min(r["delta"] for r in non) > 3 * max(r["delta"] for r in iid)
    assert max(r["tau"] for r in non[1:]) < min(r["tau"] for r in iid[1:])


def _rows(tau: dict[str, float], delta: dict[str, float], gain: float = 0.5,
          model: str = "svm") -> list[dict]:
    rows = []
    for case in paper003.CASES:
        for r in (1, 2, 3, 4):
            rows.append({"model": model, "case": case, "seed": 0, "round": r,
                         "tau": tau[case], "delta": delta[case], "last": r == 4,
                         "accuracy": 0.1 + gain, "initial_accuracy": 0.1})
    return rows


GOOD_TAU = {"case 1": 100, "case 2": 14, "case 3": 100, "case 4": 25, "case 2 + delay": 45}
GOOD_DELTA = {"case 1": 0.2, "case 2": 2.1, "case 3": 0.0, "case 4": 1.3, "case 2 + delay": 2.1}


@pytest.mark.parametrize("change, failing", [
    ({}, []),
    ({"case 2": 100}, [1, 3]),  # non-IID not more frequent, and the delay shows nothing
    ({"case 3": 90}, [2]),
    ({"case 2 + delay": 10}, [3]),
])
def test_each_claim_can_fail(change: dict, failing: list[int]) -> None:
    claims = paper003.judge(_rows({**GOOD_TAU, **change}, GOOD_DELTA))
    assert [i for i, c in enumerate(claims) if not c.ok] == failing
    if not failing:
        assert verdict_of(claims) == REPRODUCED


def test_deviation_and_learning_claims_can_fail() -> None:
    flat = paper003.judge(_rows(GOOD_TAU, {**GOOD_DELTA, "case 2": 0.1}))
    assert [c.ok for c in flat][0] is False
    still = paper003.judge(_rows(GOOD_TAU, GOOD_DELTA, gain=0.1))
    assert [c.ok for c in still][-1] is False


def test_the_entry_trains_the_demonstrations_even_odd_task(digits) -> None:  # type: ignore[no-untyped-def]
    task = paper003.even_odd(digits)
    assert task.classes == 2 and set(task.y_train.tolist()) == {0, 1}
    assert np.array_equal(task.y_train, digits.y_train % 2)  # 0: even digit, 1: odd
    assert task.x_train is digits.x_train  # the same images
    # the data cases place digits: case 2 gives a node two digits, hence one or two parities
    pools = paper003.case_pools("case 2", digits.y_train, 10, 0)
    assert all(len(set(digits.y_train[p].tolist())) <= 2 for p in pools)


def test_the_verdict_is_the_svms_and_the_logistic_rows_are_shown_beside() -> None:
    good = _rows(GOOD_TAU, GOOD_DELTA)
    bad_logistic = _rows({**GOOD_TAU, "case 3": 90}, GOOD_DELTA, model="softmax")
    claims = paper003.judge(good + bad_logistic)
    assert verdict_of(claims) == REPRODUCED  # the comparison's failure is not the verdict
    assert "logistic (comparison)" in claims[2].ours and claims[2].ours.endswith(
        "does not hold")
    assert claims[0].ours.startswith("SVM: ") and claims[0].ours.endswith("- holds")
    assert "on the SVM rows" in claims[0].rule
    # the SVM's failure is the verdict, whatever the logistic rows say
    bad_svm = _rows({**GOOD_TAU, "case 3": 90}, GOOD_DELTA)
    good_logistic = _rows(GOOD_TAU, GOOD_DELTA, model="softmax")
    claims = paper003.judge(bad_svm + good_logistic)
    assert [i for i, c in enumerate(claims) if not c.ok] == [2]
    assert claims[2].ours.endswith("- holds")
    # without logistic rows the claims say nothing of them
    assert "logistic" not in paper003.judge(good)[0].ours


def test_the_quick_entry_runs_both_models_on_the_catalogues_data(
        digits: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import mel_opt.training.data as data_module

    asked = []

    def small(name: str, **_: object) -> Any:
        asked.append(name)
        return digits

    monkeypatch.setattr(data_module, "load_dataset", small)
    rows, notes = paper003.compute(Context(quick=True, dataset="idx:/somewhere"))
    assert asked == ["idx:/somewhere"]  # the catalogue's data set, not always the digits
    assert {r["model"] for r in rows} == {"svm", "softmax"}
    for model in paper003.MODELS:
        mine = [r for r in rows if r["model"] == model]
        assert {r["case"] for r in mine} == set(paper003.CASES)
        assert max(r["round"] for r in mine) <= 6  # quick: 6 rounds at most
    assert "arbitrary but fixed two-class split" in notes[0]  # not digits: the class index
    assert all(r["dataset"] == digits.name for r in rows)
