"""``--speeds`` in the simulation engine: learners at a fraction of a core, measured, not slept.

A learner below a whole core answers in a forked child that a duty cycle stops and continues
(:func:`mel_opt.live.throttle.run_at_speed`); its compute time is that child's wall time.
``--speeds instance`` takes the relative speeds of the instance's own time model. The timing
check is a ratio with a wide margin, and one that a busy machine cannot turn: the throttled
child's wall time against the CPU time it got (never against another run's time, which the
machine's load changes as much as the throttle does), never a time.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt import api
from mel_opt.cli import cli
from mel_opt.errors import SettingError
from mel_opt.live import learner as L
from mel_opt.live.run import LiveOptions, instance_speeds, load_settings
from mel_opt.live.throttle import ThrottledChildError, run_at_speed
from mel_opt.processes import Sampler, process_table

ROOT = Path(__file__).resolve().parents[2]
unix_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="forks a child")


# -- settings ----------------------------------------------------------------------------------
def test_speeds_are_taken_by_both_engines_on_this_machine_and_refused_remote() -> None:
    assert LiveOptions(engine="simulation", speeds="1,0.25").node_speeds(2) == [1.0, 0.25]
    assert LiveOptions(engine="simulation", speeds=(0.5,)).node_speeds(3) == [0.5] * 3
    assert LiveOptions(engine="local", speeds="Instance").speeds == "instance"
    assert LiveOptions(engine="simulation", speeds=("instance",)).node_speeds(
        2, [1.0, 0.5]) == [1.0, 0.5]
    with pytest.raises(SettingError) as info:
        LiveOptions(engine="remote", superlink="h:1", speeds="instance")
    assert info.value.as_flag().startswith("--speeds throttles learners on this machine")
    with pytest.raises(SettingError) as info:
        LiveOptions(engine="simulation", speeds="instance,0.5")
    assert "or instance" in info.value.as_flag()
    with pytest.raises(SettingError) as info:
        LiveOptions(engine="simulation", speeds="1,0.5,0.5").node_speeds(2)
    assert info.value.as_flag() == "--speeds needs one value or one per node (2), got 3"


def test_instance_speeds_are_the_files_relative_seconds_per_sample_pass() -> None:
    path = ROOT / "instances/mel-async/k5_T15.json"
    c2 = np.asarray(api.load_instance(path).c2)  # its seconds per sample-update
    speeds = instance_speeds(load_settings(path, max_train=1000, max_test=100), 5)
    assert max(speeds) == 1.0 and all(0 < s <= 1 for s in speeds)
    # mel-async's clock: C2_k seconds per sample-update; the fastest learner a whole core
    assert speeds == pytest.approx(c2.min() / c2, rel=0.02)
    # --nodes 3: the first three learners, the fastest of them a whole core
    three = instance_speeds(load_settings(path, max_train=1000, max_test=100), 3)
    assert three == pytest.approx(c2[:3].min() / c2[:3], rel=0.02)


@pytest.mark.parametrize("path, words", [
    ("dab/worked_example.json", "--speeds instance is not defined for dab: its learners plan"),
    ("adaptive-tau/svm_defaults.json", "--speeds instance is not defined for adaptive-tau: its "
                                       "file has no learners of its own"),
])
def test_speeds_instance_is_refused_where_the_file_gives_no_learner_a_speed(
        tmp_path: Path, path: str, words: str) -> None:
    for engine in ("simulation", "local"):
        res = CliRunner().invoke(cli, ["live", str(ROOT / "instances" / path), "--engine",
                                       engine, "--speeds", "instance", "--max-train", "500",
                                       "-o", str(tmp_path / "o")])
        assert res.exit_code == 2, res.output
        assert words in " ".join(res.output.split()) and "Traceback" not in res.output


# -- the throttled child -------------------------------------------------------------------------
def _spin() -> tuple[float, float]:
    """Busy work (a tenth of a second or more of a whole core); returns its own wall time
    and the CPU time it got."""
    start, cpu = time.perf_counter(), time.process_time()
    x = 0
    for i in range(5_000_000):
        x += i
    return time.perf_counter() - start, time.process_time() - cpu


@unix_only
def test_a_child_at_a_quarter_core_measures_its_work_much_slower() -> None:
    # below a whole core the work runs in a child, at 1 here
    assert run_at_speed(os.getpid, 0.5) != os.getpid() == run_at_speed(os.getpid, 1.0)
    # stopped three quarters of every period, the child's work takes about four times the
    # CPU time it gets, on its own wall clock. Compared with its own CPU time, not with a
    # run at a whole core: a busy machine slows that one too, and can give a quarter-core
    # child (which gets the CPU first after each pause) almost the share it gives a whole one
    wall, cpu = run_at_speed(_spin, 0.25)
    assert wall > 2 * cpu, (wall, cpu)


@unix_only
def test_the_child_returns_what_the_learner_keeps_and_its_errors() -> None:
    memory = L.Memory({"before": 1.0})

    def answer(mem: L.Memory) -> float:
        mem.keep_number("after", mem.number("before") + 1)
        mem.keep_arrays("a", [np.arange(3.0)])
        return 7.0

    assert L.answer_at_speed(answer, memory, 0.5) == 7.0
    assert memory.numbers == {"before": 1.0, "after": 2.0}
    assert memory.stored["a"][0].tolist() == [0.0, 1.0, 2.0]

    def fails() -> None:
        raise KeyError("boom")

    with pytest.raises(ThrottledChildError, match="KeyError: 'boom'"):
        run_at_speed(fails, 0.5)


# -- a simulation run -----------------------------------------------------------------------------
class StoppedSeen(Sampler):
    """Samples this process's descendants in a thread; ``seen`` holds those found stopped
    (SIGSTOP: a throttled learner's child between its slices of a core)."""

    every = 0.03

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[int] = set()

    def sample(self) -> None:
        me = os.getpid()
        self.seen |= {pid for pid, info in process_table([me]).items()
                      if pid != me and info.stopped}


@unix_only
@pytest.mark.slow
@pytest.mark.federation
@pytest.mark.timeout(300)
def test_a_simulated_learner_at_a_quarter_core_is_measured_slower(tmp_path: Path, ray: Any,
                                                                  mel_async_file: Any) -> None:
    pytest.importorskip("flwr")
    from mel_opt.live.report import rows_from_csv
    from mel_opt.live.run import check, live

    settings = load_settings(mel_async_file(2, 0.8), rounds=2, model="softmax", probe_s=0.3,
                             grace_s=60.0)
    with StoppedSeen() as stopped:
        summary = live(check(settings, LiveOptions(engine="simulation", speeds="1,0.25")),
                       tmp_path / "out")
    rows = rows_from_csv(tmp_path / "out" / "rounds.csv")
    assert len(rows) == 4 and all(r["status"] in ("ok", "late") for r in rows)
    # learner 1's probe and rounds ran in a child that its duty cycle stopped (learner 0 runs
    # in its Ray worker, never stopped); what a quarter core measures is the throttled
    # child's test above. How much slower than learner 0 it measured is not asserted: that
    # is the machine's load as much as the throttle's (a busy machine gives a whole-core
    # learner hardly more than the quarter core a throttled one gets; about 1.5 to 2 times
    # with two busy processes beside the run, about 4 times on an idle machine)
    assert stopped.seen
    per = {(r["round"], r["learner"]): r["compute_measured_s"] / (r["samples"] * r["passes"])
           for r in rows}
    assert all(v > 0 for v in per.values()), per
    est = summary["estimates_s_per_sample"]
    assert len(est) == 2 and all(v is not None and v > 0 for v in est), est
    assert ray.gone(20.0), ray.alive()
