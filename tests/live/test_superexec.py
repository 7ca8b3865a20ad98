"""The warm SuperExec (mel_opt.live.superexec) and the SuperNode's patches that use it: each
ClientApp task runs in a process forked from a warm one, other task types go to Flower's own
executor, and the object pulls' back-off is set from the environment only.

The loopback federation test (test_federation.py) checks end to end that a deployment's
ClientApps run forked from the warm SuperExec.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from mel_opt.live import superexec as SX
from mel_opt.live import supernode as SN

pytest.importorskip("flwr")
from flwr.supercore.constant import TaskType  # noqa: E402
from flwr.supercore.superexec.executor.types import (  # noqa: E402
    ExecutionSpec,
    LaunchResultStatus,
)


def _spec(task_type: TaskType, token: str = "tok") -> ExecutionSpec:
    return ExecutionSpec(task_type=task_type, runtime_api_address="127.0.0.1:1", token=token,
                         insecure=True, root_certificates_path=None,
                         runtime_dependency_install=False, parent_pid=None,
                         suppress_output=False, task_id=7)


class _Fallback:
    def __init__(self) -> None:
        self.launched: list[Any] = []
        self.reconciled = 0
        self.closed = False

    def launch(self, spec: Any) -> Any:
        self.launched.append(spec)
        return "fallback"

    def reconcile(self) -> None:
        self.reconciled += 1

    def close(self) -> None:
        self.closed = True

    def get_eligible_capacity(self, types: set[Any], **kw: Any) -> tuple[set[Any], set[str]]:
        return types, set()

    def wait_for_capacity(self, *a: Any, **kw: Any) -> None:
        pass


def _reap(ex: SX.ForkExecutor, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while ex.children and time.monotonic() < end:
        ex.reconcile()
        time.sleep(0.02)
    assert not ex.children, "a forked task did not end"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_clientapp_task_runs_in_a_forked_child_with_its_token(tmp_path: Path, monkeypatch):
    out = tmp_path / "task.txt"

    def run(spec: Any) -> int:  # stands in for Flower's run_clientapp in the child
        out.write_text(f"{os.getpid()} {os.getppid()} {spec.token}")
        return 3

    monkeypatch.setattr(SX, "_run_task", run)
    fallback = _Fallback()
    ex = SX.ForkExecutor(fallback)
    result = ex.launch(_spec(TaskType.CLIENT_APP, token="t-123"))
    assert result.status == LaunchResultStatus.ACCEPTED
    (child,) = ex.children
    _reap(ex)
    pid, ppid, token = out.read_text().split()
    assert int(pid) == child != os.getpid() and int(ppid) == os.getpid()
    assert token == "t-123"
    assert ex.ended[child] == 3  # the task's own exit code
    assert fallback.launched == [] and fallback.reconciled > 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_task_that_raises_or_exits_reports_its_code(monkeypatch):
    def boom(spec: Any) -> int:
        if spec.token == "exit":
            raise SystemExit(5)
        raise RuntimeError("the task fails")

    monkeypatch.setattr(SX, "_run_task", boom)
    ex = SX.ForkExecutor(_Fallback())
    ex.launch(_spec(TaskType.CLIENT_APP, token="exit"))
    ex.launch(_spec(TaskType.CLIENT_APP, token="raise"))
    pids = sorted(ex.children)
    _reap(ex)
    assert sorted(ex.ended[p] for p in pids) == [1, 5]


def test_other_task_types_go_to_flowers_executor():
    fallback = _Fallback()
    ex = SX.ForkExecutor(fallback)
    spec = _spec(TaskType.SERVER_APP)
    assert ex.launch(spec) == "fallback"
    assert fallback.launched == [spec] and not ex.children
    ex.close()
    assert fallback.closed


def test_the_supernode_starts_the_warm_superexec_with_flowers_arguments():
    started: list[Any] = []

    class Real:
        def Popen(self, args: Any, *rest: Any, **kw: Any) -> str:  # noqa: N802
            started.append(args)
            return "proc"

        PIPE = -1

    proxy = SN._WarmPopen(Real())  # type: ignore[arg-type]
    args = ["flower-superexec", "--insecure", "--runtime-api-address", "127.0.0.1:9",
            "--parent-pid", "42"]
    assert proxy.Popen(args) == "proc"
    assert proxy.Popen(["something-else", "-x"]) == "proc"
    assert started[0][:3] == [os.sys.executable, "-m", "mel_opt.live.superexec"]
    assert started[0][3:] == args[1:]
    assert started[1] == ["something-else", "-x"]
    assert proxy.PIPE == -1  # the rest of the module passes through


def test_patch_superexec_replaces_only_the_loops_subprocess(monkeypatch):
    import subprocess

    loop = pytest.importorskip("flwr.supernode.start_client_internal")
    monkeypatch.setattr(loop, "subprocess", loop.subprocess)  # put back after the test
    assert SN.patch_superexec()
    assert isinstance(loop.subprocess, SN._WarmPopen)
    assert subprocess.Popen is not loop.subprocess.Popen  # the process's own is untouched
    assert not SN.patch_superexec()  # a second call finds it patched and changes nothing


def test_the_object_pull_back_off_follows_the_environment_only():
    from flwr.supercore.inflatable import inflatable_utils as utils

    functions = [utils.pull_objects, utils.pull_and_inflate_object_from_tree]
    saved = [dict(f.__kwdefaults__) for f in functions]
    try:
        assert [f.__kwdefaults__["initial_backoff"] for f in functions] == [1, 1]  # Flower's
        SN.patch_from_env({})  # unset: unchanged
        SN.patch_from_env({SN.PULL_BACKOFF_ENV: "fast"})  # not numbers: unchanged
        SN.patch_from_env({SN.PULL_BACKOFF_ENV: "0.5,0.1"})  # initial above the cap: unchanged
        assert [f.__kwdefaults__["backoff_cap"] for f in functions] == [10, 10]
        SN.patch_from_env({SN.PULL_BACKOFF_ENV: "0.02,0.2"})
        for f in functions:
            assert f.__kwdefaults__["initial_backoff"] == 0.02
            assert f.__kwdefaults__["backoff_cap"] == 0.2
        with pytest.raises(ValueError, match="initial <= cap"):
            SN.patch_object_pulls(0.0, 1.0)
    finally:
        for f, d in zip(functions, saved, strict=True):
            f.__kwdefaults__.clear()
            f.__kwdefaults__.update(d)


def test_warm_up_loads_the_named_data_set_once_and_ignores_a_bad_value(capsys):
    from mel_opt.live import learner

    learner.dataset.cache_clear()
    SX.warm_up({SX.WARM_DATA_ENV: SX.warm_data_value("digits", 200, 100)})
    assert learner.dataset.cache_info().currsize == 1
    ds = learner.dataset("digits", 200, 100)
    assert learner.dataset.cache_info().hits >= 1 and ds.y_train.size == 200
    SX.warm_up({SX.WARM_DATA_ENV: "no-such-data,,"})
    assert "not preloaded" in capsys.readouterr().err
    SX.warm_up({SX.WARM_DATA_ENV: "digits,x"})  # not name,max_train,max_test: nothing


def test_warm_up_finds_the_problems_before_any_child_is_forked():
    # a forked child inherits the registry: its learner's first look-up of its problem (the
    # problems' modules and the plug-ins' entry points, 0.2 s) is no longer paid per message
    from mel_opt.problems import all_problems

    all_problems.cache_clear()
    SX.warm_up({})
    assert all_problems.cache_info().currsize == 1
    before = all_problems.cache_info().hits
    assert "mel-async" in all_problems()
    assert all_problems.cache_info().hits == before + 1
