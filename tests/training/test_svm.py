"""The linear SVM (model ``svm``): the hinge loss and its gradient on numbers worked out by
hand, against central differences, trained to zero error on a separable set, and accepted by
every trainer (the emulator, the live learner's gradient statistics, the CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt import api
from mel_opt.cli import cli
from mel_opt.errors import UsageError
from mel_opt.live.learner import LocalData
from mel_opt.live.settings import LiveSettings
from mel_opt.mlp import (
    CROSS_ENTROPY,
    HINGE,
    MLP,
    Layers,
    init_params,
    layers_for,
    loss_of,
    output_loss,
    stacked_forward,
    stacked_gradients,
    stacked_loss,
)
from mel_opt.training import TrainSettings, load_dataset, train
from mel_opt.training.data import Dataset
from mel_opt.training.local import broadcast, evaluate, local_sgd, local_sgd_loop, make_schedule
from mel_opt.training.mlp import StepBuffers, stacked_sgd_step

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]

# The hand-worked case: 2 features, 2 classes, W = [[1, -1], [2, 0]], b = (0.5, 0).
# x1 = (1, 1), class 0: scores (1 + 2 + 0.5, -1) = (3.5, -1), margin 3.5 - (-1) = 4.5 > 1,
#   loss 0, no gradient;
# x2 = (0.5, -0.5), class 0: scores (0.5 - 1 + 0.5, -0.5) = (0, -0.5), margin 0.5 < 1 (right
#   class, inside the margin), loss 1 - 0.5 = 0.5.
# Mean loss (0 + 0.5) / 2 = 0.25. With weight 1/2 per sample, d loss / d scores of x2 is
# 1/2 * (-1 at its class 0, +1 at the other class 1) = (-0.5, 0.5), so
# dW = x2^T (-0.5, 0.5) = [[-0.25, 0.25], [0.25, -0.25]] and db = (-0.5, 0.5).
W = np.array([[1.0, -1.0], [2.0, 0.0]])
B = np.array([0.5, 0.0])
X = np.array([[1.0, 1.0], [0.5, -0.5]])
Y = np.array([0, 0])
DW = np.array([[-0.25, 0.25], [0.25, -0.25]])
DB = np.array([-0.5, 0.5])


def _svm(w: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """The stacked parameters of one svm with weights ``w`` and biases ``b``."""
    tagged = init_params(Layers(w.shape, HINGE), 0)
    return [w[None].copy(), b[None].copy(), tagged[2][None]]


def test_the_svm_is_a_linear_model_with_the_hinge_and_the_others_keep_cross_entropy() -> None:
    assert layers_for("svm", 64, 2) == (64, 2) and layers_for("svm", 64, 2).loss == HINGE
    assert loss_of("svm") == HINGE
    assert all(loss_of(m) == CROSS_ENTROPY for m in ("softmax", "twonn", "mlp000"))
    p = init_params(layers_for("svm", 3, 2), 0)
    assert [a.shape for a in p] == [(3, 2), (2,), (0, 1)]  # weights, biases, the loss tag
    assert output_loss(p).name == HINGE
    # the cross-entropy models' parameters are what they always were: no tag
    assert [a.shape for a in init_params(layers_for("softmax", 3, 2), 0)] == [(3, 2), (2,)]
    # the same draws as softmax regression's: only the loss differs
    for a, b in zip(p, init_params(layers_for("softmax", 3, 2), 0), strict=False):
        assert np.array_equal(a, b)
    with pytest.raises(UsageError, match="unknown model"):
        layers_for("svm2", 3, 2)
    with pytest.raises(UsageError, match="no loss tag"):
        output_loss([*p[:2], np.zeros((1, 1))])


def test_hinge_loss_and_gradient_on_the_hand_worked_case() -> None:
    p = _svm(W, B)
    scores = stacked_forward(p, X[None])[-1][0]
    assert np.allclose(scores, [[3.5, -1.0], [0.0, -0.5]], atol=1e-15)
    assert stacked_loss(p, X[None], Y[None])[0] == pytest.approx(0.25, abs=1e-15)
    g = stacked_gradients(p, X[None], Y[None], np.full((1, 2), 0.5))
    assert np.allclose(g[0][0], DW, atol=1e-15) and np.allclose(g[1][0], DB, atol=1e-15)
    assert g[2].shape == (1, 0, 1)  # the tag's gradient: empty
    # the binary SVM's form: t = -1 for class 0, f = z_1 - z_0, loss max(0, 1 - t f)
    f = scores[:, 1] - scores[:, 0]
    assert np.allclose(np.maximum(0.0, 1 + f), [0.0, 0.5])


def test_the_trainers_step_is_the_hand_worked_gradient() -> None:
    # stacked_sgd_step reads the labels from the one-hot target times the weights (lr / m)
    p = _svm(W, B)
    target = np.zeros((1, 2, 2))
    target[0, Y, np.arange(2)] = 0.5
    stacked_sgd_step(p, X[None], np.full((1, 2), 0.5), target,
                     StepBuffers.for_params(p, 2, np.float64))
    assert np.allclose(p[0][0], W - DW, atol=1e-15) and np.allclose(p[1][0], B - DB, atol=1e-15)
    assert p[2].shape == (1, 0, 1)


@pytest.mark.parametrize("layers", [(4, 3), (5, 2), (5, 4, 3)])
def test_hinge_gradient_matches_central_differences(layers: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    K, m = 2, 6
    p = broadcast(init_params(Layers(layers, HINGE), seed=1), K)
    for a in p[:-1]:
        a += rng.normal(scale=0.5, size=a.shape)  # margins spread on both sides of 1
    x = rng.normal(size=(K, m, layers[0]))
    y = rng.integers(0, layers[-1], size=(K, m))
    w = np.array([[1 / 6] * 6, [0.25] * 4 + [0.0, 0.0]])  # ragged: 4 real samples, 2 padding
    out = stacked_forward(p, x)[-1]
    own = np.take_along_axis(out, y[:, :, None], axis=2)[:, :, 0]
    rival = np.where(np.arange(layers[-1]) == y[:, :, None], -np.inf, out).max(axis=2)
    assert np.min(np.abs(1 - (own - rival))) > 1e-3  # no sample at the hinge's kink
    assert np.any(own - rival > 1) and np.any(own - rival < 1)
    g = stacked_gradients(p, x, y, w)
    h = 1e-6
    for i in range(len(p) - 1):
        for k in range(K):
            for idx in np.ndindex(*p[i].shape[1:]):
                p[i][(k, *idx)] += h
                up = stacked_loss(p, x, y, w)[k]
                p[i][(k, *idx)] -= 2 * h
                down = stacked_loss(p, x, y, w)[k]
                p[i][(k, *idx)] += h
                assert g[i][(k, *idx)] == pytest.approx((up - down) / (2 * h), abs=1e-7)


def test_sgd_on_a_separable_set_reaches_zero_training_error() -> None:
    # class 1 when x_0 + x_1 > 0, every point at distance >= 0.5 / sqrt(2) from the line
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(200, 2))
    x = x[np.abs(x.sum(axis=1)) > 0.5]
    y = (x.sum(axis=1) > 0).astype(np.int64)
    p = broadcast(init_params(layers_for("svm", 2, 2), seed=0), 1)
    start_error = 1 - evaluate([a[0] for a in p], x, y)[1]
    assert start_error > 0.2
    sched = make_schedule([np.arange(y.size)], np.array([20]), 16, np.random.default_rng(1))
    fast = local_sgd(p, x, y, sched, 0.1)
    slow = local_sgd_loop(p, x, y, sched, 0.1)  # labels, not targets: the same numbers
    for a, b in zip(fast, slow, strict=True):
        assert np.allclose(a, b, rtol=0, atol=1e-12)
    loss, accuracy = evaluate([a[0] for a in fast], x, y)
    assert accuracy == 1.0
    # evaluate's loss is the mean hinge, written out here sample by sample
    w, b = fast[0][0], fast[1][0]
    hinge = [max(0.0, 1 - ((xi @ w + b)[yi] - (xi @ w + b)[1 - yi]))
             for xi, yi in zip(x, y, strict=True)]
    assert loss == pytest.approx(float(np.mean(hinge)), rel=1e-12)


def test_the_single_model_class_takes_the_svm() -> None:
    net = MLP(layers_for("svm", 2, 2), dtype=np.float64)
    net.weights[0][:] = W
    net.biases[0][:] = B
    assert net.loss(X, Y) == pytest.approx(0.25, abs=1e-15)
    gw, gb = net.gradients(X, Y)
    assert len(gw) == len(gb) == 1
    assert np.allclose(gw[0], DW, atol=1e-15) and np.allclose(gb[0], DB, atol=1e-15)


def test_the_live_learners_gradient_statistics_use_the_hinge() -> None:
    # two training rows: the hand-worked case
    ds = Dataset("hand", X, Y, X, Y, 2)
    p = [a[0] for a in _svm(W, B)]
    loss, grads = LocalData(ds, np.arange(2)).loss_and_gradient(p, 100)
    assert loss == pytest.approx(0.25, abs=1e-15)
    assert np.allclose(grads[0], DW, atol=1e-15) and np.allclose(grads[1], DB, atol=1e-15)
    assert grads[2].shape == (0, 1)


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def test_the_emulator_trains_and_scores_the_svm(digits: Any) -> None:
    inst = api.parse_instance({
        "problem": "mel-async", "schema_version": 1, "name": "t", "cycle_time_s": 10.0,
        "total_samples": 400, "min_samples": 10, "max_samples": 400,
        "learners": [{"name": f"n{k}", "c2": 1e-3, "c1": 1e-3, "c0": 0.5} for k in range(4)]})
    run = train(inst, TrainSettings(schemes=("sync",), cycles=3, seeds=1, model="svm",
                                    lr=0.05), data=digits)
    rows = [r for r in run.rows if r["scheme"] == "sync"]
    # the untrained model's loss is the mean multi-class hinge, written out by hand
    w, b = init_params(layers_for("svm", 64, 10), 0, digits.x_train.dtype)[:2]
    hinge = []
    for xi, yi in zip(digits.x_test, digits.y_test, strict=True):
        z = xi @ w + b
        hinge.append(max(0.0, 1 - (z[yi] - max(z[j] for j in range(10) if j != yi))))
    first = next(r for r in rows if r["cycle"] == 0)
    assert first["loss"] == pytest.approx(float(np.mean(hinge)), rel=1e-5)
    last = max(rows, key=lambda r: r["cycle"])
    assert last["accuracy"] > 0.6 and last["loss"] < first["loss"]


def test_svm_is_listed_and_accepted_wherever_a_model_is_named(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["train", "--help"])
    assert "svm" in res.output.split("--model", 1)[1].split("--target", 1)[0]
    assert TrainSettings(schemes=("exact",), model="svm").model == "svm"
    assert LiveSettings(instance={}, model="svm").model == "svm"
    inst = str(ROOT / "instances/mel-async/k10_T15.json")
    out = tmp_path / "o"
    res = CliRunner().invoke(cli, ["train", inst, "--schemes", "eta", "--cycles", "1",
                                   "--seeds", "1", "--model", "svm", "--max-train", "300",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "train.csv").is_file()
