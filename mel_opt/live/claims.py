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
from typing import TYPE_CHECKING

from mel_opt.live import learner as L
from mel_opt.problems.learning import LearnerPlan, sample_bytes
from mel_opt.problems.messages import ReplyError, TrainOrder, TrainReport

if TYPE_CHECKING:
    from mel_opt.live.rounds import Answer, LiveRun, RoundPlan

__all__ = ["claim_orders", "claim_wait_s", "read_claim", "take_claims", "wanted"]

#: Seconds allowed per learner for making its plan (it trains nothing).
CLAIM_S = 0.5
#: The most bytes of samples one order ships: half of the 512 MiB a Flower message may carry
#: (the rest is the model's).
MAX_SHIPPED_BYTES = 256 * 2**20


def wanted(run: LiveRun, plan: RoundPlan) -> bool:
    """Whether round ``plan`` starts with claims: the run ships data and its learners plan
    their own work and claim it."""
    side = run.cycle.learner_side
    return (run.settings.shards == "shipped" and side.plans_own_work and side.claims_data
            and any(order.brief for order in plan.orders.values()))


def claim_orders(plan: RoundPlan) -> dict[int, TrainOrder]:
    """Each learner's claim: its order without the model, asking only for its plan."""
    return {k: dataclasses.replace(order, claim=True, model=[])
            for k, order in plan.orders.items()}


def claim_wait_s(run: LiveRun, plan: RoundPlan) -> float:
    """How long the server waits for the claims [s]: each learner's measured messaging and
    half as much again, plus the time to plan, plus the grace."""
    return run.queue_s([1.5 * run.overhead_s(k) + CLAIM_S for k in plan.orders]) + \
        run.settings.grace


def read_claim(run: LiveRun, learner: int, answer: Answer) -> LearnerPlan | str:
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
    size = p.samples * sample_bytes(run.data.features)
    if size > MAX_SHIPPED_BYTES:
        return (f"it claims {p.samples} samples ({size:.3g} bytes), more than an order "
                f"ships ({MAX_SHIPPED_BYTES} bytes)")
    return dataclasses.replace(p, learner=learner)


def take_claims(run: LiveRun, plan: RoundPlan, answers: Sequence[Answer]) -> RoundPlan:
    """Round ``plan`` once its learners claimed: an order with the model and the shipped
    samples for each learner that claimed work (its claimed plan as the order's), none for a
    learner that halted; a learner that did not answer is missing."""
    claims: dict[int, LearnerPlan] = {}
    refused: dict[int, str] = {}
    for answer in answers:
        k = answer.learner
        if k not in plan.orders or k in claims or k in refused:
            continue
        got = read_claim(run, k, answer)
        if isinstance(got, str):
            refused[k] = got
            run.warn(f"round {plan.round}: learner {k}'s claim ignored: {got}")
        else:
            claims[k] = got
    run.missing |= set(plan.orders) - set(claims) - set(refused)
    spec = run.settings.data_spec(len(run.nodes))
    orders: dict[int, TrainOrder] = {}
    for k, p in claims.items():
        if p.samples == 0:
            continue  # it halts
        order = plan.orders[k]
        samples = L.ship(L.local_data(spec, k), p.samples,
                         L.round_seed(order.seed, order.round, k), run.data.classes)
        orders[k] = dataclasses.replace(order, brief={}, samples=p.samples, passes=p.passes,
                                        predicted_s=p.predicted_s, comm_s=p.comm_s,
                                        shipped=samples)
    return dataclasses.replace(plan, orders=orders, claims=claims, claim_refused=refused,
                               claimed_by=tuple(sorted(plan.orders)))
