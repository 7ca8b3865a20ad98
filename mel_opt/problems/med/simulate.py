"""Monte-Carlo evaluation of allocation schemes under random learner states (thesis 4.3).

Each trial runs ``cycles`` global update cycles (GUCs). In every cycle every learner's state is
drawn from its distribution gamma_j; the draws are made once and shared by every scheme (a paired
comparison). Schemes:

- ``med``: the MED allocation (4.4) with expected delays, solved once per trial and reused for
  all its cycles (as the thesis and the author's code did);
- ``mmtt-uncertain``: per trial, one extra "benchmark" state drawn per learner, (4.4) solved with
  those states taken as certain, reused for all cycles;
- ``mmtt-ideal``: (4.4) re-solved in every cycle with the learners' true states of that cycle
  (knowledge no real orchestrator has; the bound the thesis compares against). It knows the
  states, not the run-to-run noise below.

A learner j given d shards of task i, in state k, downloads the model and its shards
((Omega_i + alpha_i d) / b_jk), trains tau_i passes (tau_i d / R_ijk) and uploads the model
(Omega_i / b_jk). Run-to-run noise: in each (trial, cycle) all three times of learner j are
multiplied by one factor F = exp(sigma_j Z - sigma_j^2 / 2), Z ~ N(0, 1), sigma_j^2 =
ln(1 + cv_j^2) with cv_j the learner's ``time_cv``: a lognormal with mean 1 and coefficient of
variation cv_j (F = 1 when cv_j = 0). The factors are shared by the schemes like the states;
every scheme plans on the noise-free times. Learner halting (thesis 4.1): it watches the clock
from the start of its local update (downloads included) and stops training once the time
reaches T_i, then uploads what it has (continuous checking; the author's code checked every 10
batches). If its downloads alone end after T_i it trains nothing.

``redraw=True`` follows Section 4.3.1, where each trial starts with new learners: before the
trial, every learner's state distribution and price are drawn again by
:func:`mel_opt.problems.med.generate.draw_learners` (peak state uniform, softmax(one_hot / 0.5);
price N(1, 0.5) clipped to [0.1, 1.5]); rates, bandwidths, tasks and ``time_cv`` stay those of
the instance. MED and MMTT-Uncertain then solve once per trial, MMTT-Ideal once per cycle.

Metrics per (trial, cycle, task), then averaged over tasks and cycles, then over trials with a
95% Student-t confidence interval:

1. ``training_time_s``: time until the task's last upload arrives, max_j t_j [s];
2. ``satisfaction``: 1 if every learner of the task finished its allocated training without
   halting (the thesis' "tasks that finish training before their deadline"; judged on training,
   not on the upload that follows a halt); ``learner_satisfaction`` is the author's per-learner
   variant (share of learners that finished);
3. ``fulfilment``: shard-passes trained / tau_i D_i;
4. ``drop_rate``: 1 - fulfilment;
5. ``occupancy``: mean_j t_j / max_j t_j over the task's learners.

A scheme whose solve is infeasible (or fails) in a trial or cycle has no allocation there: the
failure is counted and reported, those cycles are left out of its metrics, and nothing is
re-drawn.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.validate import readonly_array
from mel_opt.problems.base import MethodOutput, SolveOptions
from mel_opt.problems.med import methods
from mel_opt.problems.med.generate import draw_learners
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import state_times
from mel_opt.stats import interval, lognormal_factors

SCHEMES = ("med", "mmtt-uncertain", "mmtt-ideal")
METRICS = ("training_time_s", "satisfaction", "fulfilment", "drop_rate", "occupancy",
           "learner_satisfaction")


@dataclass(frozen=True)
class Allocation:
    """One scheme's allocations over (trials, cycles): task per learner and shards held."""

    task: np.ndarray  # (T, C, n) int, -1 unused
    shards: np.ndarray  # (T, C, n) int
    ok: np.ndarray  # (T, C) bool: an allocation exists


@dataclass
class SchemeResult:
    """Per-trial metrics of one scheme and what its solves did."""

    name: str
    per_trial: dict[str, np.ndarray]
    per_cycle: dict[str, np.ndarray]
    solves: int = 0
    failed_solves: int = 0
    cycles_without_allocation: int = 0
    solve_time_s: float = 0.0
    messages: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, dict[str, float | int | None]]:
        return {k: interval(v) for k, v in self.per_trial.items()}


@dataclass
class SimulationResult:
    instance: str
    cycles: int
    trials: int
    seed: int
    method: str
    schemes: list[SchemeResult]
    wall_time_s: float = 0.0
    redraw: bool = False

    def paired(self) -> dict[str, dict[str, dict[str, float | int | None]]]:
        """Per other scheme and metric: the paired difference (other - first scheme)."""
        base = self.schemes[0]
        out: dict[str, dict[str, dict[str, float | int | None]]] = {}
        for other in self.schemes[1:]:
            out[other.name] = {k: interval(other.per_trial[k] - base.per_trial[k])
                               for k in METRICS}
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "cycles": self.cycles,
            "trials": self.trials,
            "seed": self.seed,
            "method": self.method,
            "redraw": self.redraw,
            "confidence": 0.95,
            "wall_time_s": self.wall_time_s,
            "schemes": {
                s.name: {
                    "metrics": s.summary(),
                    "solves": s.solves,
                    "failed_solves": s.failed_solves,
                    "cycles_without_allocation": s.cycles_without_allocation,
                    "solve_time_s": s.solve_time_s,
                    "messages": s.messages,
                } for s in self.schemes
            },
            "paired_difference_vs": self.schemes[0].name,
            "paired": self.paired(),
        }


# --------------------------------------------------------------------------------------------
# state draws and evaluation
# --------------------------------------------------------------------------------------------
def _streams(seed: int) -> list[np.random.SeedSequence]:
    """Independent streams of ``SeedSequence(seed)``: cycle states, benchmark states, noise,
    redraw. Each draw has its own stream, so switching one on does not move the others."""
    return list(np.random.SeedSequence(seed).spawn(4))


def draw_states(inst: MedInstance, trials: int, cycles: int, seed: int,
                probs: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The shared draws: cycle states (trials, cycles, n) and benchmark states (trials, n).

    ``probs`` (trials, n, h) gives each trial's distributions (default: the instance's for
    every trial). The uniforms come from their own streams of ``SeedSequence(seed)``, so the
    states do not depend on which schemes run, and a learner whose distribution is redrawn
    keeps its uniforms.
    """
    s_cycle, s_bench = _streams(seed)[:2]
    p = np.broadcast_to(inst.probs, (trials, *inst.probs.shape)) if probs is None else probs
    cdf = np.cumsum(p, axis=-1)
    cdf[..., -1] = 1.0

    def pick(u: np.ndarray, c: np.ndarray) -> np.ndarray:
        return (u[..., None] > c).sum(axis=-1)

    cyc = pick(np.random.default_rng(s_cycle).random((trials, cycles, inst.n_learners)),
               cdf[:, None])
    bench = pick(np.random.default_rng(s_bench).random((trials, inst.n_learners)), cdf)
    return cyc, bench


def noise_factors(cv: np.ndarray, trials: int, cycles: int, seed: int) -> np.ndarray:
    """Run-to-run factors (trials, cycles, n): lognormal, mean 1, coefficient of variation cv_j.

    F = exp(sigma_j Z - sigma_j^2 / 2) with sigma_j^2 = ln(1 + cv_j^2)
    (:func:`mel_opt.stats.lognormal_factors`) and Z the standard normals
    ``default_rng(stream).standard_normal((trials, cycles, n))`` of the third stream of
    ``SeedSequence(seed)``; then E[F] = 1 and sd(F) = cv_j exactly (F = 1 where cv_j = 0).
    """
    cv = np.asarray(cv, dtype=float)
    z = np.random.default_rng(_streams(seed)[2]).standard_normal((trials, cycles, cv.size))
    return lognormal_factors(cv, z)


def redraw_learners(inst: MedInstance, trials: int, seed: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per-trial distributions (trials, n, h) and prices (trials, n), thesis Section 4.3.1.

    Trial t uses :func:`~mel_opt.problems.med.generate.draw_learners` with a generator on the
    t-th child of the fourth stream of ``SeedSequence(seed)``.
    """
    kids = _streams(seed)[3].spawn(trials)
    probs = np.empty((trials, inst.n_learners, inst.n_states))
    prices = np.empty((trials, inst.n_learners))
    for t, kid in enumerate(kids):
        probs[t], prices[t] = draw_learners(np.random.default_rng(kid), inst.n_learners,
                                            inst.n_states)
    return probs, prices


def evaluate(inst: MedInstance, alloc: Allocation, states: np.ndarray,
             noise: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Metrics per (trial, cycle) of an allocation under the drawn states (vectorised).

    ``noise`` (T, C, n) multiplies each learner's download, training and upload times (default
    1: the state times exactly). Returns arrays (T, C), NaN where ``alloc.ok`` is False. See
    the module docstring for the halting rule and the metric definitions.
    """
    task = np.where(alloc.task >= 0, alloc.task, 0)
    d = np.where(alloc.task >= 0, alloc.shards, 0)
    used = d > 0
    down, train, up = state_times(inst, task, d, states)
    if noise is not None:
        down, train, up = down * noise, train * noise, up * noise
    T = inst.deadline[task]
    finished = used & (down + train <= T)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(train > 0, np.clip((T - down) / train, 0.0, 1.0), 1.0)
    frac = np.where(finished, 1.0, frac)
    busy = np.where(finished, down + train, np.maximum(T, down))
    t = np.where(used, busy + up, 0.0)
    shape = alloc.ok.shape
    per_task = {k: np.zeros((*shape, inst.n_tasks)) for k in METRICS}
    for i in range(inst.n_tasks):
        mine = used & (alloc.task == i)
        count = mine.sum(axis=-1)
        tmax = np.where(mine, t, 0.0).max(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):  # no learner: only where not ok
            occ = np.where(mine, t / tmax[..., None], 0.0).sum(axis=-1) / count
            happy = (finished & mine).sum(axis=-1) / count
        done = np.where(mine, frac * d, 0.0).sum(axis=-1) / inst.shards[i]
        per_task["training_time_s"][..., i] = tmax
        per_task["satisfaction"][..., i] = np.all(finished | ~mine, axis=-1)
        per_task["learner_satisfaction"][..., i] = happy
        per_task["fulfilment"][..., i] = done
        per_task["drop_rate"][..., i] = 1.0 - done
        per_task["occupancy"][..., i] = occ
    out = {}
    for k, v in per_task.items():
        avg = v.mean(axis=-1)
        out[k] = np.where(alloc.ok, avg, np.nan)
    return out


# --------------------------------------------------------------------------------------------
# schemes
# --------------------------------------------------------------------------------------------
Solver = Callable[[int, int], MethodOutput]
KeyOf = Callable[[int, int], Hashable]


def _allocate(inst: MedInstance, trials: int, cycles: int, key_of: KeyOf, solve: Solver,
              res: SchemeResult) -> Allocation:
    """Allocations for every (trial, cycle); ``key_of(trial, cycle)`` names what a solve
    depends on, and ``solve(trial, cycle)`` runs at the first (trial, cycle) of each distinct
    key, its answer reused for the others."""
    n = inst.n_learners
    task = np.full((trials, cycles, n), -1, dtype=np.int64)
    shards = np.zeros((trials, cycles, n), dtype=np.int64)
    ok = np.zeros((trials, cycles), dtype=bool)
    cache: dict[Hashable, tuple[np.ndarray, np.ndarray] | None] = {}
    for tr in range(trials):
        for cy in range(cycles):
            key = key_of(tr, cy)
            if key not in cache:
                t0 = time.perf_counter()
                out = solve(tr, cy)
                res.solve_time_s += time.perf_counter() - t0
                res.solves += 1
                if out.solution is None:
                    res.failed_solves += 1
                    if len(res.messages) < 5:
                        res.messages.append(f"{out.termination.value}: {out.message}")
                    cache[key] = None
                else:
                    cache[key] = (np.asarray(out.solution["assignment"], dtype=np.int64),
                                  np.asarray(out.solution["d"], dtype=np.int64).sum(axis=0))
            got = cache[key]
            if got is not None:
                task[tr, cy], shards[tr, cy] = got
                ok[tr, cy] = True
    return Allocation(task, shards, ok)


def _check_args(schemes: Sequence[str], method: str, cycles: int, trials: int) -> None:
    if not schemes:
        raise UsageError("no scheme to simulate")
    unknown = [s for s in schemes if s not in SCHEMES]
    if unknown:
        raise UsageError(f"unknown scheme(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(SCHEMES)}")
    if len(set(schemes)) != len(schemes):
        raise UsageError("a scheme is listed twice")
    if method not in ("exact", "highs"):
        raise UsageError(f"method must be exact or highs, got {method!r}")
    if cycles < 1 or trials < 1:
        raise UsageError("cycles and trials must be at least 1")


def simulate(inst: MedInstance, *, schemes: Sequence[str] = SCHEMES, cycles: int = 5,
             trials: int = 40, seed: int = 0, method: str = "exact",
             time_limit: float | None = None, redraw: bool = False) -> SimulationResult:
    """Run the Monte-Carlo evaluation (module docstring).

    Parameters
    ----------
    schemes : names from ``SCHEMES``; the first is the reference of the paired differences.
    cycles, trials : int
        GUCs per trial and number of trials.
    seed : int
        Seeds every draw; the result is a function of (instance, schemes, cycles, trials, seed,
        redraw).
    method : ``exact`` or ``highs``
        Solver of every allocation.
    time_limit : float, optional
        Per solve [s].
    redraw : bool
        Draw every learner's state distribution and price again for each trial, as the thesis
        did (Section 4.3.1); False keeps the instance's for every trial.
    """
    _check_args(schemes, method, cycles, trials)
    start = time.perf_counter()
    if redraw:
        probs, prices = redraw_learners(inst, trials, seed)
        insts = [replace(inst, probs=readonly_array(probs[t]), price=readonly_array(prices[t]))
                 for t in range(trials)]
        cyc_states, bench_states = draw_states(inst, trials, cycles, seed, probs)
    else:
        insts = [inst] * trials
        cyc_states, bench_states = draw_states(inst, trials, cycles, seed)
    noise = noise_factors(inst.time_cv, trials, cycles, seed)
    opts = SolveOptions(time_limit=time_limit)
    solve_med = methods.solve_highs if method == "highs" else methods.solve_exact
    # what each solve depends on: the trial's instance (only when redrawn) and the states
    per_trial: KeyOf = (lambda tr, cy: tr) if redraw else (lambda tr, cy: None)
    keys: dict[str, KeyOf] = {
        "med": per_trial,
        "mmtt-uncertain": lambda tr, cy: (per_trial(tr, cy), bench_states[tr].tobytes()),
        "mmtt-ideal": lambda tr, cy: (per_trial(tr, cy), cyc_states[tr, cy].tobytes()),
    }
    solvers: dict[str, Solver] = {
        "med": lambda tr, cy: solve_med(insts[tr], opts),
        "mmtt-uncertain": lambda tr, cy: methods.solve_known_states(
            insts[tr], bench_states[tr], time_limit, method),
        "mmtt-ideal": lambda tr, cy: methods.solve_known_states(
            insts[tr], cyc_states[tr, cy], time_limit, method),
    }
    results = []
    for name in schemes:
        res = SchemeResult(name, {}, {})
        alloc = _allocate(inst, trials, cycles, keys[name], solvers[name], res)
        res.cycles_without_allocation = int((~alloc.ok).sum())
        res.per_cycle = evaluate(inst, alloc, cyc_states, noise)
        with warnings.catch_warnings():  # a trial without any allocation gives NaN, quietly
            warnings.simplefilter("ignore", category=RuntimeWarning)
            res.per_trial = {k: np.nanmean(v, axis=1) for k, v in res.per_cycle.items()}
        results.append(res)
    return SimulationResult(inst.name, cycles, trials, seed, method, results,
                            time.perf_counter() - start, redraw)
