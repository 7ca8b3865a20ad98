"""The one round loop of a live run, over any exchange (:mod:`mel_opt.live.exchange`).

:func:`run_live` connects the nodes, probes them (subset benchmarking: each node's learner and
its first speed, :meth:`~mel_opt.live.rounds.LiveRun.accept_probe`), then runs the scheme of
the run (:mod:`mel_opt.schemes`) by the loop it declares:

- mel_opt's allocation: synchronous rounds (:func:`allocation_rounds`). Before each, the
  missing learners are probed again (those that answer are back), and, in a run with the
  learners' availability (:mod:`mel_opt.live.availability`), the nodes that never answered a
  probe (paused from the start: those that answer join); the round is planned
  (:meth:`~mel_opt.live.rounds.LiveRun.plan`), its learners claim their work first where they
  plan their own and the exchange carries samples (:mod:`mel_opt.live.claims`), the orders
  go out and the answers come back within the round's wait, and the round is closed
  (:meth:`~mel_opt.live.rounds.LiveRun.close`). A round that cannot be planned ends the run
  (its outputs say why);
- an asynchronous scheme: FedBuff's server (:func:`mel_opt.live.fedbuff.serve_buffered`) on
  the same exchange.

``on_round`` is called with the run after the probe and after every round or server step
(the outputs are written there), and once more when the run ends early.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from mel_opt.errors import MelOptError, UsageError
from mel_opt.live import claims
from mel_opt.live.exchange import PROBE, TRAIN, Arrival, Asked, Exchange
from mel_opt.live.plan import Answer, RoundPlan
from mel_opt.live.rounds import LiveRun
from mel_opt.schemes import Loop

__all__ = ["allocation_rounds", "answers_of", "probe", "rejoin", "run_live"]

Observer = Callable[[LiveRun], None]
Log = Callable[[str], None]


def _nothing(_: object) -> None:
    """An observer or a log that does nothing."""


def run_live(run: LiveRun, exchange: Exchange, on_round: Observer = _nothing,
             log: Log = _nothing) -> LiveRun:
    """Probe, then the run's scheme for ``run.settings.rounds`` rounds (or server steps)."""
    nodes = exchange.nodes()
    log(f"{len(nodes)} node(s) connected")
    # a pool probes its learners a few at a time: the wait grows with their number
    probe(run, exchange, nodes, max(exchange.first_wait_s, run.probe_wait_s(len(nodes))))
    log(f"probe: {len(run.fleet.nodes)} learner(s) measured")
    on_round(run)
    if run.scheme.loop is Loop.BUFFERED:
        from mel_opt.live.fedbuff import serve_buffered

        serve_buffered(run, exchange, on_round, log)
    elif run.scheme.loop is Loop.ALLOCATION:
        # with the learners' availability, a node paused at the probe joins when it answers
        late = nodes if run.settings.availability is not None else ()
        allocation_rounds(run, exchange, on_round, log, late)
    else:  # the registry says where each scheme runs; the settings refuse the others
        raise UsageError(f"{run.scheme.name} does not run live")
    return run


def _heard(run: LiveRun, asked: Asked) -> None:
    """Learners whose late answers came during an exchange are alive: back in the plans."""
    run.fleet.back(k for n in asked.heard if (k := run.fleet.learner_at(n)) is not None)


def probe(run: LiveRun, exchange: Exchange, nodes: Iterable[int], wait_s: float) -> None:
    """Subset benchmarking on every node; maps node ids to learners."""
    nodes = list(nodes)
    content = run.probe_order(len(nodes)).encode()
    asked = exchange.ask({n: content for n in nodes}, PROBE, "probe", wait_s, 0)
    for a in asked.arrivals:
        if a.records is None:
            run.warn(f"probe: node {a.node} failed: {a.why}" if a.failed else
                     f"probe: node {a.node}'s reply ignored: {a.why}")
            continue
        run.accept_probe(a.node, a.records, a.elapsed_s)
    run.fleet.fold_pooled()
    _heard(run, asked)


def rejoin(run: LiveRun, exchange: Exchange, r: int, log: Log = _nothing,
           nodes: Iterable[int] = ()) -> None:
    """Probe the missing learners again before round ``r``; those that answer are back. The
    ``nodes`` of the run that never answered a probe are probed too; those that answer join
    (:meth:`~mel_opt.live.rounds.LiveRun.accept_probe`)."""
    unmapped = [n for n in nodes if run.fleet.learner_at(n) is None]
    if not run.fleet.missing and not unmapped:
        return
    missing = sorted(run.fleet.missing)
    content = run.probe_order(max(len(run.fleet.nodes), 1)).encode()
    wait = run.rejoin_wait_s(missing)
    if unmapped:
        wait = max(wait, run.probe_wait_s(len(unmapped)))
    asked = exchange.ask({**{run.fleet.node_of(k): content for k in missing},
                          **{n: content for n in unmapped}}, PROBE, "rejoin", wait, r)
    for a in asked.arrivals:
        k = run.fleet.learner_at(a.node)
        if k is None and a.records is not None:
            run.accept_probe(a.node, a.records, a.elapsed_s)
            if (k := run.fleet.learner_at(a.node)) is not None:
                log(f"learner {k} answers its first probe")
        elif k is not None and not a.failed:
            run.fleet.back([k])
            log(f"learner {k} answers again")
    _heard(run, asked)


def answers_of(run: LiveRun, r: int, arrivals: Iterable[Arrival]) -> list[Answer]:
    """The learners' answers among ``arrivals`` (a failed or unreadable one is dropped with a
    warning; one from a node of no learner silently)."""
    out = []
    for a in arrivals:
        learner = run.fleet.learner_at(a.node)
        if learner is None:
            continue
        if a.records is None:
            run.warn(f"round {r}: learner {learner} failed: {a.why}" if a.failed else
                     f"round {r}: learner {learner}'s reply ignored: {a.why}")
            continue
        out.append(Answer(learner, a.records, a.elapsed_s))
    return out


def _claim(run: LiveRun, exchange: Exchange, plan: RoundPlan) -> RoundPlan:
    """The round's claims first (:mod:`mel_opt.live.claims`): each learner's plan, then the
    round with the claimed samples in its orders."""
    orders = claims.claim_orders(plan)
    asked = exchange.ask({run.fleet.node_of(k): o.encode() for k, o in orders.items()}, TRAIN,
                         f"claim-{plan.round}",
                         claims.claim_wait_s(run.fleet, plan, run.settings.grace), plan.round)
    _heard(run, asked)
    return run.take_claims(plan, answers_of(run, plan.round, asked.arrivals))


def allocation_rounds(run: LiveRun, exchange: Exchange, on_round: Observer = _nothing,
                      log: Log = _nothing, nodes: Iterable[int] = ()) -> None:
    """``run.settings.rounds`` synchronous rounds of the method's allocation, each closed at
    its own wait (module docstring); ``nodes``: the run's nodes (those that never answered a
    probe are probed again before each round)."""
    nodes = list(nodes)
    for r in range(1, run.settings.rounds + 1):
        rejoin(run, exchange, r, log, nodes)
        exchange.lap()  # the round's time counts from its planning
        try:
            plan = run.plan(r)
        except MelOptError as exc:  # no learner left, or no allocation for them
            run.stop(r, str(exc))
            log(f"round {r}: stopped: {exc}")
            on_round(run)  # the outputs say why the run ended
            break
        # where the learners claim first, the orders (and their models) are encoded once,
        # after the claims
        if claims.wanted(run.cycle, run.settings.shards, exchange.carries_data, plan):
            plan = _claim(run, exchange, plan)
            log(f"round {r}: {len(plan.claims)} claims, {len(plan.orders)} learners sent "
                "their shards")
        if plan.adapted is not None:
            log(f"round {r}: adapted: {plan.adapted.text}")
        wait = run.wait_s(plan)
        log(f"round {r}: {len(plan.orders)} learners, waiting up to {wait:.3g} s")
        asked = exchange.ask({run.fleet.node_of(k): o.encode() for k, o in plan.orders.items()},
                             TRAIN, str(r), wait, r)
        _heard(run, asked)
        run.close(plan, answers_of(run, r, asked.arrivals), exchange.lap())
        last = run.log.last
        log(f"round {r}: accuracy {last.evaluation['accuracy']:.3f}, {last.learners} "
            f"answered, {len(run.fleet.missing)} missing, {last.round_wall_s:.3g} s")
        on_round(run)
        if run.finished:
            log(f"round {r}: the run ends here ({run.spec.name}: the budget is spent)"
                if not plan.last else f"round {r}: the method marked this round the last one")
            break
