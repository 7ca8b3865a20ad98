"""FedBuff live without Flower: the asynchronous loop against a scripted grid, its fixed work
worked by hand, and its server side with learners training in this process (faults injected
into what their nodes send; no sleeps, no timers)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mel_opt import api
from mel_opt.arena.run import work_clock
from mel_opt.errors import UsageError
from mel_opt.io.json_io import parse_json_text
from mel_opt.live import learner as L
from mel_opt.live.estimates import Measurement
from mel_opt.live.fedbuff import AsyncServer, Work, equal_work
from mel_opt.live.rounds import LiveRun, LiveSettings
from mel_opt.problems import get_problem
from mel_opt.problems.mel_async.generate import generate
from mel_opt.problems.messages import Records
from mel_opt.schemes.fedbuff import FedBuffOutcome as Outcome
from mel_opt.schemes.fedbuff import Model, Step, default_buffer, run
from mel_opt.schemes.fedbuff import Update as Reply
from mel_opt.schemes.fedbuff import run as run_loop
from mel_opt.training import load_dataset

ROOT = Path(__file__).resolve().parents[2]


class ScriptedGrid:
    """Each pull returns the next scripted batch of answers; a learner answers
    ``model + its step`` (or the scripted bad value) from the model it was last pushed."""

    def __init__(self, script: list[list[tuple[int, float | None]]],
                 late: list[list[int]] | None = None) -> None:
        self.script = script
        self.late = list(late or [])
        self.pushed: dict[int, Model] = {}
        self.pushes: list[tuple[int, int]] = []

    def overdue(self) -> list[int]:
        return self.late.pop(0) if self.late else []

    def push(self, node: int, model: Model, version: int) -> None:
        self.pushed[node] = [m.copy() for m in model]
        self.pushes.append((node, version))

    def pull(self) -> list[tuple[int, Reply]]:
        if not self.script:
            return []
        out: list[tuple[int, Reply]] = []
        for node, step in self.script.pop(0):
            out.append((node, None if step is None else [self.pushed[node][0] + step]))
        return out


def test_buffer_flushes_after_k_with_staleness_weights() -> None:
    # K = 2, C = 2, nodes 1 and 2. Pull 1: node 1 (+2, s=0); pull 2: node 1 again
    # (+4 from version 0, s=0) fills the buffer: model 0 + (2 + 4)/2 = 3, version 1.
    # Pull 3: node 2, started at version 0, now s = 1, delta +6 -> weight 1/sqrt(2).
    # Pull 4: node 1 (pushed version 1, model 3), +8, s = 0. Step: 3 + (6/sqrt 2 + 8)/2.
    grid = ScriptedGrid([[(1, 2.0)], [(1, 4.0)], [(2, 6.0)], [(1, 8.0)]])
    out = run(grid, [1, 2], [np.zeros(1)], buffer=2, concurrency=2, steps=2)
    assert [s.version for s in out.steps] == [1, 2]
    assert out.steps[0].nodes == [1, 1] and out.steps[0].staleness == [0, 0]
    assert out.steps[1].nodes == [2, 1] and out.steps[1].staleness == [1, 0]
    assert math.isclose(out.model[0][0], 3 + (6 / math.sqrt(2) + 8) / 2)


def test_concurrency_never_exceeded_and_every_node_served() -> None:
    grid = ScriptedGrid([[(1, 1.0)], [(2, 1.0)], [(3, 1.0)], [(4, 1.0)]])
    out = run(grid, [1, 2, 3, 4], [np.zeros(1)], buffer=1, concurrency=2, steps=4)
    assert out.most_busy == 2
    # nodes 3 and 4 waited until a slot freed: pushed at versions 1 and 2
    assert grid.pushes[:4] == [(1, 0), (2, 0), (3, 1), (4, 2)]


def test_nan_and_error_replies_ignored_model_stays_finite() -> None:
    grid = ScriptedGrid([[(1, float("nan"))], [(2, None)], [(1, 2.0)]])
    out = run(grid, [1, 2], [np.zeros(1)], buffer=1, concurrency=2, steps=1)
    assert out.ignored == [(1, "non-finite values"), (2, "error reply")]
    assert out.model[0][0] == 2.0 and np.isfinite(out.model[0]).all()


def test_missing_learner_served_again_when_it_answers() -> None:
    # node 2 is silent for two steps, then answers (stale by 2) and gets new work
    grid = ScriptedGrid([[(1, 1.0)], [(1, 1.0)], [(2, 4.0)], [(2, 0.0)]])
    out = run(grid, [1, 2], [np.zeros(1)], buffer=1, concurrency=2, steps=4)
    assert out.steps[2].nodes == [2] and out.steps[2].staleness == [2]
    assert math.isclose(out.model[0][0], 2 + 4 / math.sqrt(3))
    assert grid.pushes.count((2, 3)) == 1


def test_stops_when_every_learner_is_lost() -> None:
    # node 1's work is overdue at the first poll; nothing comes back in 5 more polls
    grid = ScriptedGrid([], late=[[1]])
    out = run(grid, [1], [np.zeros(1)], buffer=1, concurrency=1, steps=3, max_polls=5)
    assert out.steps == [] and out.model[0][0] == 0.0
    assert out.given_up == [1] and out.stopped == "no reply in 5 polls"
    assert grid.script == [] and len(grid.pushes) == 1


def test_an_error_reply_sets_the_learner_aside_and_the_run_ends_when_all_failed() -> None:
    grid = ScriptedGrid([[(1, None)], [(2, None)]])
    out = run(grid, [1, 2], [np.zeros(1)], buffer=1, concurrency=1, steps=2)
    assert out.stopped == "every learner failed" and out.steps == []
    assert grid.pushes == [(1, 0), (2, 0)]  # node 1 never got work again


def test_work_given_up_frees_its_slot_and_a_late_reply_is_not_used() -> None:
    # C = 1: node 1 is overdue at the first poll, node 2 takes the slot and answers +2;
    # node 1's late +100 arrives while node 2 trains again: ignored; node 2 answers +1
    grid = ScriptedGrid([[], [(2, 2.0)], [(1, 100.0)], [(2, 1.0)]], late=[[1]])
    seen: list[tuple[int, int, int | None, str | None]] = []
    out = run(grid, [1, 2], [np.zeros(1)], buffer=1, concurrency=1, steps=2,
              on_reply=lambda *a: seen.append(a))
    assert out.given_up == [1]
    assert grid.pushes == [(1, 0), (2, 0), (2, 1)]
    assert seen[0] == (1, 1, None, "missing") and seen[1] == (2, 1, 0, None)
    assert seen[2][0] == 1 and seen[2][3] is not None and seen[2][3].startswith("late")
    assert math.isclose(out.model[0][0], 3.0)  # 0 + 2, then + 1; the late 100 never entered


def test_an_unreadable_reply_is_ignored_with_its_reason_and_the_learner_works_again() -> None:
    class Garbled(ScriptedGrid):
        def pull(self) -> list[tuple[int, Reply]]:
            if len(self.pushes) == 1:
                return [(1, "compute_s = 1e9 s is longer than the reply took")]
            return super().pull()

    grid = Garbled([[(1, 3.0)]])
    out = run(grid, [1], [np.zeros(1)], buffer=1, concurrency=1, steps=1)
    assert out.ignored == [(1, "compute_s = 1e9 s is longer than the reply took")]
    assert out.model[0][0] == 3.0 and grid.pushes == [(1, 0), (1, 0)]


# -- FedBuff's fixed work, worked by hand ------------------------------------------------------
def mel_async_doc() -> dict[str, Any]:
    # u = d / K = 1000 samples; one pass costs c2 u = 1 s, transfers c1 u + c0 = 0.6 s;
    # within T = 10 s each fits floor((10 - 0.6) / 1) = 9 passes
    learner = {"c2": 1e-3, "c1": 1e-4, "c0": 0.5}
    return {"problem": "mel-async", "schema_version": 1, "name": "two", "cycle_time_s": 10.0,
            "total_samples": 2000, "min_samples": 10, "max_samples": 2000,
            "learners": [dict(learner, name="a"), dict(learner, name="b")]}


def work_of(inst: Any, dataset_size: int, seconds: np.ndarray | None = None) -> Work:
    cycle = get_problem(inst.problem).learning
    assert cycle is not None
    return equal_work(cycle, inst, dataset_size, seconds=seconds)


def test_equal_work_of_mel_async_is_an_equal_share_for_the_passes_that_fit() -> None:
    work = work_of(api.parse_instance(mel_async_doc()), 1437)
    assert (work.samples, work.passes) == (1000, 9)
    assert np.allclose(work.comm_s, 0.6) and np.allclose(work.compute_s, 9.0)
    # measured: learner a at 2e-3 s per sample-pass (2 s a pass), b unmeasured (1 s a pass):
    # a fits floor(9.4 / 2) = 4, b 9; the median floor(6.5) = 6 passes
    work = work_of(api.parse_instance(mel_async_doc()), 1437, seconds=np.array([2e-3, np.nan]))
    assert work.passes == 6 and np.allclose(work.compute_s, [12.0, 6.0])


def test_equal_work_of_dab_is_s_over_k_shards_of_its_samples_per_shard() -> None:
    doc = parse_json_text((ROOT / "instances" / "dab" / "worked_example.json").read_text())
    inst = api.parse_instance(doc)
    work = work_of(inst, 1437)
    # one learner holds all S = 92 shards; a shard is 1437 // 92 = 15 of the data set's samples
    assert (inst.K, inst.total_shards) == (1, 92)
    assert work.samples == 92 * 15
    assert work.passes == inst.iterations
    # Eq. (3.4) of an equal share a: transfers (2 Omega_m + Omega_d a) / b, compute mu a / c
    a = work_clock(inst).share
    assert np.allclose(work.comm_s, (2 * inst.model_bytes + inst.shard_bytes * a) /
                       np.asarray(inst.bandwidth))
    assert np.allclose(work.compute_s, inst.iterations * a / np.asarray(inst.train_rate))


def test_equal_work_refuses_a_problem_without_a_work_clock() -> None:
    doc = parse_json_text((ROOT / "instances" / "med" / "mays2023_n4_m1.json").read_text())
    with pytest.raises(UsageError, match="'med' declares none"):
        work_of(api.parse_instance(doc), 100)


def test_default_buffer_is_ten_at_most_half_the_concurrency() -> None:
    assert [default_buffer(c) for c in (1, 2, 4, 19, 20, 1000)] == [1, 1, 2, 9, 10, 10]


# -- the server side with learners in this process (real training, injected faults) -------------
SLOW = 1e-3  # seconds per sample-pass every learner's clock reports

Fault = Callable[[Records], Records]


def nan_weights(rec: Records) -> Records:
    model = [a.copy() for a in rec.arrays["model"]]
    model[0].flat[0] = np.nan
    return Records(rec.config, {**rec.arrays, "model": model})


def absurd_time(rec: Records) -> Records:
    return Records({**rec.config, "compute_s": 1e9}, rec.arrays)


class LearnersHere:
    """A grid whose learners train here (:func:`mel_opt.live.learner.answer_train`); one
    reply per pull, in the order pushed. ``faults[(k, n)]``: what learner k's node sends
    instead of its n-th answer (1, 2, ...); ``errors``: learners whose node fails."""

    def __init__(self, server: AsyncServer, faults: dict[tuple[int, int], Fault],
                 errors: set[int], late: list[list[int]] | None = None) -> None:
        self.server, self.faults, self.errors = server, faults, errors
        self.late = list(late or [])
        run = server.run
        self.pools = np.array_split(np.arange(run.data.y_train.size), run.K)
        self.memories = {k: L.Memory({L.SPEED: SLOW}) for k in range(run.K)}
        self.queue: list[tuple[int, Records | None]] = []
        self.answers: dict[int, int] = {}
        self.pushes: list[int] = []

    def push(self, node: int, model: Model, version: int) -> None:
        order, wait = self.server.order(node, model, version)
        assert wait > 0
        k = self.server.run.nodes[node]
        self.pushes.append(k)
        if k in self.errors:
            self.queue.append((node, None))
            return
        local = L.LocalData(self.server.run.data, self.pools[k])
        report = L.answer_train(order, k, local, self.memories[k], lambda work: SLOW * work)
        self.answers[k] = self.answers.get(k, 0) + 1
        fault = self.faults.get((k, self.answers[k]))
        rec = report.encode()
        self.queue.append((node, rec if fault is None else fault(rec)))

    def pull(self) -> list[tuple[int, Reply]]:
        if not self.queue:
            return []
        node, rec = self.queue.pop(0)
        return [(node, self.server.read(node, rec, None))]

    def overdue(self) -> list[int]:
        return self.late.pop(0) if self.late else []


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def fedbuff_run(data: Any, steps: int, faults: dict[tuple[int, int], Fault],
                errors: set[int]) -> tuple[LiveRun, LearnersHere, Outcome, list[Model]]:
    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    run = LiveRun(LiveSettings(instance=json.loads(json.dumps(doc)), scheme="fedbuff",
                               rounds=steps, model="softmax"), data)
    for k in range(run.K):  # the probe: node 10 + k holds learner k
        assert run.fleet.join(10 + k, k) == ""
        assert run.fleet.measure(Measurement.of(k, SLOW * 1000, 1000.0), 0) == ""
    work = work_of(run.inst, run.N)
    server = AsyncServer(run, work, steps)
    grid = LearnersHere(server, faults, errors)
    models: list[Model] = []

    def on_step(step: Step, model: Model) -> None:
        server.on_step(step, model)
        models.append([m.copy() for m in model])

    out = run_loop(grid, sorted(run.nodes), [np.asarray(a, float) for a in run.model], buffer=2,
                   concurrency=4, steps=steps, on_step=on_step, on_reply=server.on_reply)
    return run, grid, out, models


def test_fedbuff_learners_here_faulty_replies_are_ignored_the_model_stays_finite(
        digits: Any) -> None:
    # learner 1's first answer has a NaN weight, learner 2's first claims 1e9 s of compute,
    # learner 3's node fails at once
    run, grid, out, models = fedbuff_run(digits, 4, {(1, 1): nan_weights, (2, 1): absurd_time},
                                         errors={3})
    assert out.stopped is None and [s.version for s in out.steps] == [1, 2, 3, 4]
    assert all(np.isfinite(a).all() for m in models for a in m)
    assert grid.pushes.count(3) == 1  # the failed learner was set aside for good
    by = [(r["learner"], r["status"], r.get("reason") or "") for r in run.rows]
    assert (3, "ignored", "error reply") in by
    assert any(k == 1 and s == "ignored" and "non-finite" in why for k, s, why in by)
    assert any(k == 2 and s == "ignored" and "not believed" in why for k, s, why in by)
    # the absurd time did not reach learner 2's estimate
    assert run.estimates.seconds[2] < 10 * SLOW
    ok = [r for r in run.rows if r["status"] == "ok"]
    assert len(ok) == 8 and all(isinstance(r["staleness"], int) and r["staleness"] >= 0
                                for r in ok)
    assert all(r["compute_measured_s"] == pytest.approx(SLOW * r["samples"] * r["passes"])
               for r in ok)
    # every step is a round of the outputs: two updates each, accuracy above the start's
    assert [r["learners"] for r in run.rounds[1:]] == [2, 2, 2, 2]
    assert run.rounds[-1]["accuracy"] > run.rounds[0]["accuracy"] + 0.3
    assert run.rounds[-1]["last"] and not run.rounds[1]["last"]


def test_fedbuff_a_learner_given_up_is_missing_until_its_late_reply(digits: Any) -> None:
    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    run = LiveRun(LiveSettings(instance=json.loads(json.dumps(doc)), scheme="fedbuff",
                               rounds=2, model="softmax"), digits)
    for k in range(4):
        run.fleet.join(10 + k, k)
    server = AsyncServer(run, work_of(run.inst, run.N), 2)
    server.on_reply(10, 1, None, "missing")
    assert run.missing == {0} and run.rows[-1]["status"] == "missing"
    server.on_reply(10, 2, None, "late: its work was given up and handed to another learner")
    assert run.missing == set() and run.rows[-1]["status"] == "ignored"


def test_fedbuff_in_process_on_the_clock_gives_up_a_lost_learner(digits: Any) -> None:
    """The same server and loop as on Flower, on the in-process exchange: learner k takes
    (k + 1) x SLOW s per sample-pass on the clock, learner 3 never answers after the probe."""
    from mel_opt.live.inprocess import Clock, run_in_process

    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    run = LiveRun(LiveSettings(instance=json.loads(json.dumps(doc)), scheme="fedbuff",
                               rounds=4, buffer=2, model="softmax"), digits)
    clock = Clock(compute_s=lambda r, k, work: SLOW * (k + 1) * work, overhead_s=lambda r: 0.0,
                  probe_s_per_sample=SLOW, answers=lambda r, k: k != 3)
    run_in_process(run, np.array_split(np.arange(digits.y_train.size), 4), clock)
    assert run.stopped is None and [r["round"] for r in run.rounds] == [0, 1, 2, 3, 4]
    # every learner measured at the probe's SLOW: one piece of work takes learner 0 t0 s
    w = work_of(run.inst, run.N, seconds=np.full(4, SLOW))
    t0 = SLOW * w.samples * w.passes
    # step 1: learner 0 at t0, then at 2 t0 learner 1 (pushed before learner 0's second work)
    first = run.rounds[1]
    assert first["staleness"] == [0, 0] and first["round_wall_s"] == pytest.approx(2 * t0)
    assert all(r["learners"] == 2 and r["method"] == "fedbuff" for r in run.rounds[1:])
    rows = run.rows
    assert [r["status"] for r in rows if r["learner"] == 3] == ["missing"]
    assert run.missing == {3}
    # the others' speeds were measured on their work: (k + 1) SLOW, learner 0 exactly its probe
    assert run.estimates.seconds[0] == pytest.approx(SLOW)
    assert run.estimates.seconds[:3] == pytest.approx(SLOW * np.array([1.0, 2.0, 3.0]),
                                                      rel=0.5)
    assert run.rounds[-1]["accuracy"] > run.rounds[0]["accuracy"]
