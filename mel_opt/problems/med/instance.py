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
from typing import Any

import numpy as np

from mel_opt.io.validate import Validator, join, readonly_array

PROB_TOL = 1e-6  # |sum(state_probs) - 1| allowed (JSON files carry rounded probabilities)


@dataclass(frozen=True, eq=False)
class MedInstance:
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
    """

    name: str
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
    description: str = ""

    problem = "med"

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
    """Validate a med document (design brief, "Instance files") and build the instance.

    Raises
    ------
    InstanceError
        Listing every problem with its JSON path: wrong types, NaN/inf, non-positive sizes,
        rates or bandwidths, negative prices, probabilities outside [0, 1] or not summing to 1,
        per-learner lists whose length does not match the states or tasks, duplicate names,
        fewer learners than tasks (each task needs a learner and a learner serves one task,
        (4.4f)) and n * D_l > sum_i D_i (4.4e cannot hold with (4.4c)).
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None
    budget = v.number(root, "budget", "$", positive=True)
    dl = v.number(root, "min_shards_per_learner", "$", default=1, integer=True, nonnegative=True)

    states = v.list(root, "states", "$")
    state_names: list[str] = []
    if isinstance(states, list):
        for k, s in enumerate(states):
            if not isinstance(s, str) or not s:
                v.error(join("states", k), f"must be a non-empty string, got {s!r}")
            elif s in state_names:
                v.error(join("states", k), f"duplicate state name {s!r}")
            state_names.append(str(s))
    h = len(state_names) if isinstance(states, list) else None

    tasks = v.list(root, "tasks", "$")
    tnames: list[str] = []
    omega: list[Any] = []
    alpha: list[Any] = []
    shards: list[Any] = []
    deadline: list[Any] = []
    iters: list[Any] = []
    for i, p, t in v.objects(tasks, "tasks"):
        v.unique_name(t, p, f"task{i}", tnames, "task")
        omega.append(v.number(t, "model_bytes", p, positive=True))
        alpha.append(v.number(t, "shard_bytes", p, positive=True))
        shards.append(v.number(t, "shards", p, integer=True, positive=True))
        deadline.append(v.number(t, "deadline_s", p, positive=True))
        iters.append(v.number(t, "iterations", p, default=1, integer=True, positive=True))
    m = len(tasks) if isinstance(tasks, list) else None

    learners = v.list(root, "learners", "$")
    lnames: list[str] = []
    price: list[Any] = []
    probs: list[Any] = []
    bw: list[Any] = []
    rate: list[Any] = []
    for j, p, lr in v.objects(learners, "learners"):
        v.unique_name(lr, p, f"learner{j}", lnames, "learner")
        price.append(v.number(lr, "price", p, nonnegative=True))
        probs.append(_probs(v, lr, p, h))
        bw.append(_per_state(v, lr, "bandwidth_Bps", p, h))
        rate.append(_rates(v, lr, p, m, h))

    if v.ok:
        n, m_ = len(lnames), len(tnames)
        if n < m_:
            v.error("learners", f"{n} learners for {m_} tasks: every task needs at least one "
                    "learner and a learner serves one task (4.4f), so n >= m is required")
        total = int(sum(shards))
        if n * dl > total:
            v.error("min_shards_per_learner",
                    f"n * D_l = {n} * {dl} = {n * dl} exceeds the {total} shards of all tasks: "
                    "(4.4e) cannot hold with (4.4c)")
    v.finish()
    desc = root.get("description", "")
    return MedInstance(
        name=str(root.get("name", "instance")),
        budget=float(budget),
        min_shards=int(dl),
        state_names=tuple(state_names),
        task_names=tuple(tnames),
        model_bytes=readonly_array(omega),
        shard_bytes=readonly_array(alpha),
        shards=readonly_array(shards, np.int64),
        deadline=readonly_array(deadline),
        iterations=readonly_array(iters, np.int64),
        learner_names=tuple(lnames),
        price=readonly_array(price),
        probs=readonly_array(probs),
        bandwidth=readonly_array(bw),
        train_rate=readonly_array(rate),
        description=desc if isinstance(desc, str) else "",
    )


def _probs(v: Validator, lr: dict[str, Any], p: str, h: int | None) -> Any:
    key = join(p, "state_probs")
    vals = v.list(lr, "state_probs", p, length=h)
    if vals is None:
        return None
    out = v.numbers(vals, key, minimum=0.0, maximum=1.0)
    if out is None:
        return None
    s = float(sum(out))
    if abs(s - 1.0) > PROB_TOL:
        v.error(key, f"probabilities must sum to 1, got {s:.6g}")
        return None
    return [x / s for x in out]  # remove the rounding left in the file


def _per_state(v: Validator, lr: dict[str, Any], key: str, p: str, h: int | None) -> Any:
    vals = v.list(lr, key, p, length=h)
    if vals is None:
        return None
    return v.numbers(vals, join(p, key), positive=True)


def _rates(v: Validator, lr: dict[str, Any], p: str, m: int | None, h: int | None) -> Any:
    key = join(p, "train_rate")
    rows = v.list(lr, "train_rate", p)
    if rows is None:
        return None
    if m is not None and len(rows) != m:
        v.error(key, f"must have one row per task ({m}), got {len(rows)}")
        return None
    out = [v.numbers(row, join(key, i), length=h, positive=True) for i, row in enumerate(rows)]
    return None if any(r is None for r in out) else out
