"""The process table on psutil: parents, trees, start times as identity, states, signals and
listening sockets, checked on child processes this test starts (known answers: their parent
is this process, a grandchild's parent is the child, a bound socket's port is the one bound)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import psutil
import pytest

from mel_opt import processes
from mel_opt.processes import (
    command_line,
    descendants,
    is_alive,
    listening_sockets,
    parent_map,
    process_table,
    send,
    start_time,
    tree_rss,
)

SLEEP = "import time; time.sleep(60)"
# a child that says it runs (so it has exec'd: its command line is its own) and waits
READY = "print('ready', flush=True); import time; time.sleep(60)"
# a child that starts a grandchild, prints its pid and waits
PARENT = ("import subprocess, sys\n"
          f"g = subprocess.Popen([sys.executable, '-c', {SLEEP!r}])\n"
          "print(g.pid, flush=True)\n"
          "g.wait()\n")


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start python children; each one (and what it started) is killed after the test."""
    procs: list[subprocess.Popen[str]] = []

    def start(code: str = SLEEP, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                                text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        for pid in descendants([proc.pid]) - {proc.pid}:
            send(pid, signal.SIGKILL)
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _until(check: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Whether ``check`` holds within ``seconds`` (asked every 10 ms)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if check():
            return True
        time.sleep(0.01)
    return check()


def test_a_childs_parent_is_this_process_in_every_view_of_the_table(spawn):
    child = spawn()
    me = os.getpid()
    assert process_table()[child.pid].ppid == me
    assert process_table([me])[child.pid].ppid == me
    assert parent_map()[child.pid] == me
    assert child.pid in descendants([me]) and me in descendants([me])


def test_the_start_time_is_stable_and_tells_two_processes_apart(spawn):
    first = spawn()
    time.sleep(0.1)  # ten clock ticks: the two start times differ by one tenth of a second
    second = spawn()
    start = start_time(first.pid)
    assert start is not None
    assert start_time(first.pid) == start == process_table([first.pid])[first.pid].start
    later = start_time(second.pid)
    assert later is not None and later > start
    assert is_alive(first.pid, start)
    assert not is_alive(first.pid, later)  # same pid, another start: another process


def test_a_killed_child_is_not_alive_zombie_or_reaped(spawn):
    child = spawn()
    start = start_time(child.pid)
    assert is_alive(child.pid, start)
    child.kill()
    # not reaped yet: a zombie, in the table but ended
    assert _until(lambda: not is_alive(child.pid, start))
    info = process_table([os.getpid()]).get(child.pid)
    assert info is not None and info.ended
    child.wait(timeout=10)
    assert not is_alive(child.pid) and start_time(child.pid) is None
    assert child.pid not in process_table([os.getpid()])


def test_descendants_find_a_grandchild_and_only_the_tree(spawn):
    child = spawn(PARENT)
    other = spawn()
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    table = process_table([child.pid])
    assert table[grandchild].ppid == child.pid
    assert descendants([child.pid]) == {child.pid, grandchild}
    assert descendants([child.pid], table) == {child.pid, grandchild}
    assert other.pid not in table
    assert descendants([child.pid, other.pid]) == {child.pid, grandchild, other.pid}


def test_a_trees_rss_is_its_processes_rss_summed(spawn):
    # a grandchild that holds 64 MiB of memory it wrote (every byte, so every page is
    # resident; a zeroed allocation may be mapped lazily), under a child that holds little
    big = ("import subprocess, sys\n"
           "code = 'b = bytes(range(256)) * (1 << 18); print(1, flush=True); "
           "import time; time.sleep(60)'\n"
           "g = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE)\n"
           "g.stdout.readline()\n"
           "print(g.pid, flush=True)\n"
           "g.wait()\n")
    child = spawn(big)
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    alone = {pid: psutil.Process(pid).memory_info().rss for pid in (child.pid, grandchild)}
    assert alone[grandchild] > 64 << 20
    # the same sum, read again (a few pages may come and go between the reads)
    assert tree_rss(child.pid) == pytest.approx(sum(alone.values()), rel=0.05)
    assert tree_rss(grandchild) == pytest.approx(alone[grandchild], rel=0.05)
    assert tree_rss(os.getpid()) > tree_rss(child.pid)  # this process is in its own tree
    assert tree_rss(2**22 + 12345) == 0  # no such process (above Linux's pid limit)


def test_a_sampler_samples_at_once_while_its_block_runs_and_never_after():
    class Count(processes.Sampler):
        every = 0.01

        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def sample(self) -> None:
            self.n += 1

    with Count() as count:
        assert _until(lambda: count.n >= 3)
    ended = count.n
    time.sleep(0.1)
    assert count.n == ended  # the thread was joined at the end of the block
    with pytest.raises(KeyError), Count() as failing:
        raise KeyError("the watched work failed")
    assert not failing._thread.is_alive() and failing.n >= 1  # the first sample came at once


def test_a_stopped_process_is_seen_stopped_and_then_running(spawn):
    child = spawn()
    assert send(child.pid, signal.SIGSTOP)
    try:
        assert _until(lambda: process_table([child.pid])[child.pid].stopped)
    finally:
        send(child.pid, signal.SIGCONT)
    assert _until(lambda: not process_table([child.pid])[child.pid].stopped)
    assert is_alive(child.pid)


def test_the_public_parent_reader_agrees_with_the_fast_one(spawn, monkeypatch):
    child = spawn(PARENT)
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    fast = parent_map()
    monkeypatch.setattr(processes, "_fast_parent_map", lambda: None)
    public = parent_map()
    for pid in (child.pid, grandchild, os.getpid()):
        assert fast[pid] == public[pid]
    assert public[grandchild] == child.pid
    assert descendants([child.pid]) == {child.pid, grandchild}


def test_the_command_line_is_read(spawn):
    child = spawn(READY, "marker-argument")
    # Popen returns once the exec has passed its point of no return, before the new program's
    # arguments are in place: until then /proc shows an empty (or the parent's) command line.
    # A line from the child proves that it runs its own program.
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    assert command_line(child.pid) == [sys.executable, "-c", READY, "marker-argument"]


def test_send_never_signals_the_init_process_a_group_or_itself():
    assert not send(0, 0) and not send(1, 0) and not send(-1, 0)
    assert not send(os.getpid(), 0)


def test_listening_sockets_are_read_from_proc():
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp.bind(("127.0.0.1", 0))
        found = listening_sockets([os.getpid()])
        assert ("tcp", "127.0.0.1", tcp.getsockname()[1]) in [f[1:] for f in found]
        assert ("udp", "127.0.0.1", udp.getsockname()[1]) in [f[1:] for f in found]
    if socket.has_ipv6:
        try:
            with socket.socket(socket.AF_INET6) as six:
                six.bind(("::1", 0))
                six.listen()
                assert ("tcp6", "::1", six.getsockname()[1]) in [
                    f[1:] for f in listening_sockets([os.getpid()])]
        except OSError:  # no IPv6 loopback here
            pass


def test_connected_and_closed_sockets_are_not_listening():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.connect(("127.0.0.1", port))  # a peer: not a listening UDP socket
            accepted, _ = server.accept()
            with accepted:
                found = listening_sockets([os.getpid()])
                mine = [f for f in found if f[0] == os.getpid()]
                ports = {(proto, p) for _, proto, _, p in mine}
                assert ("tcp", port) in ports  # the server, once
                assert [f for f in mine if f[1:] == ("tcp", "127.0.0.1", port)] == [
                    (os.getpid(), "tcp", "127.0.0.1", port)]
                assert ("tcp", client.getsockname()[1]) not in ports
                assert ("udp", udp.getsockname()[1]) not in ports
    assert ("tcp", "127.0.0.1", port) not in [f[1:] for f in listening_sockets([os.getpid()])]


def test_processes_that_are_gone_are_skipped(spawn):
    child = spawn()
    child.kill()
    child.wait(timeout=10)
    assert listening_sockets([child.pid]) == []
    assert descendants([child.pid]) == set()
    assert command_line(child.pid) is None


def _inside_a_pool_worker() -> tuple[bool, bool, bool]:
    """In a worker of a pool started with pool_worker_init: (SIGINT ignored, SIGTERM free
    while the job runs, a SIGTERM sent while the result queue's lock is held waits)."""
    import gc
    import multiprocessing.queues

    free = signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    [queue] = [q for q in gc.get_objects() if isinstance(q, multiprocessing.queues.SimpleQueue)
               and type(q._wlock).__name__ == "_SigtermWaits"]
    with queue._wlock:
        os.kill(os.getpid(), signal.SIGTERM)
        waits = signal.SIGTERM in signal.sigpending()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # drop it: this worker lives on
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN, free, waits


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="blocks signals")
@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_a_pool_worker_is_never_ended_holding_the_result_queues_lock(method):
    # Pool.terminate waits for a sentinel put through the result queue under the lock the
    # workers share with it: a worker killed while sending its result held it for good
    import multiprocessing

    from mel_opt.processes import pool_worker_init

    with multiprocessing.get_context(method).Pool(1, initializer=pool_worker_init) as pool:
        assert pool.apply(_inside_a_pool_worker) == (True, True, True)
