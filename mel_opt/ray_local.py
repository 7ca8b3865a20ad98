"""A Ray for this machine only, and the clean-up of the Ray processes mel_opt started.

``melopt batch --executor ray`` and ``melopt live --engine simulation`` start a Ray of their
own when none runs: :func:`init_local_ray` starts it with every Ray process on 127.0.0.1.
After a Ray pool was stopped mid-run (Ctrl-C, a full disk), :func:`end_ray_pool` waits until
its actors are dead and, for a Ray that melopt started, shuts Ray down and ends every Ray
process it left behind (:func:`ray_descendants`, :func:`reap`), so that none outlives the
command. Ray is passed in or imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from typing import Any

from mel_opt.processes import command_line, descendants, is_alive, process_table, send

__all__ = ["end_ray_pool", "init_local_ray", "ray_descendants", "reap"]


def init_local_ray(ray: Any, jobs: int) -> None:
    """Start a Ray for this machine only: every Ray process listens on 127.0.0.1.

    Ray's servers listen on all interfaces unless the node address is the loopback one, and
    ``ray.init`` replaces a loopback ``_node_ip_address`` by the machine's outward address
    (``ray._private.services.resolve_ip_for_localhost``, meant for clusters). melopt keeps
    127.0.0.1 by disabling that replacement for the duration of ``ray.init``; a Ray without
    that function is started with the plain option. The test suite checks the sockets.

    Its workers run at this process's priority: Ray starts them at niceness 15 by default
    (``RAY_worker_niceness``), where any other busy process on the machine, the live run's
    own server included, takes their core (about 30 to 1 against niceness 0): a simulated
    learner's probe of 0.08 s then measured itself 100 to 5,000 times slower than it trains
    a moment later, and its replies were refused as measurements off their estimate. A
    niceness set in the environment is kept.

    Parameters
    ----------
    ray
        The imported ``ray`` module.
    jobs
        CPUs the Ray offers (``num_cpus``).
    """
    # mel_opt's tasks need no accelerator: Ray keeps its hands off the visible-device
    # variables (and does not warn that it will stop touching them by default)
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    # the workers (learners, solves) at the priority of the run, not Ray's niceness 15
    os.environ.setdefault("RAY_worker_niceness", "0")
    kwargs: dict[str, Any] = {"num_cpus": jobs, "ignore_reinit_error": True,
                              "log_to_driver": False, "include_dashboard": False,
                              "_node_ip_address": "127.0.0.1"}
    try:
        from ray._private import services
    except ImportError:  # pragma: no cover - a Ray without this module layout
        ray.init(**kwargs)
        return
    original = getattr(services, "resolve_ip_for_localhost", None)
    if original is None:  # pragma: no cover
        ray.init(**kwargs)
        return
    services.resolve_ip_for_localhost = lambda host: host
    try:
        ray.init(**kwargs)
    finally:
        services.resolve_ip_for_localhost = original


def end_ray_pool(pool: Any, started: bool, timeout: float = 10.0) -> None:
    """After ``pool.terminate()`` of a Ray pool: wait until its actors are dead, then stop the
    Ray that melopt started and every process it left.

    ``terminate`` only asks Ray to kill the actors (``ray.kill`` is asynchronous), and
    ``ray.shutdown`` leaves some of its helper processes to end by themselves, seconds later.

    Parameters
    ----------
    pool
        A terminated ``ray.util.multiprocessing.Pool``.
    started
        Whether melopt started this Ray (:func:`init_local_ray`); a Ray the caller started, or
        a cluster reached at an address, stays.
    timeout
        Seconds to wait for the actors and then for the left processes, before they are killed.
    """
    import ray

    until = time.monotonic() + timeout
    for actor, _ in list(getattr(pool, "_actor_pool", [])):
        while time.monotonic() < until:
            try:  # answers while the actor lives; raises once it is dead
                ray.get(actor.ping.remote(), timeout=max(0.1, until - time.monotonic()))
            except Exception:
                break
            time.sleep(0.05)
    if started:
        left = ray_descendants()
        ray.shutdown()
        reap(left, until)


def ray_descendants() -> list[tuple[int, float | None]]:
    """(pid, start time) of the Ray processes below this one: those whose command line names
    Ray (processes whose command line cannot be read are left out)."""
    me = os.getpid()
    table = process_table([me])
    out = []
    for pid in sorted(descendants([me], table) - {me}):
        cmd = command_line(pid)
        if cmd is not None and "ray" in " ".join(cmd):
            out.append((pid, table[pid].start))
    return out


#: The longest wait for killed processes to be gone [s] (SIGKILL ends a process, but it
#: still leaves an uninterruptible wait and frees its memory first).
KILLED_WAIT_S = 10.0


def reap(procs: Sequence[tuple[int, float | None]], until: float) -> None:
    """Wait until ``until`` (monotonic seconds) for ``procs`` to end; kill what is left, and
    return once the killed ones are gone too (so that none outlives the caller).

    A pid reused by another process since, told apart by its start time, is left alone. At
    least one second is waited (``ray.shutdown`` may have used the whole wait).
    """
    left = [p for p in procs if is_alive(*p)]
    stop = max(until, time.monotonic() + 1.0)
    while left and time.monotonic() < stop:
        time.sleep(0.05)
        left = [p for p in left if is_alive(*p)]
    for pid, _ in left:
        send(pid, signal.SIGKILL)
    stop = time.monotonic() + KILLED_WAIT_S
    while left and time.monotonic() < stop:
        left = [p for p in left if is_alive(*p)]  # a zombie counts as gone
        if left:
            time.sleep(0.01)
