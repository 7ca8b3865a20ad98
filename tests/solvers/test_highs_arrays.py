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
