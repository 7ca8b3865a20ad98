"""Claims: learners that plan their own work claim it first, and the server ships its data.

In DAB as the thesis runs it (Algorithm 10) the orchestrator holds the data set: each learner
decides from its own benchmark how many shards a_k it can take by the deadline (Eq. (3.5)),
asks for them, and downloads the model and its a_k shards across its link before training.
Live, with ``shards = shipped`` (the default), a round of such a problem has two exchanges:

1. every learner gets its brief as a *claim* (:class:`~mel_opt.problems.messages.TrainOrder`
   with ``claim`` set and no model) and answers with the plan it made
   (:meth:`~mel_opt.problems.learning.LearnerSide.own_plan`), training nothing;
2. every learner that claimed work gets its order with the model and the samples it claimed
   (``shipped``: float32 features, as many bytes as the thesis's shards, and their labels),
   drawn by the server from that learner's part of the data set; a learner that claimed none
   halts (lines 18-19 of the algorithm) and gets no order.

So a shard crosses the learner's link as the model does, and its transfer is part of the
reply's measured round trip (``comm_measured_s``) beside the file's model of it
(``comm_emulated_s``). A claim that cannot be read is ignored with its reason (the learner's
row says ``ignored``), as is a claim of more samples than one message can carry
(:data:`MAX_SHIPPED_BYTES`); a learner that does not answer its claim is missing.

With ``shards = held``, or where there is no link to cross (the in-process engine), the
learners draw their shards from the parts they hold and a round is one exchange.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from mel_opt.live import learner as L
from mel_opt.live.fleet import Fleet
from mel_opt.live.plan import Answer, RoundPlan
from mel_opt.problems.learning import LearnerPlan, LearningCycle
from mel_opt.problems.messages import DataSpec, ReplyError, TrainOrder, TrainReport
from mel_opt.training.data import Dataset

__all__ = ["CLAIM_S", "MAX_SHIPPED_BYTES", "Claimed", "claim_orders", "claim_wait_s",
           "read_claim", "take_claims", "wanted"]

#: Seconds allowed per learner for making its plan (it trains nothing).
CLAIM_S = 0.5
#: The most bytes of samples one order ships: half of the 512 MiB a Flower message may carry
#: (the rest is the model's).
MAX_SHIPPED_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Claimed:
    """What the claims of a round decided, for the run to apply.

    Attributes
    ----------
    plan : RoundPlan
        The round with each claiming learner's order carrying the model and its samples.
    missing : frozenset of int
        Learners that did not answer their claim.
    warnings : tuple of str
        One line per claim refused.
    """

    plan: RoundPlan
    missing: frozenset[int] = frozenset()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def wanted(cycle: LearningCycle, shards: str, carried: bool, plan: RoundPlan) -> bool:
    """Whether round ``plan`` starts with claims: the run ships data (``shards`` is
    ``shipped`` and its exchange ``carried`` samples across a link), and its learners plan
    their own work and claim it."""
    side = cycle.learner_side
    return (shards == "shipped" and carried and side.plans_own_work and side.claims_data
            and any(order.brief for order in plan.orders.values()))


def claim_orders(plan: RoundPlan) -> dict[int, TrainOrder]:
    """Each learner's claim: its order without the model, asking only for its plan."""
    return {k: dataclasses.replace(order, claim=True, model=[])
            for k, order in plan.orders.items()}


def claim_wait_s(fleet: Fleet, plan: RoundPlan, grace: float) -> float:
    """How long the server waits for the claims [s]: each learner's measured messaging and
    half as much again, plus the time to plan, plus the grace."""
    return fleet.queue_s([1.5 * fleet.overhead_s(k) + CLAIM_S for k in plan.orders]) + grace


def read_claim(learner: int, answer: Answer, sample_bytes: float) -> LearnerPlan | str:
    """The plan ``learner`` claimed in ``answer``, or why the claim is ignored."""
    try:
        report = TrainReport.decode(answer.records)
    except ReplyError as exc:
        return str(exc)
    if report.learner != learner:
        return f"it reports partition id {report.learner}, its node holds learner {learner}"
    p = report.plan
    if p is None:
        return "its claim carries no plan"
    if p.samples < 0 or p.passes < 0 or p.weight < 0:
        return (f"it claims {p.samples} samples, {p.passes} passes and weight {p.weight:g}; "
                "none may be negative")
    size = p.samples * sample_bytes
    if size > MAX_SHIPPED_BYTES:
        return (f"it claims {p.samples} samples ({size:.3g} bytes), more than an order "
                f"ships ({MAX_SHIPPED_BYTES} bytes)")
    return dataclasses.replace(p, learner=learner)


def take_claims(plan: RoundPlan, answers: Sequence[Answer], spec: DataSpec, data: Dataset,
                sample_bytes: float) -> Claimed:
    """Round ``plan`` once its learners claimed: an order with the model and the shipped
    samples (drawn from the learner's part of ``data`` as ``spec`` splits it) for each
    learner that claimed work (its claimed plan as the order's), none for a learner that
    halted; a learner that did not answer is missing."""
    claims: dict[int, LearnerPlan] = {}
    refused: dict[int, str] = {}
    warnings: list[str] = []
    for answer in answers:
        k = answer.learner
        if k not in plan.orders or k in claims or k in refused:
            continue
        got = read_claim(k, answer, sample_bytes)
        if isinstance(got, str):
            refused[k] = got
            warnings.append(f"round {plan.round}: learner {k}'s claim ignored: {got}")
        else:
            claims[k] = got
    orders: dict[int, TrainOrder] = {}
    for k, p in claims.items():
        if p.samples == 0:
            continue  # it halts
        order = plan.orders[k]
        samples = L.ship(L.local_data(spec, k), p.samples,
                         L.round_seed(order.seed, order.round, k), data.classes)
        orders[k] = dataclasses.replace(order, brief={}, samples=p.samples, passes=p.passes,
                                        predicted_s=p.predicted_s, comm_s=p.comm_s,
                                        shipped=samples)
    claimed = dataclasses.replace(plan, orders=orders, claims=claims, claim_refused=refused,
                                  claimed_by=tuple(sorted(plan.orders)))
    return Claimed(claimed, frozenset(set(plan.orders) - set(claims) - set(refused)),
                   tuple(warnings))
