"""Monte-Carlo evaluation of allocation schemes under random learner states (thesis 4.3).

Each trial runs ``cycles`` global update cycles (GUCs). In every cycle every learner's state is
drawn from its distribution gamma_j; the draws are made once and shared by every scheme (a paired
comparison). Schemes:

- ``med``: the MED allocation (4.4) with expected delays, solved once and reused for all cycles
  (as the thesis and the author's code did);
- ``mmtt-uncertain``: per trial, one extra "benchmark" state drawn per learner, (4.4) solved with
  those states taken as certain, reused for all cycles;
- ``mmtt-ideal``: (4.4) re-solved in every cycle with the learners' true states of that cycle
  (knowledge no real orchestrator has; the bound the thesis compares against).

A learner j given d shards of task i, in state k, downloads the model and its shards
((Omega_i + alpha_i d) / b_jk), trains tau_i passes (tau_i d / R_ijk) and uploads the model
(Omega_i / b_jk). Learner halting (thesis 4.1): it watches the clock from the start of its local
update (downloads included) and stops training once the time reaches T_i, then uploads what it
has (continuous checking; the author's code checked every 10 batches). If its downloads alone
end after T_i it trains nothing.

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

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.problems.base import MethodOutput, SolveOptions
from mel_opt.problems.med import methods
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.latency import state_times

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
# statistics
# --------------------------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
           + a * math.log(x) + b * math.log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """Student-t distribution function with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Quantile of the Student-t distribution (bisection on ``t_cdf``)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must lie in (0, 1)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def interval(values: np.ndarray, level: float = 0.95) -> dict[str, float | int | None]:
    """Mean and two-sided Student-t confidence interval over the finite ``values``."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    n = int(v.size)
    if n == 0:
        return {"mean": None, "low": None, "high": None, "half_width": None, "n": 0}
    mean = float(v.mean())
    if n == 1:
        return {"mean": mean, "low": None, "high": None, "half_width": None, "n": 1}
    half = t_quantile(0.5 + level / 2.0, n - 1) * float(v.std(ddof=1)) / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "half_width": half, "n": n}


# --------------------------------------------------------------------------------------------
# state draws and evaluation
# --------------------------------------------------------------------------------------------
def draw_states(inst: MedInstance, trials: int, cycles: int, seed: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """The shared draws: cycle states (trials, cycles, n) and benchmark states (trials, n).

    Two independent streams of one ``SeedSequence(seed)``, so the cycle states do not depend on
    which schemes run.
    """
    s_cycle, s_bench = np.random.SeedSequence(seed).spawn(2)
    cdf = np.cumsum(inst.probs, axis=1)
    cdf[:, -1] = 1.0

    def pick(u: np.ndarray) -> np.ndarray:
        return (u[..., None] > cdf).sum(axis=-1)

    cyc = pick(np.random.default_rng(s_cycle).random((trials, cycles, inst.n_learners)))
    bench = pick(np.random.default_rng(s_bench).random((trials, inst.n_learners)))
    return cyc, bench


def evaluate(inst: MedInstance, alloc: Allocation, states: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics per (trial, cycle) of an allocation under the drawn states (vectorised).

    Returns arrays (T, C), NaN where ``alloc.ok`` is False. See the module docstring for the
    halting rule and the metric definitions.
    """
    task = np.where(alloc.task >= 0, alloc.task, 0)
    d = np.where(alloc.task >= 0, alloc.shards, 0)
    used = d > 0
    down, train, up = state_times(inst, task, d, states)
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
Solver = Callable[[np.ndarray | None], MethodOutput]


def _allocate(inst: MedInstance, trials: int, cycles: int, keys: np.ndarray | None,
              solve: Solver, res: SchemeResult, per_cycle: bool) -> Allocation:
    """Allocations for every (trial, cycle); ``keys`` are the states each solve assumes
    ((T, C, n) per cycle, (T, n) per trial, None for one solve), solved once per distinct key."""
    n = inst.n_learners
    task = np.full((trials, cycles, n), -1, dtype=np.int64)
    shards = np.zeros((trials, cycles, n), dtype=np.int64)
    ok = np.zeros((trials, cycles), dtype=bool)
    cache: dict[bytes | None, tuple[np.ndarray, np.ndarray] | None] = {}

    def get(key: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
        tag = None if key is None else key.tobytes()
        if tag not in cache:
            t0 = time.perf_counter()
            out = solve(key)
            res.solve_time_s += time.perf_counter() - t0
            res.solves += 1
            if out.solution is None:
                res.failed_solves += 1
                if len(res.messages) < 5:
                    res.messages.append(f"{out.termination.value}: {out.message}")
                cache[tag] = None
            else:
                cache[tag] = (np.asarray(out.solution["assignment"], dtype=np.int64),
                              np.asarray(out.solution["d"], dtype=np.int64).sum(axis=0))
        return cache[tag]

    for tr in range(trials):
        for cy in range(cycles):
            if keys is None:
                got = get(None)
            elif per_cycle:
                got = get(keys[tr, cy])
            else:
                got = get(keys[tr])
            if got is not None:
                task[tr, cy], shards[tr, cy] = got
                ok[tr, cy] = True
    return Allocation(task, shards, ok)


def simulate(inst: MedInstance, *, schemes: Sequence[str] = SCHEMES, cycles: int = 5,
             trials: int = 40, seed: int = 0, method: str = "exact",
             time_limit: float | None = None) -> SimulationResult:
    """Run the Monte-Carlo evaluation (module docstring).

    Parameters
    ----------
    schemes : names from ``SCHEMES``; the first is the reference of the paired differences.
    cycles, trials : int
        GUCs per trial and number of trials.
    seed : int
        Seeds every draw; the result is a function of (instance, schemes, cycles, trials, seed).
    method : ``exact`` or ``highs``
        Solver of every allocation.
    time_limit : float, optional
        Per solve [s].
    """
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
    start = time.perf_counter()
    cyc_states, bench_states = draw_states(inst, trials, cycles, seed)
    opts = SolveOptions(time_limit=time_limit)
    results = []
    for name in schemes:
        res = SchemeResult(name, {}, {})
        solver: Solver
        if name == "med":
            solve_med = methods.solve_highs if method == "highs" else methods.solve_exact

            def solver(_: np.ndarray | None, f: Callable[..., MethodOutput] = solve_med
                       ) -> MethodOutput:
                return f(inst, opts)

            alloc = _allocate(inst, trials, cycles, None, solver, res, False)
        else:
            keys = cyc_states if name == "mmtt-ideal" else bench_states

            def solver(states: np.ndarray | None) -> MethodOutput:
                assert states is not None
                return methods.solve_known_states(inst, states, time_limit, method)

            alloc = _allocate(inst, trials, cycles, keys, solver, res, name == "mmtt-ideal")
        res.cycles_without_allocation = int((~alloc.ok).sum())
        res.per_cycle = evaluate(inst, alloc, cyc_states)
        with warnings.catch_warnings():  # a trial without any allocation gives NaN, quietly
            warnings.simplefilter("ignore", category=RuntimeWarning)
            res.per_trial = {k: np.nanmean(v, axis=1) for k, v in res.per_cycle.items()}
        results.append(res)
    return SimulationResult(inst.name, cycles, trials, seed, method, results,
                            time.perf_counter() - start)
