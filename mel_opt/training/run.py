"""``train``: solve an instance with each scheme, then train a real model under each allocation.

Any problem whose ``ProblemSpec`` declares a learning cycle
(:class:`~mel_opt.problems.learning.LearningCycle`) can be trained; nothing here knows the
problems. A *scheme* is any method of the instance's problem (solved through
:func:`mel_opt.api.solve`) or one of the training-only schemes its learning cycle declares
(feel: paper 004's Table II schemes that are not allocations of the problem). A scheme whose
allocation is infeasible is reported and left out; the others run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt import activity, api
from mel_opt.errors import UsageError
from mel_opt.problems import get_problem
from mel_opt.problems.base import Instance
from mel_opt.problems.learning import LearningCycle, RunContext
from mel_opt.subset_benchmarking.threads import blas_threads
from mel_opt.training.data import Dataset, load_dataset
from mel_opt.training.emulate import Trainer, run_cycles
from mel_opt.training.mlp import init_params, layers_for
from mel_opt.training.partition import Partition, make_pools, parse_partition, proportional_sizes

DTYPES = ("float32", "float64")


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
        ``float32`` (default) or ``float64``: the precision of the data, the model and its
        training. float32 trains about twice as fast and ends at the same accuracies within
        the spread over seeds (docs: Train, What it costs).
    threads : int or None
        Threads that train the learners of a cycle, each a share of them (the numbers do not
        depend on it); None: the CPUs this process may run on. BLAS runs one thread each
        while training (its own threads cost more than they give on these small products).
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
    threads: int | None = None
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


def learning_cycle(problem: str) -> LearningCycle:
    """The problem's learning cycle, or UsageError naming the problems that have one."""
    cycle = get_problem(problem).learning
    if cycle is None or not cycle.emulated:
        live = " (melopt live trains it on real learner processes)" if cycle else ""
        raise UsageError(f"training supports the problems {', '.join(trainable_problems())}; "
                         f"this instance is {problem!r}{live}")
    return cycle


def check_settings(problem: str, s: TrainSettings) -> Partition:
    """Reject bad settings with one clear message each (UsageError, exit code 2)."""
    learning_cycle(problem)
    known = list(api.methods(problem)[problem]) + list(training_only(problem))
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
    if s.dtype not in DTYPES:
        raise UsageError(f"--dtype must be float32 or float64, got {s.dtype!r}")
    if s.threads is not None and s.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {s.threads}")
    layers_for(s.model, 1, 1)  # unknown model -> UsageError
    return parse_partition(s.partition)


def _allocate(inst: Instance, scheme: str, time_limit: float | None) -> dict[str, Any] | str:
    """The scheme's solution, or why there is none."""
    res = api.solve(inst, scheme, time_limit=time_limit, seed=0)
    if not res.ok:
        return f"{res.status.value}: {res.message}" if res.message else res.status.value
    return dict(res.solution)


def train(inst: Instance, settings: TrainSettings, *, data: Dataset | None = None,
          progress: Callable[[int, int], None] | None = None) -> TrainRun:
    """Solve ``inst`` with every scheme and train under each allocation.

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
    problem = api.problem_of(inst)
    part = check_settings(problem, settings)
    cycle = learning_cycle(problem)
    ds = data if data is not None else load_dataset(
        settings.dataset, max_train=settings.max_train, max_test=settings.max_test)
    ds = ds.astype(np.dtype(settings.dtype))
    K = int(inst.K)  # type: ignore[attr-defined]  # every trainable instance has K learners
    if ds.y_train.size < K:
        raise UsageError(f"the data set has {ds.y_train.size} training samples, fewer than "
                         f"the {K} learners")
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
    layers = layers_for(settings.model, ds.features, ds.classes)
    total = len(run.schemes) * settings.seeds * settings.cycles
    done = 0
    N = ds.y_train.size
    threads = settings.threads if settings.threads is not None else available_cpus()
    # one BLAS thread per training thread: a BLAS splitting these small products waits at
    # every one of them for its other threads, and several times longer on a busy machine
    with blas_threads(1):
        for scheme in run.schemes:
            sol = run.allocations.get(scheme)
            shares = cycle.data_shares(inst, scheme, sol, N)
            for seed in range(settings.seeds):
                tr = Trainer(ds, init_params(layers, seed, ds.x_train.dtype), settings.lr,
                             settings.batch_size, threads)
                rng = np.random.default_rng([seed, 7])
                sizes = proportional_sizes(shares, N)
                pools = make_pools(ds.y_train, sizes, part, ds.classes, rng)
                ctx = RunContext(scheme, sol, seed, np.array([p.size for p in pools]),
                                 {"param_bits": settings.param_bits})
                for rec in run_cycles(tr, cycle, inst, ctx, pools, settings.cycles, rng):
                    run.rows.append({"scheme": scheme, "seed": seed, "cycle": rec.cycle,
                                     "time_s": rec.time_s, "loss": rec.loss,
                                     "accuracy": rec.accuracy, "truancy": rec.truancy})
                    if rec.cycle and progress is not None:
                        done += 1
                        progress(done, total)
                    if rec.cycle and activity.listening():
                        activity.report(f"{inst.name}: {scheme}, seed {seed + 1}/"
                                        f"{settings.seeds}, cycle {rec.cycle}/{settings.cycles}")
    return run
