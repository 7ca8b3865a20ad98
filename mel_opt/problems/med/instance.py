"""med instances (thesis 001, Chapter 4): tasks, learners with uncertain states, validation.

An instance holds m tasks (requests r_i) and n learners (w_j), each learner being in one of h
states with probabilities gamma_jk. Per state it has a bandwidth b_jk [bytes/s] and, per task, a
training rate R_ijk [shards/s] (the thesis' c_ijk). Task i has a model of Omega_i bytes, shards of
alpha_i bytes, D_i shards, a deadline T_i [s] and tau_i local passes over the data
(``iterations``; thesis Eq. 4.2-4.3 omit it, the author's code has it).

Field names are those of the design brief (``budget``, ``min_shards_per_learner``, ``states``,
``tasks``, ``learners``); the parser reports every problem with its JSON path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from mel_opt.io.fields import Field, number
from mel_opt.io.reader import Rows, read_table
from mel_opt.io.validate import Validator, join, readonly_array
from mel_opt.problems.base import Instance
from mel_opt.stats import DEFAULT_TIME_CV

PROB_TOL = 1e-6  # |sum(state_probs) - 1| allowed (JSON files carry rounded probabilities)

_STATES = "states"  # per-state lists have one entry per state
#: The fields of a med file. Shards and iterations are bounded so that sums and products of
#: them (sum_i D_i, tau_i D_i in the ILP (4.4)) stay far inside int64 and exact in float64.
FIELDS: tuple[Field, ...] = (
    number("budget", 1e-9, 1e15, unit="price", doc="B of (4.4d), in the learners' price unit"),
    number("min_shards_per_learner", 0, 10**9, integer=True, sign="non-negative",
           required=False, default=1, unit="shard", doc="D_l of (4.4e)"),
    Field("states", "list", names="state", item=Field("", "string"),
          doc="names of the learner states"),
    Field("tasks", "list", names="task", name_default="task{i}", doc="the learning tasks",
          fields=(
              number("model_bytes", 1, 1e15, unit="byte", doc="Omega_i, size of the model"),
              number("shard_bytes", 1, 1e15, unit="byte", doc="alpha_i, size of one shard"),
              number("shards", 1, 10**9, integer=True, unit="shard", doc="D_i, shards to place"),
              number("deadline_s", 1e-9, 1e9, unit="s", doc="T_i, the task's deadline"),
              number("iterations", 1, 10**6, integer=True, required=False, default=1,
                     doc="tau_i, local passes over the allocated shards"),
          )),
    Field("learners", "list", names="learner", name_default="learner{i}", doc="the learners",
          fields=(
              number("price", 0, 1e15, sign="non-negative", unit="price/shard",
                     doc="p_j, price of one shard"),
              Field("state_probs", "list", doc="gamma_jk, probability of each state",
                    item=number("", 0.0, 1.0, sign=None), length_of=_STATES),
              Field("bandwidth_Bps", "list", doc="b_jk, bandwidth in each state",
                    item=number("", 1e-3, 1e15, unit="byte/s"), length_of=_STATES),
              number("time_cv", 0.0, 2.0, sign="non-negative", required=False,
                     default=DEFAULT_TIME_CV,
                     doc="coefficient of variation of the learner's time within one state, "
                         "run to run (the simulator's noise; the methods plan on expected "
                         "times and ignore it)"),
              Field("train_rate", "list", length_of="tasks",
                    length_message="must have one row per task ({n}), got {got}",
                    doc="R_ijk, shards/s per task (rows) and state (columns)",
                    item=Field("", "list", item=number("", 1e-6, 1e6, unit="shard/s"),
                               length_of=_STATES)),
          )),
)


#: Rules of :func:`parse` beyond the field table, as (JSON path, rule): JSON Schema cannot
#: express them, so the published schema lists them and mel_opt alone checks them.
CROSS_FIELD_RULES: tuple[tuple[str, str], ...] = (
    ("learners[].state_probs", f"sums to 1 (within {PROB_TOL:g})"),
    ("learners", "at least as many learners as tasks (4.4f)"),
    ("min_shards_per_learner", "n * min_shards_per_learner <= sum of the tasks' shards "
     "(n learners; (4.4e) with (4.4c))"),
)


@dataclass(frozen=True, eq=False, kw_only=True)
class MedInstance(Instance):
    """A validated med instance (arrays are read-only).

    Attributes
    ----------
    name, description : str
    budget : float
        B of (4.4d), in the learners' price unit (per shard).
    min_shards : int
        D_l of (4.4e): shards every learner must receive (0 lets a learner stay unused).
    state_names : tuple of str, length h
    task_names : tuple of str, length m
    model_bytes, shard_bytes : ndarray (m,)
        Omega_i and alpha_i [bytes].
    shards : ndarray (m,) of int
        D_i.
    deadline : ndarray (m,)
        T_i [s].
    iterations : ndarray (m,) of int
        tau_i, local passes over the allocated shards.
    learner_names : tuple of str, length n
    price : ndarray (n,)
        p_j per shard.
    probs : ndarray (n, h)
        gamma_jk, each row sums to 1.
    bandwidth : ndarray (n, h)
        b_jk [bytes/s].
    train_rate : ndarray (n, m, h)
        R_ijk stored learner-major as in the file: ``train_rate[j, i, k]`` [shards/s].
    time_cv : ndarray (n,)
        Coefficient of variation of learner j's time within a state from one cycle to the next
        (>= 0; 0: none). Only :mod:`mel_opt.problems.med.simulate` uses it.
    """

    problem: ClassVar[str] = "med"
    budget: float
    min_shards: int
    state_names: tuple[str, ...]
    task_names: tuple[str, ...]
    model_bytes: np.ndarray
    shard_bytes: np.ndarray
    shards: np.ndarray
    deadline: np.ndarray
    iterations: np.ndarray
    learner_names: tuple[str, ...]
    price: np.ndarray
    probs: np.ndarray
    bandwidth: np.ndarray
    train_rate: np.ndarray
    time_cv: np.ndarray

    @property
    def n_tasks(self) -> int:
        return len(self.task_names)

    @property
    def n_learners(self) -> int:
        return len(self.learner_names)

    @property
    def n_states(self) -> int:
        return len(self.state_names)

    def with_known_states(self, states: np.ndarray) -> MedInstance:
        """The same instance with each learner's state known: ``probs`` one-hot on ``states``.

        This is the deterministic model of the MMTT baselines (one state per learner, its
        benchmark scores taken as certain). Nothing else changes; ``self`` is not modified.
        """
        s = np.asarray(states, dtype=np.int64)
        onehot = np.zeros((self.n_learners, self.n_states))
        onehot[np.arange(self.n_learners), s] = 1.0
        return replace(self, probs=readonly_array(onehot))


def parse(doc: Mapping[str, Any], source: str | None = None) -> MedInstance:
    """Validate a med document against :data:`FIELDS` and build the instance.

    Raises
    ------
    InstanceError
        Listing every problem with its JSON path: wrong types, NaN/inf, values outside the
        documented ranges, probabilities not summing to 1, per-learner lists whose length does
        not match the states or tasks, duplicate names, fewer learners than tasks (each task
        needs a learner and a learner serves one task, (4.4f)) and n * D_l > sum_i D_i (4.4e
        cannot hold with (4.4c)).
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None
    f = read_table(v, root, FIELDS)
    probs = _probabilities(v, f["learners"])
    if v.ok:
        _cross_checks(v, f)
    v.finish()
    tasks: Rows = f["tasks"]
    learners: Rows = f["learners"]
    desc = root.get("description", "")
    return MedInstance(
        name=str(root.get("name", "instance")),
        budget=float(f["budget"]),
        min_shards=int(f["min_shards_per_learner"]),
        state_names=tuple(f["states"]),
        task_names=tuple(tasks.names),
        model_bytes=readonly_array(tasks.col("model_bytes")),
        shard_bytes=readonly_array(tasks.col("shard_bytes")),
        shards=readonly_array(tasks.col("shards"), np.int64),
        deadline=readonly_array(tasks.col("deadline_s")),
        iterations=readonly_array(tasks.col("iterations"), np.int64),
        learner_names=tuple(learners.names),
        price=readonly_array(learners.col("price")),
        probs=readonly_array(probs),
        bandwidth=readonly_array(learners.columns["bandwidth_Bps"]),
        train_rate=readonly_array(learners.columns["train_rate"]),
        time_cv=readonly_array(learners.col("time_cv")),
        description=desc if isinstance(desc, str) else "",
    )


def _probabilities(v: Validator, learners: Rows | None) -> list[Any]:
    """Each learner's state_probs, normalised; a sum off 1 by more than PROB_TOL is an issue."""
    out: list[Any] = []
    if learners is None:
        return out
    for j, row in enumerate(learners.columns.get("state_probs", [])):
        if row is None or np.isnan(row).any():
            out.append(None)
            continue
        s = float(row.sum())
        if abs(s - 1.0) > PROB_TOL:
            v.error(join(join("learners", j), "state_probs"),
                    f"probabilities must sum to 1, got {s:.6g}")
            out.append(None)
        else:
            out.append(row / s)  # remove the rounding left in the file
    return out


def _cross_checks(v: Validator, f: dict[str, Any]) -> None:
    """n >= m (4.4f) and n D_l <= sum_i D_i ((4.4e) with (4.4c))."""
    n, m_ = len(f["learners"]), len(f["tasks"])
    dl = f["min_shards_per_learner"]
    if n < m_:
        v.error("learners", f"{n} learners for {m_} tasks: every task needs at least one "
                "learner and a learner serves one task (4.4f), so n >= m is required")
    total = int(f["tasks"].col("shards").sum())
    if n * dl > total:
        v.error("min_shards_per_learner",
                f"n * D_l = {n} * {dl} = {n * dl} exceeds the {total} shards of all tasks: "
                "(4.4e) cannot hold with (4.4c)")
