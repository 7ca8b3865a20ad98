"""The forked runner (mel_opt.solvers.forked): answers, errors, crashes and the kill at the
deadline, with the shared progress buffer surviving the kill; no child is left behind however
the call ends, and the child neither repeats the parent's output nor runs its atexit handlers."""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sys
import time

import numpy as np
import pytest

from mel_opt.errors import SolverError, UsageError
from mel_opt.solvers import forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

# Generous allowance over a deadline for a loaded machine: the stuck children here sleep 60 s.
SLACK_S = 5.0


def _gone(pid: int) -> bool:
    """Process ``pid`` has ended and been reaped (a zombie keeps its /proc entry)."""
    return not os.path.exists(f"/proc/{pid}")


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

    deadline_s, grace_s = 0.3, 0.1
    t = time.perf_counter()
    out = forked.run_forked(work, t + deadline_s, grace=grace_s)
    elapsed = time.perf_counter() - t
    assert out.killed and not out.finished and out.value is None
    # A real wall-clock bound is unavoidable here: only the parent's clock ends a child stuck
    # in a call, so only the time taken shows that the deadline and the grace were waited for
    # (lower bound; 1e-6 for the rounding of clock sums) and that the child was killed rather
    # than waited for (upper bound, generous for a loaded machine: the child would take 60 s).
    assert deadline_s + grace_s - 1e-6 <= elapsed < deadline_s + grace_s + SLACK_S
    assert out.seconds <= elapsed
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


def test_every_kind_of_error_in_the_child_keeps_its_meaning() -> None:
    def usage() -> None:
        raise UsageError("Ipopt rejected option tol='x'")

    def solver() -> None:
        raise SolverError("Ipopt: restoration failed")

    def bare() -> None:
        raise RuntimeError

    def leaves() -> None:
        sys.exit(4)

    with pytest.raises(UsageError) as usage_error:
        forked.run_forked(usage, math.inf)
    assert type(usage_error.value) is UsageError
    assert str(usage_error.value) == "Ipopt rejected option tol='x'"
    for func, message in [(solver, "SolverError: Ipopt: restoration failed"),
                          (bare, "RuntimeError"), (leaves, "SystemExit: 4")]:
        with pytest.raises(SolverError) as error:
            forked.run_forked(func, math.inf)
        assert type(error.value) is SolverError
        assert str(error.value) == f"the solver failed in its process: {message}"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1], ids=lambda s: s.name)
def test_a_child_ended_by_a_signal_is_a_solver_error_naming_it(sig: signal.Signals) -> None:
    with pytest.raises(SolverError) as error:
        forked.run_forked(lambda: os.kill(os.getpid(), sig), math.inf)
    assert str(error.value) == (f"the solver's process ended without an answer "
                                f"(killed by {sig.name})")


def test_a_value_that_does_not_pickle_is_a_crash_with_exit_code_1() -> None:
    import threading

    with pytest.raises(SolverError) as error:
        forked.run_forked(threading.Lock, math.inf)
    assert str(error.value) == "the solver's process ended without an answer (exit code 1)"


def _end(how: str) -> None:
    if how == "usage":
        raise UsageError("bad option")
    if how == "error":
        raise RuntimeError("broken")
    if how == "exit":
        os._exit(5)
    if how == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
    if how == "hang":
        time.sleep(60.0)


@linux_only
@pytest.mark.parametrize(("how", "error"), [
    ("return", None), ("usage", UsageError), ("error", SolverError), ("exit", SolverError),
    ("signal", SolverError), ("hang", None)])
def test_no_child_is_left_behind(how: str, error: type[Exception] | None) -> None:
    pid = forked.Progress(1)

    def work() -> str:
        pid.publish(np.array([float(os.getpid())]))
        _end(how)
        return how

    end = time.perf_counter() + (0.2 if how == "hang" else 60.0)
    if error is None:
        out = forked.run_forked(work, end)
        assert (out.value, out.finished, out.killed) == (
            (None, False, True) if how == "hang" else ("return", True, False))
    else:
        with pytest.raises(error):
            forked.run_forked(work, end)
    child = pid.latest()
    assert child is not None
    assert int(child[0]) != os.getpid() and _gone(int(child[0]))
    assert multiprocessing.active_children() == []


@linux_only
def test_ctrl_c_while_waiting_ends_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    from multiprocessing.connection import Connection

    pid = forked.Progress(1)
    waiting = forked.Progress(1)  # published by the parent once it waits for the answer
    real_poll = Connection.poll

    def poll(self: Connection, timeout: float | None = 0.0) -> bool:
        waiting.publish(np.ones(1))
        return real_poll(self, timeout)

    def work() -> None:
        pid.publish(np.array([float(os.getpid())]))
        while waiting.count == 0:
            time.sleep(0.001)
        os.kill(os.getppid(), signal.SIGINT)  # Ctrl-C reaches the parent in its wait
        time.sleep(60.0)

    monkeypatch.setattr(Connection, "poll", poll)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            forked.run_forked(work, time.perf_counter() + 60.0)
    finally:
        signal.signal(signal.SIGINT, previous)
    child = pid.latest()
    assert child is not None and _gone(int(child[0]))
    assert multiprocessing.active_children() == []


def test_a_daemonic_process_may_run_a_forked_call() -> None:
    # the batch process pool's workers are daemonic, and multiprocessing refuses such a
    # process children unless run_forked lifts the refusal while its child starts
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)

    def worker() -> None:
        try:
            value = forked.run_forked(lambda: 6 * 7, math.inf).value
            me = multiprocessing.current_process()
            sender.send((value, me.daemon, len(multiprocessing.active_children())))
        except BaseException as exc:  # noqa: BLE001 - reported to the test instead
            sender.send(repr(exc))

    proc = ctx.Process(target=worker, daemon=True)
    proc.start()
    sender.close()
    try:
        assert receiver.poll(60.0)
        assert receiver.recv() == (42, True, 0)
    finally:
        proc.join(60.0)
        receiver.close()
    assert proc.exitcode == 0


def test_the_child_repeats_no_output_and_runs_no_atexit_handler(
        tmp_path: os.PathLike[str], capfd: pytest.CaptureFixture[str]) -> None:
    import atexit
    import ctypes
    from pathlib import Path

    libc = ctypes.CDLL(None)
    libc.fdopen.restype = ctypes.c_void_p
    libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
    libc.fputs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    # a C stream of its own onto stdout: block-buffered even under PYTHONUNBUFFERED (which
    # makes C's stdout unbuffered), as Ipopt's output into a file or a pipe is
    c_out = libc.fdopen(os.dup(1), b"w")
    assert c_out
    capfd.readouterr()
    ran = Path(tmp_path) / "atexit.txt"
    printed = Path(tmp_path) / "stdout.txt"

    def handler() -> None:
        with ran.open("a") as f:
            f.write(f"{os.getpid()}\n")

    def child() -> int:
        print("child;", end="")
        libc.fputs(b"C child;", c_out)
        return 1

    stream = printed.open("w")  # block-buffered, as stdout is into a file or a pipe
    saved = sys.stdout
    sys.stdout = stream
    atexit.register(handler)
    try:
        print("parent;", end="")  # still in the buffer when the child is forked
        libc.fputs(b"C parent;", c_out)
        assert forked.run_forked(child, math.inf).value == 1
        print("after", end="")
    finally:
        atexit.unregister(handler)
        sys.stdout = saved
        stream.close()
        libc.fclose(c_out)
    assert printed.read_text() == "parent;child;after"
    assert capfd.readouterr().out == "C parent;C child;"
    assert not ran.exists()
