"""A FEEL training round under an allocation (paper 004, Section II-A and VI).

Per round every device computes the gradient of its mean loss on B_k samples of its local data,
the server averages the gradients weighted by B_k (Eq. (1)) and takes one step (Eq. (2)) with
the learning rate scaled as sqrt(B) (Section III-A). One SGD step of each device from the
global model followed by the B_k-weighted average of the results is exactly that step, so the
plan tells each device: one step over its B_k samples, weight B_k. The round lasts the
latency model's T = max_k (t_k^L + t_k^U) + max_k (t_k^D + t_k^M) (Eq. (15), CPU, with
(9)-(12); Eq. (29), GPU, with (27)-(28)), over the allocation's TDMA slots.

Besides the methods' allocations, three training-only schemes of Table II (Section VI-C):

- ``gradient-based``: every device's gradient over its whole local data each round, slots
  chosen optimally for that work;
- ``model-based``: one local epoch (minibatches of B^max) per round, then the models are
  averaged (weighted by data size) and sent back: the parameters travel instead of a gradient;
- ``individual``: each device trains its own model, one local epoch per round, with no
  exchange; the model of round r is the average the devices would make had they stopped
  there, the clock counting r epochs and that one exchange.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.validate import readonly_array
from mel_opt.problems.base import SolveOptions
from mel_opt.problems.feel.instance import FeelInstance
from mel_opt.problems.feel.latency import coefficients
from mel_opt.problems.feel.methods import solve_random_batch
from mel_opt.problems.feel.roots import equalise
from mel_opt.problems.feel.verify import verify
from mel_opt.problems.learning import CyclePlan, LearnerPlan, LearningCycle, RunContext


class FeelClock:
    """Round latencies of a feel instance (paper 004, Eq. (9)-(16), (27)-(29)).

    Parameters
    ----------
    inst : FeelInstance
    """

    def __init__(self, inst: FeelInstance) -> None:
        self.inst = inst
        self.co = coefficients(inst)

    def compute(self, batch: np.ndarray) -> np.ndarray:
        """t_k^L of Eq. (9) (CPU) or (27) (GPU) for one minibatch of ``batch`` samples [s]."""
        b = np.asarray(batch, dtype=float)
        return np.asarray(self.co.e + self.co.c * np.maximum(b, self.co.lo))

    def upload(self, up_slots: np.ndarray) -> np.ndarray:
        """t_k^U of Eq. (10)-(11) in the uplink slots [s]."""
        return np.asarray(self.co.a / np.asarray(up_slots, float))

    def download(self, down_slots: np.ndarray) -> np.ndarray:
        """t_k^D of Eq. (12) in the downlink slots [s]."""
        return np.asarray(self.co.b / np.asarray(down_slots, float))

    def round_latency(self, batch: np.ndarray, up_slots: np.ndarray,
                      down_slots: np.ndarray) -> float:
        """T of Eq. (15) / (29) for the given batches and TDMA slots [s]."""
        up = float(np.max(self.compute(batch) + self.upload(up_slots)))
        down = float(np.max(self.download(down_slots) + self.co.m))
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
        up = equalise(a, np.asarray(work, dtype=float), self.co.frame_up)
        down = equalise(b, self.co.m * np.asarray(updates, dtype=float), self.co.frame_down)
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


@lru_cache(maxsize=64)
def clock_of(inst: FeelInstance) -> FeelClock:
    """The clock of ``inst``, built once per instance (instances are immutable)."""
    return FeelClock(inst)


@lru_cache(maxsize=4096)
def _epochs_latency(clock: FeelClock, epochs: int, sizes: tuple[int, ...],
                    bits: float | None) -> float:
    """Latency of ``epochs`` local epochs over ``sizes`` samples per device, then one exchange
    of ``bits`` (memoised: a run asks for the same values every round)."""
    return clock.best_latency(epochs * clock.epoch_compute(np.array(sizes)), bits, 0.0)


TRAINING_ONLY = {
    "individual": "individual learning: one local epoch per round on every device, no exchange",
    "model-based": "model-based FEEL: one local epoch per round, models averaged (Table II)",
    "gradient-based": "gradient-based FEEL over each device's whole local data (Table II)",
}

# Seed of the random-batch redraw of round c of a run with seed s (a fresh draw every round,
# paper 004, Section VI-D).
_REDRAW = 1_000_003


class FeelCycle(LearningCycle):
    """One gradient step per round over each device's B_k samples, on the round latency."""

    schemes = TRAINING_ONLY
    has_deadline = False  # the round latency is what the allocation achieves, not a deadline
    columns = ("batch",)

    def configure_cycle(self, inst: FeelInstance, ctx: RunContext, cycle: int) -> CyclePlan:
        if ctx.scheme in ("individual", "random-batch"):  # their plan changes every round
            return self._plan(inst, ctx, cycle)
        if "plan" not in ctx.memo:  # the same allocation every round: planned once
            ctx.memo["plan"] = self._plan(inst, ctx, cycle)
        plan: CyclePlan = ctx.memo["plan"]
        return plan

    def _plan(self, inst: FeelInstance, ctx: RunContext, cycle: int) -> CyclePlan:
        clock = clock_of(inst)
        sizes = np.asarray(ctx.data_sizes, dtype=np.int64)
        if ctx.scheme in ("individual", "model-based"):
            return self._local_epochs(clock, ctx, sizes, cycle)
        if ctx.scheme == "gradient-based":
            work = clock.compute(sizes)
            latency = clock.best_latency(work, updates=1.0)
            return self._gradient_round(inst, sizes, work, latency, None)
        solution = self._solution(inst, ctx, cycle)
        batch = np.asarray(solution["batch"], dtype=np.int64)
        up, down = np.asarray(solution["uplink_slots"]), np.asarray(solution["downlink_slots"])
        latency = clock.round_latency(batch, up, down)
        comm = clock.upload(up) + clock.download(down)
        busy = clock.compute(batch) + comm + clock.co.m
        return self._gradient_round(inst, batch, busy, latency, comm)

    @staticmethod
    def _solution(inst: FeelInstance, ctx: RunContext, cycle: int) -> Mapping[str, Any]:
        if ctx.solution is None:
            raise UsageError(f"feel scheme {ctx.scheme!r} has no allocation to train under")
        if ctx.scheme != "random-batch":
            return ctx.solution
        out = solve_random_batch(inst, SolveOptions(seed=ctx.seed * _REDRAW + cycle))
        if out.solution is None or not verify(inst, out.solution).verification.feasible:
            raise UsageError(f"random-batch gave no valid allocation in round {cycle}")
        return out.solution

    @staticmethod
    def _gradient_round(inst: FeelInstance, batch: np.ndarray, busy: np.ndarray,
                        latency: float, comm: np.ndarray | None) -> CyclePlan:
        """One full-batch gradient step per device, weights B_k, lr scaled as sqrt(B)."""
        plans = tuple(
            LearnerPlan(learner=k, samples=int(batch[k]), passes=1, weight=float(batch[k]),
                        predicted_s=float(busy[k]),
                        comm_s=0.0 if comm is None else float(comm[k]),
                        columns={"batch": int(batch[k])})
            for k in range(inst.K))
        B = float(batch.sum())
        return CyclePlan(plans, duration_s=latency, batch=0,
                         lr_scale=math.sqrt(B / float(inst.max_batch)))

    @staticmethod
    def _local_epochs(clock: FeelClock, ctx: RunContext, sizes: np.ndarray,
                      cycle: int) -> CyclePlan:
        """Model-based FEEL and individual learning: one local epoch per round."""
        bits = ctx.options.get("param_bits")
        epoch = clock.epoch_compute(sizes)
        key = tuple(int(n) for n in sizes)
        if ctx.scheme == "model-based":
            duration = _epochs_latency(clock, 1, key, bits)
        else:  # individual: the clock of round c is c epochs and one exchange
            before = _epochs_latency(clock, cycle - 1, key, bits) if cycle > 1 else 0.0
            duration = _epochs_latency(clock, cycle, key, bits) - before
        plans = tuple(
            LearnerPlan(learner=k, samples=int(sizes[k]), passes=1, weight=float(sizes[k]),
                        predicted_s=float(epoch[k]), columns={"samples": int(sizes[k])})
            for k in range(sizes.size))
        return CyclePlan(plans, duration_s=duration, batch=int(clock.co.max_batch),
                         restart=ctx.scheme == "model-based")


    def live_instance(self, inst: FeelInstance, learners: np.ndarray, seconds: np.ndarray,
                      dataset_size: int) -> FeelInstance:
        """Each device's compute from its measured seconds per sample (one sample's gradient):
        a CPU device's clock becomes C / sigma_k (so t^L = C B / f = sigma_k B, Eq. (9)); a GPU
        device's slope becomes sigma_k and its flat part sigma_k times its threshold
        (Eq. (27)). The radio (uplink, downlink, frames, gradient size) stays the file's: the
        TDMA slots' transfer times are emulated."""
        idx = np.asarray(learners, dtype=np.int64)
        sigma = np.asarray(seconds, dtype=float)[idx]

        def pick(arr: np.ndarray | None) -> np.ndarray | None:
            return None if arr is None else readonly_array(np.asarray(arr)[idx])

        changes: dict[str, Any] = {
            "device_names": tuple(inst.device_names[k] for k in idx),
            "uplink_bps": pick(inst.uplink_bps), "downlink_bps": pick(inst.downlink_bps),
            "name": f"{inst.name}-live"}
        if inst.is_gpu:
            th = np.asarray(inst.batch_threshold, dtype=float)[idx]
            changes.update(slope=readonly_array(sigma), t_low=readonly_array(sigma * th),
                           batch_threshold=pick(inst.batch_threshold),
                           update_s=pick(inst.update_s))
        else:
            assert inst.cycles_per_sample is not None
            changes["cpu_hz"] = readonly_array(inst.cycles_per_sample / sigma)
        return dataclasses.replace(inst, **changes)


CYCLE = FeelCycle()
