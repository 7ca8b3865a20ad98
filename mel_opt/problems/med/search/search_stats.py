"""What one run of med's branch and bound counts and finds, as typed fields.

:class:`SearchStats` is filled by the search's phases and turned into the outcome's ``stats``
dict by :meth:`SearchStats.as_dict`, whose keys (``exact``'s extras prefix each with
``search_``) and order are those of the result JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mel_opt.problems.med.search.bundle import Ascent
from mel_opt.status import TerminationCondition

__all__ = ["METHOD", "COMPANION", "SearchStats"]

METHOD = "lagrangian branch and bound"
COMPANION = "primal heuristics in a second process beside the branching"


@dataclass
class SearchStats:
    """The branch and bound's statistics.

    Attributes
    ----------
    nodes : int
        Nodes taken from the heap (pruned ones included).
    root_ascent : Ascent or None
        The root's bundle ascent (its steps, columns and certificate), once it ran.
    root_bound : float or None
        The root bound [s] (the tasks' least levels when the Lagrangian tables ran out of
        time).
    companion : bool
        The primal heuristics ran in a companion process beside the branching.
    incumbent_from_master : float or None
        The root master's rounding after its local search [s] (one core only; inf when it
        was infeasible).
    incumbent_after_local_search, incumbent_before_branching : float or None
        The incumbent after the first local searches and after the iterated local search
        [s] (one core only).
    ils_kicks : int or None
        Kicks the iterated local search tried before branching (one core only).
    companion_allocations : int
        Allocations received from the companion that improved the incumbent.
    lp_stops : dict of TerminationCondition to int
        Ascents (root and children) that ended because the bundle's box LP gave no optimal
        point, by why it stopped.
    bound : float or None
        The final bound [s], with an allocation to report.
    """

    nodes: int = 0
    root_ascent: Ascent | None = None
    root_bound: float | None = None
    companion: bool = False
    incumbent_from_master: float | None = None
    incumbent_after_local_search: float | None = None
    ils_kicks: int | None = None
    incumbent_before_branching: float | None = None
    companion_allocations: int = 0
    lp_stops: dict[TerminationCondition, int] = field(default_factory=dict)
    bound: float | None = None

    def note_ascent(self, ascent: Ascent) -> None:
        """Count an ascent that the box LP ended (root or child)."""
        if ascent.lp_stop is not None:
            self.lp_stops[ascent.lp_stop] = self.lp_stops.get(ascent.lp_stop, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        """The outcome's ``stats``: a key for each statistic that was recorded (a phase that
        did not run has none), in the order the phases record them. ``bundle_lp_<why>``
        appears only when the box LP ended an ascent."""
        out: dict[str, Any] = {"method": METHOD, "nodes": self.nodes}
        ascent = self.root_ascent
        if ascent is not None and ascent.counted:
            out.update(bundle_steps=ascent.steps, bundle_columns=ascent.columns,
                       bundle_converged=ascent.converged)
        optional: list[tuple[str, Any]] = [
            ("root_bound", self.root_bound),
            ("companion", COMPANION if self.companion else None),
            ("incumbent_from_master", self.incumbent_from_master),
            ("incumbent_after_local_search", self.incumbent_after_local_search),
            ("ils_kicks", self.ils_kicks),
            ("incumbent_before_branching", self.incumbent_before_branching),
            ("companion_allocations", self.companion_allocations or None),
            *((f"bundle_lp_{why.value}", count) for why, count in self.lp_stops.items()),
            ("bound", self.bound),
        ]
        out.update((key, value) for key, value in optional if value is not None)
        return out

