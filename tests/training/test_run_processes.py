"""(scheme, seed) runs trained in worker processes give the rows one process gives."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from mel_opt import api
from mel_opt.solvers import forked
from mel_opt.training import TrainSettings, load_dataset, train
from mel_opt.training.run import run_processes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=300, max_test=100)


def test_worker_processes_give_the_same_rows(digits: Any) -> None:
    inst = api.load_instance(ROOT / "instances/mel-async/k10_T15.json")
    base = dict(schemes=("exact", "eta"), cycles=2, seeds=2, model="softmax", lr=0.5)
    one = train(inst, TrainSettings(**base, processes=1), data=digits)
    two = train(inst, TrainSettings(**base, processes=2), data=digits)
    assert len(one.rows) == 2 * 2 * 3
    assert two.rows == one.rows  # the same numbers, in the same order
    seen: list[tuple[int, int]] = []
    train(inst, TrainSettings(**base, processes=2), data=digits,
          progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 8) for i in range(1, 9)]  # every cycle of every run, counted once


def test_how_many_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    s = TrainSettings(schemes=("a",), processes=4)
    assert run_processes(s, 3) == 3 and run_processes(s, 1) == 1
    assert run_processes(TrainSettings(schemes=("a",), processes=1), 9) == 1
    # where a fork is not safe (Ray loaded: its gRPC threads' locks), one process trains all
    monkeypatch.setattr(forked, "can_fork", lambda: False)
    assert run_processes(s, 3) == 1


FRESH = """
from pathlib import Path
from mel_opt import api
from mel_opt.training import TrainSettings, load_dataset, train
from mel_opt.solvers import forked
from mel_opt.training.run import run_processes
digits = load_dataset("digits", max_train=300, max_test=100)
inst = api.load_instance(Path({root!r}) / "instances/mel-async/k10_T15.json")
base = dict(schemes=("exact", "eta"), cycles=2, seeds=2, model="softmax", lr=0.5)
assert run_processes(TrainSettings(**base, processes=2), 4) == 2, "no workers"
one = train(inst, TrainSettings(**base, processes=1), data=digits)
two = train(inst, TrainSettings(**base, processes=2), data=digits)
assert two.rows == one.rows and len(one.rows) == 12
print("same rows")
"""


def test_forked_workers_give_the_same_rows_in_a_fresh_interpreter() -> None:
    # the suite's own process may have loaded Ray (then it trains in one process): the
    # workers are checked where nothing forbids a fork
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FRESH.format(root=str(ROOT))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "same rows" in done.stdout, done.stderr[-2000:]


def _in_a_daemon(queue: Any) -> None:
    queue.put(run_processes(TrainSettings(schemes=("a",), processes=4), 9))


def test_a_daemonic_worker_trains_in_itself() -> None:
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=_in_a_daemon, args=(queue,), daemon=True)
    p.start()
    assert queue.get(timeout=60) == 1
    p.join(timeout=60)


@pytest.mark.parametrize("processes", [1, 2])
def test_a_converged_run_stops_after_its_patience(digits: Any, processes: int) -> None:
    inst = api.load_instance(ROOT / "instances/mel-async/k10_T15.json")
    seen: list[tuple[int, int]] = []
    # a learning rate so small the accuracy never moves: best at cycle 0, then 3 cycles
    # without progress, and the run ends there (rows of cycles 0-3, not 0-10)
    run = train(inst, TrainSettings(schemes=("exact",), cycles=10, seeds=2, model="softmax",
                                    lr=1e-12, patience=3, processes=processes),
                data=digits, progress=lambda done, total: seen.append((done, total)))
    assert [r["cycle"] for r in run.rows] == [0, 1, 2, 3] * 2
    assert seen[-1] == (20, 20)  # the cycles it skipped count as done
    # with room to learn, patience 3 lets every cycle run
    full = train(inst, TrainSettings(schemes=("exact",), cycles=4, seeds=1, model="softmax",
                                     lr=0.5, patience=3, processes=processes), data=digits)
    assert [r["cycle"] for r in full.rows] == [0, 1, 2, 3, 4]


def test_a_run_stops_once_it_has_reached_every_target(digits: Any) -> None:
    from mel_opt.training.curves import learning_curve
    from mel_opt.training.report import summarise

    inst = api.load_instance(ROOT / "instances/mel-async/k10_T15.json")
    base = dict(schemes=("exact", "sync"), cycles=8, seeds=2, model="softmax", lr=0.5,
                targets=(0.5, 0.8), processes=1)
    every = train(inst, TrainSettings(**base), data=digits)
    until = train(inst, TrainSettings(**base, until_targets=True), data=digits)
    for scheme in ("exact", "sync"):
        for seed in (0, 1):
            full = [r for r in every.rows if r["scheme"] == scheme and r["seed"] == seed]
            cut = [r for r in until.rows if r["scheme"] == scheme and r["seed"] == seed]
            hit = next(r["cycle"] for r in full if r["cycle"] and r["accuracy"] >= 0.8)
            assert hit < 8  # the set-up reaches the last target inside the cycles
            assert cut == full[:hit + 1]  # the same rows, up to the cycle it reached 0.8
    a, b = summarise(every), summarise(until)
    for scheme in ("exact", "sync"):
        for t in ("0.5", "0.8"):
            assert a["schemes"][scheme]["targets"][t]["cycles"] == \
                b["schemes"][scheme]["targets"][t]["cycles"]
    # the curve is drawn while both seeds run: up to the earlier seed's stop
    ends = {s: min(max(r["cycle"] for r in until.rows if r["scheme"] == s and r["seed"] == k)
                   for k in (0, 1)) for s in ("exact", "sync")}
    curve = learning_curve(until, {})
    for s, end in ends.items():
        assert max(r["cycle"] for r in curve if r["scheme"] == s) == end
