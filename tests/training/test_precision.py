"""float32 training against float64, and the learner threads of the batched trainer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt import api
from mel_opt.cli import cli
from mel_opt.problems import get_problem
from mel_opt.training import TrainSettings, load_dataset, train
from mel_opt.training import local as L
from mel_opt.training.local import broadcast, local_sgd, make_schedule
from mel_opt.training.mlp import init_params, layers_for

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits")


def _round(ds: Any, model: str, dtype: type, workers: int = 1) -> list[np.ndarray]:
    """One round of six learners (1-6 passes over 100 samples each) from one float64 start."""
    rng = np.random.default_rng(3)
    samples = list(np.array_split(rng.permutation(ds.y_train.size)[:600], 6))
    sched = make_schedule(samples, np.arange(1, 7), 32, np.random.default_rng(5), dtype)
    start = broadcast(init_params(layers_for(model, ds.features, ds.classes), 0), 6)
    return local_sgd([a.astype(dtype) for a in start], ds.x_train.astype(dtype), ds.y_train,
                     sched, 0.1, workers)


# The float32 round against the float64 one, per parameter array: max |difference| over the
# largest change training made to it (max |trained - start|). Measured on this seed: at most
# 2e-6 for softmax and twonn (float32 rounding), 0.017 for mlp000 (its first layer; with four
# layers a ReLU whose input is near 0 can switch on a sample in one precision and not the
# other); the bounds leave a 3-5x margin.
@pytest.mark.parametrize(("model", "tol"), [("softmax", 1e-5), ("twonn", 1e-5),
                                            ("mlp000", 0.05)])
def test_float32_round_matches_float64(digits: Any, model: str, tol: float) -> None:
    lo = _round(digits, model, np.float32)
    hi = _round(digits, model, np.float64)
    start = broadcast(init_params(layers_for(model, digits.features, digits.classes), 0), 6)
    assert all(a.dtype == np.float32 for a in lo)
    for a, b, s in zip(lo, hi, start, strict=True):
        change = np.abs(b - s).max()
        assert change > 1e-3  # training moved every array
        assert np.abs(a - b).max() <= tol * change


def test_float32_run_matches_float64_cycle_by_cycle(digits: Any) -> None:
    """Paper 000's network under the mohammad2020 allocation (K = 10), 5 cycles, 2 seeds: the
    validation accuracy of every cycle within one sample of 359, the loss within 1e-3
    (measured: the same accuracies, losses within 2e-5)."""
    gen = get_problem("mel-async").generate
    assert gen is not None
    inst = api.parse_instance(gen("mohammad2020", learners=10, seed=2020, params={}))
    rows = {}
    for dtype in ("float32", "float64"):
        run = train(inst, TrainSettings(schemes=("exact",), cycles=5, seeds=2, model="mlp000",
                                        dtype=dtype), data=digits)
        rows[dtype] = np.array([(r["accuracy"], r["loss"]) for r in run.rows])
    acc32, loss32 = rows["float32"].T
    acc64, loss64 = rows["float64"].T
    assert acc64[-1] > 0.5  # it learns (chance is 0.1)
    np.testing.assert_allclose(acc32, acc64, rtol=0, atol=1.0 / digits.y_test.size + 1e-12)
    np.testing.assert_allclose(loss32, loss64, rtol=0, atol=1e-3)


def _shares(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, the number of learners of each share a training thread gets."""
    used: list[int] = []
    real = L._train_sorted

    def spy(p: list[np.ndarray], *args: Any) -> None:
        used.append(p[0].shape[0])
        real(p, *args)

    monkeypatch.setattr(L, "_train_sorted", spy)
    return used


@pytest.mark.parametrize("workers", [2, 3, 7])
def test_learner_threads_give_the_same_numbers(digits: Any, workers: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each learner's arithmetic is its own, whichever thread runs it: bit for bit equal."""
    one = _round(digits, "twonn", np.float32, workers=1)
    monkeypatch.setattr(L, "MIN_SHARE_FLOP", 0.0)  # threads even for this small model
    used = _shares(monkeypatch)
    many = _round(digits, "twonn", np.float32, workers=workers)
    assert sorted(used, reverse=True) == [len(s) for s in np.array_split(
        np.arange(6), min(workers, 6))]  # min(workers, K) shares of the six learners
    for a, b in zip(one, many, strict=True):
        np.testing.assert_array_equal(a, b)


def test_small_products_stay_on_one_thread(digits: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    used = _shares(monkeypatch)
    _round(digits, "softmax", np.float32, workers=4)  # 6 x 32 x 640 x 6 FLOPs a step: small
    assert used == [6]


def test_cli_dtype_and_threads(tmp_path: Path) -> None:
    inst = tmp_path / "i.json"
    gen = get_problem("mel-async").generate
    assert gen is not None
    inst.write_text(json.dumps(gen("mohammad2020", learners=4, seed=1, params={})))
    args = ["train", str(inst), "--schemes", "eta", "--cycles", "1", "--seeds", "1",
            "--model", "softmax", "--max-train", "200"]
    res = CliRunner().invoke(cli, [*args, "--dtype", "float64", "--threads", "2",
                                   "-o", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    settings = json.loads((tmp_path / "a" / "summary.json").read_text())["settings"]
    assert settings["dtype"] == "float64" and settings["threads"] == 2
    for bad in (["--dtype", "float16"], ["--threads", "0"]):
        res = CliRunner().invoke(cli, [*args, *bad, "-o", str(tmp_path / "b")])
        assert res.exit_code == 2 and bad[0] in res.output
