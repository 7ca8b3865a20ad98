"""FedBuff's server side of a live run (Nguyen et al., AISTATS 2022), on any exchange.

Flower's strategies are synchronous; its grid offers pushes and pulls, on which FedBuff's
asynchronous loop runs: the loop itself is the scheme's (:func:`mel_opt.schemes.fedbuff.run`,
the same that the arena runs on its virtual clock); here are its live learners
(:class:`LiveWorkers`: each push an encoded order over the run's exchange, each answer read
where every live reply is read) and the server's side between the loop and the run
(:class:`AsyncServer`: each learner's order and deadline, each reply's measurements, the rows
and rounds of the outputs, through the run's fleet, models and log).

Every learner holds the same fixed work (:func:`equal_work`), as in the arena's FedBuff: an
equal share of the data and the problem's own passes, from the problem's work clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt import api
from mel_opt.errors import UsageError
from mel_opt.live.estimates import ALPHA, Measurement, fold
from mel_opt.live.exchange import Exchange
from mel_opt.live.log import LearnerRow, RoundRecord
from mel_opt.live.rounds import LiveRun, beyond_compute
from mel_opt.problems.learning import LearnerPlan, LearningCycle, sample_bytes
from mel_opt.problems.messages import Records, TrainOrder
from mel_opt.schemes import period
from mel_opt.schemes.base import SPEED_MOVE, SchemeSpec, WorkPlan
from mel_opt.schemes.fedbuff import Model, Step, Update, default_buffer

__all__ = ["AsyncServer", "LiveWorkers", "PlannedWork", "Work", "equal_work", "planned_work",
           "serve_buffered"]


@dataclass(frozen=True)
class Work:
    """The fixed work of every FedBuff learner, and what the file's model says it costs.

    Attributes
    ----------
    samples, passes : int
        Samples drawn from the learner's data and passes over them, the same for all.
    comm_s : ndarray, shape (K,)
        Each learner's transfer time for that work in the file's model [s] (emulated on one
        machine, as the allocation's).
    compute_s : ndarray, shape (K,)
        Each learner's computation for it in the file's model [s] (its deadline until the
        learner's own speed is measured).
    """

    samples: int
    passes: int
    comm_s: np.ndarray
    compute_s: np.ndarray


def equal_work(cycle: LearningCycle, inst: Any, dataset_size: int, sample_bytes: float = 0.0,
               seconds: np.ndarray | None = None) -> Work:
    """The arena's FedBuff work in live units, from the problem's work clock
    (:meth:`~mel_opt.problems.learning.LearningCycle.work_clock`): an equal share of the
    file's data (:meth:`~mel_opt.problems.learning.LearningCycle.work_samples`) and the
    clock's passes.

    ``seconds``: each learner's measured seconds per sample-pass (NaN: not measured). Live,
    the allocation's rounds fit the learners' measured speeds into the file's budget, so a
    clock whose passes are fitted is fitted the same way
    (:meth:`~mel_opt.problems.work.WorkClock.refitted`; the transfers stay the file's,
    emulated for both).

    Raises
    ------
    UsageError
        The problem has no work clock.
    """
    clock = cycle.work_clock(inst)
    if clock is None:
        raise UsageError(f"runs on problems whose learning cycle declares a work clock; "
                         f"{inst.problem!r} declares none")
    samples = cycle.work_samples(inst, clock, dataset_size, sample_bytes)
    measured = np.full(clock.K, np.nan) if seconds is None else np.asarray(seconds, float)
    per_pass, passes = clock.refitted(measured)
    return Work(samples, passes, np.asarray(clock.fixed_s, dtype=float), passes * per_pass)


@dataclass
class PlannedWork:
    """The work of a scheme that plans each start (its :attr:`~mel_opt.schemes.base.
    SchemeSpec.live_plan`: staggered's), in live units: each learner's samples, and each
    start's passes from the plan over the server's clock.

    Attributes
    ----------
    plan : WorkPlan
        Over learners (0 .. K-1): the passes of a start at a time, the weight of an update,
        the buffer, the concurrency and the learners that take part.
    samples : ndarray of int
        Each learner's samples (its data under the allocation, in the data set's samples).
    batch : int
        The minibatch: a start with room for less than a pass trains fewer samples, at least
        one minibatch.
    placed_at : ndarray
        The seconds per sample-pass each learner's data was last placed at (NaN: not
        measured then).
    window_s : float
        How much measured compute a learner's speed is judged over [s] (the problem's
        budget).
    place : callable or None
        ``seconds -> samples or None``: the data placed again at these seconds per
        sample-pass (the allocation's; None where it has none). None: the data stays (the
        plan is still told of the new speeds).
    placements : list of dict
        Every placement after the first: the server step after which it was made, the
        seconds it was made at, the samples it gave and what the plan decided again
        (``plan``: staggered's groups).
    start_s : ndarray or None
        Each learner's fixed cost of a start [s], measured by its probe
        (:attr:`~mel_opt.live.fleet.Fleet.start_s`; None: none). A reply's compute beyond it
        is what its work took, and the plan gives every start room for it; a reply more
        than half of which is that fixed cost is too short to judge a speed by
        (:meth:`observe`).
    alpha : float
        Weight of a reply's speed in the learner's speed per start (:meth:`at`).
    """

    plan: WorkPlan
    samples: np.ndarray
    batch: int
    placed_at: np.ndarray
    window_s: float
    place: Callable[[np.ndarray], np.ndarray | None] | None = None
    placements: list[dict[str, Any]] = field(default_factory=list)
    start_s: np.ndarray | None = None
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        K = self.samples.size
        self.placed_at = np.asarray(self.placed_at, dtype=float).copy()
        self.start_s = np.zeros(K) if self.start_s is None else \
            np.asarray(self.start_s, dtype=float).copy()
        self._compute = np.zeros(K)  # each learner's measured compute in its window [s]
        self._work = np.zeros(K)  # and the sample-passes it did in it
        # its last two full windows, the older first: (compute [s], sample-passes) each
        self._windows = np.full((K, 2, 2), np.nan)
        # its seconds per sample-pass beyond a start's fixed cost: the one its data was
        # placed at (the probe's), then followed reply by reply
        self._rate = self.placed_at.copy()

    def observe(self, learner: int, compute_s: float, work: float) -> None:
        """One accepted reply of ``learner``: ``compute_s`` of measured compute for
        ``work`` sample-passes, of which all but the learner's fixed cost of a start is its
        work's. A reply that is more than half fixed cost is left out: its work is too
        little to time. Each reply's speed updates the learner's speed per start
        (:meth:`at`); once its window holds :attr:`window_s` of its work's compute, the
        window's ratio (all that compute over all its work) is the learner's speed, and a new
        window starts."""
        k = int(learner)
        if not (math.isfinite(compute_s) and compute_s > 0 and work > 0):
            return
        assert self.start_s is not None
        net = compute_s - float(self.start_s[k])
        if net < 0.5 * compute_s:
            return
        self._rate[k] = fold(float(self._rate[k]), net / work, self.alpha)
        self._compute[k] += net
        self._work[k] += work
        if self._compute[k] >= self.window_s:
            self._windows[k] = (self._windows[k, 1], (self._compute[k], self._work[k]))
            self._compute[k] = self._work[k] = 0.0

    @property
    def _speed(self) -> np.ndarray:
        """Each learner's seconds per sample-pass over its last full window (NaN: none)."""
        return self._windows[:, 1, 0] / self._windows[:, 1, 1]

    def replace(self, step: int, now: float) -> bool:
        """After server ``step`` at ``now`` [s on the server's clock]: where a learner
        that takes part has a speed more than :data:`~mel_opt.schemes.base.SPEED_MOVE` away
        from the one its data was placed at, on the same side, over each of its last two
        full windows, place the data again at every learner's latest speed (over its last
        two windows where it has two) and tell the plan
        (:meth:`~mel_opt.schemes.base.WorkPlan.placed`). True if the plan was told.

        Two windows, not one: on a machine whose cores the learners share, a learner's speed
        over one budget of its compute moves by more than a quarter with what the others run
        beside it (on the loopback deployment of four throttled learners on two cores, its
        windows moved by up to twice), and the data then followed that back and forth; a
        device that really slowed down or sped up stays moved."""
        last, was = self._speed, self.placed_at
        before = self._windows[:, 0, 0] / self._windows[:, 0, 1]
        ok = (self.samples > 0) & np.isfinite(last) & np.isfinite(before) & \
            np.isfinite(was) & (was > 0)
        moved = np.zeros(ok.shape, dtype=bool)
        up = last[ok] / was[ok] - 1.0 > SPEED_MOVE
        down = 1.0 - last[ok] / was[ok] > SPEED_MOVE
        moved[ok] = (up & (before[ok] / was[ok] - 1.0 > SPEED_MOVE)) | \
            (down & (1.0 - before[ok] / was[ok] > SPEED_MOVE))
        if not moved.any():
            return False
        both = self._windows.sum(axis=1)  # NaN where a learner has fewer than two
        speed = np.where(np.isfinite(both[:, 0]), both[:, 0] / both[:, 1], last)
        seconds = np.where(np.isfinite(speed), speed, was)
        self.placed_at = seconds.copy()
        new = None if self.place is None else self.place(seconds)
        if new is not None:
            self.samples = np.where(self.samples > 0,
                                    np.maximum(np.asarray(new, dtype=np.int64), 1), 0)
        redone = self.plan.placed(self.samples, seconds, now) or {}
        self.placements.append({"step": int(step), "seconds": seconds.tolist(),
                                "samples": self.samples.tolist(), "plan": dict(redone)})
        return True

    def placed_record(self) -> dict[str, Any]:
        """The last placement as its step's record keeps it (``summary.json``): each
        learner's samples, the seconds per sample-pass they were placed at, its group where
        the plan has groups (dealt again from the new data), and what the plan has in force
        from then on."""
        last = self.placements[-1]
        return {"samples": list(last["samples"]), "s_per_sample_pass": list(last["seconds"]),
                **last["plan"], "control": dict(self.plan.row())}

    def at(self, learner: int, now: float, seconds: float = math.nan) -> tuple[int, int]:
        """``(samples, passes)`` of ``learner``'s start at ``now`` [s on the server's clock]:
        the plan's passes as whole passes over its samples, or, with room for less than one,
        one pass over the fraction of its samples that fits. ``seconds``: the learner's
        measured seconds per sample-pass, where its data was placed at none; else the one
        it was placed at (the probe's, beyond a start's fixed cost), followed by its replies
        (:meth:`observe`). Its pass then costs that times its samples, and its start that
        fixed cost more: the plan follows the measured speeds."""
        n = int(self.samples[learner])
        own = float(self._rate[learner])
        seconds = own if math.isfinite(own) else seconds
        if math.isfinite(seconds) and seconds > 0:
            assert self.start_s is not None
            self.plan.measured(learner, seconds * n, float(self.start_s[learner]))
        p = float(self.plan.passes(learner, now))
        if p >= 1.0:
            return n, int(math.floor(p + 1e-9))
        return max(min(self.batch, n), int(p * n)), 1


def _measured_shares(run: LiveRun, K: int, log: Callable[[str], None],
                     seconds: np.ndarray | None = None) -> np.ndarray | None:
    """Each of the first ``K`` learners' data share under the method's allocation of the
    measured instance (0 for a learner the probe did not find), at ``seconds`` per
    sample-pass (default: the fleet's estimates); None, with the reason logged, where there
    is none to solve or it has no allocation."""
    active = np.asarray([k for k in run.fleet.learners if k < K], dtype=np.int64)
    seconds = np.asarray(run.fleet.seconds if seconds is None else seconds, dtype=float)
    if not active.size or not np.all(np.isfinite(seconds[active])):
        log("the data is the allocation on the file: not every learner's speed is measured")
        return None
    try:
        inst = run.cycle.live_instance(run.inst, active, seconds, run.N)
    except UsageError:  # the problem has no live form: its file's allocation
        log(f"the data is the allocation on the file: {run.spec.name} solves no measured "
            "instance")
        return None
    res = api.solve(inst, run.method, seed=0)
    if not res.ok:
        log(f"the data is the allocation on the file: {run.method} has none for the "
            f"measured speeds ({res.status.value})")
        return None
    shares = np.zeros(K)
    shares[active] = np.asarray(run.cycle.data_shares(inst, run.method, dict(res.solution),
                                                      run.N), dtype=float)
    log(f"the data is {run.method}'s allocation at the measured speeds")
    return shares


def planned_work(run: LiveRun, spec: SchemeSpec, work: Work,
                 log: Callable[[str], None] = lambda text: None) -> PlannedWork:
    """The run's :class:`PlannedWork` for ``spec`` (a scheme with a live plan).

    The data is the allocation's: the run's method solved on the instance of the learners
    the probe found, at their measured speeds (:meth:`~mel_opt.problems.learning.
    LearningCycle.live_instance`, as the synchronous allocation's live rounds solve it), each
    learner's share of it (:meth:`~mel_opt.problems.learning.LearningCycle.data_shares`) in
    the data set's samples, scaled so that an equal share is FedBuff's ``work.samples``. Where
    the problem has no live instance, a speed was not measured or the measured instance has
    no allocation, the file's instance is solved instead (``log`` says so). Each start's work
    follows every new measurement, and the measured data is placed again when a learner's
    speed, measured over a budget of its compute, has moved by more than
    :data:`~mel_opt.schemes.base.SPEED_MOVE` since it was placed (:meth:`PlannedWork.
    replace`; the file's allocation stays, the plan still hears of the speeds). A pass of
    learner
    ``k`` costs its measured seconds per sample-pass times its samples (the file's model
    until it is measured, as FedBuff's); its transfers are the file's (emulated).

    Raises
    ------
    UsageError
        The method has no allocation for the file's instance either.
    """
    assert spec.live_plan is not None
    K = run.K  # the file's first K learners
    # the probes' speeds beyond a start's fixed cost, where they measured it
    probed = np.where(np.isfinite(run.fleet.rate_s), run.fleet.rate_s, run.fleet.seconds)
    shares = _measured_shares(run, K, log, probed)
    measured_data = shares is not None
    if shares is None:
        res = api.solve(run.inst, run.method, seed=0)
        if not res.ok:
            raise UsageError(f"{spec.name} needs the allocation of {run.method}, which has "
                             f"none for this instance ({res.status.value})")
        shares = np.asarray(run.cycle.data_shares(run.inst, run.method, dict(res.solution),
                                                  run.N), dtype=float)[:K]
    samples = _in_samples(shares, work, K)
    per_sample_pass = np.asarray(work.compute_s, dtype=float)[:K] / max(
        work.samples * work.passes, 1)
    measured = np.asarray(probed, dtype=float)[:K]
    per_sample_pass = np.where(np.isfinite(measured), measured, per_sample_pass)
    known = np.zeros(K, dtype=bool)
    known[np.asarray(run.fleet.learners, dtype=np.int64)] = True
    samples = np.where(known, samples, 0)
    clock = run.cycle.work_clock(run.inst)
    assert clock is not None
    estimates = horizon_s = overhead = None
    if run.settings.period_rule == "bound":
        estimates = _bound_estimates(run, samples, log)
        budgets = run.settings.horizon if run.settings.horizon is not None else \
            run.settings.rounds
        horizon_s = budgets * clock.budget_s
        # a round trip's messaging and its start's fixed cost are wall time the bound's
        # time model must count
        overhead = np.array([run.fleet.overhead_s(k) for k in range(K)]) + \
            np.asarray(run.fleet.start_s, dtype=float)[:K]
    plan = spec.live_plan(run.settings, clock.budget_s, per_sample_pass * samples,
                          np.asarray(work.comm_s, dtype=float)[:K], samples,
                          int(run.settings.batch_size), estimates=estimates,
                          horizon_s=horizon_s, overhead_s=overhead)
    if estimates is not None:
        chosen = ", ".join(f"{k} {v:.4g}" for k, v in plan.row().items())
        log(f"{spec.name}: chosen by the bound over {horizon_s:g} s ({budgets:g} budgets): "
            f"{chosen}")
    place = None
    if measured_data:
        def place(seconds: np.ndarray) -> np.ndarray | None:
            again = _measured_shares(run, K, lambda text: None, seconds)
            return None if again is None else np.where(known, _in_samples(again, work, K), 0)

    return PlannedWork(plan, samples, int(run.settings.batch_size), measured,
                       float(clock.budget_s), place, start_s=run.fleet.start_s[:K],
                       alpha=float(run.settings.alpha))


def _in_samples(shares: np.ndarray, work: Work, K: int) -> np.ndarray:
    """Data shares in the data set's samples, scaled so that an equal share is FedBuff's
    ``work.samples``."""
    total = float(shares.sum()) or 1.0
    return np.rint(shares / total * work.samples * K).astype(np.int64)


def _bound_estimates(run: LiveRun, samples: np.ndarray,
                     log: Callable[[str], None]) -> period.Estimates | None:
    """The bound's constants of the learners that hold data, from their probes, weighted by
    their data (:func:`mel_opt.schemes.period.combine`); None, with the reason logged and
    warned (the run then keeps ``--period``), where none of them measured them."""
    held = [k for k in np.flatnonzero(samples > 0).tolist() if k in run.constants]
    if not held:  # the user asked for the bound: the summary says it was not used
        why = (f"the period is --period ({run.settings.period:g} budgets): no learner that "
               "trains measured the bound's constants")
        log(why)
        run.warn(why)
        return None
    est = period.combine([run.constants[k] for k in held], samples[held])
    log(f"the bound's constants from {len(held)} learners' probes: beta {est.beta:.4g}, "
        f"rho {est.rho:.4g}, delta {est.delta:.4g}")
    return est


class AsyncServer:
    """FedBuff's server side of a live run, between the loop and the exchange.

    It changes the run only through its owners' methods (the fleet's estimates, overheads and
    missing learners, the models, the log's rows and rounds), so the outputs are those of any
    live run: a server step is a round, each reply a row.

    Parameters
    ----------
    run : LiveRun
        The run, its nodes already mapped to learners by the probe.
    work : Work
        Every learner's fixed work.
    steps : int
        Server steps of the run (the last one is marked ``last``).
    log : callable, optional
        Receives one line per step and per learner given up.
    lap : callable, optional
        The exchange's stopwatch (:meth:`~mel_opt.live.exchange.Exchange.lap`; default: the
        wall clock's).
    """

    def __init__(self, run: LiveRun, work: Work, steps: int,
                 log: Callable[[str], None] | None = None,
                 lap: Callable[[], float] | None = None,
                 planned: PlannedWork | None = None) -> None:
        self.run, self.work, self.steps, self.planned = run, work, steps, planned
        self.log = log or (lambda text: None)
        self._lap = lap or _wall_lap()
        self.now = 0.0  # the server's clock since start_clock [s]
        self._since_step = 0.0
        self.seq = 0
        self.info: dict[int, dict[str, Any]] = {}  # node -> its newest work's numbers
        self.busy: set[int] = set()

    def _tick(self) -> None:
        since = self._lap()
        self.now += since
        self._since_step += since

    def work_of(self, learner: int) -> tuple[int, int]:
        """``(samples, passes)`` of the learner's next start: FedBuff's fixed work, or the
        planned work at the server's clock now."""
        if self.planned is None:
            return self.work.samples, self.work.passes
        return self.planned.at(learner, self.now, float(self.run.fleet.seconds[learner]))

    def predicted_s(self, learner: int, samples: int | None = None,
                    passes: int | None = None) -> float | None:
        """The learner's computation for its work (the fixed work by default) by its speed
        estimate (None: unknown)."""
        per = float(self.run.fleet.seconds[learner])
        n = self.work.samples if samples is None else samples
        p = self.work.passes if passes is None else passes
        return per * n * p if math.isfinite(per) else None

    def order(self, node: int, model: Model, version: int) -> tuple[TrainOrder, float]:
        """What ``node`` is sent to train from ``model`` (of ``version``), and how long to
        wait for it [s]: the fleet's reply wait for its predicted computation, through the
        pool of learners busy at once where there is one, plus the grace; before its speed is
        known, the file's model of its computation plus the grace."""
        run, fleet = self.run, self.run.fleet
        k = fleet.learner_at(node)
        assert k is not None
        self.seq += 1
        self._tick()
        samples, passes = self.work_of(k)
        pred = self.predicted_s(k, samples, passes)
        comm = float(self.work.comm_s[k])
        plan = LearnerPlan(k, samples, passes, 1.0, (pred or 0.0) + comm, comm_s=comm)
        order = run.lying(run.order(self.seq, [np.asarray(a, dtype=np.float32) for a in model],
                                    plan), k, version + 1)
        self.busy.add(node)
        # before its speed is measured: the file's model of the computation, per sample-pass
        # of the fixed work
        one = fleet.reply_wait_s(k, pred) if pred is not None else \
            float(self.work.compute_s[k]) * samples * passes / max(
                self.work.samples * self.work.passes, 1)
        wait = fleet.queue_s([one] * len(self.busy)) + run.settings.grace
        self.info[node] = {"predicted_s": None if pred is None else pred + comm,
                           "comm_predicted_s": fleet.overhead_known(k),
                           "comm_emulated_s": comm, "compute_predicted_s": pred,
                           "samples": samples, "passes": passes,
                           "version": version}
        return order, wait

    def read(self, node: int, records: Records | str | None,
             elapsed_s: float | None) -> Update:
        """The local model in ``node``'s reply, why it cannot be used, or None for an error
        reply. ``records``: the reply's content, the reason it has none readable (text), or
        None for an error. A usable reply's measured compute time updates the learner's speed
        estimate and messaging overhead, as in a synchronous round."""
        run, fleet = self.run, self.run.fleet
        self.busy.discard(node)
        k = fleet.learner_at(node)
        assert k is not None
        info = self.info.setdefault(node, {"version": 0, "comm_emulated_s": 0.0})
        if records is None:
            run.warn(f"{run.scheme.name}: learner {k} failed; it is left out of the run")
            return None
        if isinstance(records, str):
            return records
        report = run.read_report(k, 0, records, elapsed_s)
        if isinstance(report, str):
            return report
        # the server learns every learner's speed from its fixed work, whoever plans rounds
        why = fleet.measure(Measurement.of(k, report.compute_s, report.work),
                            int(info["version"]) + 1)
        if why:
            return f"its measurement is not believed: {why}"
        fleet.note_overhead(k, report.compute_s, elapsed_s)
        fleet.fold_pooled()
        if self.planned is not None:
            self.planned.observe(k, report.compute_s, report.work)
        info.update(compute_measured_s=report.compute_s,
                    measured_s=report.compute_s + float(info["comm_emulated_s"]),
                    comm_measured_s=beyond_compute(elapsed_s, report.compute_s))
        return report.model

    def given_up(self, node: int) -> None:
        """``node``'s work is overdue: it no longer holds a slot."""
        self.busy.discard(node)

    def on_reply(self, node: int, joins: int, staleness: int | None, why: str | None) -> None:
        """One row: the reply of ``node`` (or its work given up) for server step ``joins``."""
        run = self.run
        k = run.fleet.learner_at(node)
        assert k is not None
        info = self.info.get(node, {})
        base: dict[str, Any] = {c: info.get(c) for c in (
            "predicted_s", "comm_emulated_s", "comm_predicted_s", "compute_predicted_s",
            "samples", "passes")}
        base.update(round=joins, learner=k, name=run.learner_name(k), node=node,
                    columns={"staleness": staleness})
        if why is None:
            row = LearnerRow(**base, status="ok", measured_s=info.get("measured_s"),
                             compute_measured_s=info.get("compute_measured_s"),
                             comm_measured_s=info.get("comm_measured_s"))
        elif why == "missing":
            row = LearnerRow(**base, status="missing")
            run.fleet.lose([k])
            self.log(f"{run.scheme.name}: learner {k} is late; its work is given up")
        else:
            row = LearnerRow(**base, status="ignored", reason=why)
            run.warn(f"step {joins}: learner {k}'s reply ignored: {why}")
        if why is None or why.startswith("late"):
            run.fleet.back([k])
        run.log.add_rows([row])

    def on_step(self, step: Step, model: Model) -> None:
        """One round of the outputs: the new global model, evaluated."""
        run = self.run
        if not run.models.replace(0, model):
            run.warn(f"step {step.version}: the new model is not finite in float32; the "
                     "previous model is kept")
        fleet = run.fleet
        clipped = {k: why for n, why in step.notes.items()
                   if (k := fleet.learner_at(n)) is not None}
        if step.kept:
            run.warn(f"step {step.version}: {step.kept}")
        self._tick()
        wall, self._since_step = self._since_step, 0.0
        planned = self.planned
        control = placed = None
        moved = ""
        if planned is not None:
            control = planned.plan.row() or None
            # a learner's speed moved: the data (and the period) again, from the next start on
            if planned.replace(step.version, self.now):
                placed = planned.placed_record()
                held = planned.samples[planned.samples > 0]
                moved = (f"step {step.version}: a learner's speed moved; the data placed "
                         f"again at the measured speeds: samples {int(held.min())} to "
                         f"{int(held.max())}; "
                         + ", ".join(f"{k} {v:.4g}" for k, v in placed["control"].items()))
        record = RoundRecord(step.version, run.models.evaluation(),
                             time.perf_counter() - run.started, None, len(step.nodes),
                             round_wall_s=wall,
                             missing=tuple(sorted(run.fleet.missing)),
                             method=run.scheme.method_label(run.method),
                             last=step.version >= self.steps, staleness=tuple(step.staleness),
                             clipped=clipped or None, kept=step.kept, control=control,
                             placed=placed)
        run.log.add_round(record)
        self.log(f"step {step.version}: accuracy {record.evaluation['accuracy']:.3f}, "
                 f"{len(step.nodes)} updates, staleness {max(step.staleness)} at most, "
                 f"{record.round_wall_s:.3g} s")
        if moved:
            self.log(moved)

    def start_clock(self) -> None:
        """The server's clock, and the first step's wall time, count from now."""
        self._lap()
        self.now = self._since_step = 0.0


def _wall_lap() -> Callable[[], float]:
    """A stopwatch on the wall clock: seconds since its previous call."""
    last = [time.perf_counter()]

    def lap() -> float:
        now = time.perf_counter()
        since, last[0] = now - last[0], now
        return since

    return lap


class LiveWorkers:
    """FedBuff's learners over a live exchange (:class:`mel_opt.schemes.fedbuff.Workers`):
    each push is one encoded order, each answer read by the :class:`AsyncServer`, work past its
    due time reported overdue (once; its late answer still comes)."""

    def __init__(self, server: AsyncServer, exchange: Exchange) -> None:
        self.server, self.exchange = server, exchange

    def push(self, node: int, model: Model, version: int) -> None:
        order, wait = self.server.order(node, model, version)
        self.exchange.push(node, order.encode(), f"fedbuff-{self.server.seq}", wait,
                           self.server.seq)

    def pull(self) -> list[tuple[int, Update]]:
        out: list[tuple[int, Update]] = []
        for a in self.exchange.pull():
            content: Records | str | None = a.records if a.records is not None else (
                None if a.failed else a.why)
            out.append((a.node, self.server.read(a.node, content, a.elapsed_s)))
        return out

    def overdue(self) -> list[int]:
        late = self.exchange.overdue()
        for node in late:
            self.server.given_up(node)
        return late


#: Once every learner was given up, the server waits at least this long for one to come back
#: (and twice the probe's wait where that is longer) [s].
COME_BACK_S = 30.0


def serve_buffered(run: LiveRun, exchange: Exchange,
                   on_round: Callable[[LiveRun], None] = lambda run: None,
                   log: Callable[[str], None] = lambda text: None) -> None:
    """``run.settings.rounds`` server steps of the run's asynchronous scheme (its ``serve``:
    FedBuff's loop): ``concurrency`` learners train at once, each the same fixed work
    (:func:`equal_work`), and every ``buffer`` updates make one server step, weighted by
    staleness. Each step is a round of the outputs (its accuracy, the updates it holds and
    their staleness); each reply a row (``ok`` with its staleness, ``ignored`` with the
    reason, ``missing`` when its work was given up)."""
    s, spec = run.settings, run.scheme
    assert spec.serve is not None
    learners = run.fleet.learners
    if not learners:
        run.stop(1, "no learner answered the probe")
        on_round(run)
        return
    work = equal_work(run.cycle, run.inst, run.N, sample_bytes(run.data.features),
                      run.fleet.seconds)
    planned = None
    weigh: Callable[[int, int], float] | None = None
    if spec.live_plan is None:  # FedBuff: the same fixed work for every learner
        C = min(s.concurrency or len(learners), len(learners))
        K = min(s.buffer or default_buffer(C), C)
        log(f"{spec.name}: {len(learners)} learners, {C} at once, a server step every {K} "
            f"updates; each {work.samples} samples x {work.passes} passes")
    else:  # each start's work from the scheme's plan, each update weighed by it
        try:
            planned = planned_work(run, spec, work, log)
        except UsageError as exc:
            run.stop(1, str(exc))
            on_round(run)
            return
        plan = planned.plan
        learners = [k for k in learners if k in set(plan.nodes)]
        C, K = min(plan.concurrency, len(learners)), min(plan.buffer, len(learners))

        def weigh(node: int, staleness: int) -> float:
            k = run.fleet.learner_at(node)
            assert k is not None and planned is not None
            return planned.plan.weight(k, staleness)

        log(f"{spec.name}: {len(learners)} learners, {C} at once, a server step every {K} "
            f"updates; samples {int(planned.samples[learners].min())} to "
            f"{int(planned.samples[learners].max())}, the work of each start planned")
    server = AsyncServer(run, work, s.rounds, log, exchange.lap, planned)

    def on_step(step: Step, model: Model) -> None:
        server.on_step(step, model)
        on_round(run)

    polls = exchange.polls_for(max(COME_BACK_S, 2 * run.probe_wait_s(len(learners))))
    server.start_clock()
    outcome = spec.serve(LiveWorkers(server, exchange),
                         [run.fleet.node_of(k) for k in learners],
                         [np.asarray(a, dtype=float) for a in run.model], buffer=K,
                         concurrency=C, steps=s.rounds, server_lr=s.server_lr,
                         aggregation=s.aggregation, max_polls=polls, on_step=on_step,
                         on_reply=server.on_reply, weigh=weigh)
    if outcome.stopped is not None:
        run.stop(len(outcome.steps) + 1, f"{spec.name} stopped: {outcome.stopped}")
        on_round(run)
