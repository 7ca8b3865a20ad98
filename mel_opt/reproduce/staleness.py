"""Staleness against the number of learners (paper 000, Section V-B, Fig. 2).

For each K and seed the ``mohammad2020`` preset draws a Section V set-up at cycle time T; every
method solves it and the maximum staleness (6) and average staleness (13) of its answer are
collected. Infeasible answers (e.g. ETA when an equal share does not fit in T) are counted
apart, never averaged in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mel_opt import activity
from mel_opt.api import parse_instance, solve
from mel_opt.errors import InstanceError
from mel_opt.problems.mel_async.generate import generate


@dataclass
class StalenessPoint:
    """The answers of one method at one (T, K) over seeds.

    Attributes
    ----------
    max_staleness, avg_staleness : list of float
        Eq. (6) and Eq. (13) of every seed with an answer [updates].
    no_answer : int
        Seeds for which the method returned no feasible allocation.
    """

    max_staleness: list[float] = field(default_factory=list)
    avg_staleness: list[float] = field(default_factory=list)
    no_answer: int = 0

    @property
    def zero(self) -> int:
        """Seeds whose answer has no staleness at all (every learner the same tau)."""
        return sum(1 for v in self.max_staleness if v == 0)


def staleness_vs_k(learners: Sequence[int], cycle_time_s: float,
                   methods: Sequence[str] | Mapping[str, tuple[str, Mapping[str, Any]]],
                   seeds: int, params: Mapping[str, str] | None = None
                   ) -> dict[tuple[int, str], StalenessPoint]:
    """``{(K, label): StalenessPoint}`` for the ``mohammad2020`` preset at cycle time T [s].

    ``methods`` are method names, or labels mapped to (method, options) (e.g. the paper's own
    route ``{"ipopt-paper": ("ipopt", {"rounding": "paper"})}``). ``params`` are extra
    generator parameters (strings, as ``--param`` takes them); seeds 0..seeds-1 give the same
    learners to every method.
    """
    routes = dict(methods) if isinstance(methods, Mapping) else {m: (m, {}) for m in methods}
    out: dict[tuple[int, str], StalenessPoint] = {}
    for K in learners:
        for s in range(seeds):
            activity.report(f"K = {K}, T = {cycle_time_s:g} s, seed {s + 1}/{seeds}")
            doc = generate("mohammad2020", learners=K, seed=s,
                           params={**dict(params or {}), "cycle_time_s": str(cycle_time_s)})
            try:
                inst = parse_instance(doc)
            except InstanceError:  # no allocation exists (e.g. d_l does not fit in T)
                for label in routes:
                    out.setdefault((K, label), StalenessPoint()).no_answer += 1
                continue
            for label, (m, options) in routes.items():
                point = out.setdefault((K, label), StalenessPoint())
                r = solve(inst, m, options=options)
                if r.ok:
                    point.max_staleness.append(float(r.metrics["max_staleness"]))
                    point.avg_staleness.append(float(r.metrics["avg_staleness"]))
                else:
                    point.no_answer += 1
    return out
