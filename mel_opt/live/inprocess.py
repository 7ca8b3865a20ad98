"""A live run's rounds with the learners in this process, on a virtual clock (no Flower).

The server side is the same :class:`~mel_opt.live.rounds.LiveRun` as on Flower (probe, plan a
round through the problem's learning cycle, close it, feed the measurements back); the
learners are the same functions the Flower client app calls (:mod:`mel_opt.live.learner`),
each on its own rows of the data set. What differs is the clock: a :class:`Clock` says how long
each learner's work and the round took, so a run is deterministic (the catalogue's entry of
paper 003 runs the adaptive-tau control this way, with the times its authors simulated), and
which learners answer, and what, so a lost or faulty learner is a choice of the test, not a
timer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mel_opt.errors import MelOptError
from mel_opt.live import learner as L
from mel_opt.live.rounds import Answer, LiveRun
from mel_opt.problems.messages import Records, TrainOrder, TrainReport

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
    answers : callable
        ``(round, learner) -> bool``: whether that learner answers that round (False: it is
        lost, as a node that died; default: every learner always answers). A missing learner
        is probed again before each round, as on Flower, and is back once it answers.
    sends : callable
        ``(round, learner, records) -> records``: what that learner's node sends, given what
        its learner answered (default: that answer). A test's faulty learner (non-finite
        weights, arrays of other shapes, an absurd compute time) is one that sends something
        else; the round's length stays the clock's, as a real server's wall clock does not
        believe what a reply says.
    """

    compute_s: Callable[[int, int, float], float]
    overhead_s: Callable[[int], float]
    probe_s_per_sample: float = 1e-4
    answers: Callable[[int, int], bool] = lambda r, k: True
    sends: Callable[[int, int, Records], Records] = lambda r, k, records: records


def run_in_process(run: LiveRun, pools: Sequence[np.ndarray], clock: Clock,
                   on_round: Callable[[LiveRun], None] | None = None) -> LiveRun:
    """Probe, then ``run.settings.rounds`` rounds (or until the problem ends the run, or a
    round cannot be planned: :meth:`~mel_opt.live.rounds.LiveRun.stop`).

    Every learner answers through :func:`mel_opt.live.learner.answer_train`, as a Flower
    client does, and its report goes through the same encoding and the same reading on the
    server; only its compute time is the clock's.

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
    memories = {k: L.Memory({L.SPEED: clock.probe_s_per_sample}) for k in range(run.K)}
    for k in range(run.K):  # the probe, on the clock
        report = L.probe_report(run.spec.name, k, int(np.asarray(pools[k]).size),
                                clock.probe_s_per_sample * 1000, 1000.0)
        run.accept_probe(k, report.encode())
    for r in range(1, run.settings.rounds + 1):
        run.missing -= {k for k in run.missing if clock.answers(r, k)}  # probed again
        try:
            plan = run.plan(r)
        except MelOptError as exc:  # no learner left, or no allocation for them
            run.stop(r, str(exc))
            if on_round is not None:
                on_round(run)
            break
        answers, longest = [], 0.0
        for k, order in plan.orders.items():
            if not clock.answers(r, k):
                continue
            local = L.LocalData(data, np.asarray(pools[k]))
            trained = _learner(order, k, local, memories[k], clock)
            answers.append(Answer(k, clock.sends(r, k, trained.encode())))
            longest = max(longest, trained.compute_s)  # the clock's, not what was sent
        run.close(plan, answers, longest + clock.overhead_s(r))
        if on_round is not None:
            on_round(run)
        if run.finished:
            break
    return run


def _learner(order: TrainOrder, k: int, local: L.LocalData, memory: L.Memory,
             clock: Clock) -> TrainReport:
    """What learner k answers: as the client app does, with the clock's time."""
    report = L.answer_train(order, k, local, memory,
                            lambda work: clock.compute_s(order.round, k, work))
    return dataclasses.replace(report, work=max(report.work, 1.0))
