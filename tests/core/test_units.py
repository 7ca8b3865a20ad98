"""Units of work (:mod:`mel_opt.units`): keys, the store, resuming, workers, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mel_opt import units
from mel_opt.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
CALLS: list[int] = []


def square(shared: int, i: int) -> int:
    """A unit: ``shared + i * i``, the call counted (in this process)."""
    CALLS.append(i)
    return shared + i * i


def numbers(shared: Any, i: int) -> dict[str, Any]:
    """A unit whose result holds numpy numbers and awkward floats."""
    return {"f": np.float32(0.1) * i, "a": np.arange(3) * i, "nan": float("nan"),
            "third": 1 / 3, "pid": os.getpid()}


def interrupted(shared: Any, i: int) -> int:
    if i == 2:
        raise KeyboardInterrupt
    return i


@dataclass(frozen=True)
class Point:
    x: float
    v: np.ndarray


class Recorder:
    def __init__(self) -> None:
        self.plans: list[tuple[int, int]] = []
        self.began: list[str] = []
        self.ended: list[str] = []

    def planned(self, total: int, done: int) -> None:
        self.plans.append((total, done))

    def started(self, label: str) -> None:
        self.began.append(label)

    def finished(self, label: str, seconds: float) -> None:
        assert seconds >= 0
        self.ended.append(label)


def test_a_fingerprint_changes_with_any_number_and_only_then() -> None:
    a = Point(0.1, np.arange(4, dtype=np.float32))
    assert units.fingerprint(a) == units.fingerprint(Point(0.1, np.arange(4, dtype=np.float32)))
    assert units.fingerprint(a) != units.fingerprint(Point(float(np.nextafter(0.1, 1.0)), a.v))
    changed = a.v.copy()
    changed[3] = np.nextafter(changed[3], np.float32(9))
    assert units.fingerprint(a) != units.fingerprint(Point(0.1, changed))
    assert units.fingerprint(a) != units.fingerprint(Point(0.1, a.v.astype(np.float64)))
    assert units.fingerprint({"b": 1, "a": 2}) == units.fingerprint({"a": 2, "b": 1})
    assert units.fingerprint([1, 2]) != units.fingerprint([2, 1])
    assert units.fingerprint({"x": 1}) != units.fingerprint({"x": 1.0})  # int and float differ


def _units(n: int, tag: str = "t") -> list[units.Unit]:
    return [units.Unit({"tag": tag, "i": i}, f"square {i}", square, (i,)) for i in range(n)]


def test_kept_units_are_read_back_and_a_changed_key_runs_again(tmp_path: Path) -> None:
    CALLS.clear()
    rec = Recorder()
    ex = units.Execution(jobs=1, store=str(tmp_path), progress=rec)
    assert units.run_units(_units(4), 10, ex) == [10, 11, 14, 19]
    assert CALLS == [0, 1, 2, 3] and rec.plans == [(4, 0)]
    assert len(list(tmp_path.glob("*.json"))) == 4
    # a rerun reads every unit back: nothing runs, the results are the same
    assert units.run_units(_units(4), 10, ex) == [10, 11, 14, 19]
    assert CALLS == [0, 1, 2, 3] and rec.plans[-1] == (4, 4)
    # one more unit, and a changed key for all: only what is new runs
    assert units.run_units(_units(5), 10, ex)[-1] == 26
    assert CALLS[-1] == 4 and rec.plans[-1] == (5, 4)
    assert units.run_units(_units(2, tag="other"), 0, ex) == [0, 1]
    assert CALLS[-2:] == [0, 1]


def test_a_damaged_or_foreign_file_is_not_read_back(tmp_path: Path) -> None:
    CALLS.clear()
    ex = units.Execution(jobs=1, store=str(tmp_path))
    todo = _units(2)
    units.run_units(todo, 0, ex)
    store = units.UnitStore(tmp_path)
    store.path(todo[0]).write_text("{not json")
    doc = json.loads(store.path(todo[1]).read_text())
    doc["key"]["i"] = 7  # a file under the right name holding another unit's key
    doc["value"] = 999
    store.path(todo[1]).write_text(json.dumps(doc))
    CALLS.clear()
    assert units.run_units(todo, 0, ex) == [0, 1]
    assert CALLS == [0, 1]


def test_results_read_back_are_the_results_computed(tmp_path: Path) -> None:
    ex = units.Execution(jobs=1, store=str(tmp_path))
    todo = [units.Unit({"n": i}, f"n {i}", numbers, (i,)) for i in range(3)]
    first = units.run_units(todo, None, ex)
    again = units.run_units(todo, None, ex)
    for a, b in zip(first, again, strict=True):
        assert a["f"] == b["f"] and type(b["f"]) is float  # float32 -> float, bit for bit
        assert a["a"] == b["a"] == [0, 1 * a["a"][1], 2 * a["a"][1]]
        assert a["third"] == b["third"] == 1 / 3
        assert np.isnan(b["nan"])


FORKED = """
import os, sys
sys.path.insert(0, {here!r})
from mel_opt import units
from mel_opt.solvers import forked
from test_units import Recorder, numbers
assert forked.can_fork(), "no fork here"
rec = Recorder()
todo = [units.Unit({{"n": i}}, f"n {{i}}", numbers, (i,)) for i in range(6)]
one = units.run_units(todo, None, units.Execution(jobs=1))
two = units.run_units(todo, None, units.Execution(jobs=2, progress=rec))
drop = ("pid", "nan")
assert [{{k: v for k, v in r.items() if k not in drop}} for r in two] == \
    [{{k: v for k, v in r.items() if k not in drop}} for r in one]
assert {{r["pid"] for r in two}} - {{os.getpid()}}, "ran in this process"
assert sorted(rec.began) == sorted(rec.ended) == sorted(u.label for u in todo)
print("same results")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="forked workers are Linux's")
def test_worker_processes_give_the_results_of_one_process_in_order() -> None:
    # in a fresh interpreter: the suite's own process may have loaded Ray (then nothing forks)
    done = subprocess.run([sys.executable, "-c", FORKED.format(here=str(Path(__file__).parent))],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and "same results" in done.stdout, done.stderr[-2000:]


def test_an_interrupted_run_keeps_what_finished(tmp_path: Path) -> None:
    ex = units.Execution(jobs=1, store=str(tmp_path))
    todo = [units.Unit({"k": i}, f"k {i}", interrupted, (i,)) for i in range(4)]
    with pytest.raises(KeyboardInterrupt):
        units.run_units(todo, None, ex)
    store = units.UnitStore(tmp_path)
    assert [store.get(u)[0] for u in todo] == [True, True, False, False]


def test_a_cluster_address_where_nothing_listens_is_one_usage_error() -> None:
    with pytest.raises(UsageError, match="--cluster: no Ray cluster answers at 127.0.0.1:1"):
        units.check_address("127.0.0.1:1")
    with pytest.raises(UsageError, match="not auto or HOST:PORT"):
        units.check_address("nowhere")


ARENA = [sys.executable, "-m", "mel_opt.cli", "arena",
         str(ROOT / "instances/mel-async/k10_T15.json"), "--max-train", "1500",
         "--max-test", "300", "--schemes", "exact,fedbuff", "--cycles", "6", "-j", "1"]


def _default_sigint() -> None:
    """Ctrl-C acts in the child as at a terminal, even when this suite runs as a background
    job (a non-interactive shell starts those with SIGINT ignored, and a child inherits that:
    the arena then ran to its end and exited 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_keeps_the_finished_runs_and_a_rerun_resumes_from_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [*ARENA, "--seeds", "10", "-o", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint)
    kept = out / "units"
    until = time.monotonic() + 240
    while time.monotonic() < until and len(list(kept.glob("*.json"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    done = len(list(kept.glob("*.json")))
    assert proc.returncode == 130, err[-2000:]
    assert 2 <= done < 20 and not (out / "arena.csv").exists()
    assert not list(kept.glob(".*.tmp*"))  # no half-written unit
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resumed: {done} of 20 units were already done" in again.stderr
    assert len(list(kept.glob("*.json"))) == 20
    # the resumed run's table is the one a run without a stop writes
    whole = subprocess.run([*ARENA, "--seeds", "10", "-o", str(tmp_path / "whole")], env=env,
                           capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0
    assert (out / "arena.csv").read_text() == (tmp_path / "whole" / "arena.csv").read_text()
    # a changed setting reads nothing back
    other = subprocess.run([*ARENA, "--seeds", "10", "--lr", "0.2", "-o", str(out)], env=env,
                           capture_output=True, text=True, timeout=600)
    assert other.returncode == 0 and "resumed" not in other.stderr
    assert len(list(kept.glob("*.json"))) == 40


def test_a_cluster_that_does_not_answer_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "mel_opt.cli", "train",
                           str(ROOT / "instances/mel-async/k10_T15.json"), "--schemes", "exact",
                           "--cluster", "127.0.0.1:1", "-o", str(tmp_path / "o")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --cluster: no Ray cluster answers at 127.0.0.1:1 (Connection refused); start "
        "one with `ray start --head`, or give its HOST:PORT"]
