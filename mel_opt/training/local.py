"""The vectorised core: K learners' local SGD as one batched numpy computation.

Learner k runs ``epochs[k]`` passes of minibatch SGD over its own ``counts[k]`` samples, so the
learners take different numbers of steps S_k = epochs_k * ceil(counts_k / batch_size) and their
last minibatch of a pass may be short. Both kinds of raggedness are handled without a Python
loop over learners:

- short minibatches are padded and the loss of every sample is weighted by 1/m (0 on the
  padding), so each learner still takes the gradient of its own mean loss;
- learners are sorted by S_k (largest first), so at step j the learners still training are a
  *prefix* of the learner axis and the step works on views ``param[:m_j]``: no masking of
  whole learners, no copies, no wasted arithmetic on learners that have finished.

Learners are independent within a round, so :func:`local_sgd` can share them among threads
(``workers``); numpy releases the GIL in its products, and every learner's numbers are the same
whichever thread trains it.

:func:`make_schedule` draws every shuffle up front, so the batched trainer
(:func:`local_sgd`) and the plain per-learner loop (:func:`local_sgd_loop`, the reference the
tests and the benchmark compare against) consume exactly the same minibatches.

With a ``device`` other than the host (:mod:`mel_opt.training.device`: CuPy on a GPU) the same
code trains on the device's array module: the data set resident there, each round's schedule
(the rows and weights of the steps trained) and starting model uploaded, every learner in one
share, the trained models brought back for the aggregation; :func:`evaluate` scores there too.
The schedule is still drawn on the host, so a seed gives the same minibatches on either.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from mel_opt.arrays import put_along_axis, take_rows
from mel_opt.problems.learning import weighted_average as average
from mel_opt.training.device import CPU, Device
from mel_opt.training.mlp import (
    Params,
    StepBuffers,
    layer_count,
    output_loss,
    stacked_forward,
    stacked_gradients,
    stacked_sgd_step,
)

__all__ = ["Schedule", "average", "broadcast", "evaluate", "local_sgd", "local_sgd_loop",
           "make_schedule", "one_step_schedule"]

GATHER_BYTES = 1 << 25  # minibatch features gathered at once by local_sgd [bytes]
#: Validation samples :func:`evaluate` scores at once on a device (the host: 4,096)
DEVICE_CHUNK = 1 << 16
#: Matrix-product FLOPs a thread of local_sgd gets per step at least: below it, the threads'
#: Python work per step (serialised by the GIL) costs more than the products they share
MIN_SHARE_FLOP = 2e7


@dataclass(frozen=True, eq=False)
class Schedule:
    """Minibatches of every learner for one round of local training.

    Attributes
    ----------
    index : ndarray of int, shape (K, S, batch)
        Training-set row of every minibatch slot (0 on padding).
    weight : ndarray, shape (K, S, batch)
        Loss weight of every slot: 1/m on the m real samples of the minibatch, 0 on padding.
    steps : ndarray of int, shape (K,)
        S_k, the minibatches learner k trains on (the rest of its row is padding).
    """

    index: np.ndarray
    weight: np.ndarray
    steps: np.ndarray


def make_schedule(samples: list[np.ndarray], epochs: np.ndarray, batch_size: int,
                  rng: np.random.Generator, dtype: np.dtype | type = np.float64) -> Schedule:
    """Shuffled minibatches for ``epochs[k]`` passes of learner k over ``samples[k]``.

    Parameters
    ----------
    samples : list of K int arrays
        Training-set rows of each learner's local data (ragged).
    epochs : ndarray of int, shape (K,)
        Passes per learner (0: the learner does not train).
    batch_size : int
    rng : numpy Generator
        Draws a fresh permutation of each learner's data for every pass.
    """
    K = len(samples)
    counts = np.array([s.size for s in samples], dtype=np.int64)
    epochs = np.asarray(epochs, dtype=np.int64)
    nmax = max(int(counts.max()), 1)
    smax = -(-nmax // batch_size)
    emax = max(int(epochs.max()), 1)
    local = np.zeros((K, nmax), dtype=np.int64)
    for k, s in enumerate(samples):
        local[k, : s.size] = s
    pos = np.arange(nmax)
    real = pos[None, :] < counts[:, None]
    keys = rng.random((K, emax, nmax))
    keys[~np.broadcast_to(real[:, None, :], keys.shape)] = 2.0  # padding sorts last
    perm = np.argsort(keys, axis=2, kind="stable")  # (K, emax, nmax), real rows first
    pad = smax * batch_size - nmax
    perm = np.pad(perm, ((0, 0), (0, 0), (0, pad)), constant_values=nmax)
    slot_ok = perm < counts[:, None, None]
    perm = np.minimum(perm, nmax - 1)
    perm = perm.reshape(K, emax * smax, batch_size)
    slot_ok = slot_ok.reshape(K, emax * smax, batch_size)
    per_epoch = -(-counts // batch_size)
    e_of = np.repeat(np.arange(emax), smax)
    j_of = np.tile(np.arange(smax), emax)
    step_ok = (e_of[None, :] < epochs[:, None]) & (j_of[None, :] < per_epoch[:, None])
    order = np.argsort(~step_ok, axis=1, kind="stable")  # each learner's real steps first
    steps = step_ok.sum(axis=1)
    S = max(int(steps.max()), 1)
    order = order[:, :S]
    perm = np.take_along_axis(perm, order[:, :, None], axis=1)
    ok = np.take_along_axis(slot_ok, order[:, :, None], axis=1)
    ok &= (np.arange(S)[None, :] < steps[:, None])[:, :, None]
    index = local[np.arange(K)[:, None, None], perm]
    m = ok.sum(axis=2, keepdims=True)
    weight = np.where(ok, 1.0 / np.maximum(m, 1), 0.0).astype(dtype)
    return Schedule(index=np.where(ok, index, 0), weight=weight, steps=steps)


def one_step_schedule(samples: list[np.ndarray],
                      dtype: np.dtype | type = np.float64) -> Schedule:
    """One minibatch per learner holding all of its ``samples``: one gradient step each.

    The order of samples inside a minibatch does not change its gradient, so nothing is
    shuffled (no random numbers are drawn). A learner with no samples takes no step.
    """
    K = len(samples)
    counts = np.array([s.size for s in samples], dtype=np.int64)
    width = max(int(counts.max()) if K else 1, 1)
    index = np.zeros((K, 1, width), dtype=np.int64)
    real = np.arange(width)[None, :] < counts[:, None]
    for k, s in enumerate(samples):
        index[k, 0, : s.size] = s
    weight = np.where(real, 1.0 / np.maximum(counts[:, None], 1), 0.0).astype(dtype)[:, None, :]
    return Schedule(index=index, weight=weight, steps=(counts > 0).astype(np.int64))


def local_sgd(params: Params, x: np.ndarray, y: np.ndarray, sched: Schedule,
              lr: float, workers: int = 1, device: Device = CPU) -> Params:
    """Run every learner's minibatches of ``sched`` at once; returns the trained parameters
    (on the host, whichever ``device`` trains them).

    Parameters
    ----------
    params : list of ndarray
        Stacked parameters, leading axis K (not modified): host arrays, or ``device``'s
        (:func:`broadcast` there).
    x, y : ndarray
        The whole training set (features, labels), on the host; the schedule holds row
        numbers into it. Off the host their device copies are used (uploaded once,
        :meth:`~mel_opt.training.device.Device.resident`).
    sched : Schedule
    lr : float
        SGD learning rate.
    workers : int
        At most this many threads train the learners, each a share of them (learners are
        independent within a round, so the numbers do not depend on it). numpy releases the
        GIL in its products, so on free cores the shares run in parallel; fewer threads are
        used where a step's products are small (:data:`MIN_SHARE_FLOP` each at least). Keep
        BLAS at one thread meanwhile (:func:`mel_opt.subset_benchmarking.blas_threads`).
        Not read off the host: a device trains every learner in one share.
    device : Device
        Where to train (:mod:`mel_opt.training.device`; the host's numpy by default).
    """
    if not device.host:
        return _local_sgd_on(device, params, x, y, sched, lr)
    order = np.argsort(-sched.steps, kind="stable")
    pairs = sum(a.shape[1] * a.shape[2] for a in params[0:2 * layer_count(params):2])
    step_flop = 6.0 * pairs * sched.index.shape[2] * order.size  # forward and backward
    n = max(1, min(int(workers), order.size, int(step_flop // max(MIN_SHARE_FLOP, 1.0))))
    # learners dealt out in order of their step counts: every share has a similar amount of
    # work, and each share stays sorted by steps (what _train_sorted needs)
    shares = [order[i::n] for i in range(n)]
    out = [np.empty_like(a) for a in params]

    def run(share: np.ndarray) -> None:
        p = [a[share] for a in params]
        _train_sorted(p, x, y, sched.index[share], sched.weight[share], sched.steps[share], lr)
        for a, b in zip(out, p, strict=True):
            a[share] = b

    if n == 1:
        run(shares[0])
    else:
        with ThreadPoolExecutor(max_workers=n) as pool:
            for f in [pool.submit(run, share) for share in shares]:
                f.result()
    return out


def sorted_on(device: Device, params: Params, order: np.ndarray) -> Params:
    """The stacked ``params`` (host arrays or ``device``'s) on ``device``, learners in
    ``order``: fresh arrays there, which training may change in place."""
    if isinstance(params[0], np.ndarray):
        return [device.put(a[order]) for a in params]
    at = device.put(order)
    return [a[at] for a in params]


def unsorted_on_host(device: Device, p: Params, order: np.ndarray) -> Params:
    """``p`` (on ``device``, learners in ``order``) on the host, in the learners' order."""
    out = []
    for a in p:
        host = device.get(a)
        back = np.empty_like(host)
        back[order] = host
        out.append(back)
    return out


def _local_sgd_on(device: Device, params: Params, x: np.ndarray, y: np.ndarray,
                  sched: Schedule, lr: float) -> Params:
    """:func:`local_sgd` on a device: every learner at once, the data set resident there,
    the parameters uploaded (sorted by steps) and the trained ones brought back."""
    order = np.argsort(-sched.steps, kind="stable")
    p = sorted_on(device, params, order)
    _train_sorted(p, device.resident(x), device.resident(y), sched.index[order],
                  sched.weight[order], sched.steps[order], lr, device)
    return unsorted_on_host(device, p, order)


def _train_sorted(p: Params, x: np.ndarray, y: np.ndarray, index: np.ndarray,
                  weight: np.ndarray, steps: np.ndarray, lr: float,
                  device: Device = CPU) -> None:
    """:func:`local_sgd` on learners sorted by their step counts (largest first), in place.

    ``p``, ``x`` and ``y`` are ``device``'s arrays; the schedule (``index``, ``weight``,
    ``steps``) is the host's: the rows and weights of the steps trained are uploaded once,
    the step counts stay on the host (the loop reads them, the device never waits on it).
    """
    n_steps = int(steps.max()) if steps.size else 0
    bs = index.shape[2]
    # the learner-steps that are trained, step by step: at step j the learners still training
    # are a prefix of the sorted axis, active[j] long, and their minibatches are the rows
    # offsets[j]:offsets[j + 1] of `rows`, so nothing is gathered or computed for learners
    # that have finished and every step's slice of the gathered arrays is contiguous
    j_of, k_of = np.nonzero(steps[None, :] > np.arange(n_steps)[:, None])
    rows = index[k_of, j_of]
    coef = weight[k_of, j_of] * np.asarray(lr, dtype=weight.dtype)
    active = np.bincount(j_of, minlength=n_steps).tolist()
    offsets = np.concatenate([[0], np.cumsum(active, dtype=np.int64)])
    starts = offsets.tolist()
    xp = device.xp
    if not device.host:  # what crosses the bus each round: these two, compact
        rows = device.put(rows.astype(np.int32) if x.shape[0] < 2 ** 31 else rows)
        coef = device.put(coef)
    # minibatches are gathered for a block of steps at once (one fancy-indexing call instead
    # of one per step), the block kept to about GATHER_BYTES; the block's one-hot targets are
    # built in one call too, and the learning rate is folded into the loss weights, so a step
    # is the forward and backward products and one in-place update per parameter
    # (stacked_sgd_step); every array a step or a block writes is allocated once, here
    per_block = max(1, GATHER_BYTES // max(1, bs * x.shape[1] * x.itemsize))
    classes = p[2 * layer_count(p) - 1].shape[-1]  # the output bias's width
    K = p[0].shape[0]
    work = StepBuffers.for_params(p, bs, np.result_type(p[0].dtype, x.dtype))
    block = min(max(per_block, K), rows.shape[0])
    x_block = xp.empty((block, bs, x.shape[1]), dtype=x.dtype)
    t_block = xp.empty((block, classes, bs), dtype=coef.dtype)
    j0 = 0
    while j0 < n_steps:
        fits = int(np.searchsorted(offsets, offsets[j0] + per_block, side="right")) - 1
        j1 = min(max(j0 + 1, fits), n_steps)
        r0, r1 = starts[j0], starts[j1]
        xs = take_rows(xp, x, rows[r0:r1], x_block[:r1 - r0])
        ws = coef[r0:r1]
        # one-hot targets times the weights, class axis before the sample axis (the layout
        # stacked_gradients takes them in)
        target = t_block[:r1 - r0]
        target.fill(0)
        put_along_axis(xp, target, y[rows[r0:r1]][:, None, :], ws[:, None, :], axis=1)
        for j in range(j0, j1):
            m = active[j]
            s = slice(starts[j] - r0, starts[j + 1] - r0)
            stacked_sgd_step([a[:m] for a in p], xs[s], ws[s], target[s], work)
        j0 = j1


def local_sgd_loop(params: Params, x: np.ndarray, y: np.ndarray, sched: Schedule,
                   lr: float) -> Params:
    """The same training as :func:`local_sgd`, one learner and one step at a time.

    The reference the vectorised trainer is tested and benchmarked against.
    """
    out = []
    K = params[0].shape[0]
    for k in range(K):
        p = [a[k:k + 1].copy() for a in params]
        for j in range(int(sched.steps[k])):
            rows = sched.index[k:k + 1, j]
            g = stacked_gradients(p, x[rows], y[rows], sched.weight[k:k + 1, j])
            for a, da in zip(p, g, strict=True):
                da *= lr
                a -= da
        out.append(p)
    return [np.concatenate([o[i] for o in out]) for i in range(len(params))]


def broadcast(model: Params, K: int, device: Device = CPU) -> Params:
    """K copies of one model (host arrays), stacked on a new learner axis, on ``device``
    (one copy crosses the bus, the K are made there)."""
    if not device.host:
        xp = device.xp
        return [xp.repeat(device.put(a[None]), K, axis=0) for a in model]
    return [np.repeat(a[None], K, axis=0) for a in model]


def evaluate(model: Params, x: np.ndarray, y: np.ndarray,
             chunk: int | None = None, device: Device = CPU) -> tuple[float, float]:
    """Mean loss and accuracy of one model on (x, y): the loss its output layer trains on
    (the cross-entropy, or the hinge of ``svm``; :func:`~mel_opt.mlp.output_loss`), the
    accuracy of its highest score.

    ``model`` and (x, y) are the host's; on another ``device`` the model is uploaded (one
    copy), (x, y) are read from their resident copies and two numbers per ``chunk`` of
    samples come back (default 4,096 on the host, :data:`DEVICE_CHUNK` on a device).
    An empty split has no loss and no accuracy: (nan, nan)."""
    if y.shape[0] == 0:
        return math.nan, math.nan
    if chunk is None:
        chunk = 4096 if device.host else DEVICE_CHUNK
    stacked = [device.put(a[None]) for a in model]
    x, y = device.resident(x), device.resident(y)
    losses = output_loss(stacked).losses
    loss = 0.0
    hits = 0
    for s in range(0, x.shape[0], chunk):
        out = stacked_forward(stacked, x[None, s:s + chunk])[-1][0]
        yy = y[s:s + chunk]
        loss += float(losses(out, yy).sum())
        hits += int((out.argmax(axis=1) == yy).sum())
    return loss / y.size, hits / y.size
