"""A live run's rounds with the learners in this process, on a virtual clock (no Flower).

The server side is the same :class:`~mel_opt.live.rounds.LiveRun` as on Flower (probe, plan a
round through the problem's learning cycle, close it, feed the measurements back); the
learners are the same functions the Flower client app calls (:mod:`mel_opt.live.learner`),
each on its own rows of the data set. What differs is the clock: a :class:`Clock` says how long
each learner's work and the round took, so a run is deterministic (the catalogue's entry of
paper 003 runs the adaptive-tau control this way, with the times its authors simulated).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mel_opt.live import learner as L
from mel_opt.live.rounds import LiveRun, NodeReply, RoundPlan
from mel_opt.training.mlp import Params

__all__ = ["Clock", "run_in_process"]


@dataclass(frozen=True)
class Clock:
    """Virtual times of a round.

    Attributes
    ----------
    compute_s : callable
        ``(round, learner, sample_passes) -> seconds`` of that learner's training.
    overhead_s : callable
        ``(round) -> seconds`` the round takes beyond its slowest learner's training
        (messages, aggregation).
    probe_s_per_sample : float
        Seconds per sample-pass every learner reports in the probe.
    """

    compute_s: Callable[[int, int, float], float]
    overhead_s: Callable[[int], float]
    probe_s_per_sample: float = 1e-4


def run_in_process(run: LiveRun, pools: Sequence[np.ndarray], clock: Clock,
                   on_round: Callable[[LiveRun], None] | None = None) -> LiveRun:
    """Probe, then ``run.settings.rounds`` rounds (or until the problem ends the run).

    Parameters
    ----------
    run : LiveRun
        The server's state (its data set is the learners' too).
    pools : sequence of int arrays
        Training-set rows of each learner (learner k holds ``pools[k]``; any split, including
        the same rows for every learner).
    clock : Clock
    on_round : callable, optional
        Called with ``run`` after every round.
    """
    data = run.data
    for k in range(run.K):
        run.accept_probe(k, {"partition_id": k, "compute_s": clock.probe_s_per_sample * 1000,
                             "work": 1000.0})
    previous: dict[int, Params] = {}
    seed = run.settings.seed
    for r in range(1, run.settings.rounds + 1):
        plan = run.plan(r)
        replies, longest = [], 0.0
        for k, cfg in plan.configs.items():
            replies.append(_learner(run, plan, k, cfg, L.LocalData(data, np.asarray(pools[k])),
                                    previous, seed, clock))
            longest = max(longest, float(replies[-1].metrics["compute_s"]))
        run.close(plan, replies, longest + clock.overhead_s(r))
        if on_round is not None:
            on_round(run)
        if run.finished:
            break
    return run


def _learner(run: LiveRun, plan: RoundPlan, k: int, cfg: dict, local: L.LocalData,
             previous: dict[int, Params], seed: int, clock: Clock) -> NodeReply:
    """What learner k answers: as the client app does, with the clock's time."""
    model = run.model_of(k, plan)
    stats = L.gradient_statistics(model, previous.get(k), local) \
        if int(cfg.get("statistics", 0)) else None
    done = L.train_cycle(model, local, int(cfg["samples"]), int(cfg["passes"]),
                         int(cfg["batch"]), float(cfg["lr"]),
                         seed * 1_000_003 + plan.round * 7919 + k)
    metrics: dict[str, float] = {"partition_id": k, "samples": done.samples,
                                 "passes": done.passes, "work": max(done.work, 1.0),
                                 "compute_s": clock.compute_s(plan.round, k, done.work)}
    gradient = None
    if stats is not None:
        previous[k] = done.model
        metrics["local_loss"] = stats.loss
        if stats.rho is not None:
            metrics["rho"] = stats.rho
        if stats.beta is not None:
            metrics["beta"] = stats.beta
        gradient = stats.gradient
    return NodeReply(k, metrics, done.model, gradient=gradient)
