"""Learners that go offline and come back (a FedScale behaviour trace): the trace read
safely, the availability by hand, and each loop of the arena by hand (a learner offline at a
round's start is not invited; one that leaves mid-work loses its update)."""

from __future__ import annotations

import dataclasses
import math
import pickle
from pathlib import Path

import numpy as np
import pytest

from mel_opt.api import parse_instance
from mel_opt.arena.availability import Availability, availability_for, match
from mel_opt.arena.run import work_clock
from mel_opt.arena.runner import Run, allocation_run, buffered_run, model_bytes, rounds_run
from mel_opt.arena.settings import ArenaSettings
from mel_opt.errors import SettingError, UsageError
from mel_opt.io.traces import read_fedscale_behaviour, read_fedscale_capacity
from mel_opt.problems.learning import RunContext
from mel_opt.schemes import SCHEMES
from mel_opt.training import load_dataset
from mel_opt.training.mlp import init_params, layers_for
from mel_opt.training.partition import make_pools, parse_partition, proportional_sizes

# two learners; equal share 50 samples: a takes 0.55 + 13 x 0.5 = 7.05 s for the fixed 13
# passes, b 1.1 + 13 x 1 = 14.1 s (past T = 10 s)
MEL_ASYNC = {"problem": "mel-async", "schema_version": 1, "name": "two", "cycle_time_s": 10.0,
             "total_samples": 100, "min_samples": 10, "max_samples": 100,
             "learners": [{"name": "a", "c2": 0.01, "c1": 0.001, "c0": 0.5},
                          {"name": "b", "c2": 0.02, "c1": 0.002, "c0": 1.0}]}


def _trace(tmp_path: Path, clients: dict, name: str = "client_behave_trace") -> Path:
    path = tmp_path / name
    path.write_bytes(pickle.dumps(clients))
    return path


def test_the_trace_is_read_and_bad_ones_name_client_and_field(tmp_path: Path) -> None:
    good = {"a": {"active": [0, 50], "inactive": [20, 100], "finish_time": 100,
                  "duration": 7, "model": "x"},
            7: {"active": [10.5], "inactive": [30], "finish_time": 40.0}}
    tr = read_fedscale_behaviour(_trace(tmp_path, good))
    assert tr.ids == ("a", "7")
    assert tr.active[0].tolist() == [0, 50] and tr.inactive[1].tolist() == [30]
    assert tr.finish_s.tolist() == [100.0, 40.0]
    for record, match_ in [
        ({"active": [0, 5], "inactive": [3], "finish_time": 9},
         r"'active' has 2 times and 'inactive' 1"),
        ({"active": [0, 5], "inactive": [6, 9], "finish_time": 9},
         r"interval 1 starts at 5 s, before interval 0 ends at 6 s"),
        ({"active": [4], "inactive": [3], "finish_time": 9}, r"'active'\[0\] = 4 is after"),
        ({"active": [0], "inactive": [3], "finish_time": 0},
         r"'finish_time' must be a positive finite number, got 0"),
        ({"active": [-1], "inactive": [3], "finish_time": 9},
         r"'active'\[0\] must be a non-negative finite number, got -1"),
        ({"active": "0", "inactive": [3], "finish_time": 9}, r"'active' must be a list of "
                                                             r"times, got str"),
        ({"active": [float("nan")], "inactive": [3], "finish_time": 9},
         r"'active'\[0\] must be a non-negative finite number, got nan"),
        ({"active": [0], "inactive": [10**400], "finish_time": 9},
         r"'inactive'\[0\] is an integer of about 401 digits"),
        ({"active": [0], "inactive": [3]}, r"has no 'finish_time'"),
        ({"computation": 5.0, "communication": 1.0},
         r"has 'computation' but no 'active': this is a FedScale device-capacity file"),
    ]:
        path = _trace(tmp_path, {"u9": record}, "behave.pkl")
        with pytest.raises(UsageError, match=r"behave\.pkl: client 'u9':? " + match_):
            read_fedscale_behaviour(path)
    # the behaviour trace given as a capacity file says what it is
    with pytest.raises(UsageError, match=r"this is a FedScale behaviour trace"):
        read_fedscale_capacity(_trace(tmp_path, good))


def test_availability_by_hand() -> None:
    # learner 0: online [0, 20] and [50, 100], repeating every 100 s (the second runs into
    # the next period's first); learner 1: online [10, 30] every 40 s
    av = Availability((np.array([0.0, 50.0]), np.array([10.0])),
                      (np.array([20.0, 100.0]), np.array([30.0])), np.array([100.0, 40.0]))
    assert [bool(av.online([0], t)[0]) for t in (0, 20, 21, 49, 50, 100, 120, 121)] == \
        [True, True, False, False, True, True, True, False]
    assert [av.offline_at(0, t) for t in (0, 15, 25, 60, 150)] == [20, 20, 25, 120, 220]
    assert av.next_online([0, 0, 0], 25).tolist() == [50.0] * 3
    assert av.next_online([0], 121).tolist() == [150.0]
    assert [av.offline_at(1, t) for t in (5, 10, 45, 55)] == [5, 30, 45, 70]
    assert av.next_online([1, 1], 31).tolist() == [50.0, 50.0]
    assert av.left([0, 1], 0.0).tolist() == [20.0, 0.0]
    assert av.lost([0, 0, 1], 0.0, np.array([20.0, 20.5, 5.0])).tolist() == [False, True, True]
    always = Availability((np.array([0.0]),), (np.array([5.0]),), np.array([5.0]))
    assert always.offline_at(0, 1e6) == math.inf


def test_learners_are_matched_by_name_else_by_fedscales_rule(tmp_path: Path) -> None:
    trace = read_fedscale_behaviour(_trace(tmp_path, {
        i: {"active": [float(i)], "inactive": [50.0], "finish_time": 100} for i in range(3)}))
    by_name = match(trace, ["2", "0"])
    assert [a[0] for a in by_name.starts] == [2.0, 0.0] and "by name" in by_name.matched
    by_id = match(trace, ["7", "5"])  # 7 mod 3 = 1, 5 mod 3 = 2
    assert [a[0] for a in by_id.starts] == [1.0, 2.0] and "client id mod 3" in by_id.matched
    by_index = match(trace, ["x", "y", "z", "w"])
    assert [a[0] for a in by_index.starts] == [0.0, 1.0, 2.0, 0.0]
    with pytest.raises(UsageError, match=r"--availability expects fedscale:PATH"):
        availability_for("flash:x", ["a"])
    with pytest.raises(SettingError):
        ArenaSettings(availability="oort:x")


def _run(s: ArenaSettings, doc: dict, av: Availability | None) -> Run:
    inst = parse_instance(doc)
    ds = load_dataset("digits").astype(np.dtype("float32"))
    rng = np.random.default_rng([0, 7])
    pools = make_pools(ds.y_train, proportional_sizes(np.ones(inst.K), ds.y_train.size),
                       parse_partition("iid"), ds.classes, rng)
    init = init_params(layers_for("softmax", ds.features, ds.classes), 0, np.float32)
    clock = work_clock(inst)
    return Run(ds, init, pools, clock, s, rng, s.cycles * clock.budget_s, availability=av)


def _one(starts: list[float], ends: list[float], period: float) -> tuple:
    return np.array(starts), np.array(ends), period


def _av(*learners: tuple) -> Availability:
    return Availability(tuple(x[0] for x in learners), tuple(x[1] for x in learners),
                        np.array([x[2] for x in learners], dtype=float))


def test_deadline_rounds_by_hand() -> None:
    # a online [0, 5] and [20, 100], b always; m = 2, both invited when online, T = 10 s.
    # Round 1 (t = 0): a leaves at 5 s before its 7.05 s, b misses T: nothing kept, the
    # round lasts T; bytes 2 down + 1 up (a sent none); busy 5 + 10 s.
    # Round 2 (t = 10): a offline, not invited; b alone, past T: 2 copies, busy 10 s.
    # Round 3 (t = 20): a back and kept (7.05 s), b past T: 4 copies, busy 7.05 + 10 s,
    # a idle 10 - 7.05 s.
    av = _av(_one([0, 20], [5, 100], 100), _one([0], [100], 100))
    run = _run(ArenaSettings(cycles=3, model="softmax"), MEL_ASYNC, av)
    rows = list(rounds_run(run, SCHEMES["deadline"].policy(run)))
    mb = model_bytes(run.init)
    assert [r["time_s"] for r in rows] == [0, 10, 20, 30]
    assert [r["bytes"] / mb for r in rows] == pytest.approx([0, 3, 5, 9])
    assert [r["dropped"] for r in rows] == [0, 2, 3, 4]
    assert [r["busy_s"] for r in rows] == pytest.approx([0, 15, 25, 42.05])
    assert rows[-1]["idle_s"] == pytest.approx(10 - 7.05)
    assert rows[1]["accuracy"] == rows[2]["accuracy"] != rows[3]["accuracy"]
    # nobody online: the round's budget passes without work
    none = _av(_one([50], [60], 100), _one([50], [60], 100))
    run = _run(ArenaSettings(cycles=2, model="softmax"), MEL_ASYNC, none)
    rows = list(rounds_run(run, SCHEMES["deadline"].policy(run)))
    assert [(r["time_s"], r["bytes"]) for r in rows] == [(0, 0), (10, 0), (20, 0)]


def test_fedbuff_learner_leaves_and_comes_back_by_hand() -> None:
    # one learner of 1.8 s... (its time B from the clock): online [0, B/2] and [B, 1000]:
    # pushed at 0, it leaves at B/2 (given up, 1 copy down, busy B/2), is back at B, pushed
    # again and answers at 2 B: the first server step, 3 copies moved, busy 1.5 B
    doc = {**MEL_ASYNC, "learners": MEL_ASYNC["learners"][:1]}
    s = ArenaSettings(cycles=2, model="softmax", buffer=1)
    clock = work_clock(parse_instance(doc))
    B = float(clock.seconds(np.array([0]), clock.passes)[0])
    run = _run(s, doc, _av(_one([0, B], [B / 2, 1000], 1000)))
    rows = buffered_run(run, SCHEMES["fedbuff"])
    mb = model_bytes(run.init)
    assert rows[1]["step"] == 1 and rows[1]["time_s"] == pytest.approx(2 * B)
    assert rows[1]["bytes"] == pytest.approx(3 * mb)
    assert rows[1]["busy_s"] == pytest.approx(1.5 * B) and rows[1]["dropped"] == 1
    assert np.all(np.diff([r["time_s"] for r in rows]) > 0)


def test_allocation_cycles_by_hand() -> None:
    # the exact allocation's cycles of T = 10 s; a leaves at 0.3 s, before any update can
    # finish (C0 alone is 0.5 s), and is back only at 1000 s: cycle 1 sends a a copy (no
    # upload) and loses its update; cycles 2 and 3 do not invite it; b moves 2 copies a cycle
    from mel_opt import api

    inst = parse_instance(MEL_ASYNC)
    sol = api.solve(inst, "exact").solution
    av = _av(_one([0, 1000], [0.3, 2000], 5000), _one([0], [5000], 5000))
    s = ArenaSettings(cycles=3, model="softmax", time_cv=0.0)
    run = _run(s, MEL_ASYNC, av)
    held = np.array([p.size for p in run.pools])
    ctx = RunContext("exact", dict(sol), 0, held, {})
    from mel_opt.problems import get_problem

    cycle = get_problem("mel-async").learning
    rows = list(allocation_run(run, cycle, inst, ctx))
    mb = model_bytes(run.init)
    assert [r["time_s"] for r in rows] == pytest.approx([0, 10, 20, 30])
    assert [r["bytes"] / mb for r in rows] == pytest.approx([0, 3, 5, 7])
    assert [r["dropped"] for r in rows] == [0, 1, 1, 1]
    # without availability the same run moves 4 copies a cycle and drops nothing
    plain = list(allocation_run(dataclasses.replace(_run(s, MEL_ASYNC, None)), cycle, inst,
                                ctx))
    assert [r["bytes"] / mb for r in plain] == pytest.approx([0, 4, 8, 12])
    assert plain[-1]["dropped"] == 0 and plain[1]["accuracy"] != rows[1]["accuracy"]


def test_arena_end_to_end_with_a_behaviour_trace(tmp_path: Path) -> None:
    import csv

    from click.testing import CliRunner

    from mel_opt.cli.app import cli

    cap = tmp_path / "cap.pkl"
    cap.write_bytes(pickle.dumps({i: {"computation": 30.0 + 10 * i,
                                      "communication": 20000.0 + 3000 * i} for i in range(6)}))
    # each client offline from 2 + i to 4 + i s of every 30 s
    behave = _trace(tmp_path, {i: {"active": [0.0, 4.0 + i], "inactive": [2.0 + i, 30.0],
                                   "finish_time": 30.0} for i in range(6)})
    inst = tmp_path / "dab.json"
    run = CliRunner().invoke(cli, ["generate", "dab", "--preset", "fleet", "--learners", "6",
                                   "--param", f"trace=fedscale:{cap}", "-o", str(inst)])
    assert run.exit_code == 0, run.output
    out = tmp_path / "out"
    args = ["arena", str(inst), "--seeds", "1", "--cycles", "3", "--model", "softmax",
            "--schemes", "dab,deadline,fedbuff", "-o", str(out)]
    run = CliRunner().invoke(cli, [*args, "--availability", f"fedscale:{behave}"])
    assert run.exit_code == 0, run.output
    assert "availability: learners matched to the 6 clients of the behaviour trace by name" \
        in run.output
    with (out / "arena.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["scheme"] for r in rows} == {"dab", "deadline", "fedbuff"}
    for scheme in ("dab", "deadline", "fedbuff"):  # dab and fedbuff drop none without it
        assert max(int(r["dropped"]) for r in rows if r["scheme"] == scheme) > 0
    run = CliRunner().invoke(cli, [*args, "--availability", f"fedscale:{cap}"])
    assert run.exit_code == 2 and "Traceback" not in run.output
    assert "this is a FedScale device-capacity file" in run.output
