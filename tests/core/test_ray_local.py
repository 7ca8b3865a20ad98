"""The clean-up of a local Ray's processes, on stand-in children (no Ray needed): which
descendants count as Ray's, and what is killed after the wait."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from mel_opt.processes import is_alive, start_time
from mel_opt.ray_local import ray_descendants, reap

# ignores SIGTERM, as a Ray helper that outlives ray.shutdown; ends only when killed; says
# when it runs
STUBBORN = ("import signal, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\n"
            "time.sleep(120)\n")


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str, code: str = STUBBORN) -> subprocess.Popen[bytes]:
        """A child that runs its own program: Popen returns before the exec has put the new
        command line in place (until then /proc shows an empty one, or this process's, which
        names this file and so "ray"), so the child's first line is awaited."""
        proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_ray_descendants_are_the_children_whose_command_line_names_ray(spawn):
    raylet = spawn("--raylet-name=raylet")
    plain = spawn("--other")
    found = dict(ray_descendants())
    assert raylet.pid in found and plain.pid not in found
    assert found[raylet.pid] == start_time(raylet.pid)


def test_reap_kills_what_outlives_the_wait(spawn):
    stubborn = spawn()
    start = start_time(stubborn.pid)
    reap([(stubborn.pid, start)], until=time.monotonic())  # the wait is already over
    assert not is_alive(stubborn.pid, start)  # gone (a zombie) when reap returns
    assert stubborn.wait(timeout=10) == -signal.SIGKILL


def test_reap_leaves_a_process_whose_start_time_is_not_the_recorded_one(spawn):
    other = spawn()
    start = start_time(other.pid)
    assert start is not None
    reap([(other.pid, start - 1.0)], until=time.monotonic())  # as if its pid were reused
    assert is_alive(other.pid, start) and other.poll() is None


def test_a_local_ray_runs_its_workers_at_this_processs_priority(monkeypatch):
    # Ray's default niceness 15 let any busy process take the learners' cores (their measured
    # times were the machine's load); a niceness set in the environment is kept
    from mel_opt.ray_local import init_local_ray

    class FakeRay:
        def init(self, **kwargs: object) -> None:
            self.kwargs = kwargs

    monkeypatch.setitem(sys.modules, "ray", None)  # no Ray imported into the suite's process
    for name in ("RAY_worker_niceness", "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO"):
        monkeypatch.setenv(name, "")  # each put back as it was after the test
        monkeypatch.delenv(name)
    init_local_ray(FakeRay(), 2)
    assert os.environ["RAY_worker_niceness"] == "0"
    monkeypatch.setenv("RAY_worker_niceness", "5")
    init_local_ray(FakeRay(), 2)
    assert os.environ["RAY_worker_niceness"] == "5"
