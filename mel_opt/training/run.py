"""``train``: solve an instance with each scheme, then train a real model under each allocation.

A *scheme* is any method of the instance's problem (solved through :func:`mel_opt.api.solve`)
or one of the training-only baselines of :data:`TRAINING_ONLY` (paper 004's Table II schemes
that are not allocations of the feel problem). A scheme whose allocation is infeasible is
reported and left out; the others run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt import api
from mel_opt.errors import UsageError
from mel_opt.problems.base import Instance
from mel_opt.problems.dab.instance import DabInstance
from mel_opt.problems.feel.instance import FeelInstance
from mel_opt.problems.mel_async.instance import MelAsyncInstance
from mel_opt.stats import lognormal_factors
from mel_opt.training.data import Dataset, load_dataset
from mel_opt.training.emulate import (
    CycleRecord,
    LocalPlan,
    Trainer,
    run_feel,
    run_feel_local,
    run_local_cycles,
)
from mel_opt.training.latency import FeelClock, dab_times, mel_async_times
from mel_opt.training.mlp import init_params, layers_for
from mel_opt.training.partition import Partition, make_pools, parse_partition, proportional_sizes

PROBLEMS = ("mel-async", "dab", "feel")
TRAINING_ONLY: dict[str, tuple[str, ...]] = {
    "mel-async": (),
    "dab": (),
    "feel": ("individual", "model-based", "gradient-based"),
}


@dataclass(frozen=True)
class TrainSettings:
    """What to train and how (the options of ``melopt train``).

    Attributes
    ----------
    schemes : tuple of str
        Methods of the instance's problem and training-only baselines.
    cycles : int
        Global cycles (communication rounds) per run.
    seeds : int
        Runs per scheme, seeds 0 .. seeds-1 (model initialisation, partition, shuffling).
    dataset, partition, model : str
        See :func:`~mel_opt.training.data.load_dataset`,
        :func:`~mel_opt.training.partition.parse_partition`,
        :func:`~mel_opt.training.mlp.layers_for`.
    targets : tuple of float
        Validation accuracies in (0, 1] to report cycles and seconds to.
    lr : float
        SGD learning rate (feel: at a global batch of B^max, scaled as sqrt(B)).
    batch_size : int
        Local minibatch of mel-async and dab passes (feel uses B^max for local epochs).
    dtype : str
        ``float32`` or ``float64``.
    param_bits : float or None
        feel: bits of the model parameters sent by model-based FEEL and individual learning
        (default: the instance's gradient size, i.e. parameters sent at the gradient's b bits).
    reference : str or None
        Scheme the speedups are measured against (default: the first scheme).
    max_train, max_test : int or None
        Subset sizes of the data set.
    time_limit : float or None
        Per-scheme solver time limit [s].
    """

    schemes: tuple[str, ...]
    cycles: int = 20
    seeds: int = 3
    dataset: str = "digits"
    partition: str = "iid"
    model: str = "twonn"
    targets: tuple[float, ...] = (0.9,)
    lr: float = 0.1
    batch_size: int = 32
    dtype: str = "float32"
    param_bits: float | None = None
    reference: str | None = None
    max_train: int | None = None
    max_test: int | None = None
    time_limit: float | None = 60.0


@dataclass
class TrainRun:
    """Everything one ``train`` call produced.

    Attributes
    ----------
    instance : str
    problem : str
    settings : TrainSettings
    rows : list of dict
        One per (scheme, seed, cycle): the columns of ``train.csv``.
    infeasible : dict
        scheme -> why it has no allocation.
    allocations : dict
        scheme -> the solution it trained under (as the result JSON has it).
    """

    instance: str
    problem: str
    settings: TrainSettings
    rows: list[dict[str, Any]] = field(default_factory=list)
    infeasible: dict[str, str] = field(default_factory=dict)
    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def schemes(self) -> list[str]:
        """Schemes that trained, in the order asked."""
        return [s for s in self.settings.schemes if s not in self.infeasible]


def check_settings(problem: str, s: TrainSettings) -> Partition:
    """Reject bad settings with one clear message each (UsageError, exit code 2)."""
    if problem not in PROBLEMS:
        raise UsageError(f"training supports the problems {', '.join(PROBLEMS)}; "
                         f"this instance is {problem!r}")
    known = list(api.methods(problem)[problem]) + list(TRAINING_ONLY[problem])
    if not s.schemes:
        raise UsageError("--schemes needs at least one scheme")
    for name in s.schemes:
        if name not in known:
            raise UsageError(f"--schemes: unknown scheme {name!r} for {problem}; choose from "
                             f"{', '.join(known)}")
    if len(set(s.schemes)) != len(s.schemes):
        raise UsageError("--schemes: a scheme is named twice")
    if s.reference is not None and s.reference not in s.schemes:
        raise UsageError(f"--reference {s.reference!r} is not one of --schemes")
    if s.cycles < 1:
        raise UsageError(f"--cycles must be at least 1, got {s.cycles}")
    if s.seeds < 1:
        raise UsageError(f"--seeds must be at least 1, got {s.seeds}")
    for t in s.targets:
        if not 0.0 < t <= 1.0:
            raise UsageError(f"--target: accuracies must lie in (0, 1], got {t:g}")
    if not s.lr > 0 or s.batch_size < 1:
        raise UsageError("--lr must be positive and --batch-size at least 1")
    if s.dtype not in ("float32", "float64"):
        raise UsageError(f"--dtype must be float32 or float64, got {s.dtype!r}")
    layers_for(s.model, 1, 1)  # unknown model -> UsageError
    return parse_partition(s.partition)


def _allocate(inst: Instance, scheme: str, time_limit: float | None) -> dict[str, Any] | str:
    """The scheme's solution, or why there is none."""
    res = api.solve(inst, scheme, time_limit=time_limit, seed=0)
    if not res.ok:
        return f"{res.status.value}: {res.message}" if res.message else res.status.value
    return dict(res.solution)


def _mel_async(inst: MelAsyncInstance, sol: dict[str, Any], tr: Trainer, part: Partition,
               rng: np.random.Generator, cycles: int) -> Iterator[CycleRecord]:
    d = np.asarray(sol["d"], dtype=np.int64)
    tau = np.asarray(sol["tau"], dtype=np.int64)
    busy = mel_async_times(inst, d, tau)
    T = float(inst.cycle_time)
    if float(busy.max()) > T * (1 + 1e-9):
        raise UsageError(f"the allocation overruns the cycle clock: max t_k = {busy.max():g} s "
                         f"> T = {T:g} s")
    n = proportional_sizes(d.astype(float), tr.data.y_train.size)
    pools = make_pools(tr.data.y_train, n, part, tr.data.classes, rng)
    plan = LocalPlan(n, tau, d.astype(float), lambda _rng: (T, None))
    return run_local_cycles(tr, plan, pools, cycles, rng)


def _dab(inst: DabInstance, sol: dict[str, Any], tr: Trainer, part: Partition,
         rng: np.random.Generator, cycles: int) -> Iterator[CycleRecord]:
    """Thesis Ch. 3 cycles: learner k trains a_k shards for its passes (the solution's tau_k,
    else mu); the cycle ends with the last update, each eta_k times the learner's run-to-run
    noise factor (the instance's ``time_cv``, :func:`mel_opt.stats.lognormal_factors`)."""
    shards = np.asarray(sol["shards"], dtype=np.int64)
    passes = np.asarray(sol.get("tau") or [inst.iterations] * inst.K, dtype=np.int64)
    used = shards > 0
    ref = inst.total_shards if inst.total_shards is not None else int(shards.sum())
    per_shard = max(1, tr.data.y_train.size // max(ref, 1))
    samples = shards * per_shard
    times = dab_times(inst, shards[used], passes[used])
    D = float(inst.deadline)
    cv = inst.time_cv[used]

    def cycle_time(r: np.random.Generator) -> tuple[float, float | None]:
        t = float((times * lognormal_factors(cv, r.standard_normal(times.size))).max())
        return t, 100.0 * max(0.0, t - D) / D

    sizes = proportional_sizes(np.where(used, samples, 1e-9).astype(float),
                               tr.data.y_train.size)
    pools = make_pools(tr.data.y_train, sizes, part, tr.data.classes, rng)
    plan = LocalPlan(np.where(used, samples, 0), np.where(used, passes, 0),
                     shards.astype(float), cycle_time)
    return run_local_cycles(tr, plan, pools, cycles, rng)


def _feel(inst: FeelInstance, scheme: str, sol: dict[str, Any] | None, tr: Trainer, part: Partition,
          rng: np.random.Generator, cycles: int, seed: int,
          param_bits: float | None) -> Iterator[CycleRecord]:
    clock = FeelClock(inst)
    K = inst.K
    pools = make_pools(tr.data.y_train, proportional_sizes(np.ones(K), tr.data.y_train.size),
                       part, tr.data.classes, rng)
    sizes = np.array([p.size for p in pools])
    local_tr = Trainer(tr.data, tr.init, tr.lr, int(inst.max_batch))
    if scheme in ("individual", "model-based"):
        epoch = clock.epoch_compute(sizes)
        if scheme == "model-based":
            per_round = clock.best_latency(epoch, param_bits, updates=0.0)
            return run_feel_local(local_tr, pools, cycles, rng, lambda c: c * per_round, True)
        return run_feel_local(local_tr, pools, cycles, rng,
                              lambda c: clock.best_latency(c * epoch, param_bits, 0.0), False)
    if scheme == "gradient-based":
        latency = clock.best_latency(clock.compute(sizes), updates=1.0)
        return run_feel(tr, lambda c: (sizes, latency), pools, cycles, rng, inst.max_batch)

    def rounds(c: int) -> tuple[np.ndarray, float]:
        s = sol
        if scheme == "random-batch":  # redrawn every round (paper 004, Section VI-D)
            s = dict(api.solve(inst, scheme, seed=seed * 1_000_003 + c).solution)
        assert s is not None
        b = np.asarray(s["batch"], dtype=np.int64)
        return b, clock.round_latency(b, np.asarray(s["uplink_slots"]),
                                      np.asarray(s["downlink_slots"]))

    return run_feel(tr, rounds, pools, cycles, rng, inst.max_batch)


def train(inst: Instance, settings: TrainSettings, *, data: Dataset | None = None,
          progress: Callable[[int, int], None] | None = None) -> TrainRun:
    """Solve ``inst`` with every scheme and train under each allocation.

    Parameters
    ----------
    inst : instance
        A mel-async, dab or feel instance (:func:`mel_opt.api.load_instance`).
    settings : TrainSettings
    data : Dataset, optional
        Use this data set instead of loading ``settings.dataset``.
    progress : callable, optional
        Called as progress(done, total) after every cycle of every (scheme, seed).

    Raises
    ------
    UsageError
        Bad settings, unknown data set, model or scheme (nothing is trained).
    """
    problem = api.problem_of(inst)
    part = check_settings(problem, settings)
    assert isinstance(inst, (MelAsyncInstance, DabInstance, FeelInstance))  # checked above
    ds = data if data is not None else load_dataset(
        settings.dataset, max_train=settings.max_train, max_test=settings.max_test)
    ds = ds.astype(np.dtype(settings.dtype))
    if ds.y_train.size < inst.K:
        raise UsageError(f"the data set has {ds.y_train.size} training samples, fewer than "
                         f"the {inst.K} learners")
    run = TrainRun(inst.name, problem, settings)
    for scheme in settings.schemes:
        if scheme in TRAINING_ONLY[problem]:
            continue
        out = _allocate(inst, scheme, settings.time_limit)
        if isinstance(out, str):
            run.infeasible[scheme] = out
        else:
            run.allocations[scheme] = out
    layers = layers_for(settings.model, ds.features, ds.classes)
    total = len(run.schemes) * settings.seeds * settings.cycles
    done = 0
    for scheme in run.schemes:
        sol = run.allocations.get(scheme)
        for seed in range(settings.seeds):
            tr = Trainer(ds, init_params(layers, seed, ds.x_train.dtype), settings.lr,
                         settings.batch_size)
            rng = np.random.default_rng([seed, 7])
            if isinstance(inst, MelAsyncInstance):
                assert sol is not None
                records = _mel_async(inst, sol, tr, part, rng, settings.cycles)
            elif isinstance(inst, DabInstance):
                assert sol is not None
                records = _dab(inst, sol, tr, part, rng, settings.cycles)
            else:
                assert isinstance(inst, FeelInstance)  # check_settings allows only these three
                records = _feel(inst, scheme, sol, tr, part, rng, settings.cycles, seed,
                                settings.param_bits)
            for rec in records:
                run.rows.append({"scheme": scheme, "seed": seed, "cycle": rec.cycle,
                                 "time_s": rec.time_s, "loss": rec.loss,
                                 "accuracy": rec.accuracy, "truancy": rec.truancy})
                if rec.cycle and progress is not None:
                    done += 1
                    progress(done, total)
    return run
