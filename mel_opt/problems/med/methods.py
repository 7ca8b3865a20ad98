"""Methods for med: ``exact`` (default), ``highs`` and the ``mmtt-uncertain`` baseline.

Every method returns ``{"assignment": task per learner (-1 unused), "d": m x n shards}``;
``mmtt-uncertain`` also returns ``planning_states`` (the state index it assumed per learner).
``mmtt-ideal`` needs the learners' true states of each cycle, so it exists only in the simulator
(``simulate``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mel_opt import deadline
from mel_opt.problems.base import MethodOutput, SolveOptions
from mel_opt.problems.med import formulation
from mel_opt.problems.med.instance import MedInstance
from mel_opt.problems.med.search import branch_and_bound, dispatch
from mel_opt.problems.med.search.types import SearchOutcome
from mel_opt.problems.options import Option
from mel_opt.result import SolverInfo
from mel_opt.solvers import highs
from mel_opt.status import SolutionStatus, TerminationCondition

EXACT_INFO = SolverInfo("mel_opt med type programme / Lagrangian search", "1")
MIP_GAP = 1e-7


def _solution(assignment: np.ndarray, d: np.ndarray) -> dict[str, Any]:
    return {"assignment": [int(a) for a in assignment], "d": np.asarray(d).astype(int).tolist()}


# The search checks its deadline between steps and may overrun it by one step (a local search
# sweep, a Lagrangian iteration) before assembling the answer: it stops this share of the time
# left (at most RESERVE_S) early, so that the answer is ready before the deadline passes.
RESERVE_SHARE = 0.05
RESERVE_S = 0.25


def _search_limit() -> float | None:
    left = deadline.current().seconds()
    return None if left is None else max(0.0, left - min(RESERVE_S, RESERVE_SHARE * left))


def solve_exact(inst: MedInstance, opts: SolveOptions) -> MethodOutput:
    """Proven optimum of (4.4) by the type programme (package ``search``).

    Extras: ``bound`` (proven lower bound), ``gap`` (relative), and the search statistics.
    """
    running = branch_and_bound.Running()  # what a stop by the guard timer keeps
    with deadline.keep_incumbent(lambda: _exact_output(running.snapshot())):
        out = dispatch.solve(inst, time_limit=_search_limit(), running=running)
    output = _exact_output(out)
    assert output is not None
    return output


def _exact_output(out: SearchOutcome | None) -> MethodOutput | None:
    """``exact``'s answer from the search's outcome (None: none)."""
    if out is None:
        return None
    extras: dict[str, Any] = {"bound": out.bound}
    if out.objective is not None and out.bound is not None:
        extras["gap"] = max(0.0, out.objective - out.bound) / max(1e-12, abs(out.objective))
    extras.update({f"search_{k}": v for k, v in out.stats.items()})
    solution = None
    if out.d is not None and out.assignment is not None:
        solution = _solution(out.assignment, out.d)
    return MethodOutput.stopped(out.termination, solution, EXACT_INFO, extras, out.message)


HIGHS_OPTIONS = (Option("symmetry", bool, True, "keep the symmetry-breaking rows of the MILP"),)
MMTT_OPTIONS = (Option("solver", str, "exact", "what solves (4.4) for the sampled states: "
                       "exact (the type programme) or highs (the MILP)",
                       choices=("exact", "highs")),)


def solve_highs(inst: MedInstance, opts: SolveOptions) -> MethodOutput:
    """The strengthened MILP (4.4) of ``formulation`` solved by HiGHS.

    Option ``symmetry`` (default true) keeps the symmetry-breaking rows.
    """
    symmetry = bool(opts.options.get("symmetry", True))
    model = formulation.build_milp_model(inst, symmetry=symmetry)
    res = highs.solve_milp(model, time_limit=opts.time_limit, mip_gap=MIP_GAP)
    info = SolverInfo("highs", highs.version())
    extras: dict[str, Any] = {"bound": res.bound, "gap": res.gap}
    if not res.is_usable:
        why = {TerminationCondition.INFEASIBLE: "HiGHS proved (4.4) infeasible"}.get(
            res.termination, f"HiGHS stopped without a solution ({res.message})")
        return MethodOutput.nothing(res.termination, info, extras, why)
    assignment, d = formulation.read_solution(model, res.values, inst)
    return MethodOutput(res.termination, res.solution_status, _solution(assignment, d), info,
                        extras, res.message)


def sample_states(inst: MedInstance, rng: np.random.Generator) -> np.ndarray:
    """One state per learner drawn from its distribution gamma_j (inverse CDF)."""
    u = rng.random(inst.n_learners)
    cdf = np.cumsum(inst.probs, axis=1)
    return np.minimum((u[:, None] > cdf).sum(axis=1), inst.n_states - 1)


def solve_known_states(inst: MedInstance, states: np.ndarray, time_limit: float | None = None,
                       solver: str = "exact") -> MethodOutput:
    """MMTT: the same model (4.4) with deterministic delays of one known state per learner."""
    known = inst.with_known_states(states)
    opts = SolveOptions(time_limit=time_limit)
    out = solve_highs(known, opts) if solver == "highs" else solve_exact(known, opts)
    if out.solution is not None:
        out.solution["planning_states"] = [int(s) for s in states]
    return out


def solve_mmtt_uncertain(inst: MedInstance, opts: SolveOptions) -> MethodOutput:
    """MMTT-Uncertain: one state per learner sampled with ``seed``, then (4.4) as if certain.

    This is what the author's code did (one benchmark run per learner, its scores taken as the
    learner's capabilities). Option ``solver``: ``exact`` (default) or ``highs``.
    """
    solver = opts.options["solver"]
    states = sample_states(inst, np.random.default_rng(opts.seed))
    out = solve_known_states(inst, states, opts.time_limit, solver)
    names = [inst.state_names[s] for s in states]
    note = (f"optimal for the sampled states ({out.message}); judged by (4.4a) with expected "
            "delays" if out.solution is not None else out.message)
    # optimal for the sampled states only: an answer of (4.4) without an optimality claim
    point = (SolutionStatus.FEASIBLE if out.solution_status is SolutionStatus.OPTIMAL
             else out.solution_status)
    return MethodOutput(out.termination, point, out.solution, out.solver,
                        {"planning_state_names": names}, note)
