"""Method ``ipopt`` of feel: IPOPT on P4 + P5 (fixed B, convex) or on P1 with several starts,
then whole batches.

Options (:data:`MULTISTART_OPTIONS`): ``starts`` (IPOPT runs; the first starts from half-full
batches with equal slots, the others from seeded random batches and slots) and ``tol``
(IPOPT's tolerance).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mel_opt import deadline
from mel_opt.problems.base import MethodOutput, SolveOptions
from mel_opt.problems.feel import formulation
from mel_opt.problems.feel.closed_form import Phase, downlink
from mel_opt.problems.feel.instance import FeelInstance
from mel_opt.problems.feel.latency import Coeffs, coefficients, efficiency
from mel_opt.problems.feel.rounding import IntegerSplit, best_split, solution_dict
from mel_opt.problems.options import Option
from mel_opt.result import SolverInfo
from mel_opt.solvers.base import SolverResult
from mel_opt.status import SolutionStatus, TerminationCondition

MULTISTART_OPTIONS = (
    Option("starts", int, None, "IPOPT runs from different starting points; the best is kept",
           minimum=1, default_doc="8, or 1 when the instance fixes global_batch (P4 is convex)"),
    Option("tol", float, 1e-10, "IPOPT's convergence tolerance", minimum=1e-14),
)


def point_efficiency(co: Coeffs, batch: np.ndarray, up: np.ndarray, dn: np.ndarray) -> float:
    """Efficiency (16) of a continuous point, recomputed from the latency model [loss/s].

    IPOPT may overrun a slot budget by its tolerance (it relaxes constraints by about 1e-8);
    such slots are first scaled down to fit the frame, so the value is that of a feasible point.
    """
    up = up * min(1.0, co.frame_up / float(up.sum()))
    dn = dn * min(1.0, co.frame_down / float(dn.sum()))
    L = float(np.max(co.compute_time(batch) + co.a / up))
    D = float(np.max(co.m + co.b / dn))
    return efficiency(co, float(batch.sum()), L, D)


def whole_batches(inst: FeelInstance, co: Coeffs, batch_c: np.ndarray,
                  down: Phase) -> tuple[IntegerSplit, float]:
    """Whole batches for the continuous batches ``batch_c``, and their efficiency [loss/s].

    The global batch is the fixed one, or the better of floor and ceil of ``batch_c.sum()``
    (within the global bounds); for each, ``batch_c`` scaled to it is rounded and repaired
    (:func:`~mel_opt.problems.feel.rounding.best_split`); ``down`` is the downlink phase.
    """
    Bc = float(batch_c.sum())
    if inst.global_batch is not None:
        candidates = [inst.global_batch]
    else:
        lo_B, hi_B = co.min_global, co.max_global
        candidates = sorted({min(max(int(math.floor(Bc)), lo_B), hi_B),
                             min(max(int(math.ceil(Bc)), lo_B), hi_B)})
    chosen: IntegerSplit | None = None
    chosen_eff = -math.inf
    for B in candidates:
        split = best_split(co, B, suggestion=batch_c * (B / Bc))
        e = efficiency(co, B, split.uplink.latency, down.latency)
        if e > chosen_eff:
            chosen, chosen_eff = split, e
    assert chosen is not None
    return chosen, chosen_eff


def ipopt_multistart(inst: FeelInstance, opts: SolveOptions) -> MethodOutput:
    """Solve P4 + P5 (fixed ``global_batch``) or P1 with IPOPT, then round and repair.

    The best start (by the efficiency recomputed from the latency model) is kept as the
    continuous answer; its batches are rounded to whole numbers adding up to floor or ceil of
    its global batch (the better of the two) and repaired, with slots recomputed for them.
    """
    from mel_opt.solvers import ipopt

    fixed = inst.global_batch is not None
    starts = opts.options.get("starts") or (1 if fixed else 8)
    tol = opts.options.get("tol") or 1e-10
    co = coefficients(inst)
    rng = np.random.default_rng(opts.seed)
    K = inst.K
    until = deadline.current()
    best: tuple[float, np.ndarray, np.ndarray, np.ndarray] | None = None
    runs: list[dict[str, Any]] = []
    res_best: SolverResult | None = None
    for i in range(starts):
        if i > 0 and until.expired():
            break  # the later starts only improve on an answer already in hand
        if i == 0:
            batch0 = up0 = dn0 = None
        else:
            batch0 = rng.uniform(1.0, inst.max_batch, K)
            if inst.global_batch is not None:
                batch0 = batch0 * (inst.global_batch / batch0.sum())
            up0 = rng.dirichlet(np.ones(K)) * inst.frame_up
            dn0 = rng.dirichlet(np.ones(K)) * inst.frame_down
        if inst.global_batch is not None:
            model = formulation.build_p4_model(inst, float(inst.global_batch), batch0, up0, dn0)
        else:
            model = formulation.build_p1_model(inst, batch0, up0, dn0)
        # solve_nlp gives IPOPT what remains of the deadline (building the model counted).
        res = ipopt.solve_nlp(model, tol=tol)
        batch, up, dn = formulation.unscale(inst, model)
        ok = bool(np.all(np.isfinite(batch)) and np.all(up > 0) and np.all(dn > 0))
        eff = point_efficiency(co, batch, up, dn) if ok else float("nan")
        runs.append({"termination": res.termination.value, "iterations": res.iterations,
                     "efficiency": eff, "time_s": res.solve_time_s + res.build_time_s})
        if ok and res.is_usable and (best is None or eff > best[0]):
            best = (eff, batch, up, dn)
            res_best = res
    solver = SolverInfo("ipopt (cyipopt)", ipopt.version())
    if best is None or res_best is None:
        if until.expired():
            return MethodOutput.nothing(
                TerminationCondition.TIME_LIMIT, solver, {"ipopt_runs": runs},
                "time limit reached before an IPOPT run returned a usable point")
        return MethodOutput.nothing(TerminationCondition.ERROR, solver, {"ipopt_runs": runs},
                                    "no IPOPT run returned a usable point")
    eff_c, batch_c, up_c, dn_c = best
    Bc = float(batch_c.sum())
    down = downlink(co)
    chosen, chosen_eff = whole_batches(inst, co, batch_c, down)
    final = chosen.uplink
    extras: dict[str, Any] = {
        "continuous_efficiency": eff_c,
        "continuous_global_batch": Bc,
        "continuous_batch": [float(v) for v in batch_c],
        "continuous_uplink_slots": [float(v) for v in up_c],
        "continuous_downlink_slots": [float(v) for v in dn_c],
        "rounding_loss": 1.0 - chosen_eff / eff_c,
        "ipopt_starts": len(runs),
        "ipopt_runs": runs,
        "ipopt_iterations": int(sum(r["iterations"] for r in runs)),
        "exchange_gap": chosen.exchange_gap,
    }
    msg = (f"best of {len(runs)} IPOPT start(s) ({'P4+P5' if fixed else 'P1'}), rounded to whole "
           "batches and repaired")
    # IPOPT's termination for the run whose point was rounded, but no optimality claim: the
    # whole batches are a rounding of a local optimum of the relaxation, feasible (verified),
    # not proven optimal (as mel-async's rounded IPOPT answers say)
    return MethodOutput(res_best.termination, SolutionStatus.FEASIBLE,
                        solution_dict(chosen.batch, final.slots, down.slots), solver, extras, msg)
