"""Methods for dab: the decentralised DAB bound and the centralised CSA baseline.

``dab``  (thesis Chapter 3, Algorithm 10): each learner computes from its own benchmarks c_k
         and b_k the largest whole number of shards a_k it can download, train for mu passes
         and upload strictly before the deadline D (Eq. 3.5). The orchestrator only ever
         receives the a_k; learners with a_k = 0 halt (Algorithm 10, lines 18-19).
``csa``  the Centralised Staleness-Aware allocation the thesis compares against (its
         reference [6] in paper 002 is paper 000): with full knowledge of every c_k and b_k it
         splits a fixed ``total_shards`` and lets each learner do as many passes as fit, with
         the least staleness. That is the mel-async problem, solved by its ``exact`` method.
``csa-thesis``  the CSA rule as the thesis author's code applied it (``author_csa.py``):
         rounded (c_k + b_k)-weighted shares of ``total_shards`` and rounded passes with a
         floor of one. The deadline and the total are targets it may miss: its solution
         declares them soft, and the verifier reports the miss (``deadline_met``,
         ``truancy_pct``, ``shards_off_total``) instead of rejecting the answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.problems.base import MethodOutput, SolveOptions
from mel_opt.problems.dab.author_csa import author_csa
from mel_opt.problems.dab.instance import DabInstance
from mel_opt.problems.dab.latency import eta, one_shard_time, shard_bound
from mel_opt.result import SolverInfo
from mel_opt.status import TerminationCondition

_DAB = SolverInfo("mel_opt DAB bound (Eq. 3.5)", "1")

PRIVACY_NOTE = (
    "privacy: the orchestrator receives only a_k per learner; train rates c_k and "
    "bandwidths b_k stay on the learners"
)


def _names(inst: DabInstance, mask: np.ndarray, limit: int = 8) -> str:
    names = [inst.learner_names[k] for k in np.flatnonzero(mask)]
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


# Above 2^53 whole numbers are no longer exact in floating point: Eq. (3.5) cannot tell a_k
# from a_k + 1 there (nor fit int64 much further on).
_EXACT_WHOLE = 2.0**53


def _beyond_whole_numbers(inst: DabInstance) -> str:
    """Why a_k cannot be computed exactly ('' when it can): D over the time one more shard
    takes (eta_k is affine in a_k, Eq. 3.4) bounds a_k; past 2^53 the bound is not exact."""
    def at(n: float) -> np.ndarray:
        return np.asarray(eta(n, iterations=inst.iterations, model_bytes=inst.model_bytes,
                              shard_bytes=inst.shard_bytes, train_rate=inst.train_rate,
                              bandwidth=inst.bandwidth), dtype=float)

    with np.errstate(all="ignore"):
        per_shard = at(2.0) - at(1.0)
        most = inst.deadline / per_shard
    bad = ~(np.isfinite(most) & (most < _EXACT_WHOLE))
    if not bad.any():
        return ""
    k = int(np.flatnonzero(bad)[0])
    return (f"learner {inst.learner_names[k]!r} could take about {float(most[k]):.3g} shards "
            f"before the deadline D = {inst.deadline:g} s: beyond 2^53, where whole numbers of "
            "shards are no longer exact")


def solve_dab(inst: DabInstance, opts: SolveOptions) -> MethodOutput:
    """DAB: a_k from Eq. (3.5), the largest whole number of shards with eta_k < D.

    Returns the solution ``{"shards": [a_k]}`` (every learner trains mu passes). Learners that
    cannot train even one shard before D get 0 and are reported as excluded. The extras hold
    ``orchestrator_view`` (name -> a_k): everything the orchestrator learns. A deadline so
    long that some a_k exceeds 2^53 ends with status ``error`` (no exact whole number).
    """
    too_many = _beyond_whole_numbers(inst)
    if too_many:
        return MethodOutput.nothing(TerminationCondition.ERROR, _DAB, {}, too_many)
    a = shard_bound(inst.deadline, inst.iterations, inst.model_bytes, inst.shard_bytes,
                    inst.train_rate, inst.bandwidth)
    excluded = a < 1
    view = {name: int(n) for name, n in zip(inst.learner_names, a, strict=True)}
    extras: dict[str, Any] = {"orchestrator_view": view}
    if excluded.all():
        t1 = one_shard_time(inst.iterations, inst.model_bytes, inst.shard_bytes,
                            inst.train_rate, inst.bandwidth)
        return MethodOutput.nothing(
            TerminationCondition.INFEASIBLE, _DAB, extras,
            f"no learner can download, train ({inst.iterations} passes) and upload even one "
            f"shard before the deadline D = {inst.deadline:g} s (fastest needs "
            f"{float(t1.min()):.4g} s)",
        )
    msg = PRIVACY_NOTE
    if excluded.any():
        msg += f"; excluded (cannot train one shard before the deadline): {_names(inst, excluded)}"
    return MethodOutput.optimal({"shards": a.tolist()}, _DAB, extras, msg)


def mel_async_instance(inst: DabInstance, used: np.ndarray | None = None) -> Any:
    """The mel-async instance of CSA: the learners ``used`` (default all), d in shards.

    Coefficient mapping (paper 000 Eq. 5, t_k = C2_k tau_k d_k + C1_k d_k + C0_k, against
    thesis Eq. 3.4 with mu -> tau_k and a_k -> d_k):

    - C2_k = 1 / c_k [s per shard per pass]: the training rate c_k is in shards/s for one pass;
    - C1_k = Omega_d / b_k [s per shard]: shards are downloaded at b_k / Omega_d shards/s
      (``bandwidth_Bps`` / ``shard_bytes``);
    - C0_k = 2 Omega_m / b_k [s]: the model (``model_bytes``) goes down and back up.

    T = ``deadline_s``, d = ``total_shards``, d_l = ``min_shards``, d_u = ``max_shards``
    (default ``total_shards``), mode ``task-parallel``.
    """
    from mel_opt.problems.mel_async.instance import MelAsyncInstance

    if inst.total_shards is None:
        raise UsageError("method 'csa' needs total_shards in the instance (the number of "
                         "shards the centralised allocation splits)")
    mask = np.ones(inst.K, dtype=bool) if used is None else np.asarray(used, dtype=bool)
    b = inst.bandwidth[mask]
    return MelAsyncInstance(
        name=f"{inst.name}-csa",
        cycle_time=inst.deadline,
        total_samples=inst.total_shards,
        min_samples=inst.min_shards,
        max_samples=inst.total_shards if inst.max_shards is None else inst.max_shards,
        c2=np.array(1.0 / inst.train_rate[mask]),
        c1=np.array(inst.shard_bytes / b),
        c0=np.array(2.0 * inst.model_bytes / b),
        learner_names=tuple(n for n, m in zip(inst.learner_names, mask, strict=True) if m),
        mode="task-parallel",
        description=f"CSA allocation for dab instance {inst.name!r} (coefficients from "
                    "train_rate, bandwidth_Bps, shard_bytes and model_bytes)",
    )


def solve_csa(inst: DabInstance, opts: SolveOptions) -> MethodOutput:
    """CSA: the mel-async ``exact`` allocation of ``total_shards`` with full knowledge.

    Learners that cannot finish one pass over ``min_shards`` before D are left out (CSA knows
    every device, so it does not recruit them); the rest go to
    :func:`mel_opt.api.solve` (mel-async, ``exact``) through :func:`mel_async_instance`.
    The answer ``{"d", "tau"}`` comes back as ``{"shards", "tau"}`` with zeros for the
    learners left out; mel-async's ``max_staleness`` and ``avg_staleness`` are passed on as
    extras (the dab verifier recomputes both over the learners used).
    """
    from mel_opt.api import solve

    if inst.total_shards is None:
        raise UsageError("method 'csa' needs total_shards in the instance (the number of "
                         "shards the centralised allocation splits)")
    solver = SolverInfo("mel-async exact (via csa)", "1")
    dl = inst.min_shards
    t_min = eta(dl, iterations=1, model_bytes=inst.model_bytes, shard_bytes=inst.shard_bytes,
                train_rate=inst.train_rate, bandwidth=inst.bandwidth)
    used = t_min <= inst.deadline
    out_msg = ""
    if not used.all():
        out_msg = (f"left out (cannot do one pass over min_shards = {dl} before the deadline): "
                   f"{_names(inst, ~used)}")
    n_used = int(used.sum())
    du = inst.total_shards if inst.max_shards is None else inst.max_shards
    why = ""
    if n_used == 0:
        why = (f"no learner can do one pass over min_shards = {dl} before the deadline "
               f"D = {inst.deadline:g} s")
    elif n_used * dl > inst.total_shards:
        why = (f"{n_used} usable learners x min_shards = {dl} exceeds total_shards = "
               f"{inst.total_shards}")
    elif n_used * du < inst.total_shards:
        why = (f"{n_used} usable learners x max_shards = {du} is less than total_shards = "
               f"{inst.total_shards}")
    if why:
        return MethodOutput.nothing(TerminationCondition.INFEASIBLE, solver, {},
                                    why + (f"; {out_msg}" if out_msg else ""))

    res = solve(mel_async_instance(inst, used), "exact", time_limit=opts.time_limit)
    solver = SolverInfo(f"mel-async exact ({res.solver.name})", res.solver.version)
    if not res.ok:
        note = res.message or f"mel-async returned {res.status.value}"
        term = res.termination
        if res.verification is not None and not res.verification.feasible:
            term, note = (TerminationCondition.ERROR,
                          f"mel-async answer failed its verification: {note}")
        return MethodOutput.nothing(term, solver, {}, f"CSA (mel-async exact): {note}"
                                    + (f"; {out_msg}" if out_msg else ""))
    shards = np.zeros(inst.K, dtype=np.int64)
    tau = np.zeros(inst.K, dtype=np.int64)
    shards[used] = np.asarray(res.solution["d"], dtype=np.int64)
    tau[used] = np.asarray(res.solution["tau"], dtype=np.int64)
    extras = {
        "mel_async_max_staleness": res.metrics.get("max_staleness"),
        "mel_async_avg_staleness": res.metrics.get("avg_staleness"),
        "mel_async_status": res.status.value,
    }
    msg = "centralised: the orchestrator knows every c_k and b_k; minimum maximum staleness"
    if out_msg:
        msg += f"; {out_msg}"
    return MethodOutput(res.termination, res.solution_status,
                        {"shards": shards.tolist(), "tau": tau.tolist()}, solver, extras, msg)


def solve_csa_thesis(inst: DabInstance, opts: SolveOptions) -> MethodOutput:
    """The thesis author's CSA rule (:func:`~mel_opt.problems.dab.author_csa.author_csa`).

    Returns ``{"shards", "tau", "soft_targets": True}`` with termination ``feasible``: the rule
    always gives an answer, and whether it meets the deadline is what the thesis measures
    (its truancy, Figs. 3.6-3.7), so the verifier reports the deadline and the total as
    targets (met or missed by how much), not as constraints.
    """
    if inst.total_shards is None:
        raise UsageError("method 'csa-thesis' needs total_shards in the instance (the number "
                         "of shards the centralised allocation splits)")
    sol: dict[str, Any] = {**author_csa(inst), "soft_targets": True}
    return MethodOutput.feasible(
        sol, SolverInfo("thesis author's CSA rule", "1"), {},
        "centralised rule of the thesis' experiment code: (c_k + b_k)-weighted shares of "
        "total_shards and passes rounded, at least one; it may miss the deadline (see "
        "deadline_met and truancy_pct)")
