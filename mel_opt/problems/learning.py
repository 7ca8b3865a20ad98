"""One global cycle of learning under an allocation: the interface every training problem keeps.

A problem package that can be trained declares, in a ``learning`` module of its own, a
:class:`LearningCycle`: how its allocation becomes one cycle of work for each learner
(:meth:`~LearningCycle.configure_cycle`: which learner trains how many passes over how many
samples, with what minibatch, for how long on the problem's own clock) and what the server makes
of the replies (:meth:`~LearningCycle.aggregate`: the new global model, and how long the cycle
lasted). The split is Flower's (a strategy's ``configure_train`` and ``aggregate_train``):
the emulator in :mod:`mel_opt.training` runs every problem through one loop over this
interface, and a live run can send the same plans to real learners and aggregate their
replies the same way.

This module sits in the problems layer and knows nothing of the trainer: models are plain
lists of numpy arrays (``[W_1, b_1, W_2, b_2, ...]``), stacked over a leading learner axis
where several learners' models travel together.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mel_opt.problems.work import WorkClock

__all__ = [
    "ADAPT_POLICIES",
    "Adaptation",
    "Aggregate",
    "CyclePlan",
    "Extras",
    "Feedback",
    "LearnerMemory",
    "LearnerPlan",
    "LearnerSide",
    "LearningCycle",
    "LocalLearner",
    "LiveReport",
    "Reply",
    "RunContext",
    "WorkClock",
    "sample_bytes",
    "weighted_average",
]

Params = list[np.ndarray]


@dataclass(frozen=True)
class LearnerPlan:
    """What one learner is told for one global cycle.

    Attributes
    ----------
    learner : int
        Index of the learner in the instance.
    samples : int
        Training samples it trains on this cycle, drawn from its local data set (more than the
        set holds: the set plus random repeats).
    passes : int
        Passes over those samples (tau_k local updates of paper 000, mu of thesis Ch. 3; one
        for a FEEL gradient).
    weight : float
        Its weight in the aggregate (d_k, a_k, B_k...).
    predicted_s : float
        Its busy time for the cycle by the problem's latency model [s].
    comm_s : float
        The part of ``predicted_s`` spent communicating (model and data down, update up) [s];
        the rest is computation.
    time_cv : float or None
        Run-to-run spread of its time (coefficient of variation of a lognormal factor); None
        when the model's times are deterministic.
    task : int
        The task (model) it trains for (0 where the problem has one model).
    columns : Mapping
        The allocation's own numbers for this learner (``tau``, ``samples``, ``shards``,
        ``batch``...), reported beside each cycle.
    deadline_s : float or None
        Its own deadline where learners of one cycle have different ones (med: its task's
        T_i); None: the cycle's.
    """

    learner: int
    samples: int
    passes: int
    weight: float
    predicted_s: float
    comm_s: float = 0.0
    time_cv: float | None = None
    task: int = 0
    columns: Mapping[str, Any] = field(default_factory=dict)
    deadline_s: float | None = None

    @property
    def compute_s(self) -> float:
        """The computing part of the predicted time [s]."""
        return self.predicted_s - self.comm_s


@dataclass(frozen=True)
class CyclePlan:
    """One global cycle: every learner that takes part, and the cycle's own rules.

    Attributes
    ----------
    learners : tuple of LearnerPlan
        Learners that train this cycle (a learner absent here sits the cycle out).
    duration_s : float or None
        The cycle's length on the problem's clock when the model fixes it (mel-async: the
        cycle clock T; FEEL: the round latency); None when the cycle ends with the last
        learner's update.
    deadline_s : float or None
        The deadline a learner's time is judged against (a later reply is truant); None
        where the problem has none.
    batch : int or None
        Local minibatch size of every learner; None: the run's own (``--batch-size``); 0: each
        learner takes one gradient step over all of its samples (a FEEL device's minibatch).
    lr_scale : float
        Factor on the run's learning rate for this cycle (FEEL scales it as sqrt(B)).
    restart : bool
        True: learners start from the aggregated model. False: each continues from its own
        model (individual learning); the aggregate is then only what the server would get.
    """

    learners: tuple[LearnerPlan, ...]
    duration_s: float | None = None
    deadline_s: float | None = None
    batch: int | None = None
    lr_scale: float = 1.0
    restart: bool = True

    @property
    def learner_ids(self) -> np.ndarray:
        return np.array([p.learner for p in self.learners], dtype=np.int64)

    def with_spread(self, time_cv: float) -> CyclePlan:
        """This plan with ``time_cv`` as the run-to-run spread of every learner whose plan
        gives none (or 0)."""
        return dataclasses.replace(self, learners=tuple(
            p if p.time_cv else dataclasses.replace(p, time_cv=float(time_cv))
            for p in self.learners))

    def column(self, name: str) -> np.ndarray:
        """One attribute of every learner plan as an array (``samples``, ``weight``...)."""
        return np.array([getattr(p, name) for p in self.learners])


@dataclass(frozen=True)
class RunContext:
    """What a cycle may read besides the instance.

    Attributes
    ----------
    scheme : str
        The method (or training-only scheme) whose allocation is trained.
    solution : Mapping or None
        The verified solution of that method (the result contract's keys); None for a
        training-only scheme.
    seed : int
        The run's seed (schemes redrawn every cycle derive theirs from it).
    data_sizes : ndarray of int
        Samples in each learner's local data set.
    options : Mapping
        Run settings a problem may read (e.g. ``param_bits`` of feel).
    memo : dict
        Scratch space of the run: a cycle may keep here what does not change from one cycle
        to the next (its plan under a fixed allocation), instead of computing it again.
    sample_bytes : float
        Bytes of one training sample as the papers store it (its features in float32:
        :func:`sample_bytes`), so that a problem whose allocation is in bytes (dab's shards)
        knows how many samples it holds; 0 where unknown.
    time_cv : float or None
        Run-to-run spread of the time of every learner whose plan gives none or 0 (the
        arena's, so that no scheme runs on a deterministic clock); None: none added.
    aggregation : str
        The rule the emulator's cycles aggregate by (:mod:`mel_opt.problems.aggregate`;
        default the papers' weighted mean).
    attack : Attack or None
        Learners that lie in the emulator's cycles (:mod:`mel_opt.problems.attacks`).
    """

    scheme: str
    solution: Mapping[str, Any] | None
    seed: int
    data_sizes: np.ndarray
    options: Mapping[str, Any] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict, compare=False)
    sample_bytes: float = 0.0
    time_cv: float | None = None
    aggregation: str = "mean"
    attack: Any = None

    @property
    def dataset_size(self) -> int:
        return int(np.asarray(self.data_sizes).sum())


@dataclass(frozen=True)
class Reply:
    """What came back from one learner (emulated, or measured on a real learner).

    Attributes
    ----------
    learner : int
        Index of the learner in the instance.
    seconds : float
        Its busy time for the cycle [s].
    """

    learner: int
    seconds: float


@dataclass(frozen=True)
class Aggregate:
    """The server's side of a cycle.

    Attributes
    ----------
    model : list of ndarray
        The new global model (no learner axis).
    duration_s : float
        How long the cycle lasted on the clock [s].
    truancy : float or None
        The cycle's time past its deadline in % of the deadline (None without a deadline).
    late : tuple of int
        Learners whose time passed the deadline.
    notes : Mapping of int to str
        Learners whose update did not enter as sent, and why (clipped by the rule, left out).
    kept : str or None
        Why the previous model was kept (the aggregate was not finite); None: it was not.
    """

    model: Params
    duration_s: float
    truancy: float | None = None
    late: tuple[int, ...] = ()
    notes: Mapping[int, str] = field(default_factory=dict)
    kept: str | None = None


@dataclass(frozen=True)
class LiveReport:
    """One learner's measured answer to a live round (for :meth:`LearningCycle.live_feedback`).

    Attributes
    ----------
    learner : int
    compute_s : float
        Measured wall time of its training [s].
    weight : float
        Its weight in the aggregate.
    metrics : Mapping of str to float
        The numbers its problem's learner side reported (:attr:`LearnerSide`).
    arrays : Mapping of str to list of ndarray
        The arrays its problem's learner side reported (adaptive-tau: ``gradient``, its
        gradient of the local loss at the round's global model).
    """

    learner: int
    compute_s: float
    weight: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    arrays: Mapping[str, Params] = field(default_factory=dict)


@dataclass(frozen=True)
class Feedback:
    """What :meth:`LearningCycle.live_feedback` makes of a live round.

    Attributes
    ----------
    instance : instance
        The instance the next round solves.
    stop : bool
        The run ends after this round (adaptive-tau: the resource budget is spent).
    record : Mapping
        Numbers to keep in the round's record (the estimates the next allocation uses).
    """

    instance: Any
    stop: bool = False
    record: Mapping[str, Any] = field(default_factory=dict)


#: What the learners of a live round may do when the file's job no longer fits them
#: (:meth:`LearningCycle.live_adapt`): ``data``, the work they can do on the problem's clock;
#: ``clock``, the file's work on the least clock that fits it. ``none`` (no adaptation, the run
#: stops) is the third value of the setting and never reaches a cycle.
ADAPT_POLICIES = ("data", "clock")


@dataclass(frozen=True)
class Adaptation:
    """The job a live round's learners do instead of the file's, which no longer fits them.

    Attributes
    ----------
    instance : instance
        The round's instance to solve instead (same problem, same learners).
    text : str
        One line: what changed, with the numbers, and why (``total_samples 60000 -> 56250:
        what the 3 learners can take in T = 15 s``).
    changes : Mapping of str to (before, after)
        The instance's numbers that changed.
    data_fraction : float
        Fraction of the training set the round's learners train on (1: all of it; less when
        the adaptation gives them less data).
    """

    instance: Any
    text: str
    changes: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    data_fraction: float = 1.0


@dataclass(frozen=True)
class Extras:
    """What a problem's learner side computed beside the training, sent with the report.

    Attributes
    ----------
    metrics : Mapping of str to float
    arrays : Mapping of str to list of ndarray
    """

    metrics: Mapping[str, float] = field(default_factory=dict)
    arrays: Mapping[str, Params] = field(default_factory=dict)


class LocalLearner(Protocol):
    """What a learner process can compute on its own part of the data
    (:class:`mel_opt.live.learner.LocalData` is one)."""

    def loss_and_gradient(self, model: Params, max_samples: int) -> tuple[float, Params]:
        """Mean loss and its gradient at ``model`` over (at most ``max_samples`` of) its data,
        the same rows every round."""
        ...


class LearnerMemory(Protocol):
    """What a learner keeps from one round to the next (Flower's node state in a deployment,
    a dictionary for learners in one process)."""

    def arrays(self, key: str) -> Params | None:
        """The arrays kept under ``key`` (None: nothing kept)."""
        ...

    def keep_arrays(self, key: str, arrays: Params) -> None:
        """Keep ``arrays`` under ``key`` for the next round."""
        ...


class LearnerSide:
    """What a live learner does for its problem beyond training as ordered.

    The generic learner (:mod:`mel_opt.live.learner`) trains what its order says; a problem
    whose learners do more overrides this class in its own package and sets it as its
    cycle's :attr:`LearningCycle.learner_side`:

    - learners that plan their own work (dab, thesis Algorithm 10): :attr:`plans_own_work`
      and :meth:`own_plan`, from the order's ``brief`` and the learner's own measured speed,
      which it never reports;
    - numbers or arrays computed beside the training (adaptive-tau's gradient statistics):
      :meth:`before_training` (at the global model it received) and :meth:`after_training`
      (with the model it trained), keeping what the next round needs in the learner's memory.
    """

    #: True: the learner decides its own work (:meth:`own_plan`) and keeps its speed to itself;
    #: the server then sends briefs (:meth:`LearningCycle.briefs`) instead of plans.
    plans_own_work: bool = False
    #: True (with :attr:`plans_own_work`): where the run ships data, the learner first claims
    #: its work (its plan, from the brief) and the server then sends the samples it claimed
    #: with the model, across its link (dab's shards, thesis Algorithm 10).
    claims_data: bool = False

    def own_plan(self, order: Any, seconds: float, learner: int) -> LearnerPlan:
        """The learner's plan from ``order.brief`` and its own seconds per sample-pass."""
        raise NotImplementedError("only a learner side that plans its own work makes plans")

    def before_training(self, order: Any, local: LocalLearner,
                        memory: LearnerMemory) -> Extras:
        """Computed at the received global model (``order.model``), before training."""
        return Extras()

    def after_training(self, order: Any, model: Params, memory: LearnerMemory) -> None:
        """Called with the trained model, before the report is sent."""


#: Bytes of one feature of a stored sample: the papers' data sets are float32 pixels (a thesis
#: shard of 500 MNIST images of 28 x 28 is 500 x 784 x 4 bytes).
FEATURE_BYTES = 4


def sample_bytes(features: int) -> float:
    """Bytes of one training sample of ``features`` features as the papers store it."""
    return float(features * FEATURE_BYTES)


def weighted_average(models: Params, weights: np.ndarray) -> Params:
    """sum_k w_k P_k / sum_k w_k over the leading (learner) axis of each array, accumulated
    in float64 and returned in each array's dtype (no check: :func:`~mel_opt.problems.
    aggregate.combine` is what runs aggregate with)."""
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    return [np.tensordot(w, np.asarray(a, dtype=np.float64), axes=(0, 0)).astype(a.dtype)
            for a in models]


class LearningCycle(abc.ABC):
    """How one global cycle trains under a problem's allocation.

    Subclasses implement :meth:`configure_cycle`; :meth:`data_shares` (equal local data sets)
    and :meth:`aggregate` (federated averaging weighted by the plans' weights, the cycle
    closed by :meth:`close`) have defaults.

    Attributes
    ----------
    schemes : Mapping of str to str
        Training-only schemes (not methods of the problem) this cycle also runs, with a
        one-line description each (feel: paper 004's individual learning, model-based and
        gradient-based FEEL).
    """

    schemes: Mapping[str, str] = {}
    #: False when the cycle's length is an outcome of the allocation, not a deadline the
    #: learners must meet (feel's round latency): live runs then judge no learner late.
    has_deadline: bool = True
    #: False when only live runs train this cycle (the emulator trains one global model on
    #: the problem's clock; med's tasks have a model each and adaptive-tau's control needs
    #: the learners' gradient statistics).
    emulated: bool = True
    #: What a live learner does beyond training as ordered (:class:`LearnerSide`): dab's
    #: learners plan their own work, adaptive-tau's report gradient statistics.
    learner_side: LearnerSide = LearnerSide()
    #: Numbers of :meth:`live_feedback`'s record drawn over the rounds in a live run's figure
    #: (record key -> label; adaptive-tau: the tau of each round).
    plotted: Mapping[str, str] = {}
    #: The allocation's own numbers the plans report (the keys of ``LearnerPlan.columns``), in
    #: the order a live run's ``rounds.csv`` shows them after the generic columns.
    columns: tuple[str, ...] = ()
    #: True when a live run can take the plans' transfer times from what the replies measured
    #: (``--transfers measured``, :meth:`live_transfers`); False: the file's model only.
    measured_transfers: bool = False

    def check(self, inst: Any, scheme: str, solution: Mapping[str, Any] | None) -> None:  # noqa: B027
        """Refuse an allocation this cycle cannot train (UsageError); default: accept all."""

    def data_shares(self, inst: Any, scheme: str, solution: Mapping[str, Any] | None,
                    dataset_size: int) -> np.ndarray:
        """Relative sizes of the learners' local data sets, for a training set of
        ``dataset_size`` samples (it is split once, before the first cycle, in these
        proportions; a zero share still gets one sample)."""
        return np.ones(int(inst.K))

    @abc.abstractmethod
    def configure_cycle(self, inst: Any, ctx: RunContext, cycle: int) -> CyclePlan:
        """The plan of global cycle ``cycle`` (1, 2, ...) under ``ctx.solution``."""

    def close(self, plan: CyclePlan, replies: Sequence[Reply]) -> tuple[float, float | None,
                                                                         tuple[int, ...]]:
        """How long the cycle lasted, its truancy and the late learners.

        The cycle lasts ``plan.duration_s`` when the model fixes it (no reply can be later
        than that on the model's clock, unless the plan's learners' times vary run to run:
        then a synchronous cycle waits for its last reply, ``max(duration_s, last)``),
        otherwise until the last reply; with a deadline, the truancy is the time past it in %
        of it and the late learners are those whose time passed it.
        """
        last = max((r.seconds for r in replies), default=0.0)
        duration = plan.duration_s if plan.duration_s is not None else last
        if plan.duration_s is not None and any(p.time_cv for p in plan.learners):
            duration = max(plan.duration_s, last)
        own = {p.learner: p.deadline_s for p in plan.learners if p.deadline_s is not None}
        if own:  # learners with deadlines of their own (med's tasks): each judged by its own
            judged = [(r, D) for r in replies
                      if (D := own.get(r.learner, plan.deadline_s)) is not None]
            late = tuple(r.learner for r, D in judged if r.seconds > D)
            past = [max(0.0, r.seconds - D) / D for r, D in judged]
            return duration, 100.0 * max(past, default=0.0), late
        if plan.deadline_s is None:
            return duration, None, ()
        D = plan.deadline_s
        late = tuple(r.learner for r in replies if r.seconds > D)
        return duration, 100.0 * max(0.0, duration - D) / D, late

    def aggregate(self, plan: CyclePlan, replies: Sequence[Reply], models: Params,
                  start: Params | None = None, rule: Any = "mean") -> Aggregate:
        """The replies' models combined by ``rule`` with their plans' weights (federated
        averaging by default; :func:`mel_opt.problems.aggregate.combine`, the run's
        ``aggregation``); a new model that is not finite is not taken: ``start`` (the
        round's starting model) is kept, and :attr:`Aggregate.kept` says why.

        Parameters
        ----------
        plan : CyclePlan
        replies : sequence of Reply
            One per learner that answered, in the order of the first axis of ``models``.
        models : list of ndarray
            The answering learners' models, stacked over a leading axis.
        start : list of ndarray or None
            The model the cycle started from (required unless the aggregate is sure to be
            finite: a ValueError otherwise).
        rule : str or Rule
        """
        from mel_opt.problems.aggregate import combine

        weight = {p.learner: p.weight for p in plan.learners}
        w = np.array([weight[r.learner] for r in replies], dtype=float)
        duration, truancy, late = self.close(plan, replies)
        got = combine(models, w, start, rule)
        notes = {replies[i].learner: why for i, why in got.notes.items()}
        if got.model is None:
            if start is None:
                raise ValueError(f"{got.kept}, but no previous model was given")
            return Aggregate([np.array(a, copy=True) for a in start], duration, truancy, late,
                             notes, got.kept)
        return Aggregate(got.model, duration, truancy, late, notes)

    # -- fixed work: the field's alternatives (mel_opt.schemes) ------------------------------
    def work_clock(self, inst: Any) -> WorkClock | None:
        """What a fixed local work over an equal share of the data costs each learner of
        ``inst`` (:class:`~mel_opt.problems.work.WorkClock`). None (the default): the problem's
        model gives no time for such work, and only its own methods' allocations run."""
        return None

    def work_samples(self, inst: Any, clock: WorkClock, dataset_size: int,
                     sample_bytes: float = 0.0) -> int:
        """Training samples of one learner's equal share (``clock.share`` in the problem's
        unit) for a training set of ``dataset_size`` samples of ``sample_bytes`` each; default:
        the share is in samples."""
        return max(1, int(round(clock.share)))

    # -- live runs (mel_opt.live) -------------------------------------------------------------
    def live_instance(self, inst: Any, learners: np.ndarray, seconds: np.ndarray,
                      dataset_size: int) -> Any:
        """The instance a live run solves: ``inst`` restricted to ``learners`` (indices), each
        learner's compute coefficient set from its measured seconds per sample-pass
        (``seconds``, indexed by learner) for a training set of ``dataset_size`` samples. The
        file's communication model stays: transfers between processes on one machine are
        near instant, so their time is emulated from it.

        Raises
        ------
        UsageError
            The problem has no live form (the default).
        """
        from mel_opt.errors import UsageError

        raise UsageError(f"live runs do not support the problem {inst.problem!r} yet")

    def tasks(self, inst: Any) -> int:
        """Models the server keeps, one per task (a plan's ``task`` indexes them); default 1."""
        return 1

    def link_rates(self, inst: Any, model_bytes: float) -> np.ndarray | None:
        """Each learner's link rate in the instance's own communication model [bit/s], for a
        live model of ``model_bytes``: what a deployment on shaped links (``melopt live
        --engine netns``) gives each node's link, both ways. None (the default): the problem's
        file says nothing a link rate can be read from."""
        return None

    def live_learners(self, inst: Any, nodes: int | None) -> int:
        """Learners of a live run with ``nodes`` processes asked for (None: not said); default
        the instance's learners (``inst.K``)."""
        return int(inst.K)

    def live_shares(self, inst: Any, scheme: str, solution: Mapping[str, Any] | None,
                    learners: int, dataset_size: int) -> np.ndarray:
        """Relative amounts of data the ``learners`` learners of a live round train on (the
        round's instance numbers them 0..learners-1); default :meth:`data_shares`."""
        return self.data_shares(inst, scheme, solution, dataset_size)

    def live_feedback(self, inst: Any, plan: CyclePlan, reports: Sequence[LiveReport],
                      wall_s: float) -> Feedback:
        """What a live round's measurements change in the instance solved next round.

        ``reports`` are the learners that answered in time, ``wall_s`` the round's wall time.
        Default: nothing changes (the per-learner speeds are fed back through
        :meth:`live_instance` instead).
        """
        return Feedback(inst)

    def live_adapt(self, inst: Any, policy: str) -> Adaptation | None:
        """What the learners of a live round do when ``inst`` (the file's job for them at their
        measured speeds: :meth:`live_instance`) has no allocation, typically because a learner
        was lost: ``policy`` (one of :data:`ADAPT_POLICIES`) ``data`` keeps the problem's clock
        and gives them the work they can do, ``clock`` keeps the file's work on a longer clock.

        Returns
        -------
        Adaptation or None
            The job to solve instead; None (the default, and for a policy the problem has no
            rule for): no adaptation, the run stops.
        """
        return None

    def live_transfers(self, inst: Any, seconds: np.ndarray, rate_Bps: np.ndarray
                       ) -> Any | None:
        """``inst`` (the file's instance, all its learners) with its transfer model taken from
        what was measured live (``--transfers measured``): ``seconds``, each learner's
        messaging per round (its replies' round trip beyond its computation) and
        ``rate_Bps``, its effective link rate where samples were shipped; NaN where nothing
        was measured yet, where the file's value stays.

        Called only where :attr:`measured_transfers` is True.

        Returns
        -------
        instance or None
            None (the default): the problem has no rule for it.
        """
        return None

    def briefs(self, inst: Any, learners: np.ndarray, dataset_size: int,
               sample_bytes: float = 0.0) -> tuple[CyclePlan, dict[int, Mapping[str, Any]]]:
        """A round whose learners plan their own work (:attr:`LearnerSide.plans_own_work`):
        the cycle's rules (a :class:`CyclePlan` without learner plans: its deadline) and what
        each of ``learners`` is told (numbers only), for a training set of ``dataset_size``
        samples of ``sample_bytes`` each (:attr:`RunContext.sample_bytes`)."""
        raise NotImplementedError("only cycles whose learners plan their own work brief them")
