"""The forked runner (mel_opt.solvers.forked): answers, errors, crashes and the kill at the
deadline, with the shared progress buffer surviving the kill."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from mel_opt.errors import SolverError, UsageError
from mel_opt.solvers import forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def test_value_comes_back_and_the_child_sees_the_parents_state() -> None:
    data = np.arange(5.0)
    out = forked.run_forked(lambda: float(data.sum()) * 2, math.inf)
    assert out.finished and not out.killed
    assert out.value == 20.0


def test_changes_in_the_child_stay_there() -> None:
    box = [1]

    def change() -> int:
        box[0] = 99
        return box[0]

    assert forked.run_forked(change, math.inf).value == 99
    assert box == [1]


def test_a_hanging_child_is_killed_at_the_deadline_and_its_progress_kept() -> None:
    progress = forked.Progress(3)

    def work() -> None:
        for i in range(1, 4):
            progress.publish(np.full(3, float(i)))
        time.sleep(60.0)

    t = time.perf_counter()
    out = forked.run_forked(work, time.perf_counter() + 0.3, grace=0.1)
    elapsed = time.perf_counter() - t
    assert out.killed and not out.finished and out.value is None
    assert 0.35 <= elapsed < 1.0
    assert progress.count == 3
    np.testing.assert_array_equal(progress.latest(), [3.0, 3.0, 3.0])


def test_no_progress_reads_as_none() -> None:
    progress = forked.Progress(2)
    assert progress.latest() is None and progress.count == 0
    progress.publish(np.array([1.0, 2.0]))
    progress.publish(np.array([3.0, 4.0]))
    np.testing.assert_array_equal(progress.latest(), [3.0, 4.0])


def test_errors_in_the_child_reach_the_parent() -> None:
    def usage() -> None:
        raise UsageError("option x: bad")

    def broken() -> None:
        raise ZeroDivisionError("division by zero")

    with pytest.raises(UsageError, match="option x: bad"):
        forked.run_forked(usage, math.inf)
    with pytest.raises(SolverError, match="ZeroDivisionError: division by zero"):
        forked.run_forked(broken, math.inf)


def test_a_child_that_dies_is_a_solver_error_naming_how() -> None:
    with pytest.raises(SolverError, match="exit code 3"):
        forked.run_forked(lambda: os._exit(3), math.inf)
    with pytest.raises(SolverError, match="SIGKILL"):
        forked.run_forked(lambda: os.kill(os.getpid(), 9), math.inf)


def test_large_answers_arrive_whole() -> None:
    out = forked.run_forked(lambda: np.arange(3_000_000, dtype=float), time.perf_counter() + 30)
    assert out.finished
    assert out.value.shape == (3_000_000,) and out.value[-1] == 2_999_999.0


def test_can_fork_refuses_with_a_live_non_daemon_thread() -> None:
    import threading

    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, daemon=False)
    worker.start()
    try:
        assert not forked.can_fork()
    finally:
        stop.set()
        worker.join()
