"""Learners offline and back in a live run (``--availability fedscale:PATH``): the schedule
and the pauser by hand, a run of the in-process engine on its virtual clock with a behaviour
trace the test writes, the process side (a paused tree stays stopped under the throttle, and
nothing is left stopped), and the refusals (one line, exit 2)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mel_opt.errors import SettingError, UsageError
from mel_opt.live.availability import Pauser, learner_names, schedule_for
from mel_opt.live.inprocess import Clock, run_in_process
from mel_opt.live.rounds import LiveRun, LiveSettings
from mel_opt.problems.mel_async.generate import generate
from mel_opt.training import load_dataset


def _trace(path: Path, clients: dict[Any, dict[str, Any]]) -> str:
    """A FedScale behaviour trace (``client_behave_trace``: a pickled dict, as
    :func:`mel_opt.io.traces.read_fedscale_behaviour` reads it) written to ``path``."""
    path.write_bytes(pickle.dumps(clients))
    return f"fedscale:{path}"


# -- the schedule, by hand ------------------------------------------------------------------------
# a: online [0, 10] and [30, 40] of every 50 s; b: online [5, 20] of every 25 s
AB = {"a": {"active": [0.0, 30.0], "inactive": [10.0, 40.0], "finish_time": 50.0},
      "b": {"active": [5.0], "inactive": [20.0], "finish_time": 25.0}}


def test_the_schedule_turns_times_into_pauses_and_resumes(tmp_path: Path) -> None:
    s = schedule_for(_trace(tmp_path / "t", AB), ["a", "b"])
    assert "by name" in s.matched and s.learners == 2
    # t = 0: a in [0, 10]; b at 0 mod 25 = 0 < 5: offline
    assert s.offline(0.0) == {1} and s.changes(set(), 0.0) == ([1], [])
    # t = 12: a past 10 (offline until 30); b in [5, 20]
    assert s.changes({1}, 12.0) == ([0], [1])
    # t = 35: a in [30, 40]; b at 35 mod 25 = 10, in [5, 20]
    assert s.changes({0}, 35.0) == ([], [0])
    # t = 47: a past 40; b at 22, past 20: both offline
    assert s.changes(set(), 47.0) == ([0, 1], [])
    # t = 55: a at 55 mod 50 = 5; b at 55 mod 25 = 5 (the interval's ends count): both back
    assert s.changes({0, 1}, 55.0) == ([], [0, 1])
    # a message at 8 s taking 2 s ends at 10, a's last online second; 2.5 s does not
    assert s.answers(0, 8.0, 2.0) and not s.answers(0, 8.0, 2.5)
    assert not s.answers(1, 0.0) and s.answers(1, 5.0, 15.0) and not s.answers(1, 5.0, 15.1)
    assert s.answers(7, 0.0)  # a node of no learner answers as ever


def test_learners_are_matched_as_the_arena_matches_them(tmp_path: Path) -> None:
    spec = _trace(tmp_path / "t", AB)
    # no learner named a or b: learner k follows client k mod 2 (FedScale's rule)
    s = schedule_for(spec, learner_names(None, 3))
    assert "mod 2" in s.matched and s.offline(12.0) == {0, 2}

    class Named:
        learner_names = ("b", "a")

    assert schedule_for(spec, learner_names(Named(), 2)).offline(12.0) == {1}


def test_the_pauser_applies_the_changes_and_resumes_everyone_at_its_stop(
        tmp_path: Path) -> None:
    calls: list[tuple[str, int]] = []
    p = Pauser(schedule_for(_trace(tmp_path / "t", AB), ["a", "b"]),
               lambda k: calls.append(("pause", k)), lambda k: calls.append(("resume", k)))
    p.step(0.0)
    p.step(3.0)  # nothing changed
    p.step(12.0)
    assert calls == [("pause", 1), ("resume", 1), ("pause", 0)] and p.paused == {0}
    p.stop()
    assert calls[-1] == ("resume", 0) and p.paused == set()
    p.stop()  # twice: nothing more
    assert len(calls) == 4


def test_the_pauser_resumes_the_others_when_one_resume_fails(tmp_path: Path) -> None:
    resumed: list[int] = []

    def resume(k: int) -> None:
        resumed.append(k)
        if k == 0:
            raise OSError("no such process")

    p = Pauser(schedule_for(_trace(tmp_path / "t", AB), ["a", "b"]), lambda k: None, resume)
    p.step(47.0)
    with pytest.raises(OSError, match="no such process"):
        p.stop()
    assert resumed == [0, 1] and p.paused == set()


# -- the in-process engine -----------------------------------------------------------------------
SLOW = 0.05  # seconds per sample-pass (as tests/live/test_faults.py)


def test_a_learner_offline_for_two_rounds_is_missing_then_back(tmp_path: Path) -> None:
    """mel-async's 4 learners at 0.05 s per sample-pass: every round of 4 learners lasts
    10.1 s on the virtual clock (their work), 12.5 s with 3. Learner 1 (laptop1) is online
    until 10.5 s and again from 30 s; the others always. Round 1 [0, 10.1]: it answers.
    Round 2 from 10.1: it leaves at 10.5, mid-work: no answer, missing. Round 3 from 20.2:
    offline at the probe before the round, so left out. Round 4 from 32.7 (20.2 + 12.5): it
    answers the probe, is back, and trains."""
    doc = json.loads(json.dumps(generate("mohammad2020", learners=4, seed=5,
                                         params={"cycle_time_s": "15"})))
    always = {"active": [0.0], "inactive": [1000.0], "finish_time": 1000.0}
    spec = _trace(tmp_path / "client_behave_trace",
                  {"pi0": always, "laptop1": {"active": [0.0, 30.0],
                                              "inactive": [10.5, 1000.0],
                                              "finish_time": 1000.0},
                   "pi2": always, "laptop3": always})
    data = load_dataset("digits", max_train=400, max_test=200)
    run = LiveRun(LiveSettings(instance=doc, rounds=5, seed=0, model="softmax",
                               availability=spec), data)
    pools = np.array_split(np.arange(data.y_train.size), run.K)
    run_in_process(run, pools, Clock(compute_s=lambda r, k, work: SLOW * work,
                                     overhead_s=lambda r: 0.0, probe_s_per_sample=SLOW))
    assert run.stopped is None and [r["round"] for r in run.rounds] == [0, 1, 2, 3, 4, 5]
    lengths = [r["round_wall_s"] for r in run.rounds[1:]]
    assert lengths == pytest.approx([10.1, 10.1, 12.5, 10.1, 10.1])
    status = {(r["round"], r["learner"]): r["status"] for r in run.rows}
    assert [status.get((r, 1)) for r in range(1, 6)] == ["ok", "missing", None, "ok", "ok"]
    assert all(status[(r, k)] == "ok" for r in range(1, 6) for k in (0, 2, 3))
    assert [r["missing"] for r in run.rounds[1:]] == [[], [1], [1], [], []]
    assert [r["learners"] for r in run.rounds[1:]] == [4, 3, 3, 4, 4]


def test_a_learner_offline_at_the_probe_joins_when_it_answers_one(tmp_path: Path) -> None:
    """Learner 1 is offline from 0 to 15 s: it misses the probe, so it has no node yet.
    Round 1 [0, 12.5] (3 learners) goes without it; before round 2 (at 12.5 s) it is probed
    again and is still offline; before round 3 (at 25 s) it answers and joins: rows from
    round 3 on. Its orders find its part of the data: one part per node of the probe (4)."""
    doc = json.loads(json.dumps(generate("mohammad2020", learners=4, seed=5,
                                         params={"cycle_time_s": "15"})))
    spec = _trace(tmp_path / "t", {k: {"active": [15.0] if k == 1 else [0.0],
                                       "inactive": [1000.0], "finish_time": 1000.0}
                                   for k in range(4)})
    data = load_dataset("digits", max_train=400, max_test=200)
    run = LiveRun(LiveSettings(instance=doc, rounds=4, seed=0, model="softmax",
                               availability=spec), data)
    pools = np.array_split(np.arange(data.y_train.size), run.K)
    run_in_process(run, pools, Clock(compute_s=lambda r, k, work: SLOW * work,
                                     overhead_s=lambda r: 0.0, probe_s_per_sample=SLOW))
    assert run.stopped is None
    assert [r["round_wall_s"] for r in run.rounds[1:]] == pytest.approx([12.5, 12.5, 10.1,
                                                                         10.1])
    status = {(r["round"], r["learner"]): r["status"] for r in run.rows}
    assert [status.get((r, 1)) for r in range(1, 5)] == [None, None, "ok", "ok"]
    assert [r["learners"] for r in run.rounds[1:]] == [3, 3, 4, 4]
    assert run.data_spec.num_partitions == 4


def test_fedbuff_gives_up_an_offline_learners_work(tmp_path: Path) -> None:
    """FedBuff on the same learners (matched by FedScale's rule: learner k to client k):
    learner 1 answers the probe at 0 s and leaves at 1 s, before its first work (seconds of
    it) is done; that work is given up when overdue, and the buffer fills from the others."""
    doc = json.loads(json.dumps(generate("mohammad2020", learners=4, seed=5,
                                         params={"cycle_time_s": "15"})))
    spec = _trace(tmp_path / "t", {k: {"active": [0.0, 1000.0] if k == 1 else [0.0],
                                       "inactive": [1.0, 2000.0] if k == 1 else [2000.0],
                                       "finish_time": 2000.0} for k in range(4)})
    data = load_dataset("digits", max_train=400, max_test=200)
    run = LiveRun(LiveSettings(instance=doc, rounds=3, seed=0, model="softmax",
                               scheme="fedbuff", buffer=2, availability=spec), data)
    pools = np.array_split(np.arange(data.y_train.size), run.K)
    run_in_process(run, pools, Clock(compute_s=lambda r, k, work: SLOW * work,
                                     overhead_s=lambda r: 0.0, probe_s_per_sample=SLOW))
    assert run.stopped is None and len(run.rounds) == 4
    got = [(r["learner"], r["status"]) for r in run.rows]
    assert [s for k, s in got if k == 1] == ["missing"]
    assert {s for k, s in got if k != 1} == {"ok"} and len(got) >= 1 + 3 * 2


# -- the settings --------------------------------------------------------------------------------
def test_a_bad_value_or_trace_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    with pytest.raises(SettingError, match="availability") as info:
        LiveSettings(instance=doc, availability="flash:x")
    assert "\n" not in str(info.value)
    bad = tmp_path / "bad"
    bad.write_bytes(pickle.dumps({"1": {"active": [5.0], "inactive": [1.0],
                                        "finish_time": 10.0}}))
    with pytest.raises(UsageError, match=f"{bad}: client '1'") as info2:
        schedule_for(f"fedscale:{bad}", ["a"])
    assert "\n" not in str(info2.value)


def test_cli_refuses_a_bad_trace_and_an_engine_it_cannot_pause(tmp_path: Path) -> None:
    pytest.importorskip("flwr")
    from click.testing import CliRunner

    from mel_opt.cli import cli

    inst = tmp_path / "i.json"
    inst.write_text(json.dumps(generate("mohammad2020", learners=4, seed=5,
                                        params={"cycle_time_s": "15"})))
    good = _trace(tmp_path / "good", AB)
    bad = tmp_path / "bad"
    bad.write_bytes(pickle.dumps({"1": {"computation": 1.0, "communication": 1.0}}))
    cases = [
        (["--engine", "local", "--availability", f"fedscale:{bad}"],
         f"{bad}: client '1' has 'computation' but no 'active'"),
        (["--engine", "local", "--availability", "fedscale:"], "--availability expects"),
        (["--engine", "remote", "--superlink", "127.0.0.1:9", "--availability", good],
         "--availability takes learners started here offline: it needs --engine simulation, "
         "local, netns, got remote"),
        (["--scheme", "fedbuff", "--availability", good],
         "--availability in the simulation an offline learner's replies are errors, which "
         "FedBuff takes for a failed node, set aside for good: use --engine local or netns"),
    ]
    for args, words in cases:
        res = CliRunner().invoke(cli, ["live", str(inst), *args, "-o", str(tmp_path / "o")])
        assert res.exit_code == 2, res.output
        assert words in res.output and "Traceback" not in res.output
        assert len(res.output.strip().splitlines()) == 1, res.output


# -- the processes -------------------------------------------------------------------------------
def _state(pid: int) -> str:
    """The process's state letter (T: stopped)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                    reason="reads process states from /proc (Linux)")
def test_a_paused_tree_stays_stopped_under_the_throttle_and_is_continued_at_the_end() -> None:
    from mel_opt.live.process_trees import ProcessTrees

    class Trees(ProcessTrees):
        def start(self) -> None:
            self.open_home("melopt-test-pause-")
            # a parent with a child, as a SuperNode and its SuperExec
            code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                    "'import time; time.sleep(60)']); time.sleep(60)")
            self.proc = self.spawn([sys.executable, "-c", code])
            self.start_monitor()
            self.throttle({self.proc.pid: 0.5}, 0.02)

        def _roots(self) -> list[subprocess.Popen[bytes]]:
            return [self.proc]

    trees = Trees(grace=2.0)
    with trees:
        root = trees.proc.pid
        for _ in range(200):  # the child recorded by the monitor
            if len(trees.tree(root)) == 2:
                break
            time.sleep(0.05)
        pids = sorted(trees.tree(root))
        assert len(pids) == 2
        trees.pause(root)
        # many duty cycles later (each continues what it stopped), the tree is still stopped
        for _ in range(10):
            time.sleep(0.05)
            assert [_state(p) for p in pids] == ["T", "T"]
        trees.resume(root)
        trees.pause(root)  # paused again at the end: close continues it, then ends it
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _state(pid) == "Z"


# -- the simulation's client app ------------------------------------------------------------------
def test_the_simulations_client_app_answers_offline_with_an_error(tmp_path: Path) -> None:
    """The client app of the simulation engine (called directly, no Ray): learner 0 (client
    a, online [0, 100] s) answers the probe; learner 1 (client b, online from 500 s) replies
    with Flower's NODE_UNAVAILABLE error and a one-line reason, which the server reads as no
    answer."""
    pytest.importorskip("flwr")
    from flwr.app import Context, Message, Metadata, RecordDict
    from flwr.common.constant import ErrorCode

    from mel_opt.live.client import make_client_app
    from mel_opt.live.wire import content_of, records_of
    from mel_opt.problems.messages import DataSpec, ProbeOrder, ProbeReport

    spec = _trace(tmp_path / "t", {
        "a": {"active": [0.0], "inactive": [100.0], "finish_time": 1000.0},
        "b": {"active": [500.0], "inactive": [600.0], "finish_time": 1000.0}})
    app = make_client_app(None, schedule_for(spec, ["a", "b"]), time.time())
    order = ProbeOrder("mel-async", "softmax", 32, 0, 0.5, 0.05,
                       DataSpec("digits", "iid", 2, 0, 400, 200))
    replies = []
    for pid in (0, 1):
        msg = Message(content_of(order.encode()), metadata=Metadata(
            1, f"m{pid}", 0, 1, "", "probe", time.time(), 60.0, "query"))
        ctx = Context(run_id=1, node_id=1, node_config={"partition-id": pid,
                                                         "num-partitions": 2},
                      state=RecordDict(), run_config={})
        replies.append(app(msg, ctx))
    assert not replies[0].has_error()
    assert ProbeReport.decode(records_of(replies[0].content)).learner == 0
    assert replies[1].has_error() and replies[1].error.code == ErrorCode.NODE_UNAVAILABLE
    assert replies[1].error.reason == "learner 1 is offline (--availability)"
