"""med: time to proven optimality of ``exact`` and ``highs`` (and Gurobi as an anchor).

Part 1, the thesis preset (``mays2023``, both experiments) for N = 4..10 learners and M = 1..4
tasks; part 2, random heterogeneous learners (``hetero``, every learner different, budget
binding or not) up to N = 50, M = 5, with a time limit (for ``exact`` also how far above the
final bound its incumbent was after the local search and after the iterated local search);
part 3, where gurobipy is installed, Gurobi on the author's formulation (integer ceiling per
task, indicator constraints) as the anchor the issue quotes.

    python benchmarks/bench_med_solvers.py                 # everything (about 20-30 min)
    python benchmarks/bench_med_solvers.py --part preset --seeds 3
    python benchmarks/bench_med_solvers.py --part hetero --sizes 20x5,50x5 --time-limit 60
    # issue 24 (beyond the thesis's scale): binding budget, 5 seeds, gap beside HiGHS's
    python benchmarks/bench_med_solvers.py --part hetero --sizes 50x5,100x10 --seeds 5 \
        --budgets binding --time-limit 60
    # issue 37: exact alone, 10 seeds of 100 x 10 (about 11 min)
    python benchmarks/bench_med_solvers.py --part hetero --sizes 100x10 --seeds 10 \
        --budgets binding --methods exact --time-limit 60
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from rich.console import Console
from rich.table import Table

from mel_opt.api import parse_instance, solve
from mel_opt.problems.med.generate import generate
from mel_opt.problems.med.latency import coefficients

console = Console(width=max(Console().width, 120))  # the hetero table needs ~110 columns


def _run(inst, method: str, limit: float):
    t0 = time.perf_counter()
    res = solve(inst, method, time_limit=limit)
    return res, time.perf_counter() - t0


def part_preset(seeds: int, limit: float) -> None:
    for experiment in ("learners", "tasks"):
        table = Table(title=f"mays2023 ({experiment} experiment): median wall time over "
                      f"{seeds} seed(s) to proven optimality [s]")
        for col in ("N", "M", "exact", "highs", "highs optimal", "agree"):
            table.add_column(col, justify="right")
        all_exact, all_highs = [], []
        for n in range(4, 11):
            for m in range(1, 5):
                te, th, proven, agree = [], [], 0, 0
                for seed in range(seeds):
                    inst = parse_instance(generate("mays2023", learners=n, tasks=m, seed=seed,
                                                   params={"experiment": experiment}))
                    a, ta = _run(inst, "exact", limit)
                    b, tb = _run(inst, "highs", limit)
                    te.append(ta)
                    th.append(tb)
                    proven += b.status.value in ("optimal", "infeasible")
                    same = a.status == b.status and (
                        a.objective is None or b.objective is None
                        or abs(a.objective - b.objective) <= 1e-6 * max(1.0, a.objective))
                    agree += same
                all_exact += te
                all_highs += th
                table.add_row(str(n), str(m), f"{statistics.median(te):.4f}",
                              f"{statistics.median(th):.3f}", f"{proven}/{seeds}",
                              f"{agree}/{seeds}")
        console.print(table)
        console.print(f"{experiment}: median over all {len(all_exact)} instances: exact "
                      f"{statistics.median(all_exact):.4f} s (max {max(all_exact):.3f}), "
                      f"highs {statistics.median(all_highs):.3f} s (max {max(all_highs):.2f})")


def _stage_gap(res, key: str, bound) -> str:
    """How far above the final bound the branch and bound's incumbent was after a stage
    (local search; iterated local search), from its search statistics ("-" when absent: with
    a companion process those stages run beside the branching)."""
    value = res.metrics.get(f"search_{key}")
    if value is None or bound is None or not math.isfinite(bound) or not math.isfinite(value):
        return "-"
    return f"{100 * max(0.0, value - bound) / value:.2f}%"


BUDGETS = {"binding": ("budget binding (budget_factor 1.0)", {}),
           "slack": ("budget slack (budget_factor 10)", {"budget_factor": "10"})}


def _gap(res) -> float | None:
    bound, obj = res.metrics.get("bound"), res.objective
    if obj is None or bound is None or not math.isfinite(bound):
        return None
    return max(0.0, obj - bound) / obj


def part_hetero(sizes: list[tuple[int, int]], seeds: int, limit: float,
                budgets: tuple[str, ...] = ("binding", "slack"),
                methods: tuple[str, ...] = ("exact", "highs"), first_seed: int = 0) -> None:
    for label, params in (BUDGETS[b] for b in budgets):
        gaps: dict[tuple[int, int, str], list[float]] = {}
        side = Table(title=f"hetero, {label}: gap at {limit:g} s, exact beside highs")
        for col in ("N", "M", "seed", *(f"{method} {what}" for method in methods
                                         for what in ("objective", "bound", "gap"))):
            side.add_column(col, justify="right")
        table = Table(title=f"hetero, {label}: time limit {limit:g} s")
        for col in ("N", "M", "seed", "method", "status", "objective", "bound", "gap",
                    "LS gap", "ILS gap", "nodes", "time (s)"):
            table.add_column(col, justify="right")
        for n, m in sizes:
            for seed in range(first_seed, first_seed + seeds):
                inst = parse_instance(generate("hetero", learners=n, tasks=m, seed=seed,
                                               params=params))
                cells: list[str] = []
                for method in methods:
                    res, t = _run(inst, method, limit)
                    bound = res.metrics.get("bound")
                    obj = res.objective
                    gap = _gap(res)
                    gaps.setdefault((n, m, method), []).append(
                        math.inf if gap is None else gap)
                    cells += ["-" if obj is None else f"{obj:.4f}",
                              "-" if bound is None else f"{bound:.4f}",
                              "-" if gap is None else f"{100 * gap:.2f}%"]
                    table.add_row(str(n), str(m), str(seed), method, res.status.value,
                                  "-" if obj is None else f"{obj:.4f}",
                                  "-" if bound is None else f"{bound:.4f}",
                                  "-" if gap is None else f"{100 * gap:.2f}%",
                                  _stage_gap(res, "incumbent_after_local_search", bound),
                                  _stage_gap(res, "incumbent_before_branching", bound),
                                  str(res.metrics.get("search_nodes", "-")), f"{t:.2f}")
                side.add_row(str(n), str(m), str(seed), *cells)
        console.print(table)
        console.print(side)
        for (n, m, method), g in gaps.items():
            console.print(f"{label}, {n} x {m}, {method}: gap at {limit:g} s over {len(g)} "
                          f"seed(s): max {100 * max(g):.2f}%, median "
                          f"{100 * statistics.median(g):.2f}%, seeds above 1%: "
                          f"{sum(x > 0.01 for x in g)}")


def author_model_gurobi(inst, limit: float):
    """The author's model: integer ceilings c_i, indicators x=0 => d=0 and x=1 => d>=1."""
    import gurobipy as gp
    from gurobipy import GRB

    coef = coefficients(inst)
    m_, n_ = inst.n_tasks, inst.n_learners
    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    env.start()
    mdl = gp.Model(env=env)
    mdl.Params.TimeLimit = limit
    mdl.Params.Threads = 1
    x = mdl.addVars(m_, n_, vtype=GRB.BINARY)
    d = mdl.addVars(m_, n_, vtype=GRB.INTEGER, lb=0)
    c = mdl.addVars(m_, vtype=GRB.INTEGER, lb=0)
    for i in range(m_):
        mdl.addConstr(c[i] <= float(inst.deadline[i]))
        mdl.addConstr(d.sum(i, "*") == int(inst.shards[i]))
        for j in range(n_):
            mdl.addConstr(float(coef.A[i, j]) * x[i, j] + float(coef.C[i, j]) * d[i, j] <= c[i])
            mdl.addGenConstrIndicator(x[i, j], False, d[i, j] == 0)
            mdl.addGenConstrIndicator(x[i, j], True, d[i, j] >= 1)
    for j in range(n_):
        mdl.addConstr(x.sum("*", j) <= 1)
        mdl.addConstr(d.sum("*", j) >= 1)
    mdl.addConstr(gp.quicksum(float(inst.price[j]) * d[i, j] for i in range(m_)
                              for j in range(n_)) <= float(inst.budget))
    mdl.setObjective(c.sum(), GRB.MINIMIZE)
    t0 = time.perf_counter()
    mdl.optimize()
    elapsed = time.perf_counter() - t0
    status = {GRB.OPTIMAL: "optimal", GRB.TIME_LIMIT: "time_limit",
              GRB.INFEASIBLE: "infeasible"}.get(mdl.Status, str(mdl.Status))
    obj = mdl.ObjVal if mdl.SolCount else None
    return status, obj, elapsed


def part_gurobi(limit: float) -> None:
    try:
        import gurobipy  # noqa: F401
    except ImportError:
        console.print("gurobipy not installed: no Gurobi anchor")
        return
    table = Table(title="Gurobi on the author's formulation (integer ceilings, indicators)")
    for col in ("instance", "status", "sum of ceilings", "time (s)", "exact (s)",
                "exact objective"):
        table.add_column(col, justify="right")
    cases = [("mays2023", 10, m, {}) for m in (1, 2, 3, 4)]
    cases += [("hetero", 10, 4, {}), ("hetero", 20, 5, {}), ("hetero", 50, 5, {})]
    for preset, n, m, params in cases:
        inst = parse_instance(generate(preset, learners=n, tasks=m, seed=0, params=params))
        status, obj, t = author_model_gurobi(inst, limit)
        res, te = _run(inst, "exact", limit)
        table.add_row(f"{preset} n{n} m{m}", status, "-" if obj is None else f"{obj:g}",
                      f"{t:.2f}", f"{te:.3f}",
                      "-" if res.objective is None else f"{res.objective:.4f}")
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("all", "preset", "hetero", "gurobi"), default="all")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--sizes", default="10x5,20x5,30x5,50x5",
                    help="hetero sizes NxM, comma-separated")
    ap.add_argument("--budgets", default="binding,slack",
                    help="hetero budgets, comma-separated: binding, slack")
    ap.add_argument("--methods", default="exact,highs",
                    help="hetero methods, comma-separated (exact, highs)")
    ap.add_argument("--first-seed", type=int, default=0, help="hetero: first seed")
    args = ap.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    if args.part in ("all", "preset"):
        part_preset(args.seeds, args.time_limit)
    if args.part in ("all", "hetero"):
        budgets = tuple(b.strip() for b in args.budgets.split(",") if b.strip())
        unknown = [b for b in budgets if b not in BUDGETS]
        if unknown:
            ap.error(f"--budgets: unknown {', '.join(unknown)} (binding, slack)")
        methods = tuple(x.strip() for x in args.methods.split(",") if x.strip())
        part_hetero(sizes, args.seeds, args.time_limit, budgets, methods, args.first_seed)
    if args.part in ("all", "gurobi"):
        part_gurobi(args.time_limit)


if __name__ == "__main__":
    main()
