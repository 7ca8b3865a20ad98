"""The virtual clock: each problem's own time model, reached through this one adapter.

The training emulator never measures wall time; a cycle lasts what the instance's latency
model says. Every import of a problem's internals is here, so a renamed module is a one-line
fix.

- mel-async (paper 000): a global cycle lasts the cycle clock T; every learner's busy time
  t_k of Eq. (5) (``inst.times``) is at most T.
- dab (thesis Ch. 3): learner k is busy eta_k of Eq. (3.4) for a_k shards and its passes; the
  cycle ends when the last update arrives.
- feel (paper 004): a round lasts T = max_k (t_k^L + t_k^U) + max_k (t_k^D + t_k^M),
  Eq. (15) (CPU, with (9)-(12)) or (29) (GPU, with (27)-(28)).
"""

from __future__ import annotations

import numpy as np

from mel_opt.problems.dab.instance import DabInstance
from mel_opt.problems.dab.latency import eta as _dab_eta
from mel_opt.problems.feel.instance import FeelInstance
from mel_opt.problems.feel.latency import coefficients as _feel_coefficients
from mel_opt.problems.feel.roots import equalise as _equalise
from mel_opt.problems.mel_async.instance import MelAsyncInstance


def mel_async_times(inst: MelAsyncInstance, d: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """t_k of paper 000, Eq. (5) [s]."""
    return np.asarray(inst.times(np.asarray(d, float), np.asarray(tau, float)))


def dab_times(inst: DabInstance, shards: np.ndarray, passes: np.ndarray) -> np.ndarray:
    """eta_k of thesis Eq. (3.4) for ``shards`` a_k and ``passes`` per learner [s]."""
    return np.asarray(_dab_eta(
        shards, iterations=passes, model_bytes=inst.model_bytes, shard_bytes=inst.shard_bytes,
        train_rate=inst.train_rate, bandwidth=inst.bandwidth))


class FeelClock:
    """Round latencies of a feel instance (paper 004, Eq. (9)-(16), (27)-(29)).

    Parameters
    ----------
    inst : FeelInstance
    """

    def __init__(self, inst: FeelInstance) -> None:
        self.inst = inst
        self.co = _feel_coefficients(inst)

    def compute(self, batch: np.ndarray) -> np.ndarray:
        """t_k^L of Eq. (9) (CPU) or (27) (GPU) for one minibatch of ``batch`` samples [s]."""
        b = np.asarray(batch, dtype=float)
        return np.asarray(self.co.e + self.co.c * np.maximum(b, self.co.lo))

    def round_latency(self, batch: np.ndarray, up_slots: np.ndarray,
                      down_slots: np.ndarray) -> float:
        """T of Eq. (15) / (29) for the given batches and TDMA slots [s]."""
        up = float(np.max(self.compute(batch) + self.co.a / np.asarray(up_slots, float)))
        down = float(np.max(self.co.b / np.asarray(down_slots, float) + self.co.m))
        return up + down

    def best_latency(self, work: np.ndarray, message_bits: float | None = None,
                     updates: np.ndarray | float = 1.0) -> float:
        """Latency of a round whose devices first compute for ``work`` seconds, then exchange
        a message of ``message_bits`` (default: the instance's gradient) over slots chosen
        optimally for that work (the slot formula of Theorems 1-2: equal finishing times,
        sum of slots = frame), then run ``updates`` local model updates [s]."""
        scale = 1.0 if message_bits is None else message_bits / float(self.inst.gradient_bits)
        a = self.co.a * scale
        b = self.co.b * scale
        up = _equalise(a, np.asarray(work, dtype=float), self.co.frame_up)
        down = _equalise(b, self.co.m * np.asarray(updates, dtype=float), self.co.frame_down)
        return float(up + down)

    def epoch_compute(self, samples: np.ndarray) -> np.ndarray:
        """Compute time of one local pass over ``samples`` in minibatches of B^max [s]: whole
        minibatches at t^L(B^max), the last one at t^L(remainder), plus a local model update
        (t^M) after each minibatch."""
        n = np.asarray(samples, dtype=np.int64)
        bmax = self.co.max_batch
        full, rest = n // bmax, n % bmax
        t = full * self.compute(np.full(n.shape, bmax)) + np.where(
            rest > 0, self.compute(np.maximum(rest, 1)), 0.0)
        return np.asarray(t + (full + (rest > 0)) * self.co.m)
