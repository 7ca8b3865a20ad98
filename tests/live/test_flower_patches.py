"""The patches of Flower's internals (mel_opt.live.flower_patches), against the pinned Flower.

Each patch replaces one attribute of one Flower module and assumes something of it (a module
global, a signature, a default, what its callers pass). These tests check the installed Flower
is the version pinned, that every target exists as assumed, that each patch does what it says
and that ``undo`` puts the original back: after a Flower upgrade they fail here, loudly, rather
than the patches silently doing nothing.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import threading
import time
import tomllib
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from mel_opt.live import flower_patches as P

ROOT = Path(__file__).resolve().parents[2]
flwr = pytest.importorskip(
    "flwr", reason="Flower is not installed (the 'flower' extra): the patches of "
                   "mel_opt.live.flower_patches are not checked against it")


def _source(module: ModuleType) -> str:
    return inspect.getsource(module)


# -- the version -------------------------------------------------------------------------------
def test_the_installed_flower_is_the_pinned_one() -> None:
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["flower"]
    assert f"flwr[simulation]=={P.FLOWER_VERSION}" in pins, (
        "pyproject's Flower pin and flower_patches.FLOWER_VERSION differ: check every patch "
        "against the new version, then move both")
    assert P.installed_version() == P.FLOWER_VERSION, (
        f"Flower {P.installed_version()} is installed; the patches are written for "
        f"{P.FLOWER_VERSION}")


@pytest.mark.parametrize("patch", sorted(P.TARGETS))
def test_every_attribute_a_patch_replaces_exists(patch: str) -> None:
    module_name, attributes = P.TARGETS[patch]
    module = importlib.import_module(module_name)
    missing = [a for a in attributes if not hasattr(module, a)]
    assert not missing, f"{patch}: {module_name} has no {missing}"
    assert callable(getattr(P, patch))


# -- the SuperNode's waits ---------------------------------------------------------------------
def test_the_supernode_loop_sleeps_as_the_idle_poll_patch_assumes() -> None:
    loop = importlib.import_module("flwr.supernode.start_client_internal")
    assert loop.time is time  # a module global the patch can replace
    sleeps = re.findall(r"\btime\.sleep\(([^)]*)\)", _source(loop))
    # the idle wait between pulls (3 s), and the waits for a reply (0.5 s): told apart by
    # IDLE_SLEEP_S
    assert sorted(set(sleeps)) == ["0.5", "3"], sleeps
    assert float("3") >= P.IDLE_SLEEP_S > float("0.5")


def test_the_idle_poll_patch_shortens_only_the_loops_sleeps_and_is_undone() -> None:
    loop = importlib.import_module("flwr.supernode.start_client_internal")
    patch = P.short_idle_poll(0.01)
    assert patch is not None
    try:
        began = time.monotonic()
        loop.time.sleep(3)  # Flower's idle wait
        assert time.monotonic() - began < 2.5
        assert loop.time.monotonic is time.monotonic  # everything else passes through
        assert time.sleep is not loop.time.sleep  # the process's own time is untouched
        assert P.short_idle_poll(0.01) is None  # patched already: nothing changes
    finally:
        patch.undo()
    assert loop.time is time
    patch.undo()  # idempotent


def test_the_waits_for_a_reply_are_capped_apart_from_the_idle_wait() -> None:
    slept: list[float] = []

    class Clock:
        def sleep(self, seconds: float) -> None:
            slept.append(seconds)

    proxy = P._ShortSleep(Clock(), 0.2, 0.02)  # type: ignore[arg-type]
    proxy.sleep(3)  # Flower's idle wait between pulls
    proxy.sleep(0.5)  # its wait for a ClientApp's reply
    proxy.sleep(0.01)  # shorter than both caps: unchanged
    assert slept == [0.2, 0.02, 0.01]


def test_the_supernode_starts_its_superexec_as_the_warm_patch_assumes() -> None:
    loop = importlib.import_module("flwr.supernode.start_client_internal")
    assert loop.subprocess is subprocess
    text = _source(loop)
    assert 'command = ["flower-superexec"]' in text
    assert "subprocess.Popen(command)" in text


def test_the_warm_patch_starts_mel_opts_superexec_with_flowers_arguments() -> None:
    started: list[Any] = []

    class Real:
        def Popen(self, args: Any, *rest: Any, **kw: Any) -> str:  # noqa: N802
            started.append(args)
            return "proc"

        PIPE = -1

    proxy = P._WarmPopen(Real())  # type: ignore[arg-type]
    args = ["flower-superexec", "--insecure", "--runtime-api-address", "127.0.0.1:9",
            "--parent-pid", "42"]
    assert proxy.Popen(args) == "proc"
    assert proxy.Popen(["something-else", "-x"]) == "proc"
    assert started[0][1:3] == ["-m", P.WARM_SUPEREXEC_MODULE]
    assert started[0][3:] == args[1:]
    assert started[1] == ["something-else", "-x"]
    assert proxy.PIPE == -1  # the rest of the module passes through


def test_the_warm_patch_replaces_only_the_loops_subprocess_and_is_undone() -> None:
    loop = importlib.import_module("flwr.supernode.start_client_internal")
    with P.warm_superexec() as patch:
        assert patch is not None
        assert isinstance(loop.subprocess, P._WarmPopen)
        assert subprocess.Popen is not loop.subprocess.Popen  # the process's own untouched
        assert P.warm_superexec() is None  # patched already: nothing changes
    assert loop.subprocess is subprocess


# -- object pulls ------------------------------------------------------------------------------
def test_the_pull_functions_have_the_defaults_the_patch_rewrites() -> None:
    from flwr.supercore.inflatable import inflatable_utils as utils

    for name in ("pull_objects", "pull_and_inflate_object_from_tree"):
        params = inspect.signature(getattr(utils, name)).parameters
        for key, flowers in (("initial_backoff", 1), ("backoff_cap", 10)):
            assert params[key].kind is inspect.Parameter.KEYWORD_ONLY, (name, key)
            assert params[key].default == flowers, (name, key)


def _calls_in(tree: ast.AST, names: tuple[str, ...]) -> list[tuple[ast.Call, str | None]]:
    """The calls of ``names`` in ``tree``, each with the function it is in."""
    found: list[tuple[ast.Call, str | None]] = []

    def visit(node: ast.AST, func: str | None) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            func = node.name
        if isinstance(node, ast.Call):
            f = node.func
            if (f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)) in names:
                found.append((node, func))
        for child in ast.iter_child_nodes(node):
            visit(child, func)

    visit(tree, None)
    return found


def _pull_calls() -> list[tuple[str, ast.Call, str | None]]:
    """Every call of a pull function in Flower's package, with the function it is in."""
    names = ("pull_objects", "pull_and_inflate_object_from_tree")
    calls = []
    root = Path(flwr.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if any(f"{n}(" in text for n in names):
            calls += [(str(path.relative_to(root)), call, func)
                      for call, func in _calls_in(ast.parse(text), names)]
    return calls


def test_flowers_callers_leave_the_back_off_to_the_defaults() -> None:
    calls = _pull_calls()
    assert {path for path, _, _ in calls} >= {"supernode/start_client_internal.py",
                                              "supernode/runtime/run_clientapp.py",
                                              "superlink/grid/http_grid.py"}
    for path, call, func in calls:
        for kw in call.keywords:
            if kw.arg in ("initial_backoff", "backoff_cap"):
                # only a pull function passing its own (patched) default through
                passed = isinstance(kw.value, ast.Name) and kw.value.id == kw.arg
                assert passed and func in ("pull_objects",
                                           "pull_and_inflate_object_from_tree"), (
                    f"{path}:{call.lineno} sets {kw.arg}: the patched default is not used")


def test_the_pull_patch_shortens_the_back_off_and_is_undone() -> None:
    from flwr.supercore.inflatable import inflatable_utils as utils
    from flwr.supercore.inflatable.inflatable_utils import ObjectUnavailableError

    with pytest.raises(ValueError, match="initial <= cap"):
        P.short_object_pulls(0.0, 1.0)
    tries: list[float] = []

    def pull(object_id: str) -> bytes:
        tries.append(time.monotonic())
        if len(tries) < 4:
            raise ObjectUnavailableError(object_id)
        return b"x"

    with P.short_object_pulls(0.02, 0.05) as patch:
        assert patch is not None
        began = time.monotonic()
        assert utils.pull_objects(["a"], pull) == {"a": b"x"}
        assert time.monotonic() - began < 0.9  # Flower's back-off: 1 + 2 + 4 s
    for f in (utils.pull_objects, utils.pull_and_inflate_object_from_tree):
        assert f.__kwdefaults__ is not None
        assert (f.__kwdefaults__["initial_backoff"], f.__kwdefaults__["backoff_cap"]) == (1, 10)


# -- the SuperExec's executor ------------------------------------------------------------------
def test_the_superexec_gets_its_executor_as_the_fork_patch_assumes() -> None:
    from flwr.supercore.constant import ExecutorType
    from flwr.supercore.superexec import run_superexec as loop
    from flwr.supercore.superexec.executor import factory

    assert loop.get_executor is factory.get_executor
    params = list(inspect.signature(factory.get_executor).parameters)
    assert params[0] == "executor_type" and {"insecure", "root_certificates_path"} <= set(params)
    assert re.search(r"\bget_executor\(\s*executor_type\b", _source(loop))
    assert type(factory.get_executor(ExecutorType.SUBPROCESS)).__name__ == "SubprocessExecutor"


def test_the_fork_patch_wraps_the_subprocess_executor_only_and_is_undone() -> None:
    from flwr.supercore.constant import ExecutorType
    from flwr.supercore.superexec import run_superexec as loop

    real = loop.get_executor
    with P.fork_executor(lambda executor: ("wrapped", executor)) as patch:
        assert patch is not None
        wrapped = loop.get_executor(ExecutorType.SUBPROCESS)
        assert wrapped[0] == "wrapped" and type(wrapped[1]).__name__ == "SubprocessExecutor"
        assert P.fork_executor(lambda e: e) is None  # patched already: nothing changes
    assert loop.get_executor is real


def test_the_fork_executor_speaks_flowers_executor_protocol() -> None:
    from flwr.supercore.superexec.executor.types import ExecutionSpec, Executor
    from flwr.supernode.runtime.run_clientapp import run_clientapp

    from mel_opt.live.superexec import ForkExecutor

    for name, member in inspect.getmembers(Executor, inspect.isfunction):
        if name.startswith("_"):
            continue
        theirs, ours = inspect.signature(member), inspect.signature(getattr(ForkExecutor, name))
        assert [(p.name, p.kind, p.default) for p in theirs.parameters.values()] == [
            (p.name, p.kind, p.default) for p in ours.parameters.values()], name
    used = {"task_type", "runtime_api_address", "token", "insecure", "root_certificates_path",
            "parent_pid", "runtime_dependency_install", "suppress_output"}
    assert used <= set(inspect.signature(ExecutionSpec).parameters)
    assert {"runtime_api_address", "token", "insecure", "certificates", "parent_pid",
            "runtime_dependency_install"} <= set(inspect.signature(run_clientapp).parameters)


# -- the simulation's sweep --------------------------------------------------------------------
def _state() -> Any:
    from flwr.server.superlink.linkstate import LinkStateFactory
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME
    from flwr.supercore.object_store import ObjectStoreFactory
    from flwr.superlink.federation import NoOpFederationManager

    return LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(),
                            ObjectStoreFactory()).state()


def test_the_simulation_state_has_what_the_one_scan_sweep_reads() -> None:
    from flwr.server.superlink.fleet.vce import vce_api
    sim = importlib.import_module("flwr.simulation.run_simulation")  # the module

    assert list(inspect.signature(vce_api.add_messages_to_queue).parameters) == [
        "state", "queue", "nodes_mapping", "f_stop"]
    assert re.search(r"LinkStateFactory\(\s*FLWR_IN_MEMORY_DB_NAME", _source(sim))
    state = _state()
    assert isinstance(state.message_ins_store, dict)
    assert isinstance(state.lock, type(threading.RLock()))  # the scan calls the check under it
    assert list(inspect.signature(state._check_stored_messages).parameters)[0] == "message_ids"
    assert callable(importlib.import_module("flwr.supercore.date").now)


class _OneSweep:
    def __init__(self) -> None:
        self.asked = 0

    def is_set(self) -> bool:
        self.asked += 1
        return self.asked > 1

    def wait(self, seconds: float) -> bool:
        return False


def _sweep_with(sweep: Any) -> tuple[list[str], list[str]]:
    """One sweep over a store: what it queued and which messages are marked delivered."""
    import queue

    state = _state()
    state._check_stored_messages = lambda ids, run_id=None: None  # every message valid
    msgs = {}
    for tag, dst, delivered in (("a1", 1, ""), ("a2", 1, ""), ("b0", 2, "earlier"),
                                ("b1", 2, ""), ("c1", 3, ""), ("d1", 4, "")):
        msgs[tag] = SimpleNamespace(tag=tag, metadata=SimpleNamespace(
            dst_node_id=dst, delivered_at=delivered, run_id=1))
    state.message_ins_store.update(msgs)
    out: queue.Queue[Any] = queue.Queue()
    sweep(state, out, {1: 0, 2: 1, 4: 2}, _OneSweep())
    queued = sorted(m.tag for m in list(out.queue))
    return queued, sorted(t for t, m in msgs.items() if m.metadata.delivered_at not in
                          ("", "earlier"))


def test_one_scan_per_sweep_hands_out_what_flowers_sweep_hands_out_and_is_undone() -> None:
    from flwr.server.superlink.fleet.vce import vce_api

    flowers = vce_api.add_messages_to_queue
    expected = _sweep_with(flowers)
    assert expected == (["a1", "b1", "d1"], ["a1", "b1", "d1"])
    with P.one_scan_per_sweep():
        assert vce_api.add_messages_to_queue is not flowers
        assert _sweep_with(vce_api.add_messages_to_queue) == expected
    assert vce_api.add_messages_to_queue is flowers


# -- what a node's processes apply -------------------------------------------------------------
def test_a_local_nodes_environment_applies_the_local_engines_values() -> None:
    from flwr.supercore.inflatable import inflatable_utils as utils

    from mel_opt.live.federation import node_env
    from mel_opt.live.tuning import DEFAULT_TUNING, NodeTuning

    loop = importlib.import_module("flwr.supernode.start_client_internal")
    tuning = NodeTuning.from_env(node_env(DEFAULT_TUNING))
    assert tuning is not None
    patches = P.for_supernode(tuning)
    try:
        assert len(patches) == 3
        sleep = loop.time
        assert isinstance(sleep, P._ShortSleep) and (sleep._cap, sleep._reply_cap) == (0.2, 0.02)
        assert isinstance(loop.subprocess, P._WarmPopen)
        for f in (utils.pull_objects, utils.pull_and_inflate_object_from_tree):
            assert f.__kwdefaults__ is not None
            assert (f.__kwdefaults__["initial_backoff"],
                    f.__kwdefaults__["backoff_cap"]) == (0.02, 0.2)
    finally:
        for patch in reversed(patches):
            patch.undo()
    assert loop.time is time and loop.subprocess is subprocess
    assert P.for_serverapp(None) == [] and P.for_serverapp(NodeTuning(pull_backoff=None)) == []
