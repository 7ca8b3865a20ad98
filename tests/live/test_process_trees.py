"""The process-tree supervisor (mel_opt.live.process_trees), with plain processes: every
descendant is recorded while the trees are intact, an orphan included, and all of them end
with the context, on an exception and on Ctrl-C too; the working directory goes with them."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable

import pytest

from mel_opt.live.process_trees import ProcessTrees
from mel_opt.processes import command_line, descendants, is_alive

pytestmark = pytest.mark.skipif(shutil.which("setsid") is None or not hasattr(os, "fork"),
                                reason="needs POSIX processes and setsid")

# a shell whose child detaches into a session of its own, then is orphaned after 1 s (its
# parent subshell exits): found from the tree only while that is intact
SCRIPT = "(setsid sleep 301 & sleep 1); sleep 302"


class Trees(ProcessTrees):
    def __init__(self) -> None:
        super().__init__(grace=2.0)
        self.root: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.open_home("melopt-test-trees-")
        self.env = dict(os.environ)
        self.root = self.spawn(["sh", "-c", SCRIPT], log="shell")
        self.start_monitor()

    def _roots(self) -> list[subprocess.Popen[bytes]]:
        return [] if self.root is None else [self.root]


def _sleeps(trees: ProcessTrees) -> dict[str, tuple[int, float | None]]:
    found = {}
    for pid, start in trees.processes().items():
        argv = command_line(pid) or []
        if argv[:1] == ["sleep"] and len(argv) == 2:
            found[argv[1]] = (pid, start)
    return found


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _orphaned(trees: Trees) -> dict[str, tuple[int, float | None]]:
    """The two sleeps, once both are recorded and the detached one has left the shell's tree
    (it can no longer be found from it)."""
    assert trees.root is not None
    root = trees.root.pid
    _wait_for(lambda: {"301", "302"} <= set(_sleeps(trees)))
    sleeps = _sleeps(trees)
    _wait_for(lambda: sleeps["301"][0] not in descendants([root]))
    return sleeps


def test_every_descendant_ends_with_the_context_an_orphan_included() -> None:
    with Trees() as trees:
        home = trees.home
        assert home is not None and (home / "shell.log").exists()
        sleeps = _orphaned(trees)
        assert all(is_alive(p, s) for p, s in sleeps.values())
    assert not any(is_alive(p, s) for p, s in sleeps.values())
    assert trees.home is None and not home.exists()
    trees.close()  # idempotent


def test_an_interrupt_ends_every_process_too() -> None:
    with pytest.raises(KeyboardInterrupt):
        with Trees() as trees:
            sleeps = _orphaned(trees)
            raise KeyboardInterrupt
    assert not any(is_alive(p, s) for p, s in sleeps.values())


def test_a_tree_can_be_ended_alone_and_started_once() -> None:
    trees = Trees()
    with trees:
        with pytest.raises(RuntimeError, match="already running"):
            trees.start()
        assert trees.root is not None
        _wait_for(lambda: {"301", "302"} <= set(_sleeps(trees)))
        victims = trees.tree(trees.root.pid)
        assert trees.root.pid in victims
        trees.terminate(victims, 2.0)
        assert not any(is_alive(p, s) for p, s in victims.items())
    assert trees.home is None
