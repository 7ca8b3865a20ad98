"""The warm SuperExec (mel_opt.live.superexec): each ClientApp task runs in a process forked
from a warm one, other task types go to Flower's own executor, and the warm process loads what
its tuning names. The patches that install it are tested in test_flower_patches.py.

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
from mel_opt.live.tuning import TUNING_ENV, NodeTuning, WarmData

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


def test_main_applies_the_tuning_of_its_environment_then_warms_up(monkeypatch):
    import sys
    import types

    from mel_opt.live import flower_patches

    seen: dict[str, Any] = {}
    monkeypatch.setattr(flower_patches, "for_superexec",
                        lambda tuning, wrap: seen.update(tuning=tuning, wrap=wrap) or [])
    monkeypatch.setattr(SX, "warm_up", lambda data: seen.update(data=data))
    cli = types.ModuleType("flwr.supercore.cli")
    cli.flower_superexec = lambda: seen.update(argv0=sys.argv[0])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flwr.supercore.cli", cli)
    monkeypatch.setattr(sys, "argv", ["x"])
    tuning = NodeTuning(warm_data=WarmData("digits", 200, None))
    monkeypatch.setenv(TUNING_ENV, tuning.env()[TUNING_ENV])
    SX.main()
    assert seen == {"tuning": tuning, "wrap": SX.ForkExecutor, "data": tuning.warm_data,
                    "argv0": "flower-superexec"}


def test_warm_up_loads_the_named_data_set_once_and_ignores_a_bad_value(capsys):
    from mel_opt.live import learner

    learner.dataset.cache_clear()
    SX.warm_up(WarmData("digits", 200, 100))
    assert learner.dataset.cache_info().currsize == 1
    ds = learner.dataset("digits", 200, 100)
    assert learner.dataset.cache_info().hits >= 1 and ds.y_train.size == 200
    SX.warm_up(WarmData("no-such-data"))
    assert "not preloaded" in capsys.readouterr().err
    SX.warm_up(None)  # nothing named: nothing loaded


def test_warm_up_finds_the_problems_before_any_child_is_forked():
    # a forked child inherits the registry: its learner's first look-up of its problem (the
    # problems' modules and the plug-ins' entry points, 0.2 s) is no longer paid per message
    from mel_opt.problems import all_problems

    all_problems.cache_clear()
    SX.warm_up()
    assert all_problems.cache_info().currsize == 1
    before = all_problems.cache_info().hits
    assert "mel-async" in all_problems()
    assert all_problems.cache_info().hits == before + 1
