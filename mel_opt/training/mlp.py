"""The training emulator's in-place SGD step of the MLP over a learner axis.

:func:`stacked_sgd_step` is the arithmetic of :func:`mel_opt.mlp.stacked_gradients` with the
update done in place, into arrays (:class:`StepBuffers`) it reuses from step to step; a large
weight matrix is updated learner by learner by one BLAS gemm (:mod:`mel_opt.training.gemm`).
The model itself (named shapes, initialisation, forward pass, the output losses and their
gradients, the single-model :class:`~mel_opt.mlp.MLP`) is :mod:`mel_opt.mlp`, which subset
benchmarking uses too; its names are re-exported here, where the training and live modules
import them. The step takes the output loss from the parameters
(:func:`~mel_opt.mlp.output_loss`), as every function of the model does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from mel_opt.arrays import array_module
from mel_opt.mlp import (
    HIDDEN,
    LOSS_OF,
    LOSSES,
    MLP,
    MODELS,
    TWONN_LAYERS,
    ForwardBuffers,
    Layers,
    Params,
    forward_terms,
    init_params,
    layer_count,
    layers_for,
    loss_of,
    output_loss,
    stacked_forward,
    stacked_gradients,
    stacked_loss,
    twonn,
)
from mel_opt.training import gemm

__all__ = [
    "HIDDEN",
    "LOSSES",
    "LOSS_OF",
    "MLP",
    "MODELS",
    "PER_LEARNER_BYTES",
    "TWONN_LAYERS",
    "ForwardBuffers",
    "Layers",
    "Params",
    "StepBuffers",
    "forward_terms",
    "init_params",
    "layer_count",
    "layers_for",
    "loss_of",
    "output_loss",
    "stacked_forward",
    "stacked_gradients",
    "stacked_loss",
    "stacked_sgd_step",
    "twonn",
]

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
    xp : array module, optional
        Where the buffers live (numpy; CuPy for a GPU). Off the host every weight gradient
        is formed for all learners at once (one batched product: a device does not want
        a call per learner), whatever its size.
    """

    def __init__(self, layers: Sequence[int], K: int, m: int, dtype: DTypeLike,
                 xp: Any = np) -> None:
        dt = np.dtype(dtype)
        hidden = [int(n) for n in layers[1:-1]]
        #: the hidden layers' activations (K, m, n) and the gradients passed down to them
        self.hidden = [xp.empty((K, m, n), dtype=dt) for n in hidden]
        self.down = [xp.empty((K, m, n), dtype=dt) for n in hidden]
        self.active = [xp.empty((K, m, n), dtype=bool) for n in hidden]
        #: the output layer's terms, class-major (see :func:`~mel_opt.mlp.forward_terms`)
        self.e = xp.empty((int(layers[-1]), K, m), dtype=dt).transpose(1, 0, 2)
        #: each weight matrix's gradient: one learner's where it is formed learner by
        #: learner (PER_LEARNER_BYTES, on the host), else every learner's
        self.grad: list[np.ndarray] = []
        for n_in, n_out in zip(layers[:-1], layers[1:], strict=True):
            one = (int(n_in), int(n_out))
            big = xp is np and K > 1 and n_in * n_out * dt.itemsize >= PER_LEARNER_BYTES
            self.grad.append(xp.empty(one if big else (K, *one), dtype=dt))
        self.bias = [xp.empty((K, 1, int(n)), dtype=dt) for n in layers[1:]]
        self.ones = xp.ones((m, 1), dtype=dt)

    @classmethod
    def for_params(cls, params: Params, m: int, dtype: DTypeLike) -> StepBuffers:
        """Buffers for steps of these stacked parameters (their learners and widths), where
        the parameters live."""
        weights = params[0:2 * layer_count(params):2]
        return cls([params[0].shape[1], *(w.shape[2] for w in weights)],
                   params[0].shape[0], m, dtype, array_module(params[0]))


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
    xp = array_module(w)
    if buf is None:
        per_learner = xp is np and K > 1 and w[0].nbytes >= PER_LEARNER_BYTES
        buf = xp.empty(w.shape[1:] if per_learner else w.shape,
                       dtype=np.result_type(a.dtype, g.dtype))
    if buf.ndim == 3:
        w -= xp.matmul(a.transpose(0, 2, 1), g, out=buf[:K])
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

    The arithmetic of :func:`stacked_gradients` (with ``target``; the output loss the
    parameters carry) followed by ``params[i] -= grads[i]``, with the learning rate folded
    into ``weight`` (lr / m_k on the real samples): bit for bit, except that a large weight
    matrix (:data:`PER_LEARNER_BYTES`) is updated learner by learner by one BLAS gemm
    (:func:`_subtract_product`), whose sums may be accumulated in another order. It uses less
    memory traffic: each layer is updated as soon as its gradient and the gradient it passes
    down are known.

    Parameters
    ----------
    params : list of ndarray
        Stacked parameters (see :func:`stacked_forward`), updated in place (a loss tag stays
        as it is).
    x : ndarray, shape (K, m, features)
    weight : ndarray, shape (K, m)
    target : ndarray, shape (K, classes, m)
        The one-hot labels times ``weight``, class axis before the sample axis.
    work : StepBuffers, optional
        Arrays for the intermediate results, for at least K learners and minibatches of m
        (fresh ones where not given; the numbers are the same).
    """
    K, m = weight.shape
    xp = array_module(x)
    if work is None:
        work = StepBuffers.for_params(params, m, np.result_type(params[0].dtype, x.dtype))
    acts, e, s = forward_terms(params, x, work)
    # d loss / d scores, class-major (K, C, m), as in stacked_gradients
    g = output_loss(params).score_gradient(e, s, weight, None, target)
    n_layers = layer_count(params)
    ones = work.ones
    gs = g.transpose(0, 2, 1)  # the sample-major (K, m, n) view the weight gradients take
    for i in range(n_layers - 1, -1, -1):
        w, b = params[2 * i], params[2 * i + 1]
        db = work.bias[i][:K]  # (K, 1, n)
        if i == n_layers - 1:
            xp.matmul(g, ones, out=db.transpose(0, 2, 1))
        else:
            xp.matmul(ones.T, gs, out=db)
        down = None
        if i > 0:  # the gradient passed down, from the weights before this step's update
            down = xp.matmul(gs, w.transpose(0, 2, 1), out=work.down[i - 1][:K])
            active = xp.greater(acts[i], 0, out=work.active[i - 1][:K])
            down *= active  # the derivative of ReLU
        _subtract_product(w, acts[i], gs, work.grad[i])
        b -= db[:, 0, :]
        if down is not None:
            gs = down
