"""Methods for mel-async: exact, ipopt, kkt-sai and the eta / sync baselines.

Every method returns integer d_k and tau_k with t_k <= T and tau_k >= 1 for every learner.
Asynchronous methods give each learner the largest whole number of updates that fits in T
(the integer meaning of "busy for the whole cycle", (7b)); ``sync`` gives all the same tau.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mel_opt import deadline
from mel_opt.problems.base import MethodOutput, SolveOptions
from mel_opt.problems.mel_async import kkt
from mel_opt.problems.mel_async import windows as W
from mel_opt.problems.mel_async.formulation import (
    FORMS,
    PAIRWISE_MAX_K,
    build_relaxed_model,
    default_form,
)
from mel_opt.problems.mel_async.instance import MelAsyncInstance
from mel_opt.problems.mel_async.lexicographic import least_average
from mel_opt.problems.mel_async.rounding import paper_round
from mel_opt.problems.options import Option
from mel_opt.result import SolverInfo
from mel_opt.status import TerminationCondition

_EXACT = SolverInfo("mel_opt window algorithm + HiGHS (average staleness)", "2")
ROUNDINGS = ("repair", "paper")

# The options of the methods (declared once: checked by api.solve, listed by `melopt methods
# --options` and the docs).
ROUNDING = Option("rounding", str, "repair",
                  "continuous point to integers: repair (floor d, recompute every tau, repair "
                  "the sum) or paper (floor tau and d, then suggest-and-improve)",
                  choices=ROUNDINGS)
FORM = Option("form", str, None, "how (8b) is written: pairwise (as the paper states it) or "
              "minmax (the O(K) equivalent)", choices=FORMS,
              default_doc=f"pairwise up to {PAIRWISE_MAX_K} learners, minmax above")
IMPROVE = Option("improve", bool, False, "also run SAI's improve step after the repair")
KKT_SAI_OPTIONS = (ROUNDING,)
IPOPT_OPTIONS = (FORM, ROUNDING, IMPROVE)


def _solution(inst: MelAsyncInstance, d: np.ndarray) -> dict[str, Any]:
    d = np.asarray(d, dtype=np.int64)
    tau = W.max_updates(inst, d.astype(float)).astype(np.int64)
    return {"d": d.tolist(), "tau": tau.tolist()}


def _infeasible(solver: SolverInfo, why: str, **extras: Any) -> MethodOutput:
    return MethodOutput.nothing(TerminationCondition.INFEASIBLE, solver, extras, why)


# --------------------------------------------------------------------------------------------
# exact
# --------------------------------------------------------------------------------------------
def solve_exact(inst: MelAsyncInstance, opts: SolveOptions) -> MethodOutput:
    """Lexicographic proven optimum: maximum staleness (6), then average staleness (13).

    Stage 1, the window algorithm (:func:`windows.exact_integer`), proves the least maximum
    staleness s* and lists every optimal window [lo, lo + s*]. Stage 2
    (:func:`lexicographic.least_average`) minimises (13) over all of them: for s* = 1 by the
    exact two-level count argument at any K; for s* >= 2 by a knapsack DP over each window's
    sample reductions (bound, allocation, fixing, branch and bound) and, where a gap is left,
    a small MILP (HiGHS) over the learners the DP could not fix; among equal averages the
    window with the larger lo (more updates) wins.
    ``proven_levels`` names the objectives proven optimal: both when stage 2 finished proven
    (or s* = 0, where every optimum has (13) = 0), only ``max_staleness`` when stage 2 was
    skipped (``lexicographic.MAX_THRESHOLD_WORK``), a window's MILP was too large
    (``lexicographic.MAX_BINARIES``: the best allocation found is returned) or it hit the
    time limit. Where the second stage is not proven but bounded, ``avg_staleness_bound``
    (the least (13) any allocation of the optimal windows can have) and ``avg_staleness_gap``
    (how far above it the answer's (13) may be, relative) say by how much the unproven
    objective may be off, and the message repeats them. It also reports the
    certified global optimum of the relaxation (8) as ``relaxed_optimum``, the yardstick for
    IPOPT.
    """
    relaxed = W.relaxed_optimum(inst)
    extras: dict[str, Any] = {
        "relaxed_optimum": None if relaxed is None else relaxed.z,
        "relaxed_window": None if relaxed is None else [relaxed.lo, relaxed.hi],
    }
    ok, why = W.integer_feasible(inst)
    if not ok:
        return _infeasible(_EXACT, why, **extras)
    win = W.exact_integer(inst, checked=True)
    assert win is not None
    s_star = win.hi - win.lo
    d, tau, levels = win.d, win.tau, ["max_staleness"]
    lex = least_average(inst, s_star, win.optimal_los, opts.time_limit)
    if s_star == 0:
        levels.append("avg_staleness")
        how = "average staleness 0 (zero maximum)"
    elif lex is None:
        how = "average staleness not optimised (second stage too large)"
    else:
        d, tau = lex.d, lex.tau
        if lex.proven:
            levels.append("avg_staleness")
            how = f"then proven least average staleness over {lex.windows} optimal window(s)"
        else:
            how = f"average staleness best found, not proven ({lex.note})"
            gap = _second_stage_gap(inst.K, lex.pair_sum, lex.lower)
            extras.update(gap)
            if gap:
                how += (f"; at most {100 * gap['avg_staleness_gap']:.3g}% above its bound "
                        f"{gap['avg_staleness_bound']:.6g}")
    extras.update(window=[int(tau.min()), int(tau.max())], lo_values_scanned=win.lo_candidates,
                  optimal_windows=len(win.optimal_los), proven_levels=levels)
    return MethodOutput.optimal({"d": d.tolist(), "tau": tau.tolist()}, _EXACT, extras,
                                f"proven optimal maximum staleness; {how}")


def _second_stage_gap(K: int, pair_sum: int, lower: int | None) -> dict[str, Any]:
    """What an unproven second stage knows: the least average staleness (13) any optimum of
    the maximum can have (``avg_staleness_bound``, the pair-sum bound over N = K (K - 1) / 2)
    and how far above it the answer may be (``avg_staleness_gap``, relative to the answer's
    (13)); empty when no bound is known."""
    if lower is None or K < 2:
        return {}
    N = K * (K - 1) / 2
    return {"avg_staleness_bound": lower / N,
            "avg_staleness_gap": (pair_sum - lower) / pair_sum if pair_sum > 0 else 0.0}


def _round(inst: MelAsyncInstance, tau_c: np.ndarray, d_c: np.ndarray, how: str,
           improve_after: bool, extras: dict[str, Any]) -> dict[str, Any] | None:
    """Integer solution from a continuous point of (8) by the chosen rounding (None: none)."""
    extras["rounding"] = how
    if how == "paper":
        paper = paper_round(inst, tau_c, d_c)
        extras["paper_rounding_fallback"] = paper is None
        if paper is not None:
            return {"d": paper[1].tolist(), "tau": paper[0].tolist()}
    d0 = suggest(inst, d_c)
    if d0 is None:
        return None
    extras["suggested_max_staleness"] = float(np.ptp(W.max_updates(inst, d0.astype(float))))
    return _solution(inst, improve(inst, d0) if improve_after else d0)


# --------------------------------------------------------------------------------------------
# rounding and repair shared by ipopt and kkt-sai
# --------------------------------------------------------------------------------------------
def suggest(inst: MelAsyncInstance, d_cont: np.ndarray) -> np.ndarray | None:
    """Floor a continuous allocation and repair it to integers with sum d and tau_k >= 1.

    Each d_k is floored and clipped to [d_l, b_k(1)] (b_k(1): the most samples on which
    learner k still fits one update); the missing (or surplus) samples are then spread over the
    learners in proportion to their room, which moves every tau as little as possible.
    Returns None if no allocation gives every learner one update.
    """
    ok, _ = W.integer_feasible(inst)
    if not ok:
        return None
    cap = W.upper_d(inst, np.ones(inst.K))
    x = np.clip(np.floor(np.asarray(d_cont, dtype=float) + 1e-9), inst.min_samples, cap)
    x = x.astype(np.int64)
    total = int(x.sum())
    if total < inst.total_samples:
        return W.fill(x, cap.astype(np.int64), inst.total_samples)
    if total > inst.total_samples:
        return W.fill(np.full(inst.K, inst.min_samples), x, inst.total_samples)
    return x


def improve(inst: MelAsyncInstance, d: np.ndarray, max_rounds: int = 10_000) -> np.ndarray:
    """Improve step of SAI: move samples between learners while the staleness falls.

    Two moves, each accepted only if it lowers the maximum staleness (a learner with coarse
    taus may jump past the window when it takes one more sample; such moves are refused):
    (a) lower the top: every learner above a target h < tau_max takes the samples it needs to
    drop to h, given by the lowest-tau learners that can spare them without rising above h;
    (b) raise the bottom: every learner below a target l > tau_min sheds the samples it needs to
    reach l, taken by the highest-tau learners that stay at or above l.
    The feasibility of each move is monotone in its target, so the most ambitious target is
    found by bisection; each accepted move lowers the staleness, so the loop ends. It is a local
    search, not a proof (``exact`` is the proof). When the solve's deadline passes it stops
    and returns the allocation reached (every allocation it holds is whole and feasible).
    """
    d = np.asarray(d, dtype=np.int64).copy()
    until = deadline.current()
    for _ in range(max_rounds):
        if until.expired():
            break
        tau = W.max_updates(inst, d.astype(float))
        hmax, lmin = int(tau.max()), int(tau.min())
        if hmax == lmin:
            break
        moved = _best_move(lambda h, d=d, tau=tau: _lower_top(inst, d, tau, h), hmax - 1, lmin,
                           lowest=True)
        if moved is None or not _better(inst, moved, hmax - lmin):
            moved = _best_move(lambda h, d=d, tau=tau: _raise_bottom(inst, d, tau, h),
                               lmin + 1, hmax, lowest=False)
        if moved is None or not _better(inst, moved, hmax - lmin):
            break  # granular taus: moving samples would push a learner past the window
        d = moved
    return d


def _better(inst: MelAsyncInstance, d: np.ndarray, staleness: int) -> bool:
    """A move is kept only if every learner still does an update and the staleness falls."""
    tau = W.max_updates(inst, d.astype(float))
    return bool(tau.min() >= 1) and int(np.ptp(tau)) < staleness


def _best_move(move: Any, first: int, last: int, lowest: bool) -> np.ndarray | None:
    """Bisect the target of a move between ``first`` (least ambitious) and ``last``."""
    best = move(first)
    if best is None:
        return None
    good, bad = first, last + (-1 if lowest else 1)
    while abs(bad - good) > 1:
        mid = (good + bad) // 2
        cand = move(mid)
        if cand is None:
            bad = mid
        else:
            good, best = mid, cand
    return best


def _lower_top(inst: MelAsyncInstance, d: np.ndarray, tau: np.ndarray,
               h: int) -> np.ndarray | None:
    """Bring every learner with tau > h down to tau <= h (None if impossible)."""
    top = tau > h
    a = W.lower_d(inst, np.full(inst.K, float(h)))
    if np.any(a[top] > inst.max_samples):
        return None
    a = a.astype(np.int64)
    need = int((a[top] - d[top]).sum())
    spare = np.where(top, 0, np.maximum(0, d - a))
    if int(spare.sum()) < need:
        return None
    new = d.copy()
    new[top] = a[top]
    order = np.argsort(np.where(top, np.inf, tau), kind="stable")  # lowest tau gives first
    new -= _spread(order, spare, need)
    return new


def _raise_bottom(inst: MelAsyncInstance, d: np.ndarray, tau: np.ndarray,
                  low: int) -> np.ndarray | None:
    """Bring every learner with tau < low up to tau >= low (None if impossible)."""
    bottom = tau < low
    b = W.upper_d(inst, np.full(inst.K, float(low)))
    if np.any(b[bottom] < inst.min_samples):
        return None
    b = b.astype(np.int64)
    shed = int((d[bottom] - b[bottom]).sum())
    room = np.where(bottom, 0, np.maximum(0, b - d))
    if int(room.sum()) < shed:
        return None
    new = d.copy()
    new[bottom] = b[bottom]
    order = np.argsort(np.where(bottom, np.inf, -tau), kind="stable")  # highest tau first
    new += _spread(order, room, shed)
    return new


def _spread(order: np.ndarray, cap: np.ndarray, amount: int) -> np.ndarray:
    """Take ``amount`` units from ``cap`` greedily in ``order``; the amounts per learner."""
    c = cap[order]
    before = np.cumsum(c) - c
    q = np.clip(amount - before, 0, c)
    out = np.zeros_like(cap)
    out[order] = q
    return out


# --------------------------------------------------------------------------------------------
# kkt-sai
# --------------------------------------------------------------------------------------------
_KKT = SolverInfo("mel_opt KKT + suggest-and-improve", "1")


def solve_kkt_sai(inst: MelAsyncInstance, opts: SolveOptions) -> MethodOutput:
    """The paper's analytical route (Section IV): KKT bounds, then suggest-and-improve.

    The paper leaves the steps unspecified; ours are:

    1. KKT point (:func:`kkt.kkt_point`): Theorem 1 with the staleness constraints active gives a
       common tau_bar and d_k from (8c); bound multipliers clip d_k to [d_l, d_u]. Its
       multipliers of (9) and its residuals of the KKT conditions and of (11)-(12) are computed
       by :func:`kkt.analyse` and reported under ``kkt`` (``kkt_stationarity`` beside it).
    2. Rounding, option ``rounding``: ``repair`` (default) floors d_k, clips it to the range
       where one update still fits, spreads the missing samples so that sum d_k = d
       (:func:`suggest`) and then improves (:func:`improve`: sample moves while the maximum
       staleness falls, each learner doing the most whole updates that fit); ``paper`` floors
       tau_k and d_k independently, then suggest-and-improve as in :mod:`rounding`.
    """
    how = opts.options["rounding"]
    t_bar, d_cont = kkt.kkt_point(inst)
    tau_cont = np.maximum(W.relaxed_tau(inst, d_cont), 0.0)
    report = kkt.analyse(inst, tau_cont, d_cont)
    extras: dict[str, Any] = {"kkt_tau": t_bar, "kkt": report,
                              "kkt_stationarity": report.get("stationarity")}
    sol = _round(inst, tau_cont, d_cont, how, True, extras)
    if sol is None:
        _, why = W.integer_feasible(inst)
        return _infeasible(_KKT, why, **extras)
    which = "a" if report.get("is_kkt_point") else "not a"
    return MethodOutput.feasible(sol, _KKT, extras, f"KKT point of (8) ({which} KKT point by its "
                                 f"multipliers), rounded: {how}")


# --------------------------------------------------------------------------------------------
# ipopt
# --------------------------------------------------------------------------------------------
# From this many learners IPOPT runs with these options. The relaxation's optimum is degenerate
# (z = 0 with all 2K window rows active where equal update counts are reachable) and MUMPS's
# default permuting scaling then delays pivots into large dense fronts; without it, with the
# ordering meant for quasi-dense rows (QAMD) and the adaptive barrier update, on the seeded
# random preset: K = 1,200 1.2 -> 0.8 s, 3,200 14 -> 1.7 s, 6,400 250 -> 6.2 s (and a smaller
# relaxed spread), while below about 1,000 the defaults are faster (K = 800: 0.4 s vs 1.1 s).
LARGE_K = 1000
LARGE_K_IPOPT_OPTIONS: dict[str, Any] = {
    "mu_strategy": "adaptive",
    "mumps_permuting_scaling": 0,
    "mumps_pivot_order": 6,
}


def solve_ipopt(inst: MelAsyncInstance, opts: SolveOptions) -> MethodOutput:
    """The relaxed QCLP (8) solved by IPOPT, floored and repaired to integers.

    Options (:data:`IPOPT_OPTIONS`): ``form`` (how (8b) is written), ``rounding`` (``repair``
    or the paper's ``paper``, :mod:`rounding`), ``improve`` (also run SAI's improve step after
    the repair; off by default, to show the numerical route as it is). IPOPT's multipliers of
    (8c) and (8d) are reported as ``ipopt_lambda`` and ``ipopt_omega`` (the sign convention of
    (9)).
    IPOPT starts from the equal split; it is a local solver, and its relaxed objective is
    reported as ``relaxed_objective`` beside the certified optimum of (8) from ``exact``.
    From ``LARGE_K`` learners on IPOPT runs with ``LARGE_K_IPOPT_OPTIONS`` (reported as
    ``ipopt_options``).
    """
    from mel_opt.solvers import ipopt

    how = opts.options["rounding"]
    form = opts.options["form"] or default_form(inst)
    model = build_relaxed_model(inst, form=form)
    tuned = LARGE_K_IPOPT_OPTIONS if inst.K >= LARGE_K else {}
    res = ipopt.solve_nlp(model, time_limit=opts.time_limit, options=tuned)
    solver = SolverInfo("ipopt (cyipopt)", ipopt.version())
    extras: dict[str, Any] = {
        "form": form,
        "ipopt_options": dict(tuned),
        "relaxed_status": res.termination.value,
        "relaxed_objective": res.objective,
        "ipopt_iterations": res.iterations,
    }
    if not res.is_usable:
        return MethodOutput.nothing(res.termination, solver, extras,
                                    f"IPOPT stopped without a solution: {res.message}")
    d_cont = np.array([res.values[f"d[{k}]"] for k in range(inst.K)])
    tau_cont = np.array([res.values[f"tau[{k}]"] for k in range(inst.K)])
    extras["ipopt_lambda"] = [res.multipliers.get(f"time[{k}]") for k in range(inst.K)]
    extras["ipopt_omega"] = res.multipliers.get("total")
    extras["kkt"] = kkt.analyse(inst, tau_cont, d_cont)
    sol = _round(inst, tau_cont, d_cont, how, opts.options["improve"], extras)
    if sol is None:
        _, why = W.integer_feasible(inst)
        return _infeasible(solver, f"relaxation solved but no integer repair: {why}", **extras)
    return MethodOutput.feasible(sol, solver, extras, f"IPOPT on (8), {form} form; rounded: {how}")


# --------------------------------------------------------------------------------------------
# baselines
# --------------------------------------------------------------------------------------------
_BASE = SolverInfo("mel_opt baseline", "1")


def solve_eta(inst: MelAsyncInstance, opts: SolveOptions) -> MethodOutput:
    """Equal task allocation (asynchronous): d_k = d/K (the first d mod K learners get one
    more), each learner then doing as many whole updates as fit in T."""
    K, d_tot = inst.K, inst.total_samples
    d = np.full(K, d_tot // K, dtype=np.int64)
    d[: d_tot % K] += 1
    tau = W.max_updates(inst, d.astype(float))
    if np.any(tau < 1):
        slow = [inst.learner_names[k] for k in np.flatnonzero(tau < 1)]
        return _infeasible(_BASE, f"equal shares leave no time for one update on: "
                           f"{', '.join(slow[:5])}{' ...' if len(slow) > 5 else ''}")
    return MethodOutput.feasible(_solution(inst, d), _BASE, {},
                                 "equal task allocation, each learner doing the most updates "
                                 "that fit")


def solve_sync(inst: MelAsyncInstance, opts: SolveOptions) -> MethodOutput:
    """Synchronous scheme: one common tau for all, as large as possible, with sum d_k = d,
    d_l <= d_k <= d_u and t_k <= T (learners may then idle)."""
    K, d_tot, dl = inst.K, inst.total_samples, inst.min_samples

    def ok(t: int) -> bool:
        b = W.upper_d(inst, np.full(K, float(t)))
        return bool(np.all(b >= dl) and b.sum() >= d_tot)

    if not ok(1):
        _, why = W.integer_feasible(inst)
        return _infeasible(_BASE, why or "no common tau >= 1 fits")
    top = int(W.max_updates(inst, np.full(K, float(dl))).min())
    lo, hi = 1, max(1, top)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    b = W.upper_d(inst, np.full(K, float(lo))).astype(np.int64)
    d = W.fill(np.full(K, dl), b, d_tot)
    return MethodOutput.feasible({"d": d.tolist(), "tau": [lo] * K}, _BASE, {"common_tau": lo},
                                 "largest common tau; learners that finish early wait")
