"""Benchmark of the Pyomo-to-cyipopt adapter on the mel-async bilinear model.

For K learners the model is::

    min  tmax - tmin
    s.t. c2_k tau_k d_k + c1_k d_k + c0_k == T     (each learner uses the whole round T)
         sum_k d_k == D                             (the whole data set is assigned)
         tmin <= tau_k <= tmax
         tau_k >= 0, d_k >= 0

Its optimum has every tau_k equal to the tau* solving sum_k (T - c0_k) / (c2_k tau + c1_k) == D,
which the script finds by bisection to check each solve. Reported per K: time to build the
Pyomo model, to compile it, inside Ipopt, total (compile + Ipopt), iterations, and the cost of
one call of each callback (objective f, gradient, constraints g, Jacobian J, Hessian H).

Run ``python benchmarks/bench_ipopt_adapter.py --help`` for options.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyomo.environ as pyo

from mel_opt.nlp import compile_nlp
from mel_opt.solvers.ipopt import available, solve_nlp, version


@dataclass(frozen=True)
class Instance:
    """Coefficients of one random mel-async instance (feasible by construction)."""

    c2: np.ndarray
    c1: np.ndarray
    c0: np.ndarray
    T: float
    D: float


def make_instance(k: int, rng: np.random.Generator) -> Instance:
    """Draw coefficients in plausible units (seconds, samples).

    c2 (s per sample per local iteration), c1 (s per sample sent), c0 (s of model exchange).
    D is set well below sum_k (T - c0_k) / c1_k, the data that fits with tau -> 0, so a
    positive common tau exists.
    """
    c2 = rng.uniform(1e-3, 5e-3, k)
    c1 = rng.uniform(1e-3, 1e-2, k)
    c0 = rng.uniform(0.5, 2.0, k)
    T = 60.0
    D = 500.0 * k
    return Instance(c2, c1, c0, T, D)


def common_tau(inst: Instance) -> float:
    """Solve sum_k (T - c0_k) / (c2_k tau + c1_k) == D by bisection (decreasing in tau)."""

    def total(tau: float) -> float:
        return float(np.sum((inst.T - inst.c0) / (inst.c2 * tau + inst.c1)))

    lo, hi = 0.0, 1.0
    while total(hi) > inst.D:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if total(mid) > inst.D:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def build_model(inst: Instance) -> pyo.ConcreteModel:
    """The mel-async staleness model with tmax/tmin (2K + 1 constraints, 2K + 2 variables)."""
    k = len(inst.c2)
    m = pyo.ConcreteModel()
    m.K = pyo.RangeSet(0, k - 1)
    m.tau = pyo.Var(m.K, domain=pyo.NonNegativeReals)
    m.d = pyo.Var(m.K, domain=pyo.NonNegativeReals)
    m.tmax = pyo.Var()
    m.tmin = pyo.Var()
    c2, c1, c0 = inst.c2.tolist(), inst.c1.tolist(), inst.c0.tolist()
    m.time = pyo.Constraint(
        m.K, rule=lambda m, i: c2[i] * m.tau[i] * m.d[i] + c1[i] * m.d[i] + c0[i] == inst.T
    )
    m.data = pyo.Constraint(expr=sum(m.d[i] for i in m.K) == inst.D)
    m.upper = pyo.Constraint(m.K, rule=lambda m, i: m.tau[i] <= m.tmax)
    m.lower = pyo.Constraint(m.K, rule=lambda m, i: m.tmin <= m.tau[i])
    m.obj = pyo.Objective(expr=m.tmax - m.tmin)
    return m


def per_call_us(fn: Callable[[], Any], repeat: int) -> float:
    """Mean microseconds of one call of ``fn``."""
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat * 1e6


def run(k: int, seed: int, repeat: int, cold: bool = False) -> dict[str, Any]:
    rng = np.random.default_rng(seed + k)
    inst = make_instance(k, rng)
    t0 = time.perf_counter()
    model = build_model(inst)
    model_s = time.perf_counter() - t0
    if not cold:
        # A natural start: equal shares of the data, tau from each learner's time budget.
        share = inst.D / k
        for i in range(k):
            model.d[i].value = share
            model.tau[i].value = (inst.T - inst.c0[i] - inst.c1[i] * share) / (inst.c2[i] * share)
    res = solve_nlp(model)
    tau = np.array([model.tau[i].value for i in range(k)])
    err = float(np.max(np.abs(tau - common_tau(inst))))

    nlp = compile_nlp(model)
    x = res.x
    lam = np.ones(nlp.m)
    return {
        "K": k,
        "n": nlp.n,
        "m": nlp.m,
        "model_s": model_s,
        "compile_s": res.build_time_s,
        "ipopt_s": res.solve_time_s,
        "total_s": res.build_time_s + res.solve_time_s,
        "iters": res.iterations,
        "status": res.termination.value,
        "tau_err": err,
        "f_us": per_call_us(lambda: nlp.objective(x), repeat),
        "grad_us": per_call_us(lambda: nlp.gradient(x), repeat),
        "g_us": per_call_us(lambda: nlp.constraints_values(x), repeat),
        "jac_us": per_call_us(lambda: nlp.jacobian(x), repeat),
        "hess_us": per_call_us(lambda: nlp.hessian(x, lam, 1.0), repeat),
    }


COLUMNS = [
    ("K", "{:d}"),
    ("n", "{:d}"),
    ("m", "{:d}"),
    ("model_s", "{:.3f}"),
    ("compile_s", "{:.3f}"),
    ("ipopt_s", "{:.3f}"),
    ("total_s", "{:.3f}"),
    ("iters", "{:d}"),
    ("status", "{}"),
    ("tau_err", "{:.1e}"),
    ("f_us", "{:.1f}"),
    ("grad_us", "{:.1f}"),
    ("g_us", "{:.1f}"),
    ("jac_us", "{:.1f}"),
    ("hess_us", "{:.1f}"),
]


def format_table(rows: list[dict[str, Any]]) -> str:
    cells = [[name for name, _ in COLUMNS]]
    cells += [[fmt.format(row[name]) for name, fmt in COLUMNS] for row in rows]
    widths = [max(len(r[c]) for r in cells) for c in range(len(COLUMNS))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[50, 100, 200, 400, 800], help="values of K"
    )
    parser.add_argument("--seed", type=int, default=20240501, help="random seed")
    parser.add_argument("--repeat", type=int, default=200, help="calls per callback timing")
    parser.add_argument(
        "--target", type=float, default=2.0, help="seconds allowed for K=400 (compile + Ipopt)"
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="start from unset values (0 projected into the bounds) instead of equal shares",
    )
    args = parser.parse_args(argv)

    avail = available()
    if not avail:
        print(f"cyipopt unavailable: {avail.reason}", file=sys.stderr)
        return 1
    start = "cold start" if args.cold else "equal-share start"
    print(f"{version()}; seed {args.seed}; {start}; seconds, callback costs in microseconds")
    rows = [run(k, args.seed, args.repeat, args.cold) for k in args.sizes]
    print(format_table(rows))
    failed = [r for r in rows if r["status"] != "locally_optimal" or r["tau_err"] > 1e-4]
    slow = [r for r in rows if r["K"] == 400 and r["total_s"] > args.target]
    for r in failed:
        print(f"K={r['K']}: status {r['status']}, |tau - tau*| = {r['tau_err']:.2e}")
    for r in slow:
        print(f"K=400 took {r['total_s']:.2f} s > target {args.target:.2f} s")
    return 1 if failed or slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
