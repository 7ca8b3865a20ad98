"""Side-by-side comparison of every method of a problem on one instance.

The reference answer is the best objective among methods that prove optimality and returned
``optimal``; without one, the best verified objective. Each result gets its gap to it in the
problem's sense (absolute, and relative where the reference is not zero). A method declared
``not_comparable`` (it answers a different question, e.g. mel-async's ``sync`` lets learners
idle, dab's ``csa`` minimises staleness rather than maximising shards) gets no gap and is never
the reference; its reason is reported instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mel_opt.api import solve
from mel_opt.errors import UsageError
from mel_opt.problems import ProblemSpec, get_problem
from mel_opt.result import Result, Status


@dataclass(frozen=True)
class Comparison:
    results: list[Result]
    reference: Result | None
    reference_is_proven: bool
    gaps: dict[str, tuple[float | None, float | None]]  # method -> (absolute, relative)
    not_comparable: dict[str, str] = field(default_factory=dict)  # method -> reason

    def to_dict(self) -> dict[str, Any]:
        """JSON form: each result with ``gap_abs``, ``gap_rel``, ``comparable`` and, for a
        method that is not comparable, ``reason`` (its gaps are null)."""
        rows = []
        for r in self.results:
            row = {**r.to_dict(), "gap_abs": self.gaps[r.method][0],
                   "gap_rel": self.gaps[r.method][1],
                   "comparable": r.method not in self.not_comparable}
            if r.method in self.not_comparable:
                row["reason"] = self.not_comparable[r.method]
            rows.append(row)
        return {
            "reference": None if self.reference is None else self.reference.method,
            "reference_is_proven": self.reference_is_proven,
            "results": rows,
        }


def compare(instance: Any, methods: Sequence[str] | None = None,
            time_limit: float | None = None, seed: int = 0,
            options: Mapping[str, Any] | None = None) -> Comparison:
    """Run ``methods`` (default: all of the problem's) and compute gaps to the best answer.

    Each of ``options`` goes to the compared methods that declare it (``rounding=paper`` to
    ``ipopt`` and ``kkt-sai``, not to ``exact``); an option that none of them declares, or a
    bad value, is a UsageError before anything runs."""
    spec = get_problem(instance.problem)
    names = list(methods) if methods else list(spec.methods)
    for n in names:
        spec.method(n)  # unknown method -> UsageError before anything runs
    per_method = _options_per_method(spec, names, options or {})
    results = [solve(instance, n, time_limit=time_limit, seed=seed, options=per_method[n])
               for n in names]
    sign = 1.0 if spec.sense == "min" else -1.0
    apart = {n: spec.methods[n].not_comparable for n in names if spec.methods[n].not_comparable}
    usable = [r for r in results if r.ok and r.objective is not None and r.method not in apart]
    proven = [r for r in usable
              if r.status is Status.OPTIMAL and spec.methods[r.method].proves_optimality]
    pool = proven or usable
    ref = min(pool, key=lambda r: sign * float(r.objective)) if pool else None  # type: ignore[arg-type]
    gaps: dict[str, tuple[float | None, float | None]] = {}
    for r in results:
        if ref is None or not r.ok or r.objective is None or r.method in apart:
            gaps[r.method] = (None, None)
            continue
        g = sign * (float(r.objective) - float(ref.objective)) + 0.0  # type: ignore[arg-type]
        rel = None if ref.objective == 0 else g / abs(float(ref.objective))  # type: ignore[arg-type]
        gaps[r.method] = (g, rel)
    return Comparison(results, ref, bool(proven), gaps, apart)


def _options_per_method(spec: ProblemSpec, names: Sequence[str],
                        options: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The options each compared method declares, checked once for every method."""
    declared = {n: {o.name for o in spec.methods[n].options} for n in names}
    orphans = sorted(k for k in options if not any(k in d for d in declared.values()))
    if orphans:
        raise UsageError(f"unknown option {', '.join(orphans)}: none of the compared methods "
                         f"of {spec.name} ({', '.join(names)}) declares it (see melopt methods "
                         f"{spec.name} --options)")
    per = {n: {k: v for k, v in options.items() if k in declared[n]} for n in names}
    for n in names:
        spec.methods[n].read_options(per[n], spec.name)  # bad values fail before any solve
    return per
