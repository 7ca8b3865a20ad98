"""The server's side of a live run, without Flower: probe, plan a round, close it.

:class:`LiveRun` holds what the server knows between rounds (which node is which learner, each
learner's estimated speed, who is missing, the global models) and turns it into typed orders
(:mod:`mel_opt.problems.messages`) and records. The Flower strategy
(:mod:`mel_opt.live.strategy`) and the in-process learners (:mod:`mel_opt.live.inprocess`) only
carry the orders to the learners and their answers back, so everything that decides an
allocation or judges a measurement is a plain function of plain values, testable without a
federation.

Who plans a round is chosen once, from the problem's learner side (:mod:`mel_opt.live.planners`):
the server (it solves the round's instance from the measured speeds) or the learners (dab: each
decides its own work from a brief and keeps its speed to itself).

One round:

1. :meth:`LiveRun.plan`: the planner's cycle plan, and one :class:`~mel_opt.problems.messages.
   TrainOrder` per learner with its task's global model.
   The learners it plans for are those not missing; when the file's job no longer fits them,
   the problem's cycle adapts it (``LearningCycle.live_adapt``) and the round records how. A
   round that cannot be planned (no learner left, no allocation even after the adaptation)
   ends the run before it (:meth:`LiveRun.stop`): the rounds done and their outputs stay.
2. The learners train; the round closes when all have answered or its wall-clock budget
   (:meth:`LiveRun.wait_s`: each learner's predicted computation plus its own measured
   messaging overhead) is spent. A learner that has not answered is *missing*: left out
   of the next allocations until it answers again.
3. :meth:`LiveRun.close`: every answer is read in one place (:meth:`LiveRun.read`: a reply of
   the wrong shape, or one whose measurements are not believed, is ignored with a warning
   naming the learner), its measured time is its compute time plus the plan's emulated
   transfer time, the models are aggregated by the problem's ``aggregate``, the estimates
   follow the measurements, and the global models are evaluated on the server's validation
   set.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt import api
from mel_opt.errors import UsageError
from mel_opt.live.estimates import Estimates, Measurement, Transfers
from mel_opt.live.planners import Planner, planner_for
from mel_opt.live.settings import LiveSettings
from mel_opt.problems import get_problem
from mel_opt.problems.learning import (
    Adaptation,
    CyclePlan,
    LearnerPlan,
    LearningCycle,
    LiveReport,
    Reply,
)
from mel_opt.problems.messages import (
    ProbeOrder,
    ProbeReport,
    Records,
    ReplyError,
    TrainOrder,
    TrainReport,
    shapes_of,
)
from mel_opt.training.data import Dataset
from mel_opt.training.local import evaluate
from mel_opt.training.mlp import Params, init_params, layers_for

__all__ = ["Answer", "LiveRun", "LiveSettings", "RoundPlan", "beyond_compute"]

#: A reply's compute time may exceed its measured round trip by this fraction plus
#: :data:`ELAPSED_SLACK_S` (timer resolution) before it is refused.
ELAPSED_SLACK = 0.01
ELAPSED_SLACK_S = 0.05
#: Learners a pool works through in a probe before their probe is shortened: a pool of P
#: probes at most ``PROBE_WAVES * P`` learners for the whole ``probe_s`` each.
PROBE_WAVES = 8
#: The shortest probe of a learner in a pool [s] (2.5 duty periods of a throttled learner's
#: child, :data:`mel_opt.live.throttle.CHILD_PERIOD_S`, so a slow learner's probe sees it
#: stopped).
MIN_PROBE_S = 0.05
#: Seconds allowed per probed learner for its messaging before its overhead is measured.
PROBE_MESSAGE_S = 0.5


@dataclass(frozen=True)
class Answer:
    """What came back from one learner, not read yet.

    Attributes
    ----------
    learner : int
        The learner whose node sent it.
    records : Records
        Its content (:class:`~mel_opt.problems.messages.TrainReport` or
        :class:`~mel_opt.problems.messages.ProbeReport` encoded).
    elapsed_s : float or None
        Wall time from sending the order to receiving this answer [s].
    """

    learner: int
    records: Records
    elapsed_s: float | None = None


@dataclass
class RoundPlan:
    """One round as planned: the cycle plan and what each learner is sent.

    Attributes
    ----------
    round : int
    cycle : CyclePlan
        The cycle's rules and, where the server planned it, each learner's plan (a round whose
        learners plan their own work has the rules only: they report their plans).
    orders : dict of int to TrainOrder
        Learner -> its order.
    allocation : dict
        The verified solution this round runs (empty when the learners plan).
    method : str
    solve_s : float
        Wall time of building and solving the round's instance [s].
    last : bool
        The method marked this round the last one (adaptive-tau's end-of-budget rule).
    adapted : Adaptation or None
        What the problem changed in the file's job for this round's learners (None:
        nothing).
    claims : dict of int to LearnerPlan
        Where the learners claimed their work first (:mod:`mel_opt.live.claims`): each
        plan claimed, a halt included (a learner that claimed nothing gets no order).
    claim_refused : dict of int to str
        Learners whose claim was refused, and why.
    claimed_by : tuple of int
        The learners asked to claim (empty: no claims this round).
    """

    round: int
    cycle: CyclePlan
    orders: dict[int, TrainOrder]
    allocation: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    solve_s: float = 0.0
    last: bool = False
    adapted: Adaptation | None = None
    claims: dict[int, LearnerPlan] = field(default_factory=dict)
    claim_refused: dict[int, str] = field(default_factory=dict)
    claimed_by: tuple[int, ...] = ()

    @property
    def asked(self) -> list[int]:
        """Every learner this round asked for something (an order or a claim)."""
        return sorted(set(self.orders) | set(self.claimed_by))

    def plan_of(self, learner: int) -> LearnerPlan | None:
        """The server's plan of ``learner`` (None where the learner plans its own)."""
        return next((p for p in self.cycle.learners if p.learner == learner), None)

    @property
    def clock_s(self) -> float:
        """The round's length on the problem's clock [s] (its fixed length, deadline, the
        learners' own deadlines, or the longest predicted time)."""
        c = self.cycle
        if c.duration_s is not None:
            return float(c.duration_s)
        if c.deadline_s is not None:
            return float(c.deadline_s)
        own = [p.deadline_s for p in c.learners if p.deadline_s is not None]
        if own:
            return float(max(own))
        return max((float(p.predicted_s) for p in c.learners), default=0.0)

    def compute_s(self, learner: int) -> float:
        """The computation predicted for ``learner`` [s]: the part of its time that passes on
        the wall clock (transfers are emulated). A learner that plans its own work has no
        prediction on the server: its whole clock."""
        p = self.plan_of(learner)
        return p.compute_s if p is not None else self.clock_s


class LiveRun:
    """The server's state across the rounds of one live run.

    Parameters
    ----------
    settings : LiveSettings
    data : Dataset
        The data set (the server evaluates the global model on its validation part).
    """

    def __init__(self, settings: LiveSettings, data: Dataset) -> None:
        self.settings = settings
        self.inst = api.parse_instance(dict(settings.instance))
        self.spec = get_problem(self.inst.problem)
        cycle = self.spec.learning
        if cycle is None:
            raise UsageError(f"live runs need a problem with a learning cycle; "
                             f"{self.spec.name!r} has none")
        self.cycle: LearningCycle = cycle
        self.method = self.spec.method(settings.method).name
        self.planner: Planner = planner_for(cycle)
        self.K = cycle.live_learners(self.inst, settings.learners)
        self.data = data
        self.N = int(data.y_train.size)
        layers = layers_for(settings.model, data.features, data.classes)
        # one model per task (a task's model starts from its own seed)
        self.models: list[Params] = [init_params(layers, settings.seed + 1009 * t, np.float32)
                                     for t in range(cycle.tasks(self.inst))]
        self.finished = False  # the problem ended the run (adaptive-tau: budget spent)
        # the run ended before its rounds: {"round": the round not run, "reason": one line}
        self.stopped: dict[str, Any] | None = None
        self.estimates = Estimates.unknown(self.K, settings.alpha)
        self.transfers = Transfers.unknown(self.K, settings.alpha)
        if settings.transfers == "measured" and cycle.live_transfers(
                self.inst, self.transfers.seconds, self.transfers.rate_Bps) is None:
            raise UsageError(f"--transfers measured is not defined for {self.spec.name}: its "
                             "plans take the transfers from the file")
        # wall seconds of a message's round trip beyond the learner's computation (process
        # start, data loading, decoding): measured per learner, averaged like the speeds
        self.overhead = np.full(self.K, np.nan)
        # learners trained at once (the simulation's pool; None: each on its own node) and
        # the round trips of a pooled exchange not folded into the overheads yet
        self.pool: int | None = settings.pool
        self._timed: list[tuple[int, float, float]] = []
        self.nodes: dict[int, int] = {}  # node id -> learner
        self.missing: set[int] = set()
        self.warnings: list[str] = []
        self.rows: list[dict[str, Any]] = []
        self.rounds: list[dict[str, Any]] = []
        self.clock_s = 0.0
        self.started = time.perf_counter()
        self.rounds.append({"round": 0, **self.evaluation(), "wall_s": 0.0,
                            "clock_s": 0.0, "learners": 0})

    @property
    def planned(self) -> Any:
        """The instance the rounds are planned from: the file's (as the feedback left it),
        with its transfers as measured under ``transfers = measured``."""
        if self.settings.transfers != "measured":
            return self.inst
        return self.cycle.live_transfers(self.inst, self.transfers.seconds,
                                         self.transfers.rate_Bps)

    @property
    def model(self) -> Params:
        """The global model (of the first task, where there are several)."""
        return self.models[0]

    def model_of(self, learner: int, plan: RoundPlan) -> Params:
        """The global model ``learner`` starts from in ``plan`` (its task's)."""
        return self.models[plan.orders[learner].task]

    def evaluation(self) -> dict[str, Any]:
        """Validation loss and accuracy of the global model; with several tasks, their means
        and each task's own (``tasks``)."""
        scores = [evaluate(m, self.data.x_test, self.data.y_test) for m in self.models]
        out: dict[str, Any] = {"loss": float(np.mean([s[0] for s in scores])),
                               "accuracy": float(np.mean([s[1] for s in scores]))}
        if len(scores) > 1:
            out["tasks"] = [{"task": t, "loss": s[0], "accuracy": s[1]}
                            for t, s in enumerate(scores)]
        return out

    # -- probe ---------------------------------------------------------------------------------
    def probe_order(self, num_nodes: int) -> ProbeOrder:
        """What every node is sent in the probe round."""
        s = self.settings
        return ProbeOrder(self.spec.name, s.model, s.batch_size, s.seed, s.alpha,
                          self.probe_seconds(num_nodes), s.data_spec(num_nodes))

    def probe_seconds(self, num_nodes: int) -> float:
        """Seconds of training each of ``num_nodes`` learners times in the probe: ``probe_s``,
        or, when a pool of P works through more than ``PROBE_WAVES * P`` of them, that many
        learners' worth of probing shared among them (``probe_s * PROBE_WAVES * P /
        num_nodes``, at least :data:`MIN_PROBE_S`): the probe then lasts about as long as
        ``PROBE_WAVES`` full ones instead of growing with the learners. The estimate it
        starts is refined by every round's measurement."""
        s = self.settings.probe_s
        if self.pool is None or num_nodes <= PROBE_WAVES * self.pool:
            return s
        return min(s, max(MIN_PROBE_S, s * PROBE_WAVES * self.pool / num_nodes))

    def probe_wait_s(self, num_nodes: int) -> float:
        """How long the probe of ``num_nodes`` learners may take [s]: their probes and
        :data:`PROBE_MESSAGE_S` of messaging each, through the pool, plus the grace."""
        one = self.probe_seconds(num_nodes) + PROBE_MESSAGE_S
        return self.queue_s([one] * num_nodes) + self.settings.grace

    def accept_probe(self, node_id: int, records: Records,
                     elapsed_s: float | None = None) -> None:
        """Map ``node_id`` to the learner of its partition id and take its first speed (a
        learner that plans its own work keeps it: only the mapping is made) and its messaging
        overhead (``elapsed_s``: the probe's round trip)."""
        try:
            report = ProbeReport.decode(records)
        except ReplyError as exc:
            self.warn(f"node {node_id}'s probe reply ignored: {exc}")
            return
        if not 0 <= report.learner < self.K:
            self.warn(f"node {node_id} reported partition id {report.learner}, not a learner "
                      f"of the instance (0..{self.K - 1}); ignored")
            return
        learner = report.learner
        if _longer_than_trip(report.compute_s, elapsed_s):
            self.warn(f"node {node_id}'s probe reply ignored: it reports compute_s = "
                      f"{report.compute_s:.3g} s, longer than the {elapsed_s:.3g} s its reply "
                      "took")
            return
        if learner in self.nodes.values() and self.nodes.get(node_id) != learner:
            self.warn(f"node {node_id} claims learner {learner}, which another node holds; "
                      "ignored")
            return
        self.nodes[node_id] = learner
        why = self.planner.probed(self, report)
        if why:
            self.warn(f"round 0: learner {learner}'s measurement ignored: {why}")
        self.note_overhead(learner, report.compute_s, elapsed_s)

    def note_overhead(self, learner: int, compute_s: float | None,
                      elapsed_s: float | None) -> None:
        """Fold one round trip of ``learner`` into its messaging overhead; in a pool, keep it
        for :meth:`fold_pooled` (its round trip also holds its time queued behind others)."""
        if elapsed_s is None or not math.isfinite(elapsed_s):
            return
        compute = compute_s if compute_s is not None and math.isfinite(compute_s) else 0.0
        if self.pool is not None:
            self._timed.append((learner, compute, float(elapsed_s)))
            return
        self._fold(learner, max(0.0, elapsed_s - compute))

    def fold_pooled(self) -> None:
        """Fold the round trips kept since the last call into the messaging overhead of a
        pooled exchange: the pool of P (or the n learners, if fewer) was busy until the last
        reply, so each message cost ``(P * last - sum of compute) / n`` beyond its learner's
        computation (the queueing is the pool's, not the learner's); every learner of the
        exchange gets that. Without a pool, nothing is kept and this does nothing."""
        timed, self._timed = self._timed, []
        if not timed:
            return
        pool = min(int(self.pool or 1), len(timed))
        last = max(e for _, _, e in timed)
        busy = sum(c for _, c, _ in timed)
        each = max(0.0, (pool * last - busy) / len(timed))
        for k, _, _ in timed:
            self._fold(k, each)

    def _fold(self, learner: int, value: float) -> None:
        now = float(self.overhead[learner])
        a = self.settings.alpha
        self.overhead[learner] = value if not math.isfinite(now) else (1 - a) * now + a * value

    def queue_s(self, costs: Sequence[float]) -> float:
        """Wall time of jobs of ``costs`` seconds: the longest where every learner trains at
        once; through a pool of P, at most ``sum / P + (1 - 1/P) * longest`` (any order of a
        queue that keeps the P busy: Graham's bound of list scheduling)."""
        if not costs:
            return 0.0
        longest = max(costs)
        if self.pool is None or len(costs) <= self.pool:
            return longest
        P = self.pool
        return sum(costs) / P + (1 - 1 / P) * longest

    def wait_s(self, plan: RoundPlan) -> float:
        """How long the server waits for the replies of ``plan`` [s]: for each learner its
        predicted computation and a quarter more (for learners slower than predicted) plus its
        measured messaging overhead; the longest of those (the learners of a pool: the
        queue's length, :meth:`queue_s`), plus the grace."""
        waits = [1.25 * plan.compute_s(k) + self.overhead_s(k) for k in plan.orders]
        return self.queue_s(waits) + self.settings.grace

    def rejoin_wait_s(self, learners: Sequence[int]) -> float:
        """How long to wait for a probe of the missing ``learners`` [s]."""
        probe = self.probe_seconds(len(self.nodes))
        return self.queue_s([1.5 * self.overhead_s(k) + probe for k in learners]) + \
            self.settings.grace

    def overhead_s(self, k: int) -> float:
        value = float(self.overhead[k])
        return value if math.isfinite(value) else 0.0

    def node_of(self, learner: int) -> int:
        return next(n for n, k in self.nodes.items() if k == learner)

    @property
    def active(self) -> np.ndarray:
        """Learners the planner can plan for (with a node, and with an estimate where the
        server plans) that are not missing, in learner order."""
        known = self.planner.known(self)
        return np.array(sorted(k for k in self.nodes.values()
                               if k in known and k not in self.missing), dtype=np.int64)

    # -- one round -----------------------------------------------------------------------------
    def plan(self, r: int) -> RoundPlan:
        """The allocation and the learners' orders of round ``r`` (1, 2, ...).

        Raises
        ------
        UsageError
            No learner is left, or the round's instance has no verified allocation.
        """
        active = self.active
        if active.size == 0:
            raise UsageError(f"round {r}: no learner is left to train (all missing)")
        draft = self.planner.plan(self, r, active)
        s = self.settings
        data = s.data_spec(len(self.nodes))
        batch = s.batch_size if draft.cycle.batch is None else draft.cycle.batch
        lr = s.lr * draft.cycle.lr_scale
        plans = {p.learner: p for p in draft.cycle.learners}
        orders = {}
        for k in draft.learners:
            p = plans.get(k)
            common = (self.spec.name, r, s.seed, s.alpha, lr, batch, data)
            if p is None:  # the learner plans its own work from its brief
                orders[k] = TrainOrder(*common, self.models[0], brief=draft.briefs.get(k, {}))
            else:
                orders[k] = TrainOrder(*common, self.models[p.task], task=p.task,
                                       samples=p.samples, passes=p.passes,
                                       predicted_s=p.predicted_s, comm_s=p.comm_s)
        return RoundPlan(r, draft.cycle, orders, draft.allocation, draft.method, draft.solve_s,
                         draft.last, draft.adapted)

    def stop(self, r: int, why: str) -> None:
        """End the run before round ``r``, which could not be planned (``why``: one line);
        the rounds done keep their records."""
        self.stopped = {"round": int(r), "reason": why}
        self.warn(why)

    def read(self, plan: RoundPlan, answer: Answer) -> TrainReport | str:
        """The report in ``answer`` (:meth:`read_report` against its task's global model),
        or why it is ignored."""
        task = plan.orders[answer.learner].task if answer.learner in plan.orders else 0
        return self.read_report(answer.learner, task, answer.records, answer.elapsed_s)

    def read_report(self, learner: int, task: int, records: Records,
                    elapsed_s: float | None) -> TrainReport | str:
        """The train report of ``learner`` in ``records``, or why it is ignored: the one place
        a reply is refused (a message of the wrong shape, a model of other shapes than
        ``task``'s global model, non-finite numbers or arrays, a report for another learner,
        a compute time longer than the reply's measured round trip ``elapsed_s``)."""
        try:
            report = TrainReport.decode(records, shapes_of(self.models[task]))
        except ReplyError as exc:
            return str(exc)
        if report.learner != learner:
            return (f"it reports partition id {report.learner}, its node holds learner "
                    f"{learner}")
        # the learner trained between the order's sending and its reply's arrival: a longer
        # compute time is not a measurement (the slack covers the timers' resolution)
        if _longer_than_trip(report.compute_s, elapsed_s):
            return (f"it reports compute_s = {report.compute_s:.3g} s, longer than the "
                    f"{elapsed_s:.3g} s its reply took")
        return report

    def close(self, plan: RoundPlan, answers: Sequence[Answer], wall_s: float) -> None:
        """Read the answers, aggregate, update the estimates, record the round."""
        r = plan.round
        expected = self.overhead.copy()  # each learner's messaging as estimated before
        got: dict[int, TrainReport] = {}
        elapsed: dict[int, float | None] = {}
        refused: dict[int, str] = {}
        for answer in answers:
            k = answer.learner
            if k in got or k in refused:
                self.warn(f"round {r}: learner {k} answered twice; the second answer is "
                          "ignored")
                continue
            read = self.read(plan, answer)
            if isinstance(read, str):
                refused[k] = read
            else:
                got[k] = read
                elapsed[k] = answer.elapsed_s
        for k, why in plan.claim_refused.items():  # refused before it got an order
            refused.setdefault(k, why)
        answered = set(got) | set(refused)
        self.missing = {k for k in plan.orders if k not in answered} | (
            self.missing - answered)
        plans = self.planner.learner_plans(self, plan, got)
        for k, report in got.items():
            self.note_overhead(k, report.compute_s, elapsed[k])
        self.fold_pooled()
        rows, usable = [], []
        for k in plan.asked:
            row = self._row(plan, k, plans.get(k), got.get(k), refused.get(k))
            row["comm_predicted_s"] = float(expected[k]) if math.isfinite(expected[k]) \
                else None
            if k in got:
                row["comm_measured_s"] = beyond_compute(elapsed[k], got[k].compute_s)
                model = self.models[plan.orders[k].task]
                self.transfers.update(k, row["comm_measured_s"], row.get("shipped_bytes"),
                                      sum(int(a.nbytes) for a in model))
            rows.append(row)
            p = plans.get(k)
            if row["status"] in ("ok", "late") and p is not None and p.weight > 0:
                usable.append((Reply(k, row["measured_s"]), got[k].model, p))
        self.rows.extend(rows)
        cycle = CyclePlan(tuple(plans.values()), plan.cycle.duration_s, plan.cycle.deadline_s,
                          plan.cycle.batch, plan.cycle.lr_scale, plan.cycle.restart) \
            if not plan.cycle.learners else plan.cycle
        clock = self._aggregate(cycle, usable) if usable else plan.clock_s
        if not usable:
            self.warn(f"round {r}: no usable reply; the global model is unchanged")
        self.clock_s += clock
        reports = [LiveReport(k, float(row["compute_measured_s"]), p.weight,
                              dict(got[k].extras), dict(got[k].arrays))
                   for row in rows for k in [row["learner"]]
                   if row["status"] == "ok" and k in got and (p := plans.get(k)) is not None]
        fb = self.cycle.live_feedback(self.inst, cycle, reports, wall_s)
        self.inst = fb.instance
        self.finished = fb.stop or plan.last
        self.rounds.append({"round": r, **self.evaluation(),
                            "wall_s": time.perf_counter() - self.started,
                            "round_wall_s": wall_s, "clock_s": self.clock_s,
                            "learners": len(usable), "missing": sorted(self.missing),
                            "method": plan.method, "solve_s": plan.solve_s,
                            "allocation": plan.allocation, "last": plan.last or self.finished,
                            **({"control": dict(fb.record)} if fb.record else {}),
                            **({"adapted": _adapted(plan.adapted)} if plan.adapted else {})})

    def _aggregate(self, cycle: CyclePlan,
                   usable: Sequence[tuple[Reply, Params, LearnerPlan]]) -> float:
        """Each task's new global model from its learners' replies (the problem's
        ``aggregate``); returns the round's length on the problem's clock (the longest of the
        tasks')."""
        clock = 0.0
        for task in sorted({p.task for _, _, p in usable}):
            mine = [(reply, model) for reply, model, p in usable if p.task == task]
            sub = CyclePlan(tuple(p for p in cycle.learners if p.task == task),
                            cycle.duration_s, cycle.deadline_s, cycle.batch, cycle.lr_scale,
                            cycle.restart)
            stacked = [np.stack([m[i] for _, m in mine]) for i in range(len(mine[0][1]))]
            agg = self.cycle.aggregate(sub, [rp for rp, _ in mine], stacked)
            self.models[task] = [np.asarray(a, dtype=np.float32) for a in agg.model]
            clock = max(clock, agg.duration_s)
        return clock

    # -- helpers -------------------------------------------------------------------------------
    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def measure(self, learner: int, compute_s: float | None, work: float | None,
                r: int) -> str:
        """Fold one measurement into ``learner``'s speed estimate; why it was refused ('' when
        taken)."""
        m = Measurement.of(learner, compute_s, work)
        return m if isinstance(m, str) else self.estimates.update(m, r)

    def _row(self, plan: RoundPlan, k: int, p: LearnerPlan | None,
             report: TrainReport | None, refused: str | None) -> dict[str, Any]:
        node = self.node_of(k) if k in self.nodes.values() else None
        row: dict[str, Any] = {"round": plan.round, "learner": k,
                               "name": self.learner_name(k), "node": node}
        if plan.adapted is not None:
            row["adapted"] = plan.adapted.text
        clock = plan.clock_s
        if p is not None and p.deadline_s is not None:  # its own deadline (med: its task's)
            clock = p.deadline_s
        row.update(predicted_s=None if p is None else p.predicted_s,
                   comm_emulated_s=None if p is None else p.comm_s,
                   compute_predicted_s=None if p is None else p.compute_s)
        if p is not None:
            row.update(p.columns)
            row.update(samples=p.samples, passes=p.passes)
        order = plan.orders.get(k)
        if order is not None and order.shipped:  # the samples sent with the model
            row["shipped_bytes"] = int(sum(a.nbytes for a in order.shipped))
        why = refused
        if p is not None and p.samples == 0 and (report is not None or k in plan.claims):
            # it halted (dab): in its reply, or in its claim (then it got no order)
            row.update(status="ok", measured_s=p.comm_s, compute_measured_s=0.0,
                       deadline_met=True)
            return row
        if report is None and why is None:
            row.update(status="missing", measured_s=None, compute_measured_s=None,
                       deadline_met=False)
            return row
        if report is not None and why is None:
            why = self.planner.measured(self, report, plan.round) or (
                "" if p is not None else "it sent no plan of its own")
        if why or report is None or p is None:
            self.warn(f"round {plan.round}: learner {k}'s reply ignored: {why}")
            row.update(status="ignored", reason=why, measured_s=None, compute_measured_s=None,
                       deadline_met=False)
            return row
        measured = report.compute_s + p.comm_s
        if not self.cycle.has_deadline:
            row.update(status="ok", measured_s=measured, compute_measured_s=report.compute_s,
                       deadline_met=None)
            return row
        met = measured <= clock * (1 + 1e-9)
        row.update(status="ok" if met else "late", measured_s=measured,
                   compute_measured_s=report.compute_s, deadline_met=met)
        return row

    def learner_name(self, k: int) -> str:
        names = getattr(self.inst, "learner_names", None) or getattr(self.inst, "device_names",
                                                                         None)
        return str(names[k]) if names is not None else str(k)

    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json``."""
        s = self.settings
        measured = [r for r in self.rows if r.get("measured_s") is not None and
                    r.get("compute_predicted_s")]
        return {
            "instance": self.inst.name, "problem": self.spec.name,
            "method": "fedbuff" if s.scheme == "fedbuff" else self.method, "scheme": s.scheme,
            "rounds": self.rounds, "learners": self.K, "nodes": len(self.nodes),
            "settings": {"rounds": s.rounds, "seed": s.seed, "dataset": s.dataset,
                         "partition": s.partition, "model": s.model, "lr": s.lr,
                         "batch_size": s.batch_size, "alpha": s.alpha,
                         **({"buffer": s.buffer, "concurrency": s.concurrency,
                             "server_lr": s.server_lr} if s.scheme == "fedbuff" else {})},
            "plotted": dict(self.cycle.plotted),
            "estimates_s_per_sample": [None if not math.isfinite(v) else v
                                       for v in self.estimates.seconds],
            "estimates_comm_s": [None if not math.isfinite(v) else float(v)
                                 for v in self.overhead],
            "estimates_rate_Bps": [None if not math.isfinite(v) else float(v)
                                   for v in self.transfers.rate_Bps],
            "prediction_error": _median_errors(measured),
            "adapted": [{"round": r["round"], **r["adapted"]} for r in self.rounds
                        if "adapted" in r],
            "stopped": self.stopped,
            "warnings": self.warnings,
            "wall_s": time.perf_counter() - self.started,
        }


def _longer_than_trip(compute_s: float | None, elapsed_s: float | None) -> bool:
    """Whether a reported compute time is longer than the measured round trip of its reply
    (beyond the timers' slack): then it cannot be a measurement."""
    return compute_s is not None and elapsed_s is not None and math.isfinite(elapsed_s) and \
        compute_s > elapsed_s * (1 + ELAPSED_SLACK) + ELAPSED_SLACK_S


def beyond_compute(elapsed_s: float | None, compute_s: float) -> float | None:
    """The part of a reply's measured round trip its learner did not spend computing [s]:
    the order's and the reply's transfers, and the deployment's own messaging (polls, the
    learner process). None without a round trip (the in-process engine)."""
    if elapsed_s is None or not math.isfinite(elapsed_s) or not math.isfinite(compute_s):
        return None
    return max(0.0, float(elapsed_s) - float(compute_s))


def _adapted(a: Adaptation) -> dict[str, Any]:
    """An adaptation as the round's record keeps it."""
    return {"text": a.text, "changes": {k: list(v) for k, v in a.changes.items()},
            "data_fraction": a.data_fraction}


def _median_errors(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Median relative error |measured - predicted| / measured of the compute time, per round
    and over rounds 3 and later."""
    by_round: dict[int, list[float]] = {}
    for r in rows:
        pred, meas = r["compute_predicted_s"], r["compute_measured_s"]
        if meas and meas > 0:
            by_round.setdefault(int(r["round"]), []).append(abs(meas - pred) / meas)
    out: dict[str, float | None] = {f"round_{k}": float(np.median(v))
                                    for k, v in sorted(by_round.items())}
    later = [e for k, v in by_round.items() if k >= 3 for e in v]
    out["round_3_on"] = float(np.median(later)) if later else None
    return out
