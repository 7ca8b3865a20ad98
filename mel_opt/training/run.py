"""``train``: solve an instance with each scheme, then train a real model under each allocation.

Any problem whose ``ProblemSpec`` declares a learning cycle
(:class:`~mel_opt.problems.learning.LearningCycle`) can be trained; nothing here knows the
problems. A *scheme* is any method of the instance's problem (solved through
:func:`mel_opt.api.solve`) or one of the training-only schemes its learning cycle declares
(feel: paper 004's Table II schemes that are not allocations of the problem). A scheme whose
allocation is infeasible is reported and left out; the others run.
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt import activity, api, units
from mel_opt.blas import blas_threads
from mel_opt.errors import SettingError, UsageError
from mel_opt.problems import get_problem
from mel_opt.problems.attacks import make_attack
from mel_opt.problems.base import Instance
from mel_opt.problems.learning import LearningCycle, RunContext, sample_bytes
from mel_opt.training.data import Dataset, load_dataset
from mel_opt.training.device import get_device
from mel_opt.training.emulate import Trainer, run_cycles
from mel_opt.training.mlp import init_params, layers_for
from mel_opt.training.partition import Partition, make_pools, parse_partition, proportional_sizes
from mel_opt.training.settings import TrainSettings


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


def trainable_problems() -> list[str]:
    """The problems whose learning cycle the emulator runs (``ProblemSpec.learning`` with
    ``emulated``)."""
    from mel_opt.problems import all_problems

    return [name for name, spec in all_problems().items()
            if spec.learning is not None and spec.learning.emulated]


def training_only(problem: str) -> tuple[str, ...]:
    """The training-only schemes of ``problem``'s learning cycle (none when it has none)."""
    cycle = get_problem(problem).learning
    return tuple(cycle.schemes) if cycle is not None else ()


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


def learning_cycle(problem: str) -> LearningCycle:
    """The problem's learning cycle, or UsageError naming the problems that have one."""
    cycle = get_problem(problem).learning
    if cycle is None or not cycle.emulated:
        live = " (melopt live trains it on real learner processes)" if cycle else ""
        raise UsageError(f"training supports the problems {', '.join(trainable_problems())}; "
                         f"this instance is {problem!r}{live}")
    return cycle


def check_settings(problem: str, s: TrainSettings) -> Partition:
    """Refuse settings ``problem`` cannot train (UsageError, exit code 2); each setting's own
    type and range were checked when ``s`` was made (:data:`~mel_opt.training.settings.
    TRAIN_SETTINGS`)."""
    learning_cycle(problem)
    known = list(api.methods(problem)[problem]) + list(training_only(problem))
    for name in s.schemes:
        if name not in known:
            raise SettingError("schemes", s.setting("schemes").flag,
                               f"unknown scheme {name!r} for {problem}; choose from "
                               f"{', '.join(known)}", ": ")
    return parse_partition(s.partition)


def _allocate(inst: Instance, scheme: str, time_limit: float | None) -> dict[str, Any] | str:
    """The scheme's solution, or why there is none."""
    res = api.solve(inst, scheme, time_limit=time_limit, seed=0)
    if not res.ok:
        return f"{res.status.value}: {res.message}" if res.message else res.status.value
    return dict(res.solution)


@dataclass
class _Shared:
    """What every (scheme, seed) run of one :func:`train` call reads."""

    inst: Instance
    cycle: LearningCycle
    ds: Dataset
    settings: TrainSettings
    part: Partition
    layers: Any
    allocations: dict[str, dict[str, Any]]
    threads: int = 1

    def train_one(self, scheme: str, seed: int,
                  tick: Callable[[str, int, int], None] | None = None) -> list[dict[str, Any]]:
        """The rows of one run: ``scheme``'s allocation trained from ``seed``."""
        s, ds = self.settings, self.ds
        sol = self.allocations.get(scheme)
        N = ds.y_train.size
        shares = self.cycle.data_shares(self.inst, scheme, sol, N)
        rows = []
        # one BLAS thread per training thread: a BLAS splitting these small products waits at
        # every one of them for its other threads, and several times longer on a busy machine
        with blas_threads(1):
            tr = Trainer(ds, init_params(self.layers, seed, ds.x_train.dtype), s.lr,
                         s.batch_size, self.threads, device=get_device(s.device))
            rng = np.random.default_rng([seed, 7])
            sizes = proportional_sizes(shares, N)
            pools = make_pools(ds.y_train, sizes, self.part, ds.classes, rng)
            ctx = RunContext(scheme, sol, seed, np.array([p.size for p in pools]),
                             {"param_bits": s.param_bits},
                             sample_bytes=sample_bytes(ds.features),
                             aggregation=s.aggregation,
                             attack=make_attack(s, len(pools), seed))
            best, best_cycle = -1.0, 0
            for rec in run_cycles(tr, self.cycle, self.inst, ctx, pools, s.cycles, rng):
                rows.append({"scheme": scheme, "seed": seed, "cycle": rec.cycle,
                             "time_s": rec.time_s, "loss": rec.loss,
                             "accuracy": rec.accuracy, "truancy": rec.truancy,
                             "clipped": rec.clipped, "kept": rec.kept or ""})
                if rec.cycle and tick is not None:
                    tick(scheme, seed, rec.cycle)
                if rec.accuracy > best + s.tolerance:
                    best, best_cycle = rec.accuracy, rec.cycle
                if s.patience is not None and rec.cycle - best_cycle >= s.patience:
                    break  # converged: no progress for `patience` cycles
                if s.until_targets and rec.cycle and rec.accuracy >= max(s.targets):
                    break  # every target reached: the rest changes no cycles to target
        return rows


def _train_unit(shared: Sequence[_Shared], call: int, scheme: str,
                seed: int) -> list[dict[str, Any]]:
    """One (scheme, seed) run of the ``call``-th training: a unit of :func:`train_all`
    (:mod:`mel_opt.units`)."""
    return shared[call].train_one(scheme, seed)


def run_processes(settings: TrainSettings, runs: int) -> int:
    """Worker processes that train the ``runs`` (scheme, seed) runs at once: the
    ``processes`` setting, else the ``--jobs`` of the command (:func:`mel_opt.units.current`),
    else one per CPU this process may use, at most one per run; one (this process) where a
    process may not start children of its own (a pool's daemonic worker) or cannot fork safely
    (:func:`mel_opt.solvers.forked.can_fork`: a process that has loaded Ray, whose gRPC threads
    a forked child inherits with their locks held, or runs threads that are not daemons), or
    trains on a GPU (``device``: one process drives it). The rows are the same either way."""
    from mel_opt.solvers import forked

    if settings.device != "cpu":
        return 1
    if settings.processes is not None:
        want = settings.processes
    else:
        want = units.current().jobs or available_cpus()
    n = max(1, min(int(want), runs))
    if n > 1 and (multiprocessing.current_process().daemon
                  or "fork" not in multiprocessing.get_all_start_methods()
                  or not forked.can_fork()):
        return 1
    return n


def unit_key(inst: Instance, ds: Dataset, settings: TrainSettings) -> dict[str, Any]:
    """What every run of one :func:`train` call depends on, besides its scheme, seed and
    allocation (a unit's key, :mod:`mel_opt.units`): the instance, the data set's arrays, the
    settings a run reads, and mel_opt's code."""
    values = {k: v for k, v in settings.values().items()
              if k not in ("schemes", "seeds", "threads", "processes")}
    return {"kind": "train", "code": units.code_version(), "instance": units.fingerprint(inst),
            "data": units.data_fingerprint(ds), "settings": values}


def train(inst: Instance, settings: TrainSettings, *, data: Dataset | None = None,
          progress: Callable[[int, int], None] | None = None) -> TrainRun:
    """Solve ``inst`` with every scheme and train under each allocation.

    Every (scheme, seed) run is a unit (:mod:`mel_opt.units`): on the ``processes`` setting's
    worker processes, else the command's ``--jobs`` (one per CPU by default) or its
    ``--cluster``, kept in its output folder as each finishes. The rows are the same wherever
    they ran.

    Parameters
    ----------
    inst : instance
        An instance of a problem with a learning cycle (mel-async, dab, feel;
        :func:`mel_opt.api.load_instance`).
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
    return train_all([(inst, settings)], data=data, progress=progress)[0]


def _prepare(inst: Instance, settings: TrainSettings, data: Dataset | None
             ) -> tuple[TrainRun, _Shared]:
    """One training's checks, data and allocations (nothing trained yet)."""
    problem = api.problem_of(inst)
    part = check_settings(problem, settings)
    get_device(settings.device)  # no CuPy or no GPU: refused before any work
    cycle = learning_cycle(problem)
    ds = data if data is not None else load_dataset(
        settings.dataset, max_train=settings.max_train, max_test=settings.max_test)
    ds = ds.astype(np.dtype(settings.dtype))
    K = int(inst.K)  # type: ignore[attr-defined]  # every trainable instance has K learners
    if ds.y_train.size < K:
        raise UsageError(f"the data set has {ds.y_train.size} training samples, fewer than "
                         f"the {K} learners")
    make_attack(settings, K, 0)  # a liar's index out of range: refused before any run
    run = TrainRun(inst.name, problem, settings)
    for scheme in settings.schemes:
        if scheme in cycle.schemes:
            continue
        out = _allocate(inst, scheme, settings.time_limit)
        if isinstance(out, str):
            run.infeasible[scheme] = out
        else:
            cycle.check(inst, scheme, out)
            run.allocations[scheme] = out
    shared = _Shared(inst, cycle, ds, settings, part,
                     layers_for(settings.model, ds.features, ds.classes), run.allocations)
    return run, shared


def train_all(calls: Sequence[tuple[Instance, TrainSettings]], *, data: Dataset | None = None,
              progress: Callable[[int, int], None] | None = None) -> list[TrainRun]:
    """:func:`train` of every (instance, settings) of ``calls``, their runs as one list of
    units (a catalogue entry's trainings run side by side on the command's workers instead of
    one after the other); one :class:`TrainRun` per call, in order, as :func:`train` gives it.
    ``progress(done, total)`` counts the cycles of every call's runs."""
    prepared = [_prepare(inst, settings, data) for inst, settings in calls]
    jobs = [(c, scheme, seed) for c, (run, shared) in enumerate(prepared)
            for scheme in run.schemes for seed in range(shared.settings.seeds)]
    first = calls[0][1] if calls else None
    processes = run_processes(first, len(jobs)) if first is not None else 1
    for _, shared in prepared:
        shared.threads = (shared.settings.threads if shared.settings.threads is not None
                          else max(1, available_cpus() // processes))
    total = sum(prepared[c][1].settings.cycles for c, _, _ in jobs)
    done = 0

    def tick(c: int, scheme: str, seed: int, cycle_no: int) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)
        s, name = prepared[c][1].settings, prepared[c][0].instance
        if activity.listening():
            activity.report(f"{name}: {scheme}, seed {seed + 1}/{s.seeds}, "
                            f"cycle {cycle_no}/{s.cycles}")

    def converged_early(c: int, rows: list[dict[str, Any]]) -> None:
        """A run its patience or its targets stopped: its cycles not trained count as done."""
        nonlocal done
        skipped = prepared[c][1].settings.cycles - max((int(r["cycle"]) for r in rows),
                                                       default=0)
        if skipped > 0:
            done += skipped
            if progress is not None:
                progress(done, total)

    ex = dataclasses.replace(units.current(), jobs=processes)
    if first is not None:
        units.refuse_cluster_on_gpu(ex, first.device)
    if processes == 1 and ex.cluster is None and ex.store is None:
        for c, scheme, seed in jobs:  # in this process, each cycle reported as it ends
            rows = prepared[c][1].train_one(scheme, seed, functools.partial(tick, c))
            prepared[c][0].rows.extend(rows)
            converged_early(c, rows)
        return [run for run, _ in prepared]
    # independent (scheme, seed) runs (units), kept in the command's output folder as each
    # finishes, on worker processes (forked: they read the data set and the instance from
    # this process's memory) or a Ray cluster; the rows come back in the order of the jobs, so
    # the runs are the same wherever each ran
    keys = [unit_key(shared.inst, shared.ds, shared.settings) for _, shared in prepared]
    todo = [units.Unit({**keys[c], "scheme": scheme, "seed": seed,
                        "solution": prepared[c][0].allocations.get(scheme)},
                       f"{prepared[c][0].instance}: {scheme}, seed {seed}", _train_unit,
                       (c, scheme, seed))
            for c, scheme, seed in jobs]
    shared_all = [shared for _, shared in prepared]
    for (c, scheme, seed), rows in zip(jobs, units.run_units(todo, shared_all, ex),
                                       strict=True):
        prepared[c][0].rows.extend(rows)
        for r in rows:
            if r["cycle"]:
                tick(c, scheme, seed, int(r["cycle"]))
        converged_early(c, rows)
    return [run for run, _ in prepared]
