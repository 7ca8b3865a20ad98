"""The one multilayer perceptron of mel_opt, in numpy, for one model or many at once.

A feed-forward classifier with ReLU hidden layers, a softmax output and the mean categorical
cross-entropy (thesis Eq. 3.6), trained by plain minibatch SGD. Weights start as PyTorch's
``nn.Linear`` does: U(-1/sqrt(fan_in), 1/sqrt(fan_in)). With no hidden layer it is softmax
(multinomial logistic) regression.

The arithmetic lives in :func:`stacked_forward` and :func:`stacked_gradients`, which work on
parameters stacked over a leading *learner axis* (shape (K, n_in, n_out) and (K, n_out)) and
on minibatches of shape (K, m, features) with a per-sample weight (K, m). K learners with
different models and different (ragged) minibatches are one batched computation; a single
model is the case K = 1. The training emulator's in-place step,
:func:`mel_opt.training.mlp.stacked_sgd_step`, is the same arithmetic with the update done in
place. :class:`MLP` wraps one model for subset benchmarking and tests.

This module imports nothing of mel_opt but its errors, so that the training emulator, live
runs and subset benchmarking (:mod:`mel_opt.subset_benchmarking`) all take the model from
here without importing one another.

Named shapes (:data:`MODELS`, adapted to a data set by :func:`layers_for`):

- ``softmax``: [F, C], softmax regression;
- ``twonn``: [F, 50, 20, C], the TwoNN of the thesis' DAB experiments (Section 3.4.1), whose
  input is 784 on MNIST;
- ``mlp000``: [F, 300, 124, 60, C], the DNN of paper 000, Section V-A (784 inputs on MNIST).

F is the number of input features and C the number of classes of the data set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import DTypeLike

from mel_opt.errors import UsageError

TWONN_LAYERS: tuple[int, ...] = (784, 50, 20, 10)

# Hidden widths of the named models (input and output come from the data set).
HIDDEN: dict[str, tuple[int, ...]] = {
    "softmax": (),
    "twonn": (50, 20),
    "mlp000": (300, 124, 60),
}
MODELS = {"twonn": TWONN_LAYERS}  # the subset_benchmarking package's model table (MNIST input)

Params = list[np.ndarray]  # [W_1, b_1, W_2, b_2, ...], each with a leading learner axis


def check_model(name: str) -> None:
    """Refuse a model name :func:`layers_for` does not know (UsageError listing the known)."""
    if name not in HIDDEN:
        raise UsageError(f"unknown model {name!r}; choose one of {', '.join(HIDDEN)}")


def layers_for(name: str, features: int, classes: int) -> tuple[int, ...]:
    """Layer widths of the named model for ``features`` inputs and ``classes`` outputs.

    Raises
    ------
    UsageError
        For an unknown name (the message lists the known ones).
    """
    check_model(name)
    return (int(features), *HIDDEN[name], int(classes))


def init_params(layers: Sequence[int], seed: int = 0, dtype: DTypeLike = np.float64) -> Params:
    """Fresh parameters [W_1, b_1, ...] for one model (no learner axis), PyTorch-style uniform."""
    if len(layers) < 2 or any(int(n) < 1 for n in layers):
        raise ValueError(f"layers must be at least two positive widths, got {layers!r}")
    rng = np.random.default_rng(seed)
    out: Params = []
    for n_in, n_out in zip(layers[:-1], layers[1:], strict=True):
        bound = 1.0 / np.sqrt(n_in)
        out.append(rng.uniform(-bound, bound, (n_in, n_out)).astype(dtype))
        out.append(rng.uniform(-bound, bound, n_out).astype(dtype))
    return out


class ForwardBuffers(Protocol):
    """Arrays :func:`forward_terms` writes into instead of fresh ones (the trainer's
    :class:`~mel_opt.training.mlp.StepBuffers`): each hidden layer's activations (>= K, m, n)
    and the softmax's class-major terms (>= K, classes, m)."""

    hidden: list[np.ndarray]
    e: np.ndarray


def forward_terms(params: Params, x: np.ndarray, work: ForwardBuffers | None = None
                  ) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The forward pass up to the softmax's unnormalised terms.

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
        exp(z - max_c z) of the output logits z, class axis before the sample axis: the
        softmax is e / s. It is a view of a class-major (classes, K, m) array, so the
        reductions over the class axis run over the outermost axis (numpy reduces a short
        innermost axis row by row, far slower); the product writes it in that layout
        directly, as z^T = W^T a^T (BLAS takes the transposed operands as they are).
    s : ndarray, shape (K, 1, m)
        The class sums of ``e``.
    """
    acts = [x]
    n_layers = len(params) // 2
    K = x.shape[0]
    for i in range(n_layers - 1):
        z = np.matmul(acts[-1], params[2 * i], out=None if work is None else work.hidden[i][:K])
        z += params[2 * i + 1][:, None, :]
        acts.append(np.maximum(z, 0, out=z))
    w_out, b_out = params[-2], params[-1]
    classes = w_out.shape[2]
    if work is None:
        e = np.empty((classes, K, x.shape[1]),
                     dtype=np.result_type(w_out, x)).transpose(1, 0, 2)
    else:
        e = work.e[:K]
    np.matmul(w_out.transpose(0, 2, 1), acts[-1].transpose(0, 2, 1), out=e)
    e += b_out[:, :, None]
    e -= np.maximum.reduce(e, axis=1, keepdims=True)  # the shift keeps exp finite
    np.exp(e, out=e)
    return acts, e, np.add.reduce(e, axis=1, keepdims=True)


def stacked_forward(params: Params, x: np.ndarray) -> list[np.ndarray]:
    """Activations of every layer for learners' minibatches ``x`` of shape (K, m, features).

    ``params`` are stacked over the learner axis (W_i: (K, n_in, n_out), b_i: (K, n_out)).
    The last entry is the softmax output (K, m, classes) (a transposed view).
    """
    acts, e, s = forward_terms(params, x)
    e /= s
    return [*acts, e.transpose(0, 2, 1)]


def stacked_loss(params: Params, x: np.ndarray, y: np.ndarray,
                 weight: np.ndarray | None = None) -> np.ndarray:
    """Cross-entropy per learner, sum_i weight_i (-log p_i[y_i]) (default weight 1/m) (K,)."""
    p = stacked_forward(params, x)[-1]
    picked = np.take_along_axis(p, y[:, :, None], axis=2)[:, :, 0]
    nll = -np.log(np.maximum(picked, 1e-12))
    if weight is None:
        return np.asarray(nll.mean(axis=1))
    return np.asarray((nll * weight).sum(axis=1))


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
    """
    acts, e, s = forward_terms(params, x)
    K, m = weight.shape
    # d loss / d logits of softmax + cross-entropy, per sample: weight * (softmax - one-hot),
    # the softmax's division folded into the (K, 1, m) factor weight / s; class-major (K, C, m)
    g = e
    g *= weight[:, None, :] / s
    if target is None:
        g[np.arange(K)[:, None], y, np.arange(m)] -= weight
    else:
        g -= target
    n_layers = len(params) // 2
    grads: Params = [np.empty(0)] * len(params)
    ones = np.ones((m, 1), dtype=g.dtype)  # sums over the minibatch as products (faster)
    grads[-2] = acts[-1].transpose(0, 2, 1) @ g.transpose(0, 2, 1)
    grads[-1] = (g @ ones)[:, :, 0]
    if n_layers > 1:  # back to sample-major (K, m, n) for the hidden layers
        g = g.transpose(0, 2, 1) @ params[-2].transpose(0, 2, 1)
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
    """One ReLU multilayer perceptron with a softmax output, trained by minibatch SGD.

    Parameters
    ----------
    layers : sequence of int
        Widths from input to output (default TwoNN: 784, 50, 20, 10).
    seed : int
        Seed of the weight initialisation.
    dtype : numpy dtype
        float32 (benchmarks) or float64 (gradient checks).
    """

    def __init__(self, layers: Sequence[int] = TWONN_LAYERS, seed: int = 0,
                 dtype: DTypeLike = np.float32) -> None:
        self.layers = tuple(int(n) for n in layers)
        self.dtype = np.dtype(dtype)
        p = init_params(self.layers, seed, self.dtype)
        self.weights: list[np.ndarray] = p[0::2]
        self.biases: list[np.ndarray] = p[1::2]

    def _stacked(self) -> Params:
        out: Params = []
        for w, b in zip(self.weights, self.biases, strict=True):
            out += [w[None], b[None]]
        return out

    @property
    def parameter_count(self) -> int:
        return int(sum(w.size + b.size for w, b in zip(self.weights, self.biases, strict=True)))

    @property
    def parameter_bytes(self) -> int:
        """Size of the parameters [bytes] (Omega_m of Eq. 3.1 for this model)."""
        return self.parameter_count * self.dtype.itemsize

    def forward(self, x: np.ndarray) -> list[np.ndarray]:
        """Activations of every layer for a batch ``x`` (last entry: softmax probabilities)."""
        return [a[0] for a in stacked_forward(self._stacked(), x[None])]

    def loss(self, x: np.ndarray, y: np.ndarray) -> float:
        """Mean categorical cross-entropy (Eq. 3.6) of labels ``y`` (class indices)."""
        return float(stacked_loss(self._stacked(), x[None], np.asarray(y)[None])[0])

    def gradients(self, x: np.ndarray, y: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Gradients of :meth:`loss` with respect to every weight matrix and bias vector."""
        n = x.shape[0]
        w = np.full((1, n), 1.0 / n, dtype=self.dtype)
        g = stacked_gradients(self._stacked(), x[None], np.asarray(y)[None], w)
        return [a[0] for a in g[0::2]], [a[0] for a in g[1::2]]

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


def twonn(seed: int = 0) -> MLP:
    """A fresh TwoNN [784, 50, 20, 10] in float32."""
    return MLP(TWONN_LAYERS, seed=seed)
