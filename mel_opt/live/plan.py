"""A live round as planned (:class:`RoundPlan`) and one learner's answer to it (:class:`Answer`):
the values the round loop, the planners, the claims and the run pass between them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mel_opt.problems.learning import Adaptation, CyclePlan, LearnerPlan
from mel_opt.problems.messages import Records, TrainOrder

__all__ = ["Answer", "RoundPlan"]


@dataclass(frozen=True)
class Answer:
    """What came back from one learner, not read yet.

    Attributes
    ----------
    learner : int
        The learner whose node sent it.
    records : Records
        Its content (:class:`~mel_opt.problems.messages.TrainReport` or
        :class:`~mel_opt.problems.messages.ProbeReport` encoded).
    elapsed_s : float or None
        Wall time from sending the order to receiving this answer [s].
    """

    learner: int
    records: Records
    elapsed_s: float | None = None


@dataclass
class RoundPlan:
    """One round as planned: the cycle plan and what each learner is sent.

    Attributes
    ----------
    round : int
    cycle : CyclePlan
        The cycle's rules and, where the server planned it, each learner's plan (a round whose
        learners plan their own work has the rules only: they report their plans).
    orders : dict of int to TrainOrder
        Learner -> its order.
    allocation : dict
        The verified solution this round runs (empty when the learners plan).
    method : str
    solve_s : float
        Wall time of building and solving the round's instance [s].
    last : bool
        The method marked this round the last one (adaptive-tau's end-of-budget rule).
    adapted : Adaptation or None
        What the problem changed in the file's job for this round's learners (None:
        nothing).
    claims : dict of int to LearnerPlan
        Where the learners claimed their work first (:mod:`mel_opt.live.claims`): each
        plan claimed, a halt included (a learner that claimed nothing gets no order).
    claim_refused : dict of int to str
        Learners whose claim was refused, and why.
    claimed_by : tuple of int
        The learners asked to claim (empty: no claims this round).
    """

    round: int
    cycle: CyclePlan
    orders: dict[int, TrainOrder]
    allocation: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    solve_s: float = 0.0
    last: bool = False
    adapted: Adaptation | None = None
    claims: dict[int, LearnerPlan] = field(default_factory=dict)
    claim_refused: dict[int, str] = field(default_factory=dict)
    claimed_by: tuple[int, ...] = ()

    @property
    def asked(self) -> list[int]:
        """Every learner this round asked for something (an order or a claim)."""
        return sorted(set(self.orders) | set(self.claimed_by))

    def plan_of(self, learner: int) -> LearnerPlan | None:
        """The server's plan of ``learner`` (None where the learner plans its own)."""
        return next((p for p in self.cycle.learners if p.learner == learner), None)

    @property
    def clock_s(self) -> float:
        """The round's length on the problem's clock [s] (its fixed length, deadline, the
        learners' own deadlines, or the longest predicted time)."""
        c = self.cycle
        if c.duration_s is not None:
            return float(c.duration_s)
        if c.deadline_s is not None:
            return float(c.deadline_s)
        own = [p.deadline_s for p in c.learners if p.deadline_s is not None]
        if own:
            return float(max(own))
        return max((float(p.predicted_s) for p in c.learners), default=0.0)

    def compute_s(self, learner: int) -> float:
        """The computation predicted for ``learner`` [s]: the part of its time that passes on
        the wall clock (transfers are emulated). A learner that plans its own work has no
        prediction on the server: its whole clock."""
        p = self.plan_of(learner)
        return p.compute_s if p is not None else self.clock_s
