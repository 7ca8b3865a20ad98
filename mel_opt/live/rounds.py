"""The server's side of a live run, without Flower: probe, plan a round, close it.

:class:`LiveRun` is the owner of one run's state, split by what it holds: the fleet
(:class:`~mel_opt.live.fleet.Fleet`: which node is which learner, who is missing, the timing
estimates), the global models (:class:`~mel_opt.live.models.GlobalModels`) and the typed log
(:class:`~mel_opt.live.log.RunLog`: rows, rounds, warnings). It turns them into typed orders
(:mod:`mel_opt.problems.messages`) and records; the planners (:mod:`mel_opt.live.planners`),
the claims (:mod:`mel_opt.live.claims`) and FedBuff's server side
(:mod:`mel_opt.live.fedbuff`) read views of it and return decisions that it applies. The round
loop (:mod:`mel_opt.live.loop`) carries the orders to the learners and their answers back over
an exchange (Flower's grid, or learners in this process), so everything that decides an
allocation or judges a measurement is a plain function of plain values, testable without a
federation.

One round:

1. :meth:`LiveRun.plan`: the planner's cycle plan, and one :class:`~mel_opt.problems.messages.
   TrainOrder` per learner with its task's global model (:meth:`LiveRun.order`).
   The learners it plans for are those not missing; when the file's job no longer fits them,
   the problem's cycle adapts it (``LearningCycle.live_adapt``) and the round records how. A
   round that cannot be planned (no learner left, no allocation even after the adaptation)
   ends the run before it (:meth:`LiveRun.stop`): the rounds done and their outputs stay.
2. The learners train; the round closes when all have answered or its wall-clock budget
   (:meth:`LiveRun.wait_s`: each learner's predicted computation plus its own measured
   messaging overhead) is spent. A learner that has not answered is *missing*: left out
   of the next allocations until it answers again.
3. :meth:`LiveRun.close`: every answer is read in one place (:meth:`LiveRun.read_report`: a
   reply of the wrong shape, or one whose measurements are not believed, is ignored with a
   warning naming the learner), its measured time is its compute time plus the plan's
   emulated transfer time, the models are aggregated by the problem's ``aggregate``, the
   estimates follow the measurements, and the global models are evaluated on the server's
   validation set.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mel_opt import api
from mel_opt.errors import UsageError
from mel_opt.live import claims
from mel_opt.live.estimates import Estimates, Transfers
from mel_opt.live.fleet import Fleet
from mel_opt.live.log import LearnerRow, RoundRecord, RunLog
from mel_opt.live.models import GlobalModels
from mel_opt.live.plan import Answer, RoundPlan
from mel_opt.live.planners import Planner, PlanView, planner_for
from mel_opt.live.settings import LiveSettings
from mel_opt.problems import get_problem
from mel_opt.problems.attacks import make_attack
from mel_opt.problems.learning import (
    Adaptation,
    CyclePlan,
    LearnerPlan,
    LearningCycle,
    LiveReport,
    Reply,
    sample_bytes,
)
from mel_opt.problems.messages import (
    DataSpec,
    ProbeOrder,
    ProbeReport,
    Records,
    ReplyError,
    TrainOrder,
    TrainReport,
    shapes_of,
)
from mel_opt.schemes import SchemeSpec, get_scheme
from mel_opt.schemes.period import LearnerConstants
from mel_opt.training.data import Dataset
from mel_opt.training.mlp import Params

__all__ = ["Answer", "LiveRun", "LiveSettings", "RoundPlan", "beyond_compute"]

#: A reply's compute time may exceed its measured round trip by this fraction plus
#: :data:`ELAPSED_SLACK_S` (timer resolution) before it is refused.
ELAPSED_SLACK = 0.01
ELAPSED_SLACK_S = 0.05
#: Seconds allowed per probed learner for its messaging before its overhead is measured.
PROBE_MESSAGE_S = 0.5


class LiveRun:
    """The server's state across the rounds of one live run (module docstring).

    Parameters
    ----------
    settings : LiveSettings
    data : Dataset
        The data set (the server evaluates the global model on its validation part).
    inst : instance, optional
        The instance of ``settings.instance``, where the caller parsed it already (else it is
        parsed here: a server app in another process reads the document it was sent).
    """

    def __init__(self, settings: LiveSettings, data: Dataset, inst: Any = None) -> None:
        self.settings = settings
        self._inst = inst if inst is not None else api.parse_instance(dict(settings.instance))
        self.spec = get_problem(self._inst.problem)
        cycle = self.spec.learning
        if cycle is None:
            raise UsageError(f"live runs need a problem with a learning cycle; "
                             f"{self.spec.name!r} has none")
        self.cycle: LearningCycle = cycle
        self.scheme: SchemeSpec = get_scheme(settings.scheme, "live")
        self.method = self.spec.method(settings.method).name
        self.K = cycle.live_learners(self._inst, settings.learners)
        self.planner: Planner = planner_for(cycle, self.K)
        self.data = data
        self.N = int(data.y_train.size)
        self.models = GlobalModels(settings.model, data, settings.seed, cycle.tasks(self._inst))
        self.fleet = Fleet(self.K, settings.alpha, settings.pool)
        #: Learners told to lie in a measured run (their own process lies: the order says how)
        self.attack = make_attack(settings, self.K, settings.seed)
        self.log = RunLog()
        self._finished = False  # the problem ended the run (adaptive-tau: budget spent)
        if settings.transfers == "measured" and not cycle.measured_transfers:
            raise UsageError(f"--transfers measured is not defined for {self.spec.name}: its "
                             "plans take the transfers from the file")
        self.clock_s = 0.0
        self._partitions = 0  # the data's parts: the nodes of the first probe
        #: Each learner's constants of the period's bound, from its probe (staggered with
        #: ``period_rule`` bound asks for them; :mod:`mel_opt.schemes.period`)
        self.constants: dict[int, LearnerConstants] = {}
        self.started = time.perf_counter()
        self.log.add_round(RoundRecord(0, self.models.evaluation(), 0.0, 0.0, 0))

    # -- read-only views -----------------------------------------------------------------------
    @property
    def inst(self) -> Any:
        """The file's instance, as the problem's feedback has left it."""
        return self._inst

    @property
    def finished(self) -> bool:
        """The problem ended the run (adaptive-tau: its budget is spent), or the method marked
        the last round."""
        return self._finished

    @property
    def model(self) -> Params:
        """The global model (of the first task, where there are several)."""
        return self.models.of(0)

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.log.row_dicts()

    @property
    def rounds(self) -> list[dict[str, Any]]:
        return self.log.round_dicts()

    @property
    def warnings(self) -> list[str]:
        return list(self.log.warnings)

    @property
    def stopped(self) -> dict[str, Any] | None:
        return self.log.stopped

    @property
    def nodes(self) -> Mapping[int, int]:
        return self.fleet.nodes

    @property
    def missing(self) -> frozenset[int]:
        return self.fleet.missing

    @property
    def estimates(self) -> Estimates:
        return self.fleet.estimates

    @property
    def transfers(self) -> Transfers:
        return self.fleet.transfers

    @property
    def planned(self) -> Any:
        """The instance the rounds are planned from: the file's (as the feedback left it),
        with its transfers as measured under ``transfers = measured``."""
        if self.settings.transfers != "measured":
            return self._inst
        return self.cycle.live_transfers(self._inst, self.fleet.transfers.seconds,
                                         self.fleet.transfers.rate_Bps)

    def view(self) -> PlanView:
        """What a planner reads of the run."""
        return PlanView(self.cycle, self.spec.name, self.method, self.planned,
                        self.fleet.seconds, self.N, sample_bytes(self.data.features),
                        self.settings)

    @property
    def active(self) -> np.ndarray:
        """Learners the planner can plan for (with a node, and with an estimate where the
        server plans) that are not missing, in learner order."""
        return self.fleet.active(self.planner.known(self.fleet.seconds))

    def learner_name(self, k: int) -> str:
        names = getattr(self._inst, "learner_names", None) or getattr(
            self._inst, "device_names", None)
        return str(names[k]) if names is not None else str(k)

    @property
    def data_spec(self) -> DataSpec:
        """Where each learner finds its part of the data: one part per node of the first probe
        (so a node that did not answer it finds its part when it joins later)."""
        return self.settings.data_spec(max(self._partitions, len(self.fleet.nodes)))

    def warn(self, text: str) -> None:
        self.log.warn(text)

    # -- probe ---------------------------------------------------------------------------------
    def probe_order(self, num_nodes: int) -> ProbeOrder:
        """What every node is sent in the probe round."""
        s = self.settings
        self._partitions = max(self._partitions, num_nodes)
        return ProbeOrder(self.spec.name, s.model, s.batch_size, s.seed, s.alpha,
                          self.probe_seconds(num_nodes), self.data_spec,
                          s.lr if s.period_rule == "bound" else None)

    def probe_seconds(self, num_nodes: int) -> float:
        """Seconds of training each of ``num_nodes`` learners times in the probe
        (:meth:`~mel_opt.live.fleet.Fleet.probe_seconds` of the run's ``probe_s``)."""
        return self.fleet.probe_seconds(num_nodes, self.settings.probe_s)

    def probe_wait_s(self, num_nodes: int) -> float:
        """How long the probe of ``num_nodes`` learners may take [s]: their probes and
        :data:`PROBE_MESSAGE_S` of messaging each, through the pool, plus the grace."""
        one = self.probe_seconds(num_nodes) + PROBE_MESSAGE_S
        return self.fleet.queue_s([one] * num_nodes) + self.settings.grace

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
        if 0 <= report.learner < self.K and _longer_than_trip(report.compute_s, elapsed_s):
            self.warn(f"node {node_id}'s probe reply ignored: it reports compute_s = "
                      f"{report.compute_s:.3g} s, longer than the {elapsed_s:.3g} s its reply "
                      "took")
            return
        why = self.fleet.join(node_id, report.learner)
        if why:
            self.warn(why)
            return
        why = self.fleet.measure(self.planner.probed(report), 0)
        if why:
            self.warn(f"round 0: learner {report.learner}'s measurement ignored: {why}")
        else:
            why = self.fleet.split_start(report.learner, report.start_s, report.rate_s,
                                         report.compute_s, report.work)
            if why:
                self.warn(f"round 0: {why}")
        # the messaging is the round trip less the timed training and the constants' work
        busy = None if report.compute_s is None else report.compute_s + report.constants_s
        self.fleet.note_overhead(report.learner, busy, elapsed_s)
        if report.gradient is not None:
            self._take_constants(node_id, report)

    def _take_constants(self, node_id: int, report: ProbeReport) -> None:
        """Keep the bound's constants a probe reply brought (a gradient of another size than
        the starting model's is refused with a warning)."""
        assert report.gradient is not None and report.rho is not None and \
            report.beta is not None
        flat = np.concatenate([np.ravel(a) for a in report.gradient]).astype(np.float64)
        size = sum(int(np.size(a)) for a in self.models.of(0))
        if flat.size != size:
            self.warn(f"node {node_id}'s constants ignored: its gradient has {flat.size} "
                      f"values, the model {size}")
            return
        self.constants[report.learner] = LearnerConstants(flat, report.rho, report.beta)

    def rejoin_wait_s(self, learners: Sequence[int]) -> float:
        """How long to wait for a probe of the missing ``learners`` [s]."""
        probe = self.probe_seconds(len(self.fleet.nodes))
        return self.fleet.queue_s([1.5 * self.fleet.overhead_s(k) + probe for k in learners]) \
            + self.settings.grace

    # -- orders --------------------------------------------------------------------------------
    def order(self, r: int, model: Params, plan: LearnerPlan | None = None,
              brief: Mapping[str, Any] | None = None, lr: float | None = None,
              batch: int | None = None) -> TrainOrder:
        """What a learner is sent to train in round (or step) ``r`` from ``model``: its
        ``plan`` (the server's), or, for a learner that plans its own work, its ``brief``;
        the run's learning rate and minibatch unless the round sets its own."""
        s = self.settings
        common = (self.spec.name, r, s.seed, s.alpha, s.lr if lr is None else lr,
                  s.batch_size if batch is None else batch, self.data_spec)
        if plan is None:
            return TrainOrder(*common, model, brief=dict(brief or {}))
        return TrainOrder(*common, model, task=plan.task, samples=plan.samples,
                          passes=plan.passes, predicted_s=plan.predicted_s, comm_s=plan.comm_s)

    def lying(self, order: TrainOrder, k: int, r: int) -> TrainOrder:
        """``order`` for learner ``k`` in round ``r``, telling it to lie where the run's
        ``attack`` makes it a liar by then (:mod:`mel_opt.problems.attacks`)."""
        if self.attack is None or not self.attack.lies(k, r):
            return order
        return dataclasses.replace(order, attack=str(self.settings.attack))

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
        draft = self.planner.plan(self.view(), r, active)
        lr = self.settings.lr * draft.cycle.lr_scale
        plans = {p.learner: p for p in draft.cycle.learners}
        orders = {}
        for k in draft.learners:
            p = plans.get(k)
            model = self.models.of(0 if p is None else p.task)
            orders[k] = self.lying(self.order(r, model, p, draft.briefs.get(k, {}), lr,
                                              draft.cycle.batch), k, r)
        return RoundPlan(r, draft.cycle, orders, draft.allocation, draft.method, draft.solve_s,
                         draft.last, draft.adapted)

    def wait_s(self, plan: RoundPlan) -> float:
        """How long the server waits for the replies of ``plan`` [s]: each learner's
        :meth:`~mel_opt.live.fleet.Fleet.reply_wait_s` for its predicted computation, the
        longest of those (the learners of a pool: the queue's length), plus the grace."""
        waits = [self.fleet.reply_wait_s(k, plan.compute_s(k)) for k in plan.orders]
        return self.fleet.queue_s(waits) + self.settings.grace

    def take_claims(self, plan: RoundPlan, answers: Sequence[Answer]) -> RoundPlan:
        """Round ``plan`` once its learners claimed (:func:`mel_opt.live.claims.take_claims`
        decides; the run applies it: those that did not answer are missing)."""
        claimed = claims.take_claims(plan, answers, self.data_spec,
                                     self.data, sample_bytes(self.data.features))
        self.fleet.lose(claimed.missing)
        for text in claimed.warnings:
            self.warn(text)
        return claimed.plan

    def stop(self, r: int, why: str) -> None:
        """End the run before round ``r``, which could not be planned (``why``: one line);
        the rounds done keep their records."""
        self.log.stop(r, why)

    # -- replies -------------------------------------------------------------------------------
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
            report = TrainReport.decode(records, shapes_of(self.models.of(task)))
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

    def measured(self, report: TrainReport, r: int) -> str:
        """Judge (and take) a report's measured time (the planner says what it means, the
        fleet folds it); why it is not believed ('' when it is)."""
        return self.fleet.measure(self.planner.measured(report), r)

    def close(self, plan: RoundPlan, answers: Sequence[Answer], wall_s: float) -> None:
        """Read the answers, aggregate, update the estimates, record the round."""
        r = plan.round
        expected = self.fleet.overhead.copy()  # each learner's messaging as estimated before
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
        self.fleet.back(answered)
        self.fleet.lose(k for k in plan.orders if k not in answered)
        plans = self.planner.learner_plans(plan.cycle, plan.claims, got)
        for k, report in got.items():
            self.fleet.note_overhead(k, report.compute_s, elapsed[k])
        self.fleet.fold_pooled()
        rows, usable = [], []
        for k in plan.asked:
            row = self._row(plan, k, plans.get(k), got.get(k), refused.get(k))
            before = float(expected[k])
            row = dataclasses.replace(row, comm_predicted_s=before if math.isfinite(before)
                                      else None)
            if k in got:
                comm = beyond_compute(elapsed[k], got[k].compute_s)
                row = dataclasses.replace(row, comm_measured_s=comm)
                model = self.models.of(plan.orders[k].task)
                self.fleet.transferred(k, comm, row.shipped_bytes,
                                       sum(int(a.nbytes) for a in model))
            rows.append(row)
            p = plans.get(k)
            if row.status in ("ok", "late") and p is not None and p.weight > 0:
                assert row.measured_s is not None
                usable.append((Reply(k, row.measured_s), got[k].model, p))
        cycle = CyclePlan(tuple(plans.values()), plan.cycle.duration_s, plan.cycle.deadline_s,
                          plan.cycle.batch, plan.cycle.lr_scale, plan.cycle.restart) \
            if not plan.cycle.learners else plan.cycle
        notes: dict[int, str] = {}
        kept: list[str] = []
        clock = self._aggregate(cycle, usable, notes, kept) if usable else plan.clock_s
        # what the aggregation rule did to a reply is its row's reason (its status stays)
        rows = [dataclasses.replace(row, reason=notes[row.learner])
                if row.learner in notes and row.reason is None else row for row in rows]
        self.log.add_rows(rows)
        for why in kept:
            self.warn(f"round {r}: {why}")
        if not usable:
            self.warn(f"round {r}: no usable reply; the global model is unchanged")
        self.clock_s += clock
        reports = [LiveReport(row.learner, float(row.compute_measured_s or 0.0), p.weight,
                              dict(got[row.learner].extras), dict(got[row.learner].arrays))
                   for row in rows
                   if row.status == "ok" and row.learner in got
                   and (p := plans.get(row.learner)) is not None]
        fb = self.cycle.live_feedback(self._inst, cycle, reports, wall_s)
        self._inst = fb.instance
        self._finished = fb.stop or plan.last
        self.log.add_round(RoundRecord(
            r, self.models.evaluation(), time.perf_counter() - self.started, self.clock_s,
            len(usable), round_wall_s=wall_s, missing=tuple(sorted(self.fleet.missing)),
            method=plan.method, solve_s=plan.solve_s, allocation=plan.allocation,
            last=plan.last or self._finished, control=dict(fb.record) if fb.record else None,
            adapted=_adapted(plan.adapted) if plan.adapted else None,
            clipped=dict(notes) or None, kept="; ".join(kept) or None))

    def _aggregate(self, cycle: CyclePlan,
                   usable: Sequence[tuple[Reply, Params, LearnerPlan]],
                   notes: dict[int, str], kept: list[str]) -> float:
        """Each task's new global model from its learners' replies (the problem's
        ``aggregate`` by the run's ``aggregation``, from the task's model as it was);
        returns the round's length on the problem's clock (the longest of the tasks'). What
        the rule did is added to ``notes`` (learner -> why) and ``kept`` (why a task kept
        its model: the aggregate was not finite)."""
        clock = 0.0
        for task in sorted({p.task for _, _, p in usable}):
            mine = [(reply, model) for reply, model, p in usable if p.task == task]
            sub = CyclePlan(tuple(p for p in cycle.learners if p.task == task),
                            cycle.duration_s, cycle.deadline_s, cycle.batch, cycle.lr_scale,
                            cycle.restart)
            stacked = [np.stack([m[i] for _, m in mine]) for i in range(len(mine[0][1]))]
            agg = self.cycle.aggregate(sub, [rp for rp, _ in mine], stacked,
                                       self.models.of(task), self.settings.aggregation)
            notes.update(agg.notes)
            if agg.kept is not None:
                kept.append(agg.kept if task == 0 else f"task {task}: {agg.kept}")
            self.models.replace(task, agg.model)
            clock = max(clock, agg.duration_s)
        return clock

    def _row(self, plan: RoundPlan, k: int, p: LearnerPlan | None,
             report: TrainReport | None, refused: str | None) -> LearnerRow:
        """Learner ``k``'s row of round ``plan`` (its measurement judged and taken here)."""
        order = plan.orders.get(k)
        base: dict[str, Any] = dict(
            round=plan.round, learner=k, name=self.learner_name(k),
            node=self.fleet.node_of(k) if self.fleet.has_node(k) else None,
            adapted=None if plan.adapted is None else plan.adapted.text,
            predicted_s=None if p is None else p.predicted_s,
            comm_emulated_s=None if p is None else p.comm_s,
            compute_predicted_s=None if p is None else p.compute_s,
            shipped_bytes=int(sum(a.nbytes for a in order.shipped))
            if order is not None and order.shipped else None)
        if p is not None:
            base.update(columns=dict(p.columns), samples=p.samples, passes=p.passes)
        clock = plan.clock_s
        if p is not None and p.deadline_s is not None:  # its own deadline (med: its task's)
            clock = p.deadline_s
        if p is not None and p.samples == 0 and (report is not None or k in plan.claims):
            # it halted (dab): in its reply, or in its claim (then it got no order)
            return LearnerRow(**base, status="ok", measured_s=p.comm_s, compute_measured_s=0.0,
                              deadline_met=True)
        why = refused
        if report is None and why is None:
            return LearnerRow(**base, status="missing", deadline_met=False)
        if report is not None and why is None:
            why = self.measured(report, plan.round) or (
                "" if p is not None else "it sent no plan of its own")
        if why or report is None or p is None:
            self.warn(f"round {plan.round}: learner {k}'s reply ignored: {why}")
            return LearnerRow(**base, status="ignored", reason=why, deadline_met=False)
        measured = report.compute_s + p.comm_s
        if not self.cycle.has_deadline:
            return LearnerRow(**base, status="ok", measured_s=measured,
                              compute_measured_s=report.compute_s)
        met = measured <= clock * (1 + 1e-9)
        return LearnerRow(**base, status="ok" if met else "late", measured_s=measured,
                          compute_measured_s=report.compute_s, deadline_met=met)

    # -- outputs -------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json``."""
        s = self.settings
        rows = self.rows
        measured = [r for r in rows if r.get("measured_s") is not None and
                    r.get("compute_predicted_s")]
        return {
            "instance": self._inst.name, "problem": self.spec.name,
            "method": self.scheme.method_label(self.method), "scheme": s.scheme,
            "rounds": self.rounds, "learners": self.K, "nodes": len(self.fleet.nodes),
            "settings": {"rounds": s.rounds, "seed": s.seed, "dataset": s.dataset,
                         "partition": s.partition, "model": s.model, "lr": s.lr,
                         "batch_size": s.batch_size, "alpha": s.alpha,
                         **{o.name: getattr(s, o.name)
                            for o in self.scheme.options_for("live")}},
            "plotted": dict(self.cycle.plotted),
            "estimates_s_per_sample": _listed(self.fleet.estimates.seconds),
            # each probe's split of a start into a fixed cost and a rate (0 and None: none)
            "probe_start_s": _listed(self.fleet.start_s),
            "probe_rate_s_per_sample": _listed(self.fleet.rate_s),
            "estimates_comm_s": _listed(self.fleet.overhead),
            "estimates_rate_Bps": _listed(self.fleet.transfers.rate_Bps),
            "prediction_error": _median_errors(measured),
            "adapted": [{"round": r["round"], **r["adapted"]} for r in self.rounds
                        if "adapted" in r],
            # the aggregation rule's doing: rounds whose aggregate was not finite (the model
            # was kept), and replies it clipped or left out
            "kept_previous": [r["round"] for r in self.rounds if "kept" in r],
            "clipped": sum(len(r.get("clipped", {})) for r in self.rounds),
            "stopped": self.stopped,
            "warnings": self.warnings,
            "wall_s": time.perf_counter() - self.started,
        }

    def columns(self) -> tuple[str, ...]:
        """The allocation's and the scheme's own columns of this run's rows, in order."""
        return (*self.cycle.columns, *self.scheme.columns)


def _listed(values: np.ndarray) -> list[float | None]:
    return [None if not math.isfinite(v) else float(v) for v in values]


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
