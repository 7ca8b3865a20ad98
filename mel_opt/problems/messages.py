"""The messages of a live round, typed: what a learner is told and what it answers.

A live run (:mod:`mel_opt.live`) exchanges four messages with each learner: a
:class:`ProbeOrder` and its :class:`ProbeReport` (subset benchmarking, and which learner a node
is), then every round a :class:`TrainOrder` and its :class:`TrainReport`. Each is a frozen
dataclass with one :meth:`encode` into :class:`Records` and one ``decode`` back; the sender, the
receiver and the tests all go through them, so a field is named in one place. Records are
Flower's content without Flower: scalars (a ``ConfigRecord``) and named lists of arrays
(``ArrayRecord``s); :mod:`mel_opt.live.wire` maps them to Flower's types and back, nothing
else crosses the wire (no pickle).

``decode`` is where a message of the wrong shape is refused: a missing or mistyped field, a
number that is not finite, a model whose arrays differ in number or shape from the global model,
or a non-finite array raise :class:`ReplyError` saying which field; the server turns that into
one warning naming the learner and an ``ignored`` row (:meth:`mel_opt.live.rounds.LiveRun.
close`). Whether a well-formed value is believable (a speed within range) is the server's
judgement, not the message's.

Problem-specific content travels in two open parts, so that generic code never reads a
problem's keys: an order's ``brief`` (what a learner that plans its own work is told, dab's
deadline and sizes) and a report's ``extras`` and ``arrays`` (what a problem's learner side
computed beside the training: adaptive-tau's loss, rho, beta and gradient). A learner's own plan
(``TrainReport.plan``) is a :class:`~mel_opt.problems.learning.LearnerPlan`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt.problems.learning import LearnerPlan

__all__ = ["SHIPPED", "DataSpec", "ProbeOrder", "ProbeReport", "Records", "ReplyError",
           "Scalar", "TrainOrder", "TrainReport"]

Scalar = int | float | str | bool
Params = list[np.ndarray]

#: The record of a message's scalars, and of a report's trained model.
CONFIG, MODEL = "config", "model"
#: The record of the training samples an order ships (features, then labels).
SHIPPED = "shipped"


class ReplyError(ValueError):
    """A message of the wrong shape; the text says which field and what was wrong."""


@dataclass(frozen=True)
class Records:
    """A message's content in Flower's terms: scalars and named lists of arrays.

    Attributes
    ----------
    config : Mapping of str to int, float, str or bool
    arrays : Mapping of str to list of ndarray
    """

    config: Mapping[str, Scalar]
    arrays: Mapping[str, Params] = field(default_factory=dict)


class _Reader:
    """Typed reads of a message's scalars; every failure is a ReplyError naming the key."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config

    def _get(self, key: str) -> Any:
        if key not in self.config:
            raise ReplyError(f"{key} is missing")
        return self.config[key]

    def integer(self, key: str, minimum: int | None = None) -> int:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ReplyError(f"{key} must be a whole number, got {value!r}")
        if minimum is not None and value < minimum:
            raise ReplyError(f"{key} must be at least {minimum}, got {value!r}")
        return int(value)

    def number(self, key: str) -> float:
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise ReplyError(f"{key} must be a number, got {value!r}")
        if not math.isfinite(float(value)):
            raise ReplyError(f"{key} must be a finite number, got {value!r}")
        return float(value)

    def text(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            raise ReplyError(f"{key} must be text, got {value!r}")
        return value

    def optional(self, key: str, read: str) -> Any:
        return getattr(self, read)(key) if key in self.config else None

    def prefixed(self, prefix: str) -> dict[str, Scalar]:
        """Every ``prefix``+name key as name -> value (numbers finite, or text)."""
        out: dict[str, Scalar] = {}
        for key, value in self.config.items():
            if key.startswith(prefix):
                out[key[len(prefix):]] = value if isinstance(value, str) else self.number(key)
        return out


def _scalars(prefix: str, values: Mapping[str, Any]) -> dict[str, Scalar]:
    out: dict[str, Scalar] = {}
    for key, value in values.items():
        if isinstance(value, (bool, str)):
            out[prefix + key] = value
        elif isinstance(value, (int, np.integer)):
            out[prefix + key] = int(value)
        else:
            out[prefix + key] = float(value)
    return out


def _arrays(name: str, arrays: Any, shapes: Sequence[tuple[int, ...]] | None = None
            ) -> Params:
    """A list of finite arrays (of ``shapes`` where given), or ReplyError."""
    if not isinstance(arrays, Sequence) or isinstance(arrays, (str, bytes)):
        raise ReplyError(f"{name} must be a list of arrays")
    out = [np.asarray(a) for a in arrays]
    if shapes is not None:
        got = [a.shape for a in out]
        if got != [tuple(s) for s in shapes]:
            raise ReplyError(f"{name} has arrays of shapes {got}, the global model "
                             f"{[tuple(s) for s in shapes]}")
    for i, a in enumerate(out):
        if a.dtype.kind not in "fiu":
            raise ReplyError(f"{name}[{i}] is not numeric ({a.dtype})")
        if not np.all(np.isfinite(a)):
            raise ReplyError(f"{name}[{i}] has non-finite values")
    return out


@dataclass(frozen=True)
class DataSpec:
    """Where a learner finds its part of the data set (every process computes the same split).

    Attributes
    ----------
    dataset, partition : str
        As the run's settings.
    num_partitions : int
        Parts the training set is split into (one per node).
    seed : int
        Seed of the split.
    max_train, max_test : int or None
        Subset sizes (None: all of it).
    """

    dataset: str
    partition: str
    num_partitions: int
    seed: int
    max_train: int | None = None
    max_test: int | None = None

    def encode(self) -> dict[str, Scalar]:
        out: dict[str, Scalar] = {"data.dataset": self.dataset,
                                  "data.partition": self.partition,
                                  "data.num_partitions": self.num_partitions,
                                  "data.seed": self.seed}
        for key in ("max_train", "max_test"):  # absent: all of it
            if getattr(self, key) is not None:
                out[f"data.{key}"] = int(getattr(self, key))
        return out

    @classmethod
    def read(cls, r: _Reader) -> DataSpec:
        return cls(r.text("data.dataset"), r.text("data.partition"),
                   r.integer("data.num_partitions", 1), r.integer("data.seed", 0),
                   r.optional("data.max_train", "integer"),
                   r.optional("data.max_test", "integer"))


@dataclass(frozen=True)
class ProbeOrder:
    """The probe: time a few passes over the learner's own data (subset benchmarking).

    Attributes
    ----------
    problem : str
        The run's problem (its learner side says whether the learner keeps its speed).
    model : str
        The model's name (``layers_for``); the probe trains a throw-away copy.
    batch : int
        Minibatch of the timed passes.
    seed : int
    alpha : float
        Weight of a new measurement in the learner's own estimate of its speed.
    min_seconds : float
        The probe trains at least this long [s].
    data : DataSpec
    constants_lr : float or None
        Where set, the learner also measures the constants of the bound that chooses
        staggered's period (:func:`mel_opt.schemes.period.learner_constants`) at the run's
        starting model, its one gradient step of this learning rate; None: it does not.
    """

    problem: str
    model: str
    batch: int
    seed: int
    alpha: float
    min_seconds: float
    data: DataSpec
    constants_lr: float | None = None

    def encode(self) -> Records:
        extra: dict[str, Scalar] = {} if self.constants_lr is None else \
            {"constants_lr": float(self.constants_lr)}
        return Records({"problem": self.problem, "model": self.model, "batch": self.batch,
                        "seed": self.seed, "alpha": self.alpha,
                        "min_seconds": self.min_seconds, **self.data.encode(), **extra})

    @classmethod
    def decode(cls, records: Records) -> ProbeOrder:
        r = _Reader(records.config)
        return cls(r.text("problem"), r.text("model"), r.integer("batch", 1),
                   r.integer("seed", 0), r.number("alpha"), r.number("min_seconds"),
                   DataSpec.read(r), r.optional("constants_lr", "number"))


@dataclass(frozen=True)
class ProbeReport:
    """A learner's answer to the probe.

    Attributes
    ----------
    learner : int
        Its partition id: the learner of the instance it is.
    samples_held : int
        Training samples of its part of the data set.
    compute_s, work : float or None
        Seconds of the timed training and the sample-passes it did; None when the learner
        keeps its speed to itself (a learner that plans its own work).
    rho, beta : float or None
        Its constants of the bound, where the order asked for them (``constants_lr``):
        :class:`~mel_opt.schemes.period.LearnerConstants`.
    gradient : list of ndarray or None
        Its mean loss's gradient at the starting model, with ``rho`` and ``beta``.
    constants_s : float
        Seconds it took to compute them (part of the reply's round trip that is neither the
        timed training nor messaging).
    start_s, rate_s : float or None
        Its timed starts split into a fixed cost per start [s] and seconds per sample-pass
        beyond it (:func:`~mel_opt.live.estimates.start_cost`); None where the probe's starts
        could not tell them apart.
    """

    learner: int
    samples_held: int
    compute_s: float | None = None
    work: float | None = None
    rho: float | None = None
    beta: float | None = None
    gradient: Params | None = None
    constants_s: float = 0.0
    start_s: float | None = None
    rate_s: float | None = None

    def encode(self) -> Records:
        config: dict[str, Scalar] = {"learner": self.learner,
                                     "samples_held": self.samples_held}
        if self.compute_s is not None and self.work is not None:
            config.update(compute_s=float(self.compute_s), work=float(self.work))
        if self.start_s is not None and self.rate_s is not None:
            config.update(start_s=float(self.start_s), rate_s=float(self.rate_s))
        if self.gradient is None:
            return Records(config)
        config.update(rho=float(self.rho or 0.0), beta=float(self.beta or 0.0),
                      constants_s=float(self.constants_s))
        return Records(config, {"gradient": list(self.gradient)})

    @classmethod
    def decode(cls, records: Records) -> ProbeReport:
        r = _Reader(records.config)
        start = r.optional("start_s", "number"), r.optional("rate_s", "number")
        if (start[0] is None) != (start[1] is None):
            raise ReplyError("start_s and rate_s come together, got one of them")
        if start[0] is not None and (start[0] < 0 or start[1] <= 0):
            raise ReplyError(f"start_s must be at least 0 and rate_s positive, got "
                             f"{start[0]!r} and {start[1]!r}")
        head = (r.integer("learner", 0), r.integer("samples_held", 0),
                r.optional("compute_s", "number"), r.optional("work", "number"))
        gradient = records.arrays.get("gradient")
        if gradient is None:
            return cls(*head, start_s=start[0], rate_s=start[1])
        rho, beta, seconds = r.number("rho"), r.number("beta"), r.number("constants_s")
        if rho < 0 or beta < 0 or seconds < 0:
            raise ReplyError(f"rho, beta and constants_s must be at least 0, got {rho!r}, "
                             f"{beta!r} and {seconds!r}")
        return cls(*head, rho, beta, _arrays("gradient", gradient), seconds, *start)


@dataclass(frozen=True)
class TrainOrder:
    """One round of work for one learner, with the global model it starts from.

    Attributes
    ----------
    problem : str
    round : int
        1, 2, ...
    seed : int
        The run's seed (the learner mixes in the round and its partition id).
    alpha : float
        Weight of a new measurement in the learner's own speed estimate.
    lr : float
        Learning rate of this round (the run's, times the cycle's scale).
    batch : int
        Minibatch size (0: one gradient step over all the samples).
    data : DataSpec
    model : list of ndarray
        The global model of its task.
    task : int
        The task whose model it trains (0 where the problem has one).
    samples, passes : int
        Its work, where the server planned it.
    predicted_s, comm_s : float
        Its predicted busy time and the transfers' part of it [s] (server's plan).
    brief : Mapping
        What a learner that plans its own work is told (the problem's numbers); empty when
        the server planned.
    claim : bool
        The learner is asked only for the plan it makes from ``brief`` (no model is sent, it
        trains nothing): the server then ships it the data it claimed (dab's shards,
        Algorithm 10).
    shipped : list of ndarray
        The samples to train on, sent with the order: features (samples x features) and
        labels; empty: the learner draws them from the part of the data set it holds.
    attack : str
        A measured run's lie (:mod:`mel_opt.problems.attacks`: ``scale:F``, ``sign``...)
        this learner sends instead of its trained model; empty: it is honest.
    """

    problem: str
    round: int
    seed: int
    alpha: float
    lr: float
    batch: int
    data: DataSpec
    model: Params
    task: int = 0
    samples: int = 0
    passes: int = 0
    predicted_s: float = 0.0
    comm_s: float = 0.0
    brief: Mapping[str, Scalar] = field(default_factory=dict)
    claim: bool = False
    shipped: Params = field(default_factory=list)
    attack: str = ""

    def encode(self) -> Records:
        config: dict[str, Scalar] = {
            "problem": self.problem, "round": self.round, "seed": self.seed,
            "alpha": self.alpha, "lr": self.lr, "batch": self.batch, "task": self.task,
            "samples": self.samples, "passes": self.passes,
            "predicted_s": self.predicted_s, "comm_s": self.comm_s,
            **self.data.encode(), **_scalars("brief.", self.brief)}
        arrays: dict[str, Params] = {}
        if self.claim:
            config["claim"] = True
        else:
            arrays[MODEL] = list(self.model)
        if self.attack:
            config["attack"] = self.attack
        if self.shipped:
            arrays[SHIPPED] = list(self.shipped)
        return Records(config, arrays)

    @classmethod
    def decode(cls, records: Records) -> TrainOrder:
        r = _Reader(records.config)
        claim = records.config.get("claim", False) is True
        if MODEL not in records.arrays and not claim:
            raise ReplyError("the order carries no model")
        shipped = _samples(records.arrays[SHIPPED]) if SHIPPED in records.arrays else []
        return cls(r.text("problem"), r.integer("round", 1), r.integer("seed", 0),
                   r.number("alpha"), r.number("lr"), r.integer("batch", 0),
                   DataSpec.read(r), _arrays(MODEL, records.arrays.get(MODEL, [])),
                   r.integer("task", 0), r.integer("samples", 0), r.integer("passes", 0),
                   r.number("predicted_s"), r.number("comm_s"), r.prefixed("brief."),
                   claim, shipped, r.optional("attack", "text") or "")


def _samples(arrays: Any) -> Params:
    """Shipped samples: a 2-D array of features and a 1-D array of as many whole labels."""
    out = _arrays(SHIPPED, arrays)
    if len(out) != 2 or out[0].ndim != 2 or out[1].ndim != 1 or \
            out[0].shape[0] != out[1].shape[0] or out[1].dtype.kind not in "iu":
        raise ReplyError(f"{SHIPPED} must be features (samples x features) and as many "
                         f"whole labels, got shapes {[a.shape for a in out]}")
    return out


@dataclass(frozen=True)
class TrainReport:
    """A learner's answer to a :class:`TrainOrder`.

    Attributes
    ----------
    learner : int
        Its partition id.
    compute_s : float
        Measured wall time of its training [s].
    work : float
        Sample-passes it trained (samples x passes; samples for one full-batch step).
    samples, passes : int
        What it trained.
    model : list of ndarray
        Its trained model.
    plan : LearnerPlan or None
        The plan it made itself (a learner that plans its own work); None: it followed the
        order.
    extras : Mapping of str to float
        Numbers its problem's learner side computed (adaptive-tau: ``local_loss``, ``rho``,
        ``beta``, ``statistics_s``).
    arrays : Mapping of str to list of ndarray
        Arrays its problem's learner side computed (adaptive-tau: ``gradient``).
    """

    learner: int
    compute_s: float
    work: float
    samples: int
    passes: int
    model: Params
    plan: LearnerPlan | None = None
    extras: Mapping[str, float] = field(default_factory=dict)
    arrays: Mapping[str, Params] = field(default_factory=dict)

    def encode(self) -> Records:
        if CONFIG in self.arrays or MODEL in self.arrays:
            raise ValueError(f"{CONFIG!r} and {MODEL!r} are the report's own records")
        config: dict[str, Scalar] = {"learner": self.learner, "compute_s": self.compute_s,
                                     "work": self.work, "samples": self.samples,
                                     "passes": self.passes, **_scalars("x.", self.extras)}
        p = self.plan
        if p is not None:
            config.update(_scalars("plan.", {"samples": p.samples, "passes": p.passes,
                                             "weight": p.weight, "predicted_s": p.predicted_s,
                                             "comm_s": p.comm_s}))
            config.update(_scalars("plan.col.", p.columns))
        return Records(config, {MODEL: list(self.model), **self.arrays})

    @classmethod
    def decode(cls, records: Records, shapes: Sequence[tuple[int, ...]] | None = None
               ) -> TrainReport:
        """The report in ``records``; with ``shapes`` (the global model's), a model of other
        shapes is refused. Raises :class:`ReplyError`."""
        r = _Reader(records.config)
        if MODEL not in records.arrays:
            raise ReplyError("the reply carries no model")
        learner = r.integer("learner", 0)
        extras = {}
        for key, value in r.prefixed("x.").items():
            if isinstance(value, str):
                raise ReplyError(f"x.{key} must be a number, got {value!r}")
            extras[key] = float(value)
        plan = None
        if "plan.weight" in records.config:
            columns = r.prefixed("plan.col.")
            plan = LearnerPlan(learner, r.integer("plan.samples", 0),
                               r.integer("plan.passes", 0), r.number("plan.weight"),
                               r.number("plan.predicted_s"), r.number("plan.comm_s"),
                               columns={k: _plain(v) for k, v in columns.items()})
        return cls(learner, r.number("compute_s"), r.number("work"), r.integer("samples", 0),
                   r.integer("passes", 0), _arrays(MODEL, records.arrays[MODEL], shapes),
                   plan, extras,
                   {k: _arrays(k, v) for k, v in records.arrays.items() if k != MODEL})


def _plain(value: Scalar) -> Scalar:
    """A column's number as the allocation has it (whole numbers as int)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def shapes_of(model: Iterable[np.ndarray]) -> list[tuple[int, ...]]:
    """The shapes of a model's arrays (what :meth:`TrainReport.decode` compares with)."""
    return [tuple(np.shape(a)) for a in model]
