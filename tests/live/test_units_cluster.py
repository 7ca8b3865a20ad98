"""Units of work on a Ray cluster of two nodes that the test starts and ends
(:class:`mel_opt.ray_local.LocalCluster`): the same rows as on this machine, and a node lost
mid-run has its unit run again on the other, nothing lost."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed")

from mel_opt import api, units  # noqa: E402
from mel_opt.arena.run import arena  # noqa: E402
from mel_opt.arena.settings import ArenaSettings  # noqa: E402
from mel_opt.processes import descendants  # noqa: E402
from mel_opt.ray_local import LocalCluster  # noqa: E402
from mel_opt.training import TrainSettings, train  # noqa: E402
from mel_opt.training.data import load_dataset  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.federation


def free_port() -> int:
    """A TCP port nothing on 127.0.0.1 listens on now (the head's)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def slow_square(shared: str, i: int) -> int:
    """A unit that leaves a mark per attempt (``<i>.<pid>`` in the folder ``shared``), then
    works for two seconds."""
    Path(shared, f"{i}.{os.getpid()}").write_text("")
    time.sleep(2.0)
    return i * i


def test_a_cluster_gives_the_local_rows_and_survives_a_lost_node(tmp_path: Path,
                                                                  ray: Any) -> None:
    inst = api.load_instance(ROOT / "instances/mel-async/k10_T15.json")
    data = load_dataset("digits", max_train=600, max_test=200)
    settings = ArenaSettings(schemes=("exact", "fedbuff", "deadline"), seeds=2, cycles=3)
    tsettings = TrainSettings(schemes=("exact", "eta"), cycles=2, seeds=2, model="softmax")
    with units.using(units.Execution(jobs=1)):
        local = arena(inst, settings, data=data)
        trained = train(inst, tsettings, data=data)
    marks = tmp_path / "marks"
    marks.mkdir()
    with LocalCluster(nodes=2, cpus=1, port=free_port(),
                      env={"PYTHONPATH": str(Path(__file__).parent)}) as cluster:
        store = tmp_path / "units"
        on = units.Execution(cluster=cluster.address, store=str(store))
        with units.using(on):
            remote = arena(inst, settings, data=data)
        assert remote.rows == local.rows  # bit for bit: every float the same
        with units.using(units.Execution(cluster=cluster.address)):
            assert train(inst, tsettings, data=data).rows == trained.rows
        assert len(list(store.glob("*.json"))) == 6
        # a node whose mel_opt differs from this machine's is refused, not mixed in
        real = units.code_version
        units.code_version = lambda: "another mel_opt"  # type: ignore[assignment]
        try:
            with pytest.raises(units.UsageError, match="runs other mel_opt code"):
                units.run_units([units.Unit({"i": 0}, "square 0", slow_square, (0,))],
                                str(tmp_path), units.Execution(cluster=cluster.address))
        finally:
            units.code_version = real  # type: ignore[method-assign]

        # the second node is killed once one of its workers has begun a unit (a mark whose
        # process is below that node's `ray start`): that unit runs again on the head, and
        # every result is there
        def on_second_node() -> bool:
            below = descendants([cluster.procs[1].pid])
            return any(int(m.name.split(".")[1]) in below for m in marks.iterdir())

        def kill_when_busy() -> None:
            until = time.monotonic() + 120
            while not on_second_node() and time.monotonic() < until:
                time.sleep(0.05)
            cluster.stop_node(1)

        killer = threading.Thread(target=kill_when_busy)
        killer.start()
        todo = [units.Unit({"i": i}, f"square {i}", slow_square, (i,)) for i in range(4)]
        got = units.run_units(todo, str(marks), units.Execution(cluster=cluster.address))
        killer.join()
        assert got == [0, 1, 4, 9]
        attempts: dict[str, int] = {}
        for m in marks.iterdir():
            attempts[m.name.split(".")[0]] = attempts.get(m.name.split(".")[0], 0) + 1
        assert sorted(attempts) == ["0", "1", "2", "3"]
        assert max(attempts.values()) == 2  # the lost node's unit ran a second time
    assert ray.gone(30), ray.alive()
