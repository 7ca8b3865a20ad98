"""The server's side of a live run, without Flower: probe, plan a round, close it.

:class:`LiveRun` holds what the server knows between rounds (which node is which learner, each
learner's estimated speed, who is missing, the global model) and turns it into plans and
records. The Flower strategy (:mod:`mel_opt.live.strategy`) only carries its configurations to
the nodes and their replies back, so everything that decides an allocation or judges a
measurement is a plain function of plain values, testable without a federation.

One round:

1. :meth:`LiveRun.plan`: the instance of the learners that answered last time, with each one's
   compute coefficient from its current estimate (``LearningCycle.live_instance``), solved by
   the chosen method through :func:`mel_opt.api.solve` (so the allocation is verified), turned
   into one plan per learner by the problem's ``configure_cycle``. A decentralised problem
   (dab) instead sends each learner :meth:`LearningCycle.learner_config` and lets it decide.
2. The nodes train; the round closes when all have answered or its wall-clock budget
   (:meth:`LiveRun.wait_s`: each learner's predicted computation plus its own measured
   messaging overhead) is spent. A learner that has not answered is *missing*: left out
   of the next allocations until it answers again.
3. :meth:`LiveRun.close`: every reply is checked (non-finite, negative or absurd metrics are
   ignored with a warning), its measured time is its compute time plus the plan's emulated
   transfer time, the models are aggregated by the problem's ``aggregate``, the estimates
   follow the measurements, and the global model is evaluated on the server's validation set.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt import api
from mel_opt.errors import UsageError
from mel_opt.live.estimates import Estimates, read_measurement
from mel_opt.problems import get_problem
from mel_opt.problems.learning import (
    CyclePlan,
    LearnerPlan,
    LearningCycle,
    LiveReport,
    Reply,
    RunContext,
)
from mel_opt.training.data import Dataset
from mel_opt.training.local import evaluate
from mel_opt.training.mlp import Params, init_params, layers_for
from mel_opt.training.partition import proportional_sizes

__all__ = ["LiveRun", "LiveSettings", "NodeReply", "RoundPlan"]

#: A round's compute time beyond this is not believed (a day) [s].
MAX_ROUND_S = 86_400.0
#: The probe's own length (at least this much training) [s].
PROBE_S = 0.5


@dataclass(frozen=True)
class LiveSettings:
    """What a live run does (the options of ``melopt live``).

    Attributes
    ----------
    instance : Mapping
        The instance document (the JSON of the file), so a server on another machine can
        rebuild it.
    method : str or None
        The method that allocates every round (None: the problem's default).
    rounds : int
    seed : int
        Model initialisation, the data split and each learner's shuffles.
    dataset, partition, model : str
        As ``melopt train``.
    lr : float
    batch_size : int
        Local minibatch (problems whose plan does not set its own).
    max_train, max_test : int
        Subset sizes of the data set (0: all).
    time_limit : float or None
        Solver time limit per round [s].
    alpha : float
        Weight of a new measurement in each learner's speed estimate.
    grace_s : float
        Wall-clock seconds a round waits for replies beyond each learner's predicted
        computation and measured messaging overhead.
    learners : int or None
        Learners of a problem whose instance does not fix their number (adaptive-tau: the
        nodes; None: the problem's default).
    """

    instance: Mapping[str, Any]
    method: str | None = None
    rounds: int = 5
    seed: int = 0
    dataset: str = "digits"
    partition: str = "iid"
    model: str = "twonn"
    lr: float = 0.1
    batch_size: int = 32
    max_train: int = 0
    max_test: int = 0
    time_limit: float | None = 30.0
    alpha: float = 0.5
    grace_s: float = 5.0
    learners: int | None = None

    def data_config(self, num_partitions: int) -> dict[str, Any]:
        """What every learner needs to find its part of the data set."""
        return {"dataset": self.dataset, "partition": self.partition,
                "num_partitions": num_partitions, "data_seed": self.seed,
                "max_train": self.max_train, "max_test": self.max_test}


@dataclass(frozen=True)
class NodeReply:
    """What came back from one learner.

    Attributes
    ----------
    learner : int
    metrics : Mapping
        Its metric record (numbers).
    model : list of ndarray or None
        Its trained model (None for a probe, or when the learner trained nothing).
    elapsed_s : float or None
        Wall time from sending the message to receiving this reply [s].
    gradient : list of ndarray or None
        Its local gradient at the round's global model (cycles with gradient statistics).
    """

    learner: int
    metrics: Mapping[str, Any]
    model: Params | None = None
    elapsed_s: float | None = None
    gradient: Params | None = None


@dataclass
class RoundPlan:
    """One round as planned: the cycle plan and what each learner is sent.

    Attributes
    ----------
    round : int
    cycle : CyclePlan or None
        The problem's plan (None for a decentralised problem: learners decide theirs).
    configs : dict of int to dict
        Learner -> the configuration it is sent (numbers and strings).
    allocation : dict
        The verified solution this round runs (empty when decentralised).
    method : str
    solve_s : float
        Wall time of building and solving the round's instance [s].
    last : bool
        The method marked this round the last one (adaptive-tau's end-of-budget rule).
    """

    round: int
    cycle: CyclePlan | None
    configs: dict[int, dict[str, Any]]
    allocation: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    solve_s: float = 0.0
    last: bool = False

    @property
    def clock_s(self) -> float:
        """The round's length on the problem's clock [s] (its fixed length, deadline, or the
        longest predicted time)."""
        c = self.cycle
        if c is not None and c.duration_s is not None:
            return float(c.duration_s)
        if c is not None and c.deadline_s is not None:
            return float(c.deadline_s)
        deadlines = [float(v["deadline_s"]) for v in self.configs.values() if "deadline_s" in v]
        if deadlines:
            return max(deadlines)
        return max((float(v.get("predicted_s", 0.0)) for v in self.configs.values()),
                   default=0.0)

    def compute_s(self, learner: int) -> float:
        """The computation predicted for ``learner`` [s]: the part of its time that passes on
        the wall clock (transfers are emulated). A decentralised learner's is unknown to the
        server: its whole clock."""
        if self.cycle is None:
            return self.clock_s
        return next((p.compute_s for p in self.cycle.learners if p.learner == learner), 0.0)


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
        self.K = cycle.live_learners(self.inst, settings.learners)
        self.data = data
        self.N = int(data.y_train.size)
        layers = layers_for(settings.model, data.features, data.classes)
        # one model per task (a task's model starts from its own seed)
        self.models: list[Params] = [init_params(layers, settings.seed + 1009 * t, np.float32)
                                     for t in range(cycle.tasks(self.inst))]
        self.finished = False  # the problem ended the run (adaptive-tau: budget spent)
        self.control: list[dict[str, Any]] = []  # what live_feedback recorded, per round
        self.estimates = Estimates.unknown(self.K, settings.alpha)
        # wall seconds of a message's round trip beyond the learner's computation (process
        # start, data loading, decoding): measured per learner, averaged like the speeds
        self.overhead = np.full(self.K, np.nan)
        self.nodes: dict[int, int] = {}  # node id -> learner
        self.missing: set[int] = set()
        self.warnings: list[str] = []
        self.rows: list[dict[str, Any]] = []
        self.rounds: list[dict[str, Any]] = []
        self.clock_s = 0.0
        self.started = time.perf_counter()
        self.rounds.append({"round": 0, **self._evaluation(), "wall_s": 0.0,
                            "clock_s": 0.0, "learners": 0})

    @property
    def model(self) -> Params:
        """The global model (of the first task, where there are several)."""
        return self.models[0]

    def model_of(self, learner: int, plan: RoundPlan) -> Params:
        """The global model ``learner`` starts from in ``plan`` (its task's)."""
        return self.models[int(plan.configs[learner].get("task", 0))]

    def _evaluation(self) -> dict[str, Any]:
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
    def probe_config(self, num_nodes: int) -> dict[str, Any]:
        """What every node is sent in the probe round."""
        return {"kind": "probe", "problem": self.spec.name, "model": self.settings.model,
                "batch": self.settings.batch_size, "seed": self.settings.seed,
                **self.settings.data_config(num_nodes)}

    def accept_probe(self, node_id: int, metrics: Mapping[str, Any],
                     elapsed_s: float | None = None) -> None:
        """Map ``node_id`` to the learner of its partition id and take its first speed (a
        decentralised learner keeps its speed to itself: only the mapping is made) and its
        messaging overhead (``elapsed_s``: the probe's round trip)."""
        pid = metrics.get("partition_id")
        if not isinstance(pid, (int, float)) or not float(pid).is_integer() or \
                not 0 <= int(pid) < self.K:
            self.warn(f"node {node_id} reported partition id {pid!r}, not a learner of the "
                      f"instance (0..{self.K - 1}); ignored")
            return
        learner = int(pid)
        if learner in self.nodes.values() and self.nodes.get(node_id) != learner:
            self.warn(f"node {node_id} claims learner {learner}, which another node holds; "
                      "ignored")
            return
        self.nodes[node_id] = learner
        if not self.cycle.decentralised:
            self._measure(learner, metrics, 0)
        self.note_overhead(learner, metrics, elapsed_s)

    def note_overhead(self, learner: int, metrics: Mapping[str, Any],
                      elapsed_s: float | None) -> None:
        """Fold one round trip of ``learner`` into its messaging overhead."""
        if elapsed_s is None or not math.isfinite(elapsed_s):
            return
        try:
            compute = float(metrics.get("compute_s", 0.0))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            compute = 0.0
        value = max(0.0, elapsed_s - (compute if math.isfinite(compute) else 0.0))
        now = float(self.overhead[learner])
        a = self.settings.alpha
        self.overhead[learner] = value if not math.isfinite(now) else (1 - a) * now + a * value

    def wait_s(self, plan: RoundPlan) -> float:
        """How long the server waits for the replies of ``plan`` [s]: for each learner its
        predicted computation and a quarter more (for learners slower than predicted) plus its
        measured messaging overhead, the longest of those, plus ``grace_s``."""
        waits = [1.25 * plan.compute_s(k) + self._overhead(k) for k in plan.configs]
        return max(waits, default=0.0) + self.settings.grace_s

    def rejoin_wait_s(self, learners: Sequence[int]) -> float:
        """How long to wait for a probe of the missing ``learners`` [s]."""
        return max((self._overhead(k) for k in learners), default=0.0) * 1.5 + \
            self.settings.grace_s + PROBE_S

    def _overhead(self, k: int) -> float:
        value = float(self.overhead[k])
        return value if math.isfinite(value) else 0.0

    def node_of(self, learner: int) -> int:
        return next(n for n, k in self.nodes.items() if k == learner)

    @property
    def active(self) -> np.ndarray:
        """Learners with a node and an estimate (a decentralised learner keeps its own) that
        are not missing, in learner order."""
        known = set(range(self.K)) if self.cycle.decentralised else set(
            self.estimates.known.tolist())
        return np.array(sorted(k for k in self.nodes.values()
                               if k in known and k not in self.missing), dtype=np.int64)

    # -- one round -----------------------------------------------------------------------------
    def plan(self, r: int) -> RoundPlan:
        """The allocation and the learners' configurations of round ``r`` (1, 2, ...).

        Raises
        ------
        UsageError
            No learner is left, or the round's instance has no verified allocation.
        """
        active = self.active
        if active.size == 0:
            raise UsageError(f"round {r}: no learner is left to train (all missing)")
        base = {"kind": "train", "problem": self.spec.name, "round": r,
                "lr": self.settings.lr, "seed": self.settings.seed,
                **self.settings.data_config(len(self.nodes))}
        if self.cycle.decentralised:
            configs = {int(k): {**base, "batch": self.settings.batch_size,
                                **self.cycle.learner_config(self.inst, int(k), self.N)}
                       for k in active}
            return RoundPlan(r, None, configs, method="decentralised")
        start = time.perf_counter()
        inst = self.cycle.live_instance(self.inst, active, self.estimates.seconds, self.N)
        res = api.solve(inst, self.method, time_limit=self.settings.time_limit,
                        seed=self.settings.seed)
        solve_s = time.perf_counter() - start
        if not res.ok:
            raise UsageError(f"round {r}: {self.method} gave no verified allocation for the "
                             f"measured learners ({res.status.value}: {res.message})")
        shares = self.cycle.live_shares(inst, self.method, res.solution, int(active.size),
                                        self.N)
        sizes = proportional_sizes(shares, self.N)
        ctx = RunContext(self.method, res.solution, self.settings.seed, sizes,
                         {"batch_size": self.settings.batch_size})
        local = self.cycle.configure_cycle(inst, ctx, r)
        # the round's instance numbers its learners 0..n-1: back to the learners of the file
        cycle = CyclePlan(tuple(_renumber(p, int(active[p.learner])) for p in local.learners),
                          local.duration_s, local.deadline_s, local.batch, local.lr_scale,
                          local.restart)
        batch = self.settings.batch_size if cycle.batch is None else cycle.batch
        stats = {"statistics": 1} if self.cycle.gradient_statistics else {}
        configs = {p.learner: {**base, "samples": p.samples, "passes": p.passes,
                               "batch": batch, "lr": self.settings.lr * cycle.lr_scale,
                               "predicted_s": p.predicted_s, "comm_s": p.comm_s,
                               "task": p.task, **stats}
                   for p in cycle.learners}
        return RoundPlan(r, cycle, configs, dict(res.solution), self.method, solve_s,
                         last=bool(res.metrics.get("last_round", False)))

    def close(self, plan: RoundPlan, replies: Sequence[NodeReply], wall_s: float) -> None:
        """Judge the replies, aggregate, update the estimates, record the round."""
        r = plan.round
        got: dict[int, NodeReply] = {}
        for reply in replies:
            if reply.learner in got:
                self.warn(f"round {r}: learner {reply.learner} answered twice; the second "
                          "answer is ignored")
                continue
            got[reply.learner] = reply
        self.missing = {k for k in plan.configs if k not in got} | (self.missing - set(got))
        learner_plans = self._learner_plans(plan, got)
        rows, usable = [], []
        for k, reply in got.items():
            self.note_overhead(k, reply.metrics, reply.elapsed_s)
        for k in sorted(plan.configs):
            p = learner_plans.get(k)
            row = self._row(plan, k, p, got.get(k))
            rows.append(row)
            model = got[k].model if k in got else None
            if row["status"] in ("ok", "late") and model is not None and p is not None \
                    and p.weight > 0:
                usable.append((Reply(k, row["measured_s"]), model, p))
        self.rows.extend(rows)
        cycle = plan.cycle or CyclePlan(tuple(learner_plans.values()), deadline_s=plan.clock_s)
        clock = self._aggregate(cycle, usable) if usable else plan.clock_s
        if not usable:
            self.warn(f"round {r}: no usable reply; the global model is unchanged")
        self.clock_s += clock
        record: dict[str, Any] = {}
        if plan.cycle is not None:
            reports = [LiveReport(k, float(row["compute_measured_s"]), p.weight,
                                  dict(got[k].metrics), got[k].gradient)
                       for row in rows for k in [row["learner"]]
                       if row["status"] == "ok" and (p := learner_plans.get(k)) is not None]
            fb = self.cycle.live_feedback(self.inst, plan.cycle, reports, wall_s)
            self.inst = fb.instance
            record = dict(fb.record)
            self.finished = fb.stop or plan.last
        self.rounds.append({"round": r, **self._evaluation(),
                            "wall_s": time.perf_counter() - self.started,
                            "round_wall_s": wall_s, "clock_s": self.clock_s,
                            "learners": len(usable), "missing": sorted(self.missing),
                            "method": plan.method, "solve_s": plan.solve_s,
                            "allocation": plan.allocation, "last": plan.last or self.finished,
                            **({"control": record} if record else {})})

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

    def _measure(self, learner: int, metrics: Mapping[str, Any], r: int) -> str:
        m = read_measurement(learner, metrics)
        why = m if isinstance(m, str) else self.estimates.update(m, r)
        if why:
            self.warn(f"round {r}: learner {learner}'s measurement ignored: {why}")
        return why

    def _learner_plans(self, plan: RoundPlan,
                       got: Mapping[int, NodeReply]) -> dict[int, LearnerPlan]:
        if plan.cycle is not None:
            return {p.learner: p for p in plan.cycle.learners}
        out = {}  # decentralised: each learner reported the plan it made
        for k, reply in got.items():
            mm = reply.metrics
            try:
                out[k] = LearnerPlan(k, int(mm["samples"]), int(mm["passes"]),
                                     float(mm["weight"]), float(mm["predicted_s"]),
                                     float(mm["comm_s"]),
                                     columns={c: mm[c] for c in ("shards", "tau") if c in mm})
            except (KeyError, TypeError, ValueError):
                self.warn(f"round {plan.round}: learner {k} reported no usable plan")
        return out

    def _row(self, plan: RoundPlan, k: int, p: LearnerPlan | None,
             reply: NodeReply | None) -> dict[str, Any]:
        node = self.node_of(k) if k in self.nodes.values() else None
        row: dict[str, Any] = {"round": plan.round, "learner": k,
                               "name": self._name(k), "node": node}
        clock = plan.clock_s if plan.cycle is not None else float(
            plan.configs[k].get("deadline_s", plan.clock_s))
        if p is not None and p.deadline_s is not None:  # its own deadline (med: its task's)
            clock = p.deadline_s
        row.update(predicted_s=None if p is None else p.predicted_s,
                   comm_emulated_s=None if p is None else p.comm_s,
                   compute_predicted_s=None if p is None else p.compute_s)
        if p is not None:
            row.update(p.columns)
            row.update(samples=p.samples, passes=p.passes)
        if reply is None:
            row.update(status="missing", measured_s=None, compute_measured_s=None,
                       deadline_met=False)
            return row
        if p is not None and p.samples == 0:  # a decentralised learner that halted
            row.update(status="ok", measured_s=p.comm_s, compute_measured_s=0.0,
                       deadline_met=True)
            return row
        compute, why = self._compute_time(k, reply.metrics, plan.round)
        if why or p is None:
            self.warn(f"round {plan.round}: learner {k}'s reply ignored: {why or 'no plan'}")
            row.update(status="ignored", measured_s=None, compute_measured_s=None,
                       deadline_met=False)
            return row
        measured = compute + p.comm_s
        if not self.cycle.has_deadline:
            row.update(status="ok", measured_s=measured, compute_measured_s=compute,
                       deadline_met=None)
            return row
        met = measured <= clock * (1 + 1e-9)
        row.update(status="ok" if met else "late", measured_s=measured,
                   compute_measured_s=compute, deadline_met=met)
        return row

    def _compute_time(self, k: int, metrics: Mapping[str, Any], r: int) -> tuple[float, str]:
        """The learner's measured compute time, or why it is not believed. A central problem's
        measurement also updates the learner's speed estimate; a decentralised learner reports
        its time only (its speed stays its own)."""
        if not self.cycle.decentralised:
            m = read_measurement(k, metrics)
            if isinstance(m, str):
                return math.nan, m
            why = self.estimates.update(m, r)
            return m.compute_s, why
        raw = metrics.get("compute_s")
        try:
            value = float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return math.nan, f"compute_s is not a number ({raw!r})"
        if not math.isfinite(value) or not 0.0 <= value <= MAX_ROUND_S:
            return math.nan, f"compute_s must lie in [0, {MAX_ROUND_S:g}] s, got {raw!r}"
        return value, ""

    def _name(self, k: int) -> str:
        names = getattr(self.inst, "learner_names", None) or getattr(self.inst, "device_names",
                                                                         None)
        return str(names[k]) if names is not None else str(k)

    def summary(self) -> dict[str, Any]:
        """The content of ``summary.json``."""
        s = self.settings
        measured = [r for r in self.rows if r.get("measured_s") is not None and
                    r.get("compute_predicted_s")]
        return {
            "instance": self.inst.name, "problem": self.spec.name, "method": self.method,
            "rounds": self.rounds, "learners": self.K, "nodes": len(self.nodes),
            "settings": {"rounds": s.rounds, "seed": s.seed, "dataset": s.dataset,
                         "partition": s.partition, "model": s.model, "lr": s.lr,
                         "batch_size": s.batch_size, "alpha": s.alpha},
            "estimates_s_per_sample": [None if not math.isfinite(v) else v
                                       for v in self.estimates.seconds],
            "prediction_error": _median_errors(measured),
            "warnings": self.warnings,
            "wall_s": time.perf_counter() - self.started,
        }


def _renumber(p: LearnerPlan, learner: int) -> LearnerPlan:
    return dataclasses.replace(p, learner=learner)


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
