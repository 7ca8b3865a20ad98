"""The one multilayer perceptron of mel_opt, in numpy, for one model or many at once.

A feed-forward classifier with ReLU hidden layers, a softmax output and the mean categorical
cross-entropy (thesis Eq. 3.6), trained by plain minibatch SGD. Weights start as PyTorch's
``nn.Linear`` does: U(-1/sqrt(fan_in), 1/sqrt(fan_in)). With no hidden layer it is softmax
(multinomial logistic) regression.

The arithmetic lives in :func:`stacked_forward` and :func:`stacked_gradients`, which work on
parameters stacked over a leading *learner axis* (shape (K, n_in, n_out) and (K, n_out)) and
on minibatches of shape (K, m, features) with a per-sample weight (K, m). K learners with
different models and different (ragged) minibatches are one batched computation; a single
model is the case K = 1. The trainer's step, :func:`stacked_sgd_step`, is the same arithmetic
with the update done in place, into arrays (:class:`StepBuffers`) it reuses from step to step.
:class:`MLP` wraps one model for subset benchmarking and tests.

Named shapes (:data:`MODELS`, adapted to a data set by :func:`layers_for`):

- ``softmax``: [F, C], softmax regression;
- ``twonn``: [F, 50, 20, C], the TwoNN of the thesis' DAB experiments (Section 3.4.1), whose
  input is 784 on MNIST;
- ``mlp000``: [F, 300, 124, 60, C], the DNN of paper 000, Section V-A (784 inputs on MNIST).

F is the number of input features and C the number of classes of the data set.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import DTypeLike

from mel_opt.errors import UsageError
from mel_opt.training import gemm

TWONN_LAYERS: tuple[int, ...] = (784, 50, 20, 10)

# Hidden widths of the named models (input and output come from the data set).
HIDDEN: dict[str, tuple[int, ...]] = {
    "softmax": (),
    "twonn": (50, 20),
    "mlp000": (300, 124, 60),
}
MODELS = {"twonn": TWONN_LAYERS}  # the subset_benchmarking package's model table (MNIST input)

Params = list[np.ndarray]  # [W_1, b_1, W_2, b_2, ...], each with a leading learner axis


def layers_for(name: str, features: int, classes: int) -> tuple[int, ...]:
    """Layer widths of the named model for ``features`` inputs and ``classes`` outputs.

    Raises
    ------
    UsageError
        For an unknown name (the message lists the known ones).
    """
    try:
        hidden = HIDDEN[name]
    except KeyError:
        raise UsageError(f"unknown model {name!r}; choose one of {', '.join(HIDDEN)}") from None
    return (int(features), *hidden, int(classes))


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


def _forward(params: Params, x: np.ndarray,
             work: StepBuffers | None = None) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The forward pass up to the softmax's unnormalised terms.

    Parameters
    ----------
    params : list of ndarray
        Stacked parameters (see :func:`stacked_forward`).
    x : ndarray, shape (K, m, features)
    work : StepBuffers, optional
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
    acts, e, s = _forward(params, x)
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
    acts, e, s = _forward(params, x)
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


#: Bytes of one learner's weight matrix from which :func:`stacked_sgd_step` subtracts its
#: gradient learner by learner, product and update in one BLAS call, instead of forming a
#: (K, n_in, n_out) gradient array and reading it back for the update: the first layer of
#: mlp000 on 784 pixels (0.9 MB a learner in float32), not the small layers, where the per-
#: learner Python calls would cost more than the memory traffic saved
PER_LEARNER_BYTES = 1 << 18


class StepBuffers:
    """The arrays :func:`stacked_sgd_step` writes into, allocated once for many steps.

    Fresh arrays every step cost more than their arithmetic where the allocator hands the
    larger ones back to the system and takes them again (page faults: measured 600-1,800 a
    step of mlp000 with 20 learners on 64 features, up to half of the step's time; 170,000
    over the full-size run of ``benchmarks/bench_train.py fullsize``, 37,000 with these).
    Sized for ``K`` learners and minibatches of ``m``; a step of fewer learners uses the
    leading part.

    Parameters
    ----------
    layers : sequence of int
        Widths from input to output.
    K, m : int
        Learners and minibatch size.
    dtype : numpy dtype
    """

    def __init__(self, layers: Sequence[int], K: int, m: int, dtype: DTypeLike) -> None:
        dt = np.dtype(dtype)
        hidden = [int(n) for n in layers[1:-1]]
        #: the hidden layers' activations (K, m, n) and the gradients passed down to them
        self.hidden = [np.empty((K, m, n), dtype=dt) for n in hidden]
        self.down = [np.empty((K, m, n), dtype=dt) for n in hidden]
        self.active = [np.empty((K, m, n), dtype=bool) for n in hidden]
        #: the softmax's terms, class-major (see :func:`_forward`)
        self.e = np.empty((int(layers[-1]), K, m), dtype=dt).transpose(1, 0, 2)
        #: each weight matrix's gradient: one learner's where it is formed learner by
        #: learner (PER_LEARNER_BYTES), else every learner's
        self.grad: list[np.ndarray] = []
        for n_in, n_out in zip(layers[:-1], layers[1:], strict=True):
            one = (int(n_in), int(n_out))
            big = K > 1 and n_in * n_out * dt.itemsize >= PER_LEARNER_BYTES
            self.grad.append(np.empty(one if big else (K, *one), dtype=dt))
        self.bias = [np.empty((K, 1, int(n)), dtype=dt) for n in layers[1:]]
        self.ones = np.ones((m, 1), dtype=dt)

    @classmethod
    def for_params(cls, params: Params, m: int, dtype: DTypeLike) -> StepBuffers:
        """Buffers for steps of these stacked parameters (their learners and widths)."""
        return cls([params[0].shape[1], *(w.shape[2] for w in params[0::2])],
                   params[0].shape[0], m, dtype)


def _subtract_product(w: np.ndarray, a: np.ndarray, g: np.ndarray,
                      buf: np.ndarray | None = None) -> None:
    """w -= a^T g for every learner (w: (K, n_in, n_out), a: (K, m, n_in), g: (K, m, n_out)).

    ``buf``: where to form the gradient, of shape (n_in, n_out) (learner by learner) or
    (>= K, n_in, n_out) (the batched ``a.transpose(0, 2, 1) @ g``, which numpy forms one
    learner at a time: the same numbers bit for bit). Learner by learner with AVX-512 kernels
    (:mod:`mel_opt.training.gemm`), BLAS's gemm does the product and the subtraction in one
    pass, w_k := w_k + (-1) a_k^T g_k, without writing the gradient out and reading it back.
    It is the same sum of the same products, rounded once more only where numpy's and
    scipy's BLAS builds accumulate the m products in different orders.
    """
    K = w.shape[0]
    if buf is None:
        per_learner = K > 1 and w[0].nbytes >= PER_LEARNER_BYTES
        buf = np.empty(w.shape[1:] if per_learner else w.shape, dtype=np.result_type(a, g))
    if buf.ndim == 3:
        w -= np.matmul(a.transpose(0, 2, 1), g, out=buf[:K])
        return
    subtract = gemm.one_pass(w.dtype)
    for k in range(K):
        wk = w[k]
        if subtract is None or not subtract(wk, a[k], g[k]):
            np.matmul(a[k].T, g[k], out=buf)
            wk -= buf


def stacked_sgd_step(params: Params, x: np.ndarray, weight: np.ndarray,
                     target: np.ndarray, work: StepBuffers | None = None) -> None:
    """One SGD step of every learner, in place: each parameter minus its gradient.

    The arithmetic of :func:`stacked_gradients` (with ``target``) followed by
    ``params[i] -= grads[i]``, with the learning rate folded into ``weight`` (lr / m_k on the
    real samples): bit for bit, except that a large weight matrix (:data:`PER_LEARNER_BYTES`)
    is updated learner by learner by one BLAS gemm (:func:`_subtract_product`), whose sums
    may be accumulated in another order. It uses less memory traffic: each layer is updated
    as soon as its gradient and the gradient it passes down are known.

    Parameters
    ----------
    params : list of ndarray
        Stacked parameters (see :func:`stacked_forward`), updated in place.
    x : ndarray, shape (K, m, features)
    weight : ndarray, shape (K, m)
    target : ndarray, shape (K, classes, m)
        The one-hot labels times ``weight``, class axis before the sample axis.
    work : StepBuffers, optional
        Arrays for the intermediate results, for at least K learners and minibatches of m
        (fresh ones where not given; the numbers are the same).
    """
    K, m = weight.shape
    if work is None:
        work = StepBuffers.for_params(params, m, np.result_type(params[0], x))
    acts, e, s = _forward(params, x, work)
    g = e  # class-major (K, C, m), as in stacked_gradients
    g *= weight[:, None, :] / s
    g -= target
    n_layers = len(params) // 2
    ones = work.ones
    gs = g.transpose(0, 2, 1)  # the sample-major (K, m, n) view the weight gradients take
    for i in range(n_layers - 1, -1, -1):
        w, b = params[2 * i], params[2 * i + 1]
        db = work.bias[i][:K]  # (K, 1, n)
        if i == n_layers - 1:
            np.matmul(g, ones, out=db.transpose(0, 2, 1))
        else:
            np.matmul(ones.T, gs, out=db)
        down = None
        if i > 0:  # the gradient passed down, from the weights before this step's update
            down = np.matmul(gs, w.transpose(0, 2, 1), out=work.down[i - 1][:K])
            active = np.greater(acts[i], 0, out=work.active[i - 1][:K])
            down *= active  # the derivative of ReLU
        _subtract_product(w, acts[i], gs, work.grad[i])
        b -= db[:, 0, :]
        if down is not None:
            gs = down


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
