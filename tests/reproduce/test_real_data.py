"""The learning entries' quick forms on real data: Fashion-MNIST, as CI installs it (Debian's
``dataset-fashion-mnist``; or ``melopt data fetch fashion-mnist``). Where it cannot be read,
every test here is skipped with that reason in the summary, never silently.

A quick form trains on a fixed subset of the set (6,000 training and 2,000 validation images
of 784 pixels): the tests check that each entry's whole path runs on the real images and that
its verdict is computed from its own rows, not the numbers (those are the full runs')."""

from __future__ import annotations

import pytest

from mel_opt.reproduce.catalogue import Context, all_entries, verdict_of
from mel_opt.reproduce.learning import QUICK_TEST, QUICK_TRAIN
from mel_opt.training.data import dataset_dir, load_dataset

FOUND = dataset_dir("fashion-mnist")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(FOUND is None, reason=(
        "Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist (as .ci/run "
        "does where it is root) or melopt data fetch fashion-mnist")),
]
LEARNING = sorted(i for i, e in all_entries().items() if "train" in e.needs)


def test_every_learning_entry_is_here() -> None:
    assert len(LEARNING) == 7 and "000-fig3" in LEARNING and "003-fig3" in LEARNING


def test_the_quick_subset_is_real_fashion_mnist() -> None:
    ds = load_dataset("fashion-mnist", max_train=QUICK_TRAIN, max_test=QUICK_TEST)
    assert ds.x_train.shape == (QUICK_TRAIN, 784) and ds.x_test.shape == (QUICK_TEST, 784)
    assert ds.classes == 10 and set(ds.y_train.tolist()) == set(range(10))
    assert 0.0 <= float(ds.x_train.min()) and float(ds.x_train.max()) <= 1.0


@pytest.mark.parametrize("entry_id", LEARNING)
def test_a_learning_entry_runs_on_fashion_mnist(entry_id: str) -> None:
    outcome = all_entries()[entry_id].run(Context(quick=True, dataset="fashion-mnist"))
    assert outcome.rows, "no rows"
    assert outcome.verdict == verdict_of(outcome.claims) and outcome.claims
    assert any("fashion-mnist" in n for n in outcome.notes), outcome.notes
    # no entry may fall back on the digits: the rows that name their data say Fashion-MNIST
    named = {r["dataset"] for r in outcome.rows if r.get("dataset")}
    assert named <= {"fashion-mnist"}
