"""staggered's period chosen by Wang et al.'s bound (mel_opt.schemes.period), worked by hand
and cross-checked against the adaptive-tau control's own G(tau)."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from mel_opt.mlp import init_params
from mel_opt.problems.adaptive_tau.control import objective_values
from mel_opt.problems.adaptive_tau.generate import generate as generate_tau
from mel_opt.problems.adaptive_tau.instance import parse as parse_tau
from mel_opt.schemes.period import (
    Estimates,
    bound,
    choose_period,
    estimate,
    fleet_steps,
    step_seconds,
)
from mel_opt.schemes.staggered import StaggeredPlan


def test_step_seconds_counts_minibatches_of_each_pass() -> None:
    # 100 samples in minibatches of 32: 4 steps a pass; 32 samples: 1; no data: no step
    got = step_seconds(np.array([2.0, 0.5, 1.0]), np.array([100, 32, 0]), 32)
    assert got[:2].tolist() == [0.5, 0.5]
    assert np.isinf(got[2])


def test_fleet_steps_by_hand() -> None:
    # learner 0: (P - 1) / 1 steps, learner 1 (three times the data): (P - 2) / 0.5
    c, f, w = np.array([1.0, 0.5]), np.array([1.0, 2.0]), np.array([1.0, 3.0])
    got = fleet_steps(np.array([1.5, 3.0, 5.0]), c, f, w)
    # P = 1.5: 0.5 and 0 (not even its transfers fit) -> 0.125; P = 3: 2 and 2 -> 2;
    # P = 5: 4 and 6 -> (4 + 18) / 4 = 5.5
    assert got == pytest.approx([0.125, 2.0, 5.5])


# A fleet of equal learners (c = 1 s a step, f = 10 s of transfers), horizon R = 100 s,
# eta = 0.1, beta = 1, rho = 1, phi = 1, budget 13 s: candidates tau = 1, 2, 3 (P = 11, 12, 13).
# T(tau) = 100 tau / (tau + 10) = 9.0909, 16.667, 23.077;
# h(tau) = delta (1.1^tau - 1) - 0.1 delta tau = 0, 0.01 delta, 0.031 delta.
EQUAL = dict(step_s=np.full(4, 1.0), fixed_s=np.full(4, 10.0), weights=np.ones(4))


@pytest.mark.parametrize(("delta", "G", "chosen"), [
    # delta 1: G = 1.1, (1 + sqrt(1.5556)) / 3.3333 + 0.01 = 0.6842,
    #          (1 + sqrt(3.2012)) / 4.6154 + 0.031 = 0.6353: the longest, P = 13
    (1.0, [1.1, 0.6842, 0.6353], 13.0),
    # delta 3: 1.1, (1 + sqrt(2.6667)) / 3.3333 + 0.03 = 0.8199,
    #          (1 + sqrt(7.6035)) / 4.6154 + 0.093 = 0.9071: the middle one, P = 12
    (3.0, [1.1, 0.8199, 0.9071], 12.0),
    # delta 10: 1.1, (1 + sqrt(6.5556)) / 3.3333 + 0.1 = 1.1681,
    #           (1 + sqrt(23.012)) / 4.6154 + 0.31 = 1.5660: the shortest, P = 11
    (10.0, [1.1, 1.1681, 1.5660], 11.0),
])
def test_bound_and_choice_worked_by_hand(delta: float, G: list[float], chosen: float) -> None:
    est = Estimates(beta=1.0, rho=1.0, delta=delta)
    got = bound(np.array([11.0, 12.0, 13.0]), EQUAL["step_s"], EQUAL["fixed_s"],
                EQUAL["weights"], 100.0, est, eta=0.1, phi=1.0)
    assert got == pytest.approx(G, abs=2e-4)
    assert choose_period(**EQUAL, budget_s=13.0, horizon_s=100.0, est=est, eta=0.1,
                         phi=1.0) == chosen


def test_no_divergence_takes_the_longest_period() -> None:
    # delta = 0: h = 0 and G = 1 / (T eta phi) falls as T = tau R / P grows with P
    est = Estimates(beta=2.0, rho=1.0, delta=0.0)
    assert choose_period(**EQUAL, budget_s=30.0, horizon_s=100.0, est=est, eta=0.1) == 30.0


def test_equal_learners_give_the_adaptive_tau_controls_choice() -> None:
    """An equal fleet is Wang et al.'s setting: the period's G is the adaptive-tau control's
    G(tau) (its own code, for an instance of one resource, time) at P = f + c tau."""
    base = parse_tau(generate_tau("svm", seed=3))
    c, b, R = 0.13, 0.9, 400.0
    inst = dataclasses.replace(
        base, budget=np.array([R]), local_cost=np.array([c]), global_cost=np.array([b]),
        used=np.array([0.0]), resource_names=("time",), use_min_loss=False,
        beta=0.8, rho=0.5, delta=0.4, step_size=0.05, phi=0.01)
    est = Estimates(beta=inst.beta, rho=inst.rho, delta=inst.delta)
    taus = np.arange(1, 60, dtype=float)
    ours = bound(b + c * taus, np.full(3, c), np.full(3, b), np.array([1.0, 2.0, 3.0]), R,
                 est, eta=inst.step_size, phi=inst.phi)
    theirs = objective_values(taus, inst)
    assert ours == pytest.approx(theirs, rel=1e-9)
    chosen = choose_period(np.full(3, c), np.full(3, b), np.ones(3), budget_s=b + c * 59,
                           horizon_s=R, est=est, eta=inst.step_size, phi=inst.phi)
    tau_star = int(np.argmin(theirs)) + 1
    assert 1 < tau_star < 59  # an interior choice, so the test can tell
    assert chosen == pytest.approx(b + c * tau_star)


def _softmax_loss_grad(W: np.ndarray, bias: np.ndarray, x: np.ndarray, y: np.ndarray
                       ) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of softmax regression and its gradient [W, b] flattened (written
    out here, not the library's code)."""
    z = x @ W + bias
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    n = y.size
    loss = float(-np.log(p[np.arange(n), y]).mean())
    g = p.copy()
    g[np.arange(n), y] -= 1.0
    return loss, np.concatenate([(x.T @ g / n).ravel(), (g.sum(axis=0) / n)])


def test_estimates_of_softmax_regression_by_its_own_formulas() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 4))
    y = rng.integers(0, 3, size=30)
    pools = [np.arange(0, 10), np.arange(10, 30), np.array([], dtype=np.int64)]
    model = init_params([4, 3], seed=1)
    eta = 0.5
    got = estimate(model, x, y, pools, eta)
    W, b = model
    sizes, losses, grads, rhos, betas = [], [], [], [], []
    for rows in pools[:2]:
        loss, grad = _softmax_loss_grad(W, b, x[rows], y[rows])
        step = np.concatenate([W.ravel(), b]) - eta * grad
        W1, b1 = step[:12].reshape(4, 3), step[12:]
        loss1, grad1 = _softmax_loss_grad(W1, b1, x[rows], y[rows])
        dist = eta * np.linalg.norm(grad)
        sizes.append(rows.size)
        losses.append(loss)
        grads.append(grad)
        rhos.append(abs(loss1 - loss) / dist)
        betas.append(np.linalg.norm(grad1 - grad) / dist)
    w = np.array(sizes, dtype=float)
    mean = (w[0] * grads[0] + w[1] * grads[1]) / w.sum()
    delta = (w[0] * np.linalg.norm(grads[0] - mean) + w[1] * np.linalg.norm(grads[1] - mean))
    assert got.delta == pytest.approx(delta / w.sum(), rel=1e-9)
    assert got.rho == pytest.approx(np.average(rhos, weights=w), rel=1e-9)
    assert got.beta == pytest.approx(np.average(betas, weights=w), rel=1e-9)
    # learners holding the same data have no divergence
    same = estimate(model, x, y, [np.arange(10), np.arange(10)], eta)
    assert same.delta == pytest.approx(0.0, abs=1e-12)


def test_plan_of_an_arena_run_takes_the_chosen_period() -> None:
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(40, 5)), rng.integers(0, 2, size=40)
    pools = [np.arange(0, 10), np.arange(10, 25), np.arange(25, 40)]
    model = init_params([5, 2], seed=0)
    clock = SimpleNamespace(budget_s=20.0, per_pass_s=np.array([0.3, 0.4, 0.5]),
                            fixed_s=np.array([0.5, 1.0, 0.8]))
    opts = SimpleNamespace(groups=1, period=None, phi=5e-5, rechoose=None, lr=0.2, batch_size=8)
    ctx = SimpleNamespace(
        options=opts, clock=clock, sizes=np.array([10, 15, 15]), horizon_s=200.0,
        estimates=lambda eta, at=None: estimate(model if at is None else at, x, y, pools, eta))
    plan = StaggeredPlan.of(ctx)  # type: ignore[arg-type]
    est = estimate(model, x, y, pools, 0.2)
    steps = step_seconds(clock.per_pass_s, ctx.sizes, 8)
    want = choose_period(steps, clock.fixed_s, ctx.sizes.astype(float), 20.0, 200.0, est, 0.2,
                         5e-5)
    assert plan.period == want
    assert plan.period != 0.25 * 20.0
    fixed = StaggeredPlan.of(SimpleNamespace(**{**vars(ctx), "options": SimpleNamespace(
        **{**vars(opts), "period": 0.25})}))  # type: ignore[arg-type]
    assert fixed.period == 0.25 * 20.0
    assert plan.chooser is None and fixed.chooser is None  # chosen once by default
    # --rechoose 2: every 2 budgets (40 s), from the constants at the global model then
    again = StaggeredPlan.of(SimpleNamespace(**{**vars(ctx), "options": SimpleNamespace(
        **{**vars(opts), "rechoose": 2.0})}))  # type: ignore[arg-type]
    assert again.period == want and again.rechoose_s == 40.0 and again.chooser is not None
    later = [a + 0.5 for a in model]
    est_later = estimate(later, x, y, pools, 0.2)
    assert est_later != est
    assert again.chooser(later) == choose_period(
        steps, clock.fixed_s, ctx.sizes.astype(float), 20.0, 200.0, est_later, 0.2, 5e-5)



def test_a_live_plan_with_the_learners_constants_counts_the_messaging_of_a_round_trip() -> None:
    """Live, the bound's period: the learners' measured constants, the run's horizon, and
    each round trip costing its transfers plus the deployment's measured messaging (wall
    time the file's model has not got)."""
    est = Estimates(beta=2.0, rho=1.0, delta=3.0)
    per_pass, fixed = np.array([0.3, 0.6]), np.array([0.2, 0.1])
    sizes = np.array([64, 32])
    opts = SimpleNamespace(groups=1, period=0.25, lr=0.1, phi=5e-5)
    steps = step_seconds(per_pass, sizes, 16)
    bare = StaggeredPlan.live(opts, 10.0, per_pass, fixed, sizes, 16)
    assert bare.period == 2.5  # the option's quarter of the budget
    plain = StaggeredPlan.live(opts, 10.0, per_pass, fixed, sizes, 16, estimates=est,
                               horizon_s=50.0)
    assert plain.period == choose_period(steps, fixed, sizes.astype(float), 10.0, 50.0, est,
                                         0.1, 5e-5)
    overhead = np.array([0.7, 0.9])
    slow = StaggeredPlan.live(opts, 10.0, per_pass, fixed, sizes, 16, estimates=est,
                              horizon_s=50.0, overhead_s=overhead)
    assert slow.period == choose_period(steps, fixed + overhead, sizes.astype(float), 10.0,
                                        50.0, est, 0.1, 5e-5)
    assert slow.period > plain.period  # dearer round trips: longer ones
    assert np.array_equal(slow.fixed_s, fixed)  # the slots still fit the file's transfers
    with pytest.raises(ValueError, match="needs the run's horizon"):
        StaggeredPlan.live(opts, 10.0, per_pass, fixed, sizes, 16, estimates=est)


def test_a_live_plan_placed_again_follows_the_new_data_and_chooses_the_bounds_period_again(
) -> None:
    """Live, the data placed again at new speeds: each pass costs the new speed times the
    new data, the weights follow the new data, and the bound's period is chosen again from
    the probe's constants, its grid starting where the current period ends; a fixed period
    stays whatever the data does."""
    est = Estimates(beta=2.0, rho=1.0, delta=3.0)
    per_pass, fixed = np.array([0.3, 0.6]), np.array([0.2, 0.1])
    sizes = np.array([64, 32])
    opts = SimpleNamespace(groups=2, period=0.25, lr=0.1, phi=5e-5)

    def by_hand(pp: np.ndarray, n: np.ndarray) -> float:
        return choose_period(step_seconds(pp, n, 16), fixed, n.astype(float), 10.0, 50.0,
                             est, 0.1, 5e-5)

    plan = StaggeredPlan.live(opts, 10.0, per_pass.copy(), fixed, sizes, 16, estimates=est,
                              horizon_s=50.0)
    first = by_hand(per_pass, sizes)
    assert plan.period == first
    assert plan.weight(0, 1) == pytest.approx(64 / 48 / 2)
    plan.passes(0, 0.0)  # learner 0 (group 0) aims at its first slot, P / 2
    # learner 1 three times slower (0.6 / 32 -> 1.8 / 32 s a sample-pass): the allocation
    # now gives it 16 samples and learner 0 80; learner 0's speed was not measured (NaN)
    plan.placed(np.array([80, 16]), np.array([np.nan, 1.8 / 32]), 2.0)
    assert plan.per_pass_s == pytest.approx([0.3 / 64 * 80, 1.8 / 32 * 16])
    assert plan.sizes.tolist() == [80, 16]
    assert plan.weight(0, 1) == pytest.approx(80 / 48 / 2)
    again = by_hand(np.array([0.375, 0.9]), np.array([80, 16]))
    assert again != pytest.approx(first) and plan.period == pytest.approx(again)
    # the new grid starts where the current period ends: at the first multiple of the old
    # period at or after the slot learner 0 aims at (P / 2) and the time of the step (2 s)
    assert plan.origin == pytest.approx(first * math.ceil(max(2.0, first / 2) / first - 1e-9))
    # a learner the allocation gives nothing keeps one sample; one that never took part none
    three = StaggeredPlan.live(opts, 10.0, np.array([0.3, 0.6, 1.0]), np.zeros(3),
                               np.array([64, 32, 0]), 16)
    three.placed(np.array([96, 0, 50]), np.full(3, np.nan), 1.0)
    assert three.sizes.tolist() == [96, 1, 0] and three.nodes == [0, 1]
    assert three.period == 2.5  # a fixed period: the option's quarter of the budget, kept


def test_placed_again_the_groups_are_dealt_again_and_a_learner_in_flight_keeps_its_slot(
) -> None:
    """Four learners, G = 2, a fixed period of 10 s (a budget of 40 s): dealt in turn,
    largest data first, 40 30 20 10 gives groups 0 1 0 1 (data 60 and 40). Placed again at
    10 30 20 40 (learner 0 slowed, learner 3 sped up), the old groups would hold 30 and 70;
    dealt again in the order 3 1 2 0: 3 -> 0, 1 -> 1, 2 -> 0, 0 -> 1 (60 and 40 again)."""
    opts = SimpleNamespace(groups=2, period=0.25, lr=0.1, phi=5e-5)
    plan = StaggeredPlan.live(opts, 40.0, np.full(4, 1.0), np.zeros(4),
                              np.array([40, 30, 20, 10]), 1)
    assert plan.group.tolist() == [0, 1, 0, 1]
    # learner 0 (group 0: slots at 5, 15, 25 ...) starts at 0 and aims at 5
    assert plan.passes(0, 0.0) == pytest.approx(5.0)
    redone = plan.placed(np.array([10, 30, 20, 40]), np.full(4, np.nan), 1.0)
    assert plan.group.tolist() == [1, 1, 0, 0] and redone == {"group": [1, 1, 0, 0]}
    assert [int(plan.sizes[plan.group == g].sum()) for g in (0, 1)] == [60, 40]
    # learner 0, now in group 1 (slots at 10, 20 ...), back at 5 from the slot it aimed at,
    # aims at group 1's first slot after 5: 10. Its speed is unchanged (1 s for 40 samples),
    # so a pass over its 10 samples takes 0.25 s: 5 s of work are 20 passes
    assert plan.per_pass_s[0] == pytest.approx(0.25)
    assert plan.arrival(0, 5.0) == pytest.approx(10.0)
    assert plan.passes(0, 5.0) == pytest.approx(20.0)
    # learner 3, now in group 0, starting at 1 aims at group 0's first slot: 5
    assert plan.arrival(3, 1.0) == pytest.approx(5.0)


def test_the_arena_period_unset_is_the_bounds_and_live_keeps_a_quarter() -> None:
    from mel_opt.arena.settings import ArenaSettings
    from mel_opt.live.settings import LiveSettings
    from mel_opt.schemes.staggered import DEFAULT_PERIOD

    assert ArenaSettings().period is None
    assert ArenaSettings(per_scheme=("staggered.period=none",)).for_scheme(
        "staggered").period is None
    assert ArenaSettings(period=0.5).period == 0.5
    assert LiveSettings.setting("period").default == DEFAULT_PERIOD == 0.25



def test_an_arena_run_chooses_again_from_the_global_model_every_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from mel_opt import api
    from mel_opt.arena.run import arena
    from mel_opt.arena.runner import Run
    from mel_opt.arena.settings import ArenaSettings
    from mel_opt.training import load_dataset

    inst = api.load_instance("instances/mel-async/k5_T15.json")
    data = load_dataset("digits", max_train=500, max_test=200)
    at_start: list[bool] = []  # per measurement: at the starting model (None)?
    measured = Run.estimates

    def spy(self: Run, eta: float, model: Any = None) -> Estimates:
        at_start.append(model is None)
        return measured(self, eta, model)

    monkeypatch.setattr(Run, "estimates", spy)
    settings: dict[str, Any] = dict(schemes=("staggered",), seeds=1, cycles=4,
                                    model="softmax", lr=0.3)
    once = arena(inst, ArenaSettings(**settings), data=data)
    assert at_start == [True]  # chosen once, at the start
    at_start.clear()
    again = arena(inst, ArenaSettings(**settings, rechoose=1.0), data=data)
    # at the start, then at each step a budget or more after the last choice (here: steps
    # every 13-15 s, so every other step), each time at the global model then
    last, want = 0.0, 1
    for row in again.rows[1:]:
        if row["time_s"] >= last + inst.cycle_time:
            last, want = row["time_s"], want + 1
    assert at_start[0] and not any(at_start[1:])
    assert len(at_start) == want >= 3
    periods = [r["period_s"] for r in again.rows]
    assert periods[0] == once.rows[0]["period_s"]  # the same first choice
    assert all(0 < p <= inst.cycle_time for p in periods)
    assert again.rows[-1]["time_s"] >= 3 * inst.cycle_time  # it ran on to the horizon
