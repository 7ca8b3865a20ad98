"""Pyomo formulations of mel-async (formulations never solve).

- :func:`build_relaxed_model`: the relaxed QCLP (8) of paper 000, either with the pairwise
  staleness constraints (8b) exactly as the paper states them (2 * K(K-1)/2 rows), or in the
  equivalent O(K) form tau_min <= tau_k <= tau_max with z = tau_max - tau_min.
- :func:`build_integer_model`: the integer program (7) with t_k <= T and "busy for the whole
  cycle" written as "one more update would not fit", for export to MINLP solvers.
- :func:`build_model`: the model behind a method, for ``melopt export``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mel_opt.lazy import lazy_module
from mel_opt.problems.mel_async.instance import MelAsyncInstance

if TYPE_CHECKING:
    import pyomo.environ as pyo
else:  # Pyomo loads when a model is built, not when the package is imported
    pyo = lazy_module("pyomo.environ")

FORMS = ("pairwise", "minmax")
PAIRWISE_MAX_K = 30  # above this the O(K) form is the default


def default_form(inst: MelAsyncInstance) -> str:
    return "pairwise" if inst.K <= PAIRWISE_MAX_K else "minmax"


def build_relaxed_model(
    inst: MelAsyncInstance,
    form: str = "minmax",
    start_d: np.ndarray | None = None,
) -> pyo.ConcreteModel:
    """Relaxation (8): min z s.t. (8b), C2 tau d + C1 d + C0 = T (8c), sum d = d (8d),
    tau >= 0 (8e), d_l <= d <= d_u (8f).

    Parameters
    ----------
    form : {"pairwise", "minmax"}
        (8b) as |tau_k - tau_l| <= z for all k < l, or tau_min <= tau_k <= tau_max.
    start_d : array, optional
        Starting allocation (default: the equal split); tau and z start consistent with it.
    """
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}")
    K = inst.K
    T = inst.cycle_time
    d0 = (np.full(K, inst.total_samples / K) if start_d is None
          else np.asarray(start_d, dtype=float))
    d0 = np.clip(d0, inst.min_samples, inst.max_samples)
    tau0 = np.maximum((T - inst.c0 - inst.c1 * d0) / (inst.c2 * d0), 0.0)
    m = pyo.ConcreteModel(name=f"mel-async relaxation (8), {form} form")
    m.K = pyo.RangeSet(0, K - 1)
    m.d = pyo.Var(m.K, bounds=(inst.min_samples, inst.max_samples),
                  initialize=lambda _, k: float(d0[k]))
    m.tau = pyo.Var(m.K, bounds=(0, None), initialize=lambda _, k: float(tau0[k]))
    m.z = pyo.Var(bounds=(0, None), initialize=float(tau0.max() - tau0.min()))
    c2, c1, c0 = (list(map(float, a)) for a in (inst.c2, inst.c1, inst.c0))

    m.time = pyo.Constraint(m.K, rule=lambda m, k: c2[k] * m.tau[k] * m.d[k] + c1[k] * m.d[k]
                            + c0[k] == T)  # (8c)
    m.total = pyo.Constraint(expr=sum(m.d[k] for k in m.K) == inst.total_samples)  # (8d)
    if form == "pairwise":
        m.pairs = pyo.Set(initialize=[(k, l) for k in range(K) for l in range(k + 1, K)],
                          dimen=2)
        m.stale_up = pyo.Constraint(m.pairs, rule=lambda m, k, l: m.tau[k] - m.tau[l] <= m.z)
        m.stale_dn = pyo.Constraint(m.pairs, rule=lambda m, k, l: m.tau[l] - m.tau[k] <= m.z)
    else:
        m.tau_max = pyo.Var(initialize=float(tau0.max()))
        m.tau_min = pyo.Var(initialize=float(tau0.min()))
        m.upper = pyo.Constraint(m.K, rule=lambda m, k: m.tau[k] <= m.tau_max)
        m.lower = pyo.Constraint(m.K, rule=lambda m, k: m.tau[k] >= m.tau_min)
        m.spread = pyo.Constraint(expr=m.z == m.tau_max - m.tau_min)
    m.obj = pyo.Objective(expr=m.z, sense=pyo.minimize)  # (8a)
    return m


def build_integer_model(inst: MelAsyncInstance, busy_margin: float = 1e-6) -> pyo.ConcreteModel:
    """The integer problem (7) as a MINLP: integer d_k, tau_k >= 1 and a window [lo, hi].

    (7b) "busy for the whole cycle" is written for whole updates: t_k <= T and
    C2 (tau_k + 1) d_k + C1 d_k + C0 >= T (1 + busy_margin), i.e. one more update would not fit.
    The objective hi - lo is the maximum staleness (6).
    """
    K = inst.K
    T = inst.cycle_time
    tau_cap = float(np.floor((T - inst.c0 - inst.c1 * inst.min_samples)
                             / (inst.c2 * inst.min_samples)).max())
    c2, c1, c0 = (list(map(float, a)) for a in (inst.c2, inst.c1, inst.c0))
    m = pyo.ConcreteModel(name="mel-async integer program (7)")
    m.K = pyo.RangeSet(0, K - 1)
    m.d = pyo.Var(m.K, domain=pyo.Integers, bounds=(inst.min_samples, inst.max_samples))
    m.tau = pyo.Var(m.K, domain=pyo.Integers, bounds=(1, max(1.0, tau_cap)))
    m.lo = pyo.Var(bounds=(1, max(1.0, tau_cap)))
    m.hi = pyo.Var(bounds=(1, max(1.0, tau_cap)))
    m.fits = pyo.Constraint(m.K, rule=lambda m, k: c2[k] * m.tau[k] * m.d[k] + c1[k] * m.d[k]
                            + c0[k] <= T)
    m.busy = pyo.Constraint(m.K, rule=lambda m, k: c2[k] * (m.tau[k] + 1) * m.d[k]
                            + c1[k] * m.d[k] + c0[k] >= T * (1 + busy_margin))
    m.total = pyo.Constraint(expr=sum(m.d[k] for k in m.K) == inst.total_samples)
    m.in_hi = pyo.Constraint(m.K, rule=lambda m, k: m.tau[k] <= m.hi)
    m.in_lo = pyo.Constraint(m.K, rule=lambda m, k: m.tau[k] >= m.lo)
    m.obj = pyo.Objective(expr=m.hi - m.lo, sense=pyo.minimize)
    return m


def build_model(inst: MelAsyncInstance, method: str) -> pyo.ConcreteModel:
    """The Pyomo model behind ``method`` for export: (7) for ``exact``, (8) otherwise."""
    if method == "exact":
        return build_integer_model(inst)
    return build_relaxed_model(inst, form=default_form(inst))
