"""The answer of med's branch and bound: the incumbent's shards and the search's outcome.

:func:`outcome` turns what a run holds when it ends (its incumbent, the bounds of the nodes
still open, its statistics) into a :class:`~mel_opt.problems.med.search.types.SearchOutcome`:
proven optimal, stopped by the time limit with the least open bound, or no allocation. The
guard timer's snapshot of a running search goes through it too.
"""

from __future__ import annotations

import math

import numpy as np

from mel_opt.problems.med import split
from mel_opt.problems.med.search.evaluate import Evaluator
from mel_opt.problems.med.search.exchange import Incumbent
from mel_opt.problems.med.search.search_stats import SearchStats
from mel_opt.problems.med.search.types import SearchOutcome, parts_of
from mel_opt.status import TerminationCondition as TC

__all__ = ["allocation", "outcome"]


def allocation(ev: Evaluator, assignment: np.ndarray) -> tuple[float, np.ndarray]:
    """The value of a feasible assignment and its whole shards d (m, n) at its levels."""
    inst, coef, m = ev.inst, ev.coef, ev.m
    parts = parts_of(assignment, m)
    _, val, levels = ev.value(parts)
    assert levels is not None  # the incumbent was feasible when it was stored
    d = np.zeros((m, inst.n_learners), dtype=np.int64)
    for i, p in enumerate(parts):
        W = np.array(p, dtype=np.int64)
        part = split.split_at(coef.A[i, W], coef.C[i, W], inst.price[W], coef.L,
                              int(inst.shards[i]), levels[i])
        assert part is not None  # the level was computed from these learners
        d[i, W] = part
    return val, d


def outcome(ev: Evaluator, best: Incumbent, stats: SearchStats, timed_out: bool,
            open_bounds: list[float], root_bound: float,
            bound_kind: str = "a Lagrangian bound") -> SearchOutcome:
    """The outcome of a run that ends with ``best``: stopped by the time limit
    (``timed_out``; the bound is the least of the incumbent and the ``open_bounds``, the
    message names ``bound_kind``), or searched to the end (proven optimal, or no allocation).
    Records the final bound in ``stats`` when there is an allocation."""
    final_bound = min([best.value, *open_bounds]) if timed_out else best.value
    if best.assign is None:
        if timed_out:
            return SearchOutcome(TC.TIME_LIMIT, bound=root_bound, stats=stats.as_dict(),
                                 message="time limit without a feasible allocation")
        return SearchOutcome(TC.INFEASIBLE, bound=math.inf, stats=stats.as_dict(),
                             message="no feasible allocation (search exhausted)")
    assignment = best.assign
    val, d = allocation(ev, assignment)
    stats.bound = final_bound
    if timed_out:
        return SearchOutcome(TC.TIME_LIMIT, assignment, d, val, final_bound,
                             stats=stats.as_dict(),
                             message=f"time limit: best allocation found and {bound_kind}")
    return SearchOutcome(TC.CONVERGED, assignment, d, val, val, stats=stats.as_dict(),
                         message="proven optimal (Lagrangian branch and bound)")
