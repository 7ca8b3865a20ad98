"""Staggered live, on the in-process clock: the allocation's data in every order, each start's
work sized to its group's slot from the measured speeds, a lost learner given up as FedBuff's
loop gives it up (the same server side as on Flower)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from mel_opt import api
from mel_opt.live.fedbuff import equal_work
from mel_opt.live.inprocess import Clock, run_in_process
from mel_opt.live.rounds import LiveRun, LiveSettings
from mel_opt.problems import get_problem
from mel_opt.problems.mel_async.generate import generate
from mel_opt.training import load_dataset

SLOW = 1e-4  # seconds per sample-pass: the probe's and the clock's, so the plan is exact


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def test_staggered_in_process_plans_each_start_to_its_slot_and_gives_up_a_lost_learner(
        digits: Any) -> None:
    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    run = LiveRun(LiveSettings(instance=json.loads(json.dumps(doc)), scheme="staggered",
                               rounds=6, groups=2, period=1.0, model="softmax"), digits)
    clock = Clock(compute_s=lambda r, k, work: SLOW * work, overhead_s=lambda r: 0.0,
                  probe_s_per_sample=SLOW, answers=lambda r, k: k != 3)
    run_in_process(run, np.array_split(np.arange(digits.y_train.size), 4), clock)
    assert run.stopped is None and [r["round"] for r in run.rounds] == list(range(7))

    # the data is the allocation's at the measured speeds: exact's d_k on the instance whose
    # compute is the probe's SLOW seconds per sample-pass for all four (not the file's
    # speeds), in FedBuff's units (an equal share is FedBuff's samples)
    inst = run.inst
    cycle = get_problem("mel-async").learning
    assert cycle is not None
    work = equal_work(cycle, inst, run.N)
    measured = cycle.live_instance(inst, np.arange(4), np.full(4, SLOW), run.N)
    d = np.asarray(api.solve(measured, "exact", seed=0).solution["d"], dtype=float)
    samples = np.rint(d / d.sum() * work.samples * 4).astype(int)
    on_file = np.asarray(api.solve(inst, "exact", seed=0).solution["d"], dtype=float)
    assert not np.array_equal(np.rint(on_file / on_file.sum() * work.samples * 4), samples)
    rows = run.rows
    for r in rows:
        assert r["samples"] == samples[r["learner"]]
    # groups dealt by data, largest first, in turn: G = 2
    order = np.argsort(-samples, kind="stable")
    group = np.empty(4, dtype=int)
    group[order] = np.arange(4) % 2
    # each learner's first start at 0 s aims at its group's first slot, P (g + 1) / G with
    # P = T = 15 s: whole passes of SLOW x samples that fit after the file's transfers
    first = {}
    for r in rows:
        first.setdefault(r["learner"], r)
    for k, r in first.items():
        slot = 15.0 * (group[k] + 1) / 2
        assert r["passes"] == math.floor((slot - work.comm_s[k]) / (SLOW * samples[k]))
    # the lost learner: given up once, the run goes on with the others
    assert [r["status"] for r in rows if r["learner"] == 3] == ["missing"]
    ok = [r for r in rows if r["status"] == "ok"]
    assert {r["learner"] for r in ok} == {0, 1, 2}
    # every start's compute is what the clock took for its work, and every update is on
    # plan: at most G = 2 steps old
    assert all(r["compute_measured_s"] == pytest.approx(SLOW * r["samples"] * r["passes"])
               and r["passes"] >= 1 and 0 <= r["staleness"] <= 2 for r in ok)
    assert all(r["method"] == "exact" and r["learners"] == 2 for r in run.rounds[1:])
    assert run.rounds[-1]["accuracy"] > run.rounds[0]["accuracy"] + 0.3


def _staggered(digits: Any, compute_s: Any = None, probe_start_s: float = 0.0,
               **kw: Any) -> LiveRun:
    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    kw = {"rounds": 8, "period": 1.0, **kw}
    run = LiveRun(LiveSettings(instance=json.loads(json.dumps(doc)), scheme="staggered",
                               groups=2, model="softmax", **kw), digits)
    clock = Clock(compute_s=compute_s or (lambda r, k, work: SLOW * work),
                  overhead_s=lambda r: 0.0, probe_s_per_sample=SLOW,
                  probe_start_s=probe_start_s)
    return run_in_process(run, np.array_split(np.arange(digits.y_train.size), 4), clock)


def test_a_learners_speed_is_judged_over_a_budget_of_its_compute_before_its_data_moves(
) -> None:
    """PlannedWork's trigger, by hand: single replies three times apart (a throttled
    learner's short starts) do not move the data while their ratio over a window of the
    budget's compute stays within a quarter of the speed it was placed at; nor does one
    window beyond it, or two on opposite sides; a learner whose last two windows are both
    slower by more than a quarter does, at every learner's latest speed (over its last two
    windows), and the plan hears of it."""
    from mel_opt.live.fedbuff import PlannedWork

    told: list[tuple[list[int], list[float], float]] = []

    class Plan:
        def placed(self, sizes: np.ndarray, seconds: np.ndarray, now: float) -> None:
            told.append((sizes.tolist(), seconds.tolist(), now))

    asked: list[list[float]] = []

    def place(seconds: np.ndarray) -> np.ndarray:
        asked.append(seconds.tolist())
        return np.array([300, 100, 0])

    work = PlannedWork(Plan(), np.array([200, 200, 0]), 32,  # type: ignore[arg-type]
                       np.array([1e-4, 1e-4, np.nan]), 1.0, place)
    # learner 0: 0.3 s and 0.1 s for 2,000 sample-passes each (1.5e-4 and 0.5e-4), then
    # 0.62 s for 6,000: 1.02 s over 10,000 sample-passes, 1.02e-4: within a quarter
    for compute in (0.3, 0.1):
        work.observe(0, compute, 2000)
    assert not work.replace(1, 1.0)  # no full window yet
    work.observe(0, 0.62, 6000)
    assert not work.replace(2, 2.0) and asked == [] and told == []
    # learner 1 twice as slow over a window: 0.5 s + 0.5 s for 2,500 sample-passes each,
    # 2e-4; then half as slow, 0.5e-4 (1 s for 20,000): on opposite sides, nothing moves
    work.observe(1, 0.5, 2500)
    assert not work.replace(3, 3.0)
    work.observe(1, 0.5, 2500)
    assert not work.replace(4, 4.0)
    work.observe(1, 1.0, 20000)
    assert not work.replace(5, 4.2)
    # two windows in a row twice as slow (1 s for 5,000 each): the data moves, at learner
    # 1's last two windows, 2 s over 10,000, 2e-4, and learner 0's one window, 1.02e-4
    work.observe(1, 1.0, 5000)
    assert not work.replace(6, 4.3)  # 0.5e-4 then 2e-4: not both on one side
    work.observe(1, 1.0, 5000)
    assert work.replace(7, 4.5)
    # every learner's latest speed (learner 2 has none: NaN)
    assert len(asked) == 1 and asked[0][:2] == pytest.approx([1.02e-4, 2e-4])
    assert math.isnan(asked[0][2])
    assert work.samples.tolist() == [300, 100, 0]  # the one that took no part still none
    assert told[0][0] == [300, 100, 0] and told[0][2] == 4.5
    assert told[0][1][:2] == asked[0][:2]
    assert [(p["step"], p["samples"]) for p in work.placements] == [(7, [300, 100, 0])]
    # the speeds it was placed at are the new reference: the same speed again moves nothing
    work.observe(1, 1.0, 5000)
    assert not work.replace(5, 5.0) and len(told) == 1


def test_a_replys_work_is_its_compute_beyond_the_start_cost_by_hand() -> None:
    """PlannedWork with learner 0's start cost 0.1 s (its probe's): a reply's work took its
    compute less 0.1 s; a reply more than half start cost is left out; the plan is told the
    speed per start and the start cost."""
    from mel_opt.live.fedbuff import PlannedWork

    told: list[tuple[int, float, float]] = []

    class Plan:
        def measured(self, node: int, per_pass_s: float, start_s: float = 0.0) -> None:
            told.append((node, per_pass_s, start_s))

        def passes(self, node: int, now: float) -> float:
            return 2.0

    work = PlannedWork(Plan(), np.array([200, 100]), 32,  # type: ignore[arg-type]
                       np.array([1e-4, np.nan]), 1.0, start_s=np.array([0.1, 0.0]),
                       alpha=0.5)
    # before any reply: the speed its data was placed at, 1e-4 x 200 samples a pass
    assert work.at(0, 0.0, 5e-4) == (200, 2)
    assert told[-1] == (0, pytest.approx(0.02), 0.1)
    # learner 1 was placed at no speed: the one given
    work.at(1, 0.0, 3e-4)
    assert told[-1] == (1, pytest.approx(0.03), 0.0)
    # 0.5 s for 2,000 sample-passes: 0.4 s of work, 2e-4; the average moves half way,
    # to 1.5e-4
    work.observe(0, 0.5, 2000)
    work.at(0, 1.0)
    assert told[-1] == (0, pytest.approx(1.5e-4 * 200), 0.1)
    # 0.15 s for 100: two thirds start cost, left out
    work.observe(0, 0.15, 100)
    work.at(0, 2.0)
    assert told[-1] == (0, pytest.approx(1.5e-4 * 200), 0.1)
    # the window closes at 1 s of work's compute: 0.4 + 0.7 s over 2,000 + 3,500
    work.observe(0, 0.8, 3500)
    assert work._speed[0] == pytest.approx(1.1 / 5500)


def test_staggered_live_a_liar_is_clipped_by_the_default_rule_and_ruins_the_mean(
        digits: Any) -> None:
    """A poisoned learner, as FedBuff's loop meets it: learner 1 sends its model scaled by
    1,000 from its second update on; its own code does it, the server sees a well-formed
    reply."""
    lie = {"attack": "scale:1000", "liar_ids": (1,), "attack_from": 2}
    honest = _staggered(digits)
    norm = _staggered(digits, **lie)
    mean = _staggered(digits, aggregation="mean", **lie)
    acc = {name: [r["accuracy"] for r in run.rounds] for name, run in
           (("honest", honest), ("norm", norm), ("mean", mean))}
    clipped = [r for r in norm.rounds if r.get("clipped")]
    assert clipped and all(set(r["clipped"]) == {"1"} for r in clipped)
    assert honest.summary()["clipped"] == 0
    assert acc["norm"][-1] >= acc["honest"][-1] - 0.02
    # the mean: the liar's first scaled update dominates the model from then on (every later
    # honest update is a thousandth of it), so its accuracy stays where that step left it
    # (the step of its first lie: where the norm run clipped it first; the runs are the same
    # until then)
    first = min(r["round"] for r in clipped)
    assert acc["mean"][:first] == acc["norm"][:first]
    assert len(set(acc["mean"][first:])) == 1 and acc["mean"][-1] < acc["honest"][-1]


def test_staggered_live_chooses_its_period_by_the_bound_from_the_learners_probes(
        digits: Any) -> None:
    """``--period-rule bound``: each learner measures the bound's constants in its probe, at
    the run's starting model on its own rows; the server weighs them by the allocation's data
    and picks the period from the measured speeds over ``--horizon`` budgets."""
    from mel_opt.schemes.period import choose_period, combine, learner_constants, step_seconds
    from mel_opt.training.mlp import init_params, layers_for

    run = _staggered(digits, period_rule="bound", horizon=0.5)
    assert run.stopped is None
    pools = np.array_split(np.arange(digits.y_train.size), 4)
    start = init_params(layers_for("softmax", digits.features, digits.classes), 0, np.float32)
    mine = [learner_constants(start, digits.x_train[p], digits.y_train[p], 0.1) for p in pools]
    for k in range(4):  # what crossed the wire is what each learner computed on its rows
        got = run.constants[k]
        assert (got.rho, got.beta) == pytest.approx((mine[k].rho, mine[k].beta), rel=1e-6)
        assert np.allclose(got.gradient, mine[k].gradient, rtol=1e-6, atol=1e-9)
    cycle = get_problem("mel-async").learning
    assert cycle is not None
    work = equal_work(cycle, run.inst, run.N)
    # each learner's data: exact's allocation at the measured speeds, in FedBuff's units (as
    # in the test above)
    measured = cycle.live_instance(run.inst, np.arange(4), np.full(4, SLOW), run.N)
    d = np.asarray(api.solve(measured, "exact", seed=0).solution["d"], dtype=float)
    samples = np.rint(d / d.sum() * work.samples * 4).astype(int)
    assert len(set(samples.tolist())) > 1  # unequal data: the weights matter
    want = choose_period(step_seconds(SLOW * samples, samples, 32), work.comm_s[:4],
                         samples.astype(float), 15.0, 0.5 * 15.0, combine(mine, samples), 0.1,
                         5e-5)
    assert want != pytest.approx(15.0)  # not the --period given (1 budget)
    assert [r["control"]["period_s"] for r in run.rounds[1:]] == pytest.approx([want] * 8)
    # the first start of each learner aims at its group's first slot of the chosen period,
    # (j + (g + 1) / G) P, with room for its transfers and one minibatch
    order = np.argsort(-samples, kind="stable")
    group = np.empty(4, dtype=int)
    group[order] = np.arange(4) % 2
    first: dict[int, Any] = {}
    for r in run.rows:
        first.setdefault(r["learner"], r)
    for k, r in first.items():
        need = work.comm_s[k] + SLOW * min(32, samples[k])
        slot = want * (group[k] + 1) / 2
        while slot < need:
            slot += want
        room = (slot - work.comm_s[k]) / (SLOW * samples[k])
        if room >= 1:  # whole passes
            assert (r["samples"], r["passes"]) == (samples[k], math.floor(room))
        else:  # one pass over the part of its data that fits, at least a minibatch
            assert (r["samples"], r["passes"]) == (max(min(32, samples[k]),
                                                       int(room * samples[k])), 1)
    # without --horizon the bound plans for --rounds (8) budgets
    over_rounds = choose_period(step_seconds(SLOW * samples, samples, 32), work.comm_s[:4],
                                samples.astype(float), 15.0, 8 * 15.0, combine(mine, samples),
                                0.1, 5e-5)
    assert over_rounds != pytest.approx(want)
    unset = _staggered(digits, period_rule="bound")
    assert unset.rounds[1]["control"]["period_s"] == pytest.approx(over_rounds)
    fixed = _staggered(digits)  # --period 1 (the default rule): every step's period is T
    assert {r["control"]["period_s"] for r in fixed.rounds[1:]} == {15.0}
    assert fixed.constants == {}  # and no learner was asked for its constants


def test_the_bounds_period_is_chosen_again_live_when_a_learner_slows_down(
        digits: Any) -> None:
    """A learner that becomes four times slower after its first start: once its speed over
    two windows in a row has moved by more than a quarter, the next step chooses the
    bound's period again from the probe's constants; a fixed period stays as it is."""
    starts: dict[int, int] = {}

    def compute_s(r: int, k: int, work: float) -> float:
        starts[k] = starts.get(k, 0) + 1
        return (4.0 if k == 1 and starts[k] > 1 else 1.0) * SLOW * work

    steady = _staggered(digits, period_rule="bound", horizon=0.5)
    first = steady.rounds[1]["control"]["period_s"]
    assert {r["control"]["period_s"] for r in steady.rounds[1:]} == {first}
    run = _staggered(digits, compute_s, period_rule="bound", horizon=0.5, rounds=96)
    assert run.stopped is None
    periods = [r["control"]["period_s"] for r in run.rounds[1:]]
    assert periods[0] == pytest.approx(first)  # the probe's speeds: the steady run's period
    assert run.fleet.seconds[1] > 2 * SLOW  # the server did see it slow down
    # chosen again after the slow replies came in: a slower learner, a longer round trip
    assert len(set(periods)) > 1 and periods[-1] > first
    assert periods == sorted(periods)
    # a step that placed the data records the period in force from then on: the next step's
    steps = run.summary()["rounds"][1:]
    moved = [(a, b) for a, b in zip(steps, steps[1:], strict=False) if "placed" in a]
    assert moved and all(b["control"] == a["placed"]["control"] for a, b in moved)
    starts.clear()
    fixed = _staggered(digits, compute_s, rounds=16)  # --period 1: kept whatever happens
    assert {r["control"]["period_s"] for r in fixed.rounds[1:]} == {15.0}


def test_the_data_is_placed_again_at_the_measured_speeds_when_a_learner_slows_down(
        digits: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Learner 1 four times slower after its first start: once its speed over two windows in
    a row has moved by more than a quarter, the allocation is solved again at the measured
    speeds and its data goes to the others; its later starts are sized from its new data.
    The speeds of a steady run never move that far: its data stays where it was placed."""
    from mel_opt.live import fedbuff

    seen: list[tuple[np.ndarray, list[dict[str, Any]]]] = []
    replace = fedbuff.PlannedWork.replace

    def spy(self: Any, step: int, now: float) -> bool:
        if not seen or seen[-1][1] is not self.placements:
            seen.append((self.samples.copy(), self.placements))
        return replace(self, step, now)

    monkeypatch.setattr(fedbuff.PlannedWork, "replace", spy)
    steady = _staggered(digits, rounds=16)
    assert steady.stopped is None and seen[-1][1] == []
    starts: dict[int, int] = {}

    def compute_s(r: int, k: int, work: float) -> float:
        starts[k] = starts.get(k, 0) + 1
        return (4.0 if k == 1 and starts[k] > 1 else 1.0) * SLOW * work

    run = _staggered(digits, compute_s, rounds=16)
    assert run.stopped is None
    first, placements = seen[-1]
    assert placements, "the data was never placed again"
    # each placement is exact's allocation at the speeds measured then, in FedBuff's units
    cycle = get_problem("mel-async").learning
    assert cycle is not None
    work = equal_work(cycle, run.inst, run.N)
    for p in placements:
        seconds = np.asarray(p["seconds"])
        measured = cycle.live_instance(run.inst, np.arange(4), seconds, run.N)
        d = np.asarray(api.solve(measured, "exact", seed=0).solution["d"], dtype=float)
        assert p["samples"] == np.rint(d / d.sum() * work.samples * 4).astype(int).tolist()
    assert placements[0]["seconds"][1] > (1 + 0.25) * SLOW  # it moved by over a quarter
    # summary.json keeps each placement on the step after which it was made
    kept = [(r["round"], r["placed"]["samples"], r["placed"]["s_per_sample_pass"])
            for r in run.summary()["rounds"] if "placed" in r]
    assert kept == [(p["step"], p["samples"], p["seconds"]) for p in placements]
    # and the groups dealt again from each placement's data (G = 2), largest data first
    from mel_opt.schemes.staggered import deal_groups

    groups = [r["placed"]["group"] for r in run.summary()["rounds"] if "placed" in r]
    assert groups == [deal_groups(np.array(p["samples"]), 2).tolist() for p in placements]
    last = np.asarray(placements[-1]["samples"])
    assert last[1] < first[1] and all(last[k] > first[k] for k in (0, 2, 3))
    # learner 1's starts from a model after the first placement (a reply joining step r with
    # staleness s started from version r - 1 - s) train at most the data it held then
    later = 0
    for r in run.rows:
        if r["learner"] != 1 or r["status"] != "ok":
            continue
        held = [p["samples"][1] for p in placements if p["step"] <= r["round"] - 1 - r["staleness"]]
        if held:
            later += 1
            assert r["samples"] <= held[-1]
    assert later


def test_the_bound_without_constants_keeps_the_period_given_and_says_so_in_the_summary(
        digits: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Learners that do not answer the request for the bound's constants (a learner of an
    older mel_opt sends its probe without them): the run keeps ``--period`` and its summary
    warns that the bound was not used."""
    from mel_opt.live import learner

    monkeypatch.setattr(learner, "with_constants", lambda report, order, local: report)
    run = _staggered(digits, period_rule="bound", horizon=0.5)
    assert run.stopped is None and run.constants == {}
    assert {r["control"]["period_s"] for r in run.rounds[1:]} == {15.0}  # --period 1
    said = [w for w in run.summary()["warnings"] if "bound's constants" in w]
    assert said == ["the period is --period (1 budgets): no learner that trains measured the "
                    "bound's constants"]


def test_a_probe_reply_with_constants_is_kept_and_its_messaging_is_what_is_left(
        digits: Any) -> None:
    """The server keeps each learner's constants and measures its messaging as the reply's
    round trip less the timed training and the constants' own seconds; a gradient of another
    size than the model's is refused with a warning."""
    from mel_opt.problems.messages import ProbeReport

    doc = generate("mohammad2020", learners=4, seed=5, params={"cycle_time_s": "15"})
    run = LiveRun(LiveSettings(instance=json.loads(json.dumps(doc)), scheme="staggered",
                               period_rule="bound", model="softmax"), digits)
    size = sum(a.size for a in run.model)
    grad = np.linspace(-1.0, 1.0, size)
    run.accept_probe(10, ProbeReport(0, 100, 0.5, 1000.0, rho=0.3, beta=1.5, gradient=[grad],
                                     constants_s=0.25).encode(), elapsed_s=1.0)
    assert run.fleet.overhead[0] == pytest.approx(1.0 - 0.5 - 0.25)
    got = run.constants[0]
    assert (got.rho, got.beta) == (0.3, 1.5) and np.array_equal(got.gradient, grad)
    run.accept_probe(11, ProbeReport(1, 100, 0.5, 1000.0, rho=0.3, beta=1.5,
                                     gradient=[grad[:-1]]).encode(), elapsed_s=1.0)
    assert 1 not in run.constants and run.fleet.overhead[1] == pytest.approx(0.5)
    assert any(f"its gradient has {size - 1} values, the model {size}" in w
               for w in run.warnings)


def test_a_start_cost_measured_by_the_probe_is_planned_for_and_leaves_the_data_in_place(
        digits: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every start costs 0.2 s beyond its work (the clock's 0.2 + SLOW x work), at a
    sixteenth of the budget (slots 0.47 s apart). Probed in three starts of different work,
    the split is exact: each start's work leaves room for the fixed cost, every update is on
    plan and the data stays where it was placed, as no speed changed. Probed in one start
    (no split), the same clock reads learners as slower than they are, the more so the
    shorter their starts: the data is placed again though no speed changed."""
    from mel_opt.live import fedbuff

    made: list[Any] = []
    planned_work = fedbuff.planned_work

    def spy(*args: Any, **kwargs: Any) -> Any:
        made.append(planned_work(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(fedbuff, "planned_work", spy)
    start = 0.2

    def compute_s(r: int, k: int, work: float) -> float:
        return start + SLOW * work

    run = _staggered(digits, compute_s, probe_start_s=start, period=0.0625, rounds=90)
    assert run.stopped is None and not run.warnings
    assert run.fleet.start_s.tolist() == pytest.approx([start] * 4)
    assert run.fleet.rate_s.tolist() == pytest.approx([SLOW] * 4)
    summary = run.summary()
    assert summary["probe_start_s"] == pytest.approx([start] * 4)
    assert summary["probe_rate_s_per_sample"] == pytest.approx([SLOW] * 4)
    planned = made[-1]
    assert planned.placements == []
    assert planned._speed.tolist() == pytest.approx([SLOW] * 4)  # every window closed
    # each learner's first start at 0 s aims at its group's first slot (j + (g + 1) / G) P,
    # P = 15 / 16 s, with room for its transfers, the start's 0.2 s and one minibatch; its
    # work fills the room left, at SLOW x samples a pass (with room for less than a pass,
    # that fraction of its samples)
    cycle = get_problem("mel-async").learning
    assert cycle is not None
    comm = equal_work(cycle, run.inst, run.N).comm_s
    samples, group, P = planned.samples, planned.plan.group, 15.0 / 16
    first: dict[int, dict[str, Any]] = {}
    for r in run.rows:
        first.setdefault(r["learner"], r)
    rooms = {}
    for k, r in first.items():
        per_pass = SLOW * samples[k]
        need = comm[k] + start + per_pass * min(1.0, planned.batch / samples[k])
        phase = (group[k] + 1) / 2
        slot = (max(0, math.ceil(need / P - phase)) + phase) * P
        rooms[k] = room = slot - comm[k] - start
        if room >= per_pass:
            assert (r["samples"], r["passes"]) == (samples[k], math.floor(room / per_pass))
        else:
            assert (r["samples"], r["passes"]) == (int(room / per_pass * samples[k]), 1)
    # learner 0 (group 0, 0.945 s of transfers): its slot at 0.469 s leaves no room, the
    # next, 1.406 s, leaves 0.261 s: 2,612 of its 14,940 samples
    assert group[0] == 0 and comm[0] == pytest.approx(0.94496, abs=1e-5)
    assert rooms[0] == pytest.approx(1.40625 - 0.94496 - 0.2, abs=1e-5)
    assert (first[0]["samples"], samples[0]) == (2612, 14940)
    ok = [r for r in run.rows if r["status"] == "ok"]
    assert all(r["compute_measured_s"] == pytest.approx(start + SLOW * r["samples"] * r["passes"])
               and 0 <= r["staleness"] <= 2 for r in ok)

    unsplit = _staggered(digits, compute_s, period=0.0625, rounds=90)
    assert unsplit.stopped is None
    moved = made[-1].placements
    assert moved, "without the split the data did not move"
    assert max(moved[0]["seconds"]) > 1.25 * SLOW  # read as over a quarter slower
