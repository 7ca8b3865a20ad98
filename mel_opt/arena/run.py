"""``arena``: the same population, data, partition and seeds for every scheme.

:func:`arena` solves the instance with the methods asked (through :func:`mel_opt.api.solve`,
as ``melopt train`` does), then runs every (scheme, seed): each starts from
``init_params(layers, seed)``, draws its partition and its randomness from the generator seeded
``[seed, 7]`` (the emulator's), and runs for the same horizon of virtual time
(:mod:`mel_opt.arena.runner`). With ``tune`` it first picks every scheme's values from its
declared grid, the same number of trials each (:mod:`mel_opt.arena.tune`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt import api, units
from mel_opt.arena.availability import Availability, availability_for
from mel_opt.arena.runner import Run, allocation_run, buffered_run, rounds_run
from mel_opt.arena.settings import ALTERNATIVES, ArenaSettings
from mel_opt.blas import blas_threads
from mel_opt.errors import SettingError, UsageError
from mel_opt.problems import get_problem
from mel_opt.problems.attacks import make_attack
from mel_opt.problems.base import Instance
from mel_opt.problems.learning import LearningCycle, RunContext, sample_bytes
from mel_opt.problems.work import WorkClock
from mel_opt.schemes import ALLOCATION, SCHEMES, Loop, SchemeSpec
from mel_opt.stats import DEFAULT_TIME_CV
from mel_opt.training.data import Dataset, hold_out, load_dataset
from mel_opt.training.device import get_device
from mel_opt.training.mlp import init_params, layers_for
from mel_opt.training.partition import (
    make_pools,
    parse_partition,
    parse_shares,
    proportional_sizes,
)

__all__ = ["ArenaRun", "arena", "default_schemes"]


@dataclass
class ArenaRun:
    """Everything one :func:`arena` call produced.

    Attributes
    ----------
    instance, problem : str
    settings : ArenaSettings
    schemes : tuple of str
        The schemes asked, in order.
    horizon_s : float
        Virtual time every run covers [s].
    rows : list of dict
        One per (scheme, seed, aggregation): ``scheme``, ``seed``, ``step``, ``time_s``,
        ``loss``, ``accuracy``, ``bytes``, ``idle_s`` (the last two cumulative).
    infeasible : dict
        method -> why it has no allocation (not run).
    tuning : dict or None
        With ``tune``: per scheme, its grid, trials and scores, and the values chosen
        (:func:`mel_opt.arena.tune.tuned`); the rows are then the chosen values' runs.
    tuning_rows : list of dict
        With ``tune``: every trial's rows (``trial`` added), on the tuning seeds.
    """

    instance: str
    problem: str
    settings: ArenaSettings
    schemes: tuple[str, ...]
    horizon_s: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    infeasible: dict[str, str] = field(default_factory=dict)
    tuning: dict[str, Any] | None = None
    tuning_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ran(self) -> list[str]:
        return [s for s in self.schemes if s not in self.infeasible]


def default_schemes(problem: str) -> tuple[str, ...]:
    """The problem's default method, then the alternatives."""
    return (get_problem(problem).default_method, *ALTERNATIVES)


def scheme_of(problem: str, name: str) -> SchemeSpec:
    """The registry's scheme behind the arena's scheme ``name``: a method of ``problem`` is
    mel_opt's allocation under that method."""
    return ALLOCATION if name in api.methods(problem)[problem] else SCHEMES[name]


def _check(problem: str, s: ArenaSettings) -> tuple[str, ...]:
    schemes = s.schemes if s.schemes is not None else default_schemes(problem)
    known = [*api.methods(problem)[problem], *ALTERNATIVES]
    for name in schemes:
        if name not in known:
            raise SettingError("schemes", s.setting("schemes").flag,
                               f"unknown scheme {name!r} for {problem}; choose from "
                               f"{', '.join(known)}", ": ")
    for name in s.overrides():
        if name not in schemes:
            raise SettingError("per_scheme", s.setting("per_scheme").flag,
                               f"sets an option of {name!r}, which does not run (schemes: "
                               f"{', '.join(schemes)})", ": ")
    return schemes


def _cycle(problem: str) -> LearningCycle:
    cycle = get_problem(problem).learning
    if cycle is None or not cycle.emulated:
        raise UsageError(f"the problem {problem!r} has no emulated learning cycle")
    return cycle


def spread(s: ArenaSettings) -> float:
    """The run-to-run spread (``time_cv``) the arena gives every learner whose instance gives
    it none (or 0): the setting, else :data:`~mel_opt.stats.DEFAULT_TIME_CV`."""
    return DEFAULT_TIME_CV if s.time_cv is None else float(s.time_cv)


def noisy_clock(inst: Instance, s: ArenaSettings) -> WorkClock:
    """The problem's work clock with every learner's run-to-run spread: the instance's where
    it gives one, else :func:`spread`'s (None where both are 0: the model's times exactly)."""
    clock = work_clock(inst)
    own = np.zeros(clock.K) if clock.time_cv is None else np.asarray(clock.time_cv, float)
    cv = np.where(own > 0, own, spread(s))
    return dataclasses.replace(clock, time_cv=cv if np.any(cv > 0) else None)


def work_clock(inst: Instance) -> WorkClock:
    """The work clock of ``inst``'s problem (its learning cycle's declaration), or UsageError:
    the arena times every scheme by it."""
    problem = api.problem_of(inst)
    cycle = get_problem(problem).learning
    clock = None if cycle is None else cycle.work_clock(inst)
    if clock is None:
        raise UsageError(f"the arena needs a problem whose learning cycle declares a work "
                         f"clock (a time for any fixed local work); {problem!r} declares none")
    return clock


def allocated_updates(inst: Instance, cycle: LearningCycle, method: str,
                      solution: dict[str, Any], dataset_size: int, seed: int,
                      features: int) -> np.ndarray:
    """Each learner's sample-updates in one cycle of the allocation ``solution`` (its plan's
    samples x passes, on the data sizes the allocation gives: what an ablation reproduces).

    Reads the problem's own plan (its first cycle), so it draws no random number."""
    sizes = proportional_sizes(cycle.data_shares(inst, method, solution, dataset_size),
                               dataset_size)
    ctx = RunContext(method, solution, seed, np.asarray(sizes), {},
                     sample_bytes=sample_bytes(features))
    plan = cycle.configure_cycle(inst, ctx, 1)
    out = np.zeros(int(inst.K))  # type: ignore[attr-defined]
    out[plan.learner_ids] = plan.column("samples") * plan.column("passes")
    return out


def availability_of(spec: str | None, inst: Instance) -> Availability | None:
    """The run's :class:`~mel_opt.arena.availability.Availability` (None: every learner always
    online), read once per file and set of learner names."""
    if spec is None:
        return None
    names = tuple(getattr(inst, "learner_names", ()))
    try:  # the file's identity: a changed file is read again
        st = os.stat(spec.partition(":")[2])
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        return availability_for(spec, names)  # its reader says what is wrong
    return _availability(spec, names, stamp)


@functools.lru_cache(maxsize=4)
def _availability(spec: str, names: tuple[str, ...], stamp: tuple[int, int, int]
                  ) -> Availability:
    return availability_for(spec, names)


def _one(inst: Instance, cycle: LearningCycle, ds: Dataset, settings: ArenaSettings,
         scheme: str, seed: int, solution: dict[str, Any] | None, horizon: float,
         validation: tuple[np.ndarray, np.ndarray] | None = None,
         method: str = "") -> list[dict[str, Any]]:
    """The rows of one (scheme, seed) run (with the scheme's own settings); ``solution`` is
    the allocation of ``method`` (the scheme's own, or the one an ablation reads)."""
    s = settings.for_scheme(scheme)
    N = ds.y_train.size
    K = int(inst.K)  # type: ignore[attr-defined]
    rng = np.random.default_rng([seed, 7])
    spec = scheme_of(api.problem_of(inst), scheme)
    allocating = spec.loop is Loop.ALLOCATION
    if allocating and solution:
        shares = cycle.data_shares(inst, scheme, solution, N)
    elif spec.reads_allocation and not spec.equal_shares:  # the allocation's data
        assert solution is not None
        shares = cycle.data_shares(inst, method, solution, N)
    elif spec.equal_shares:
        shares = np.ones(K)
    else:
        shares = parse_shares(s.shares).draw(K, seed)
    sizes = proportional_sizes(shares, N)
    pools = make_pools(ds.y_train, sizes, parse_partition(s.partition), ds.classes, rng)
    clock = noisy_clock(inst, s)
    held = np.array([p.size for p in pools], dtype=float)
    if not allocating and np.ptp(held) > 0:
        # a pass over the n_k samples a learner holds (unequal shares, or a Dirichlet split,
        # which meets the shares only in expectation) costs n_k / mean(n) of an equal share's
        clock = dataclasses.replace(clock, per_pass_s=np.asarray(clock.per_pass_s) * held /
                                    float(np.mean(held)))
    init = init_params(layers_for(s.model, ds.features, ds.classes), seed, ds.x_train.dtype)
    allocated = None
    if spec.reads_allocation:
        assert solution is not None
        allocated = allocated_updates(inst, cycle, method, solution, N, seed, ds.features)
    run = Run(ds, init, pools, clock, s, rng, horizon, s.threads or 1, validation, allocated,
              availability_of(s.availability, inst),
              make_attack(s, K, seed), get_device(s.device))
    rows: Iterable[dict[str, Any]]
    if allocating:
        assert solution is not None
        ctx = RunContext(scheme, solution, seed, held.astype(np.int64), {},
                         sample_bytes=sample_bytes(ds.features), time_cv=spread(s),
                         aggregation=s.aggregation, attack=run.attack)
        rows = allocation_run(run, cycle, inst, ctx)
    elif spec.loop is Loop.BUFFERED:
        rows = buffered_run(run, spec)
    else:
        assert spec.policy is not None
        rows = rounds_run(run, spec.policy(run))
    out: list[dict[str, Any]] = []
    for r in rows:
        if r["time_s"] > horizon * (1 + 1e-9) and out:  # past the horizon: not compared
            break
        out.append({"scheme": scheme, "seed": seed, **r})
    return out


def arena_data(settings: ArenaSettings, data: Dataset | None = None
               ) -> tuple[Dataset, tuple[np.ndarray, np.ndarray] | None]:
    """The data set every run reads (``data``, else ``settings.dataset`` loaded), in the
    settings' precision, and the validation split held out of it (None without one)."""
    ds = data if data is not None else load_dataset(
        settings.dataset, max_train=settings.max_train, max_test=settings.max_test)
    ds = ds.astype(np.dtype(settings.dtype))
    validation = None
    if settings.validation is not None:
        ds, validation = hold_out(ds, settings.validation)
    return ds, validation


#: Settings that decide nothing in one (scheme, seed) run: which runs there are, how they are
#: spread, the options of other schemes (:meth:`ArenaSettings.for_scheme` has applied the
#: run's own), the solver's time limit (the allocation itself is in the key).
_NOT_IN_KEY = ("schemes", "seeds", "first_seed", "per_scheme", "tune", "trials", "tune_seeds",
               "threads", "time_limit")


@dataclass
class Planned:
    """One arena's runs before they run: the :class:`ArenaRun` to fill, and a unit
    (:mod:`mel_opt.units`) per (scheme, seed)."""

    run: ArenaRun
    jobs: list[tuple[str, int]]
    units: list[units.Unit]

    def fill(self, results: list[list[dict[str, Any]]]) -> ArenaRun:
        """The run with every unit's rows, in the order of the jobs."""
        for rows in results:
            self.run.rows.extend(rows)
        return self.run


def _arena_unit(shared: tuple[Any, ...], settings: ArenaSettings, scheme: str, seed: int,
                solution: dict[str, Any] | None, horizon: float,
                method: str) -> list[dict[str, Any]]:
    """One (scheme, seed) run: a unit of :func:`arena`."""
    inst, cycle, ds, validation = shared
    with blas_threads(1):
        return _one(inst, cycle, ds, settings, scheme, seed, solution, horizon, validation,
                    method)


def _file_digest(path: str | None) -> str | None:
    """The SHA-256 of a trace file a setting names (``fedscale:PATH``), None without one."""
    if path is None:
        return None
    import hashlib

    try:
        with open(path.partition(":")[2], "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def plan(inst: Instance, settings: ArenaSettings, ds: Dataset,
         validation: tuple[np.ndarray, np.ndarray] | None) -> Planned:
    """Check ``settings``, solve the methods the schemes need, and make a unit per (scheme,
    seed) (what :func:`arena` runs; the tuning runs every trial's at once)."""
    problem = api.problem_of(inst)
    clock = work_clock(inst)
    cycle = _cycle(problem)
    schemes = _check(problem, settings)
    make_attack(settings, clock.K, 0)  # a liar's index out of range: refused before any run
    if ds.y_train.size < clock.K:
        raise UsageError(f"the data set has {ds.y_train.size} training samples, fewer than "
                         f"the {clock.K} learners")
    horizon = settings.cycles * clock.budget_s
    availability_of(settings.availability, inst)  # a bad trace is refused before any run
    out = ArenaRun(inst.name, problem, settings, schemes, horizon)
    solutions: dict[str, dict[str, Any]] = {}
    methods = [s for s in schemes if scheme_of(problem, s).loop is Loop.ALLOCATION]
    # the allocation an ablation reads: the first method that runs, else the default one
    reference = methods[0] if methods else get_problem(problem).default_method
    needed = methods + ([reference] if any(scheme_of(problem, s).reads_allocation
                                           for s in schemes) else [])
    why: dict[str, str] = {}
    for method in dict.fromkeys(needed):
        res = api.solve(inst, method, time_limit=settings.time_limit, seed=0)
        if not res.ok:
            why[method] = res.status.value + (f": {res.message}" if res.message else "")
            continue
        cycle.check(inst, method, res.solution)
        solutions[method] = dict(res.solution)
    for scheme in schemes:
        spec = scheme_of(problem, scheme)
        if spec.loop is Loop.ALLOCATION and scheme in why:
            out.infeasible[scheme] = why[scheme]
        elif spec.reads_allocation and reference in why:
            out.infeasible[scheme] = f"{reference} has no allocation ({why[reference]})"
    seeds = range(settings.first_seed, settings.first_seed + settings.seeds)
    jobs = [(scheme, seed) for scheme in out.ran for seed in seeds]
    base = {"kind": "arena", "code": units.code_version(),
            "instance": units.fingerprint(inst), "data": units.data_fingerprint(ds),
            "validation": None if validation is None else units.fingerprint(list(validation)),
            "availability": _file_digest(settings.availability), "horizon": horizon}
    todo = []
    for scheme, seed in jobs:
        allocation = scheme_of(problem, scheme).loop is Loop.ALLOCATION
        method = scheme if allocation else reference
        solution = solutions.get(method)
        own = {k: v for k, v in settings.for_scheme(scheme).values().items()
               if k not in _NOT_IN_KEY}
        todo.append(units.Unit(
            {**base, "settings": own, "scheme": scheme, "seed": seed, "method": method,
             "solution": solution},
            f"{inst.name}: {scheme}, seed {seed}", _arena_unit,
            (settings, scheme, seed, solution, horizon, method)))
    return Planned(out, jobs, todo)


def execution(runs: int, progress: Callable[[int, int], None] | None = None,
              offset: int = 0, total: int | None = None,
              device: str = "cpu") -> units.Execution:
    """The command's execution (:func:`mel_opt.units.current`) for ``runs`` runs: its
    ``--jobs``, else one worker per CPU this process may use, at most one per run (one on a
    GPU: a forked process cannot use the CUDA its parent started); ``progress(done, total)``
    hears each finished run (counted from ``offset`` of ``total``)."""
    from mel_opt.training.run import available_cpus

    ex = units.current()
    units.refuse_cluster_on_gpu(ex, device)
    jobs = 1 if device != "cpu" else max(1, min(ex.jobs or available_cpus(), runs))
    counted = units.Counting(progress, ex.progress, offset, total) if progress else ex.progress
    return dataclasses.replace(ex, jobs=jobs, progress=counted)


def arena(inst: Instance, settings: ArenaSettings, *, data: Dataset | None = None,
          progress: Callable[[int, int], None] | None = None) -> ArenaRun:
    """Run every scheme of ``settings`` on ``inst``'s population (module docstring).

    Every (scheme, seed) run is a unit (:mod:`mel_opt.units`): they run on the command's
    ``--jobs`` worker processes (one per CPU by default) or its ``--cluster``, and are kept in
    its output folder's ``units/`` as each finishes; the rows are the same wherever they ran.

    Parameters
    ----------
    inst : instance
        A mel-async or dab instance (:func:`mel_opt.api.load_instance`).
    settings : ArenaSettings
    data : Dataset, optional
        Use this data set instead of loading ``settings.dataset``.
    progress : callable, optional
        Called as progress(done, total) after every (scheme, seed) run (with ``tune``, every
        trial's runs too).

    Raises
    ------
    UsageError
        A problem without an arena clock or learning cycle, an unknown scheme, too little
        data for the learners.
    """
    get_device(settings.device)  # no CuPy or no GPU: refused before any work
    if settings.tune:
        from mel_opt.arena.tune import tuned

        return tuned(inst, settings, data=data, progress=progress)
    problem = api.problem_of(inst)
    work_clock(inst)
    _check(problem, settings)
    ds, validation = arena_data(settings, data)
    planned = plan(inst, settings, ds, validation)
    shared = (inst, _cycle(problem), ds, validation)
    results = units.run_units(planned.units, shared,
                              execution(len(planned.units), progress, device=settings.device))
    return planned.fill(results)
