"""The one multilayer perceptron of mel_opt, in numpy, for one model or many at once.

A feed-forward classifier with ReLU hidden layers and one score per class out, trained by plain
minibatch SGD on the mean of a per-sample loss of the scores. The loss is the output layer's
and a property of the model (:data:`LOSS_OF`):

- ``cross-entropy``: softmax of the scores and the mean categorical cross-entropy (thesis
  Eq. 3.6); with no hidden layer it is softmax (multinomial logistic) regression;
- ``hinge`` (model ``svm``): the multi-class hinge of Crammer and Singer on the raw scores
  (:class:`Hinge`); with no hidden layer a linear SVM.

Weights start as PyTorch's ``nn.Linear`` does: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

The arithmetic lives in :func:`stacked_forward` and :func:`stacked_gradients`, which work on
parameters stacked over a leading *learner axis* (shape (K, n_in, n_out) and (K, n_out)) and
on minibatches of shape (K, m, features) with a per-sample weight (K, m). K learners with
different models and different (ragged) minibatches are one batched computation; a single
model is the case K = 1. The training emulator's in-place step,
:func:`mel_opt.training.mlp.stacked_sgd_step`, is the same arithmetic with the update done in
place. :class:`MLP` wraps one model for subset benchmarking and tests.

The loss travels with the parameters: they are [W_1, b_1, ..., W_n, b_n], and a model whose
loss is not the cross-entropy carries one more array, empty, whose last axis is its loss's
index in :data:`LOSSES` (:func:`loss_tag`). :func:`layers_for` gives the widths with the loss
(:class:`Layers`) and :func:`init_params` adds the tag, so every function here finds the loss
in the parameters it is given (:func:`output_loss`, the one place that decides): the
emulator, the live learners (which receive arrays only), their gradient statistics and the
evaluation train and score each model by its own loss, with no change where they call. The tag
is copied, stacked, averaged and sent like any array (an empty one costs nothing); a model
without one (all models but ``svm``) is exactly what it was before tags existed.

This module imports nothing of mel_opt but its errors and :mod:`mel_opt.arrays`, so that the
training emulator, live runs and subset benchmarking (:mod:`mel_opt.subset_benchmarking`) all
take the model from here without importing one another. Its functions compute with the array
module of the arrays they are given (:func:`mel_opt.arrays.array_module`): numpy on the host,
CuPy for the emulator's ``--device cuda`` (the same calls; numpy's results are unchanged).

Named shapes (:data:`HIDDEN`, adapted to a data set by :func:`layers_for`):

- ``softmax``: [F, C], softmax regression;
- ``svm``: [F, C], a linear SVM (hinge loss; paper 003's demonstration);
- ``twonn``: [F, 50, 20, C], the TwoNN of the thesis' DAB experiments (Section 3.4.1), whose
  input is 784 on MNIST;
- ``mlp000``: [F, 300, 124, 60, C], the DNN of paper 000, Section V-A (784 inputs on MNIST).

F is the number of input features and C the number of classes of the data set.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import DTypeLike

from mel_opt.arrays import array_module, put_along_axis
from mel_opt.errors import UsageError

TWONN_LAYERS: tuple[int, ...] = (784, 50, 20, 10)

CROSS_ENTROPY = "cross-entropy"
HINGE = "hinge"
#: The output layer's losses; a loss's index here is the one its tag carries (loss_tag).
LOSSES: tuple[str, ...] = (CROSS_ENTROPY, HINGE)

# Hidden widths of the named models (input and output come from the data set).
HIDDEN: dict[str, tuple[int, ...]] = {
    "softmax": (),
    "svm": (),
    "twonn": (50, 20),
    "mlp000": (300, 124, 60),
}
#: The output loss of the named models whose loss is not the cross-entropy.
LOSS_OF: dict[str, str] = {"svm": HINGE}
MODELS = {"twonn": TWONN_LAYERS}  # the subset_benchmarking package's model table (MNIST input)

Params = list[np.ndarray]  # [W_1, b_1, W_2, b_2, ...], each with a leading learner axis


class Layers(tuple[int, ...]):
    """Widths from input to output, and the loss of the output layer (``loss``, one of
    :data:`LOSSES`): what :func:`init_params` needs to make a model. Compares as the tuple of
    widths."""

    loss: str

    def __new__(cls, widths: Iterable[int], loss: str = CROSS_ENTROPY) -> Layers:
        if loss not in LOSSES:
            raise UsageError(f"unknown output loss {loss!r}; choose one of {', '.join(LOSSES)}")
        self = super().__new__(cls, tuple(int(n) for n in widths))
        self.loss = loss
        return self


def check_model(name: str) -> None:
    """Refuse a model name :func:`layers_for` does not know (UsageError listing the known)."""
    if name not in HIDDEN:
        raise UsageError(f"unknown model {name!r}; choose one of {', '.join(HIDDEN)}")


def loss_of(name: str) -> str:
    """The output loss of the named model (one of :data:`LOSSES`)."""
    check_model(name)
    return LOSS_OF.get(name, CROSS_ENTROPY)


def layers_for(name: str, features: int, classes: int) -> Layers:
    """Layer widths of the named model for ``features`` inputs and ``classes`` outputs, with
    its output loss.

    Raises
    ------
    UsageError
        For an unknown name (the message lists the known ones).
    """
    loss = loss_of(name)  # refuses an unknown name
    return Layers((int(features), *HIDDEN[name], int(classes)), loss)


def loss_tag(loss: str, dtype: DTypeLike = np.float64) -> np.ndarray | None:
    """The empty array that ends the parameters of a model with output loss ``loss``: shape
    (0, i) with i the loss's index in :data:`LOSSES`; None for the cross-entropy (no tag)."""
    code = LOSSES.index(loss)
    return None if code == 0 else np.empty((0, code), dtype=dtype)


def init_params(layers: Sequence[int], seed: int = 0, dtype: DTypeLike = np.float64) -> Params:
    """Fresh parameters [W_1, b_1, ...] for one model (no learner axis), PyTorch-style uniform.

    ``layers`` as :func:`layers_for` gives them: a :class:`Layers` with another loss than the
    cross-entropy adds its :func:`loss_tag` last (plain widths: the cross-entropy).
    """
    if len(layers) < 2 or any(int(n) < 1 for n in layers):
        raise ValueError(f"layers must be at least two positive widths, got {layers!r}")
    rng = np.random.default_rng(seed)
    out: Params = []
    for n_in, n_out in zip(layers[:-1], layers[1:], strict=True):
        bound = 1.0 / np.sqrt(n_in)
        out.append(rng.uniform(-bound, bound, (n_in, n_out)).astype(dtype))
        out.append(rng.uniform(-bound, bound, n_out).astype(dtype))
    tag = loss_tag(getattr(layers, "loss", CROSS_ENTROPY), dtype)
    return out if tag is None else [*out, tag]


def layer_count(params: Sequence[np.ndarray]) -> int:
    """Layers (weight matrix and bias pairs) of these parameters, stacked or not (a loss tag
    is not one)."""
    return len(params) // 2


class OutputLoss(abc.ABC):
    """The loss of a model's output layer: how :func:`forward_terms` finishes the scores, what
    the model outputs, the per-sample loss and its derivative with respect to the scores.

    Scores arrive class-major, (K, classes, m) (see :func:`forward_terms`), and are worked on
    in place.
    """

    name: str = ""

    @abc.abstractmethod
    def finish(self, e: np.ndarray) -> np.ndarray | None:
        """Turn the scores ``e`` into the terms the output and gradient need, in place;
        returns a (K, 1, m) factor they share, or None."""

    @abc.abstractmethod
    def output(self, e: np.ndarray, s: np.ndarray | None) -> np.ndarray:
        """The model's output (K, classes, m) from :meth:`finish`'s terms (in place)."""

    @abc.abstractmethod
    def losses(self, out: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Each sample's loss (..., m) from the output ``out`` (..., m, classes, sample-major)
        and the class indices ``y`` (..., m)."""

    @abc.abstractmethod
    def score_gradient(self, e: np.ndarray, s: np.ndarray | None, weight: np.ndarray,
                       y: np.ndarray | None, target: np.ndarray | None) -> np.ndarray:
        """d (sum_i weight_i loss_i) / d scores, class-major (K, classes, m), written into
        ``e`` (the terms of :meth:`finish`), from the labels ``y`` (K, m) or the one-hot
        ``target`` times ``weight`` (K, classes, m)."""


class CrossEntropy(OutputLoss):
    """Softmax of the scores and the categorical cross-entropy -log p_y (thesis Eq. 3.6)."""

    name = CROSS_ENTROPY

    def finish(self, e: np.ndarray) -> np.ndarray:
        """exp(z - max_c z) in place (the shift keeps exp finite); returns the class sums."""
        xp = array_module(e)
        e -= xp.max(e, axis=1, keepdims=True)  # numpy: np.maximum.reduce, as before
        xp.exp(e, out=e)
        return xp.sum(e, axis=1, keepdims=True)

    def output(self, e: np.ndarray, s: np.ndarray | None) -> np.ndarray:
        """The softmax probabilities e / s."""
        e /= s
        return e

    def losses(self, out: np.ndarray, y: np.ndarray) -> np.ndarray:
        xp = array_module(out)
        picked = xp.take_along_axis(out, y[..., None], axis=-1)[..., 0]
        return -xp.log(xp.maximum(picked, 1e-12))

    def score_gradient(self, e: np.ndarray, s: np.ndarray | None, weight: np.ndarray,
                       y: np.ndarray | None, target: np.ndarray | None) -> np.ndarray:
        # per sample weight * (softmax - one-hot), the softmax's division folded into the
        # (K, 1, m) factor weight / s
        g = e
        g *= weight[:, None, :] / s
        if target is None:
            K, m = weight.shape
            xp = array_module(g)
            g[xp.arange(K)[:, None], y, xp.arange(m)] -= weight
        else:
            g -= target
        return g


class Hinge(OutputLoss):
    """The multi-class hinge of Crammer and Singer: max(0, 1 - (z_y - max_{j != y} z_j)).

    One margin per sample, between its class's score and the best other class's: the loss
    bounds the sample's 0-1 error from above and does not grow with the number of classes (the
    Weston-Watkins hinge sums C - 1 such terms). With two classes the two agree and are the
    binary SVM's hinge max(0, 1 - t f) on the score difference f = z_1 - z_0, with t = +1 for
    class 1 and -1 for class 0. No L2 term: paper 003 names an SVM and neither its loss nor a
    regulariser. (The authors' released code, IBM/adaptive-federated-learning,
    ``models/svm_smooth.py``, trains a "smooth SVM" instead: the squared hinge, an L2 term
    with lambda = 0.1, no bias; not this model.) Two scores where the binary SVM has one
    make f move twice as far for the same learning rate (both columns take the step), as
    two-class softmax regression against logistic regression.

    The derivative with respect to the scores is the subgradient: for a sample with a positive
    loss +1 at the best other class and -1 at its own, else 0 (0 also at a margin of exactly
    1); a tie between other classes goes to the lower class index.
    """

    name = HINGE

    def finish(self, e: np.ndarray) -> None:
        """Nothing: the loss reads the raw scores."""
        return None

    def output(self, e: np.ndarray, s: np.ndarray | None) -> np.ndarray:
        """The scores themselves."""
        return e

    def losses(self, out: np.ndarray, y: np.ndarray) -> np.ndarray:
        return hinge_terms(out, y, axis=-1)[0]

    def score_gradient(self, e: np.ndarray, s: np.ndarray | None, weight: np.ndarray,
                       y: np.ndarray | None, target: np.ndarray | None) -> np.ndarray:
        xp = array_module(e)
        if y is None:
            assert target is not None
            # the class where the target puts the sample's weight (a sample of weight 0,
            # padding, takes no step whichever class this gives)
            y = xp.argmax(target, axis=1)
        loss, rival = hinge_terms(e, y, axis=1)
        step = (weight * (loss > 0))[:, None, :]
        e.fill(0)
        put_along_axis(xp, e, rival[:, None, :], step, axis=1)
        put_along_axis(xp, e, y[:, None, :], -step, axis=1)  # rival != y: no overlap
        return e


def hinge_terms(z: np.ndarray, y: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's Crammer-Singer hinge and its best other class.

    Parameters
    ----------
    z : ndarray
        Scores, the class axis ``axis``.
    y : ndarray of int
        Class indices, the shape of ``z`` without its class axis.

    Returns
    -------
    loss : ndarray
        max(0, 1 - (z_y - max_{j != y} z_j)), the shape of ``y`` (0 with a single class).
    rival : ndarray of int
        argmax_{j != y} z_j (the lowest index among ties).
    """
    xp = array_module(z)
    at_y = xp.expand_dims(y, axis)
    own = xp.take_along_axis(z, at_y, axis=axis)
    others = xp.array(z, copy=True)
    put_along_axis(xp, others, at_y, -np.inf, axis=axis)
    rival = xp.argmax(others, axis=axis, keepdims=True)
    best = xp.take_along_axis(others, rival, axis=axis)
    loss = xp.maximum(1 - (own - best), 0)
    return xp.squeeze(loss, axis=axis), xp.squeeze(rival, axis=axis)


_LOSSES: dict[str, OutputLoss] = {CROSS_ENTROPY: CrossEntropy(), HINGE: Hinge()}


def output_loss(params: Sequence[np.ndarray]) -> OutputLoss:
    """The loss of these parameters' output layer (stacked or not): the one their
    :func:`loss_tag` names, the cross-entropy without one.

    Raises
    ------
    UsageError
        For a tag that names no loss.
    """
    if len(params) % 2 == 0:
        return _LOSSES[CROSS_ENTROPY]
    tag = params[-1]
    code = tag.shape[-1] if tag.ndim >= 2 and tag.size == 0 else -1
    if not 0 < code < len(LOSSES):
        raise UsageError(f"the model's last array (shape {tag.shape}) is no loss tag: "
                         f"parameters are weight and bias pairs, then one tag or none")
    return _LOSSES[LOSSES[code]]


class ForwardBuffers(Protocol):
    """Arrays :func:`forward_terms` writes into instead of fresh ones (the trainer's
    :class:`~mel_opt.training.mlp.StepBuffers`): each hidden layer's activations (>= K, m, n)
    and the output layer's class-major terms (>= K, classes, m)."""

    hidden: list[np.ndarray]
    e: np.ndarray


def forward_terms(params: Params, x: np.ndarray, work: ForwardBuffers | None = None
                  ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray | None]:
    """The forward pass up to the output loss's terms (:meth:`OutputLoss.finish`).

    Parameters
    ----------
    params : list of ndarray
        Stacked parameters (see :func:`stacked_forward`).
    x : ndarray, shape (K, m, features)
    work : ForwardBuffers, optional
        Arrays to write the activations and ``e`` into (fresh ones where not given).

    Returns
    -------
    acts : list of ndarray
        The input ``x`` and every hidden activation, each (K, m, n).
    e : ndarray, shape (K, classes, m)
        The output scores z, class axis before the sample axis, as the output loss leaves
        them: exp(z - max_c z) for the cross-entropy (the softmax is e / s), z itself for the
        hinge. It is a view of a class-major (classes, K, m) array, so the reductions over the
        class axis run over the outermost axis (numpy reduces a short innermost axis row by
        row, far slower); the product writes it in that layout directly, as z^T = W^T a^T
        (BLAS takes the transposed operands as they are).
    s : ndarray, shape (K, 1, m), or None
        The class sums of ``e`` (cross-entropy); None for the hinge.
    """
    xp = array_module(x)
    acts = [x]
    n_layers = layer_count(params)
    K = x.shape[0]
    for i in range(n_layers - 1):
        z = xp.matmul(acts[-1], params[2 * i], out=None if work is None else work.hidden[i][:K])
        z += params[2 * i + 1][:, None, :]
        acts.append(xp.maximum(z, 0, out=z))
    w_out, b_out = params[2 * n_layers - 2], params[2 * n_layers - 1]
    classes = w_out.shape[2]
    if work is None:
        e = xp.empty((classes, K, x.shape[1]),
                     dtype=np.result_type(w_out.dtype, x.dtype)).transpose(1, 0, 2)
    else:
        e = work.e[:K]
    xp.matmul(w_out.transpose(0, 2, 1), acts[-1].transpose(0, 2, 1), out=e)
    e += b_out[:, :, None]
    return acts, e, output_loss(params).finish(e)


def stacked_forward(params: Params, x: np.ndarray) -> list[np.ndarray]:
    """Activations of every layer for learners' minibatches ``x`` of shape (K, m, features).

    ``params`` are stacked over the learner axis (W_i: (K, n_in, n_out), b_i: (K, n_out)).
    The last entry is the model's output (K, m, classes) (a transposed view): the softmax
    probabilities (cross-entropy) or the scores (hinge).
    """
    acts, e, s = forward_terms(params, x)
    return [*acts, output_loss(params).output(e, s).transpose(0, 2, 1)]


def stacked_loss(params: Params, x: np.ndarray, y: np.ndarray,
                 weight: np.ndarray | None = None) -> np.ndarray:
    """The output loss per learner, sum_i weight_i loss_i (default weight 1/m) (K,): the mean
    cross-entropy -log p_i[y_i] or the mean hinge (:func:`output_loss`)."""
    per_sample = output_loss(params).losses(stacked_forward(params, x)[-1], y)
    if weight is None:
        return per_sample.mean(axis=1)
    return (per_sample * weight).sum(axis=1)


def stacked_gradients(params: Params, x: np.ndarray, y: np.ndarray | None,
                      weight: np.ndarray, target: np.ndarray | None = None) -> Params:
    """Gradients of :func:`stacked_loss` (with ``weight``) for every learner at once.

    Parameters
    ----------
    params : list of ndarray
        Stacked parameters (see :func:`stacked_forward`).
    x : ndarray, shape (K, m, features)
    y : ndarray of int, shape (K, m)
        Class indices (not read when ``target`` is given).
    weight : ndarray, shape (K, m)
        Per-sample weight of the loss: 1/m_k on the m_k real samples of learner k's minibatch
        and 0 on padding, so ragged minibatches give each learner its own mean loss.
    target : ndarray, shape (K, classes, m), optional
        The one-hot labels times ``weight``, class axis before the sample axis, when the
        caller has them (the batched trainer builds them for many steps at once).

    Returns
    -------
    list of ndarray
        One per parameter, of its shape (the loss tag's: empty).
    """
    xp = array_module(x)
    acts, e, s = forward_terms(params, x)
    m = weight.shape[1]
    # d loss / d scores, class-major (K, C, m)
    g = output_loss(params).score_gradient(e, s, weight, y, target)
    n_layers = layer_count(params)
    grads: Params = [np.empty(0)] * (2 * n_layers) + [xp.zeros_like(a)
                                                      for a in params[2 * n_layers:]]
    ones = xp.ones((m, 1), dtype=g.dtype)  # sums over the minibatch as products (faster)
    grads[2 * n_layers - 2] = acts[-1].transpose(0, 2, 1) @ g.transpose(0, 2, 1)
    grads[2 * n_layers - 1] = (g @ ones)[:, :, 0]
    if n_layers > 1:  # back to sample-major (K, m, n) for the hidden layers
        g = g.transpose(0, 2, 1) @ params[2 * n_layers - 2].transpose(0, 2, 1)
        g *= acts[-1] > 0  # the derivative of ReLU
    ones = ones.T
    for i in range(n_layers - 2, -1, -1):
        grads[2 * i] = acts[i].transpose(0, 2, 1) @ g
        grads[2 * i + 1] = (ones @ g)[:, 0, :]
        if i > 0:
            g = g @ params[2 * i].transpose(0, 2, 1)
            g *= acts[i] > 0
    return grads


class MLP:
    """One ReLU multilayer perceptron with its output loss, trained by minibatch SGD.

    Parameters
    ----------
    layers : sequence of int
        Widths from input to output (default TwoNN: 784, 50, 20, 10); a :class:`Layers` also
        gives the output loss (plain widths: softmax and cross-entropy).
    seed : int
        Seed of the weight initialisation.
    dtype : numpy dtype
        float32 (benchmarks) or float64 (gradient checks).
    """

    def __init__(self, layers: Sequence[int] = TWONN_LAYERS, seed: int = 0,
                 dtype: DTypeLike = np.float32) -> None:
        self.layers = Layers(layers, getattr(layers, "loss", CROSS_ENTROPY))
        self.dtype = np.dtype(dtype)
        p = init_params(self.layers, seed, self.dtype)
        n = layer_count(p)
        self.weights: list[np.ndarray] = p[0:2 * n:2]
        self.biases: list[np.ndarray] = p[1:2 * n:2]
        self._tag = p[2 * n:]  # the loss tag, where the loss is not the cross-entropy

    def _stacked(self) -> Params:
        out: Params = []
        for w, b in zip(self.weights, self.biases, strict=True):
            out += [w[None], b[None]]
        return out + [t[None] for t in self._tag]

    @property
    def parameter_count(self) -> int:
        return int(sum(w.size + b.size for w, b in zip(self.weights, self.biases, strict=True)))

    @property
    def parameter_bytes(self) -> int:
        """Size of the parameters [bytes] (Omega_m of Eq. 3.1 for this model)."""
        return self.parameter_count * self.dtype.itemsize

    def forward(self, x: np.ndarray) -> list[np.ndarray]:
        """Activations of every layer for a batch ``x`` (last entry: the output, softmax
        probabilities or hinge scores)."""
        return [a[0] for a in stacked_forward(self._stacked(), x[None])]

    def loss(self, x: np.ndarray, y: np.ndarray) -> float:
        """Mean output loss of labels ``y`` (class indices): the categorical cross-entropy
        (Eq. 3.6) or the hinge (:class:`Hinge`)."""
        return float(stacked_loss(self._stacked(), x[None], np.asarray(y)[None])[0])

    def gradients(self, x: np.ndarray, y: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Gradients of :meth:`loss` with respect to every weight matrix and bias vector."""
        n = x.shape[0]
        w = np.full((1, n), 1.0 / n, dtype=self.dtype)
        g = stacked_gradients(self._stacked(), x[None], np.asarray(y)[None], w)
        pairs = 2 * len(self.weights)  # the loss tag's gradient (empty) is not returned
        return [a[0] for a in g[0:pairs:2]], [a[0] for a in g[1:pairs:2]]

    def sgd_pass(self, x: np.ndarray, y: np.ndarray, *, lr: float = 0.1,
                 batch_size: int = 32) -> None:
        """One pass of minibatch SGD over ``x`` (samples x features) in order."""
        for start in range(0, x.shape[0], batch_size):
            gw, gb = self.gradients(x[start:start + batch_size], y[start:start + batch_size])
            for w, b, dw, db in zip(self.weights, self.biases, gw, gb, strict=True):
                w -= lr * dw
                b -= lr * db

    def train_flops_per_sample(self) -> float:
        """Floating-point operations of one SGD step per sample, counted on the matrix products.

        Forward 2 n_in n_out per layer, the weight gradient as much again, and the input
        gradient for every layer but the first (the bias, activation and softmax terms are
        lower order). The FLOPS baseline divides this by the measured FLOP rate.
        """
        pairs = [a * b for a, b in zip(self.layers[:-1], self.layers[1:], strict=True)]
        return float(2 * sum(pairs) + 2 * sum(pairs) + 2 * sum(pairs[1:]))


def forward_flops_per_sample(layers: Sequence[int]) -> float:
    """Floating-point operations of one forward pass (inference) over one sample, counted on
    the matrix products as :meth:`MLP.train_flops_per_sample` does: 2 n_in n_out per layer (a
    multiply and an add per weight; the bias and activation terms are lower order).

    The TwoNN [784, 50, 20, 10] gives 2 x (39,200 + 1,000 + 200) = 80,800; the DNN of paper
    000 [784, 300, 124, 60, 10] gives 2 x 280,440 = 560,880.
    """
    widths = [int(n) for n in layers]
    return float(2 * sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=False)))


def twonn(seed: int = 0) -> MLP:
    """A fresh TwoNN [784, 50, 20, 10] in float32."""
    return MLP(TWONN_LAYERS, seed=seed)
