"""HiGHS from arrays (highspy directly) and the thread-pool reset between solves."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.solvers import highs
from mel_opt.solvers.base import SolutionStatus, TerminationCondition

highspy = pytest.importorskip("highspy")


def test_every_native_model_status_is_mapped() -> None:
    members = [getattr(highspy.HighsModelStatus, n) for n in dir(highspy.HighsModelStatus)
               if n.startswith("k")]
    table = highs.native_termination_map()
    assert members and all(m in table for m in members)
    assert table[highspy.HighsModelStatus.kOptimal] is TerminationCondition.CONVERGED
    assert table[highspy.HighsModelStatus.kTimeLimit] is TerminationCondition.TIME_LIMIT


def _knapsack(time_limit: float | None = None) -> highs.SolverResult:
    # max 5 x0 + 4 x1 + 3 x2, 2 x0 + 3 x1 + x2 <= 5, x binary: by hand x = (1, 0, 1) is not
    # best: (1, 1, 0) weighs 5 and gives 9; (1, 0, 1) weighs 3 and gives 8; (0, 1, 1) gives 7;
    # all three weigh 6 > 5. Optimum 9 at (1, 1, 0), minimised as -9.
    cost = -np.array([5.0, 4.0, 3.0])
    rows = np.zeros(3, dtype=int)
    cols = np.arange(3)
    vals = np.array([2.0, 3.0, 1.0])
    return highs.solve_arrays(cost, rows, cols, vals, (np.array([-np.inf]), np.array([5.0])),
                              (np.zeros(3), np.ones(3)), np.ones(3, dtype=bool),
                              time_limit=time_limit)


def test_a_hand_worked_knapsack() -> None:
    res = _knapsack()
    assert res.termination is TerminationCondition.CONVERGED
    assert res.solution_status is SolutionStatus.OPTIMAL and res.is_optimal
    assert res.objective == pytest.approx(-9.0)
    assert np.round(res.x).tolist() == [1.0, 1.0, 0.0]


def test_an_infeasible_model_has_no_point() -> None:
    # x0 + x1 >= 3 with binaries
    res = highs.solve_arrays(np.zeros(2), np.zeros(2, dtype=int), np.arange(2), np.ones(2),
                             (np.array([3.0]), np.array([np.inf])), (np.zeros(2), np.ones(2)),
                             np.ones(2, dtype=bool))
    assert res.termination is TerminationCondition.INFEASIBLE and not res.has_solution


def test_a_solve_with_another_thread_count_still_works() -> None:
    # HiGHS sizes one thread pool per process at its first solve; a later solve with another
    # `threads` value used to stop with an error ("unknown") until the pool is reset.
    highspy.Highs.resetGlobalScheduler(True)  # whatever earlier tests did: the next run sizes it
    other = highspy.Highs()
    other.setOptionValue("output_flag", False)
    other.setOptionValue("threads", 2)
    other.addVar(0.0, 1.0)
    other.changeColCost(0, 1.0)
    other.run()
    assert other.getModelStatus() == highspy.HighsModelStatus.kOptimal  # the pool now has 2
    assert _knapsack().objective == pytest.approx(-9.0)


def test_json_output_stays_json_when_highs_runs(tmp_path) -> None:
    # The first highspy.Highs of a process prints a banner on file descriptor 1; mel-async
    # exact runs HiGHS for its second stage, and `--json` must still print JSON alone.
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [sys.executable, "-m", "mel_opt.cli", "solve",
         str(root / "instances" / "mel-async" / "k10_T15.json"), "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert doc["metrics"]["proven_levels"] == ["max_staleness", "avg_staleness"]


def test_incremental_lp_matches_a_solve_from_scratch_after_each_change() -> None:
    # max x + 2 y, 0 <= x, y <= 10, x + y <= 4, y - x <= 1: by hand the vertex y = 1 + x,
    # x + y = 4, so (1.5, 2.5) and 6.5 (minimised as -6.5). Then y <= 2 added: (2, 2), 6.
    # Then x <= 1: y <= 1 + x = 2, so (1, 2), 5. Each answer also from solve_arrays.
    lp = highs.IncrementalLp(np.array([-1.0, -2.0]))
    lp.set_col_bounds(np.arange(2), np.zeros(2), np.full(2, 10.0))
    lp.add_rows(np.full(2, -np.inf), np.array([4.0, 1.0]), np.array([0, 2]),
                np.array([0, 1, 0, 1]), np.array([1.0, 1.0, -1.0, 1.0]))
    rows, cols, vals = [0, 0, 1, 1], [0, 1, 0, 1], [1.0, 1.0, -1.0, 1.0]
    ub, col_hi = [4.0, 1.0], np.full(2, 10.0)
    for want_x, want, change in [((1.5, 2.5), -6.5, None), ((2.0, 2.0), -6.0, "row"),
                                 ((1.0, 2.0), -5.0, "bound")]:
        if change == "row":
            lp.add_rows(np.array([-np.inf]), np.array([2.0]), np.array([0]), np.array([1]),
                        np.array([1.0]))
            rows, cols, vals, ub = rows + [2], cols + [1], vals + [1.0], ub + [2.0]
        elif change == "bound":
            lp.set_col_bounds(np.array([0]), np.array([0.0]), np.array([1.0]))
            col_hi = np.array([1.0, 10.0])
        res = lp.minimise()
        assert res.termination is TerminationCondition.CONVERGED and res.is_optimal
        x, objective = res.x, res.objective
        assert objective == pytest.approx(want) and x == pytest.approx(want_x)
        scratch = highs.solve_arrays(np.array([-1.0, -2.0]), np.array(rows), np.array(cols),
                                     np.array(vals), (np.full(len(ub), -np.inf), np.array(ub)),
                                     (np.zeros(2), col_hi), np.zeros(2, dtype=bool))
        assert scratch.objective == pytest.approx(objective)
    # min -x with x free is unbounded: no usable point
    unbounded = highs.IncrementalLp(np.array([-1.0])).minimise()
    assert unbounded.termination is TerminationCondition.UNBOUNDED and not unbounded.is_usable


def test_incremental_lp_reports_an_infeasible_lp() -> None:
    # x + y <= 1 and x + y >= 3 contradict: (infeasible, none), no point
    lp = highs.IncrementalLp(np.array([1.0, 1.0]))
    lp.add_rows(np.array([-np.inf, 3.0]), np.array([1.0, np.inf]), np.array([0, 2]),
                np.array([0, 1, 0, 1]), np.ones(4))
    res = lp.minimise()
    assert (res.termination, res.solution_status) == (TerminationCondition.INFEASIBLE,
                                                      SolutionStatus.NONE)
    assert res.objective is None and res.x.size == 0 and not res.is_usable


def test_incremental_lp_reports_an_unbounded_lp() -> None:
    # min x - y with 0 <= x <= 1, x <= 2 and y free: y grows without end, so unbounded; HiGHS
    # hands back the feasible point it started from (x = y = 0), which is no answer
    lp = highs.IncrementalLp(np.array([1.0, -1.0]))
    lp.set_col_bounds(np.array([0]), np.array([0.0]), np.array([1.0]))
    lp.add_rows(np.array([-np.inf]), np.array([2.0]), np.array([0]), np.array([0]),
                np.array([1.0]))
    res = lp.minimise()
    assert (res.termination, res.solution_status) == (TerminationCondition.UNBOUNDED,
                                                      SolutionStatus.FEASIBLE)
    assert not res.is_usable and not res.is_optimal


def test_incremental_lp_past_the_deadline_is_a_time_limit() -> None:
    # a deadline already spent: (time_limit, none) without running HiGHS; the same LP answers
    # (x = 1, objective 1: min x with x >= 1) once the deadline is lifted, so nothing was
    # left half-done
    import time

    from mel_opt import deadline

    lp = highs.IncrementalLp(np.array([1.0]))
    lp.set_col_bounds(np.array([0]), np.array([1.0]), np.array([5.0]))
    with deadline.limit(0.001):
        time.sleep(0.01)
        res = lp.minimise()
    assert (res.termination, res.solution_status) == (TerminationCondition.TIME_LIMIT,
                                                      SolutionStatus.NONE)
    assert res.objective is None and not res.is_usable
    after = lp.minimise()
    assert after.is_optimal and after.objective == pytest.approx(1.0)
    assert after.x.tolist() == pytest.approx([1.0])
