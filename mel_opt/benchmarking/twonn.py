"""TwoNN in numpy: the network of the thesis' DAB experiments (Section 3.4.1).

A feed-forward classifier with layer widths [784, 50, 20, 10], ReLU on the hidden layers,
softmax output and categorical cross-entropy (Eq. 3.6), trained by plain SGD (learning rate
0.1 in the thesis). Written with numpy only (no torch) so subset benchmarking runs anywhere
mel_opt does. Weights start as PyTorch's ``nn.Linear`` does: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import DTypeLike

TWONN_LAYERS: tuple[int, ...] = (784, 50, 20, 10)


class MLP:
    """A ReLU multilayer perceptron with a softmax output, trained by minibatch SGD.

    Parameters
    ----------
    layers : sequence of int
        Widths from input to output (default TwoNN: 784, 50, 20, 10).
    seed : int
        Seed of the weight initialisation.
    dtype : numpy dtype
        float32 (the benchmark) or float64 (gradient checks).
    """

    def __init__(self, layers: Sequence[int] = TWONN_LAYERS, seed: int = 0,
                 dtype: DTypeLike = np.float32) -> None:
        if len(layers) < 2 or any(int(n) < 1 for n in layers):
            raise ValueError(f"layers must be at least two positive widths, got {layers!r}")
        self.layers = tuple(int(n) for n in layers)
        self.dtype = np.dtype(dtype)
        rng = np.random.default_rng(seed)
        self.weights: list[np.ndarray] = []
        self.biases: list[np.ndarray] = []
        for n_in, n_out in zip(self.layers[:-1], self.layers[1:], strict=True):
            bound = 1.0 / np.sqrt(n_in)
            self.weights.append(rng.uniform(-bound, bound, (n_in, n_out)).astype(self.dtype))
            self.biases.append(rng.uniform(-bound, bound, n_out).astype(self.dtype))

    @property
    def parameter_count(self) -> int:
        return int(sum(w.size + b.size for w, b in zip(self.weights, self.biases, strict=True)))

    @property
    def parameter_bytes(self) -> int:
        """Size of the parameters [bytes] (Omega_m of Eq. 3.1 for this model)."""
        return self.parameter_count * self.dtype.itemsize

    def forward(self, x: np.ndarray) -> list[np.ndarray]:
        """Activations of every layer for a batch ``x`` (last entry: softmax probabilities)."""
        acts = [x]
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            z = acts[-1] @ w + b
            if i < last:
                acts.append(np.maximum(z, 0))
            else:
                z = z - z.max(axis=1, keepdims=True)
                e = np.exp(z)
                acts.append(e / e.sum(axis=1, keepdims=True))
        return acts

    def loss(self, x: np.ndarray, y: np.ndarray) -> float:
        """Mean categorical cross-entropy (Eq. 3.6) of labels ``y`` (class indices)."""
        p = self.forward(x)[-1]
        return float(-np.mean(np.log(np.maximum(p[np.arange(len(y)), y], 1e-12))))

    def gradients(self, x: np.ndarray, y: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Gradients of :meth:`loss` with respect to every weight matrix and bias vector."""
        acts = self.forward(x)
        n = x.shape[0]
        g = acts[-1].copy()
        g[np.arange(n), y] -= 1
        g /= n  # d loss / d logits of softmax + cross-entropy
        gw: list[np.ndarray] = [np.empty(0)] * len(self.weights)
        gb: list[np.ndarray] = [np.empty(0)] * len(self.weights)
        for i in range(len(self.weights) - 1, -1, -1):
            gw[i] = acts[i].T @ g
            gb[i] = g.sum(axis=0)
            if i > 0:
                g = (g @ self.weights[i].T) * (acts[i] > 0)
        return gw, gb

    def sgd_pass(self, x: np.ndarray, y: np.ndarray, *, lr: float = 0.1,
                 batch_size: int = 32) -> None:
        """One pass of minibatch SGD over ``x`` (samples x features) in order."""
        for start in range(0, x.shape[0], batch_size):
            xb = x[start:start + batch_size]
            yb = y[start:start + batch_size]
            gw, gb = self.gradients(xb, yb)
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


MODELS = {"twonn": TWONN_LAYERS}
