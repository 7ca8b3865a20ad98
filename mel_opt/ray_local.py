"""A Ray for this machine only, and the clean-up of the Ray processes mel_opt started.

``melopt batch --executor ray`` and ``melopt live --engine simulation`` start a Ray of their
own when none runs: :func:`init_local_ray` starts it with every Ray process on 127.0.0.1.
After a Ray pool was stopped mid-run (Ctrl-C, a full disk), :func:`end_ray_pool` waits until
its actors are dead and, for a Ray that melopt started, shuts Ray down and ends every Ray
process it left behind (:func:`ray_descendants`, :func:`reap`), so that none outlives the
command. Ray is passed in or imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence
from typing import Any

from mel_opt.processes import command_line, descendants, is_alive, process_table, send

__all__ = ["LocalCluster", "end_ray_pool", "init_local_ray", "ray_descendants", "reap"]


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


LOOPBACK = ("127.0.0.1", "localhost")


def _as_given(host: str) -> Any:
    return host


def connect_ray(ray: Any, address: str) -> None:
    """``ray.init`` as a driver of the cluster at ``address``. A cluster on the loopback address
    (:class:`LocalCluster`) is reached on it: the driver's own node address is 127.0.0.1 and
    Ray keeps it (as :func:`init_local_ray` does), else Ray would look for the cluster at the
    machine's outward address, where nothing listens."""
    host = address.rsplit(":", 1)[0]
    if host not in LOOPBACK:
        ray.init(address=address, log_to_driver=False, ignore_reinit_error=True)
        return
    from ray._private import services

    original = services.resolve_ip_for_localhost
    services.resolve_ip_for_localhost = _as_given
    try:
        ray.init(address=address, log_to_driver=False, ignore_reinit_error=True,
                 _node_ip_address="127.0.0.1")
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


#: ``ray start`` run with the node's address kept as given (a loopback address stays 127.0.0.1:
#: :func:`init_local_ray` says why).
_RAY_START = ("from ray._private import services; services.resolve_ip_for_localhost = "
              "lambda host: host; from ray.scripts.scripts import main; main()")


class LocalCluster:
    """A Ray cluster of ``nodes`` nodes on this machine, every one listening on 127.0.0.1:
    ``ray start --head`` and ``ray start --address`` run with ``--block``, each in a process
    group of its own, so that :meth:`stop_node` ends one node (its raylet and workers, as a
    lost machine would) and :meth:`close` (or leaving the ``with`` block, on error and Ctrl-C
    too) ends them all.

    What ``melopt ... --cluster`` is tested and measured on; a real cluster is started with
    Ray's own ``ray start`` on each machine.

    Parameters
    ----------
    nodes
        Nodes, the head included (at least 1).
    cpus
        CPUs each node offers.
    port
        The head's port (the cluster's address is ``127.0.0.1:PORT``).
    env
        Variables added to the nodes' environment (their workers inherit it).
    """

    def __init__(self, nodes: int = 2, cpus: int = 1, port: int = 6390,
                 env: dict[str, str] | None = None) -> None:
        import sys
        import tempfile

        self.nodes, self.cpus, self.port = max(1, nodes), cpus, port
        self.address = f"127.0.0.1:{port}"
        self.env = {**os.environ, "RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0",
                    "RAY_worker_niceness": "0", **(env or {})}
        # a short folder: Ray's socket paths must fit in 107 characters
        self.temp = tempfile.mkdtemp(prefix="mr-", dir="/tmp")
        self.python = sys.executable
        self.procs: list[Any] = []

    def _start(self, head: bool) -> Any:
        import subprocess

        where = (["--head", f"--port={self.port}", "--include-dashboard=false",
                  f"--temp-dir={self.temp}"] if head else [f"--address={self.address}"])
        cmd = [self.python, "-c", _RAY_START, "start", *where, "--block",
               f"--num-cpus={self.cpus}", "--node-ip-address=127.0.0.1",
               "--disable-usage-stats"]
        return subprocess.Popen(cmd, env=self.env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self, timeout: float = 120.0) -> LocalCluster:
        """Start the head, then the other nodes; return once every node is alive in the
        cluster (RuntimeError, after ending what started, when they are not in ``timeout``)."""
        try:
            self.procs.append(self._start(head=True))
            self._wait(1, timeout)
            for _ in range(self.nodes - 1):
                self.procs.append(self._start(head=False))
            self._wait(self.nodes, timeout)
        except BaseException:
            self.close()
            raise
        return self

    def alive_nodes(self) -> int:
        """Nodes the cluster counts as alive (``ray status``'s view; 0 when it cannot say)."""
        import json
        import subprocess

        probe = ("import json, ray; from mel_opt.ray_local import connect_ray; "
                 f"connect_ray(ray, {self.address!r}); "
                 "print(json.dumps(sum(1 for n in ray.nodes() if n['Alive'])))")
        try:
            done = subprocess.run([self.python, "-c", probe], env=self.env, timeout=60,
                                  capture_output=True, text=True)
            return int(json.loads(done.stdout.strip().splitlines()[-1]))
        except (subprocess.SubprocessError, ValueError, IndexError):
            return 0

    def _wait(self, nodes: int, timeout: float) -> None:
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError("a ray start of the local cluster ended at its start")
            if self.alive_nodes() >= nodes:
                return
            time.sleep(1.0)
        raise RuntimeError(f"the local cluster did not have {nodes} nodes in {timeout:g} s")

    def stop_node(self, index: int) -> None:
        """End node ``index`` (0 is the head) and every process of its group at once."""
        _end_groups([self.procs[index]], signal.SIGKILL)

    def close(self) -> None:
        """End every node (the workers first, then the head) and remove the cluster's
        folder."""
        import shutil

        _end_groups(self.procs, signal.SIGTERM)
        self.procs.clear()
        shutil.rmtree(self.temp, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _end_groups(procs: Sequence[Any], sig: int, grace: float = 5.0) -> None:
    """Send ``sig`` to each of ``procs``' process groups and every process below them (Ray's
    helpers start sessions of their own); kill what is left after ``grace`` seconds, and return
    once all are gone."""
    me = os.getpid()
    table = process_table([me])
    below = [(pid, table[pid].start)
             for pid in sorted(descendants([p.pid for p in procs], table))]
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
    for pid, _ in below:
        send(pid, sig)
    reap(below, time.monotonic() + grace)  # the procs themselves are among them
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.wait(timeout=KILLED_WAIT_S)
