"""Live rounds of med (a model per task, a deadline per task) and adaptive-tau (the control rule
on the learners' reports), without Flower: the replies are made up, so every number is known.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from mel_opt import api
from mel_opt.live.learner import LocalData
from mel_opt.live.rounds import Answer, LiveRun, LiveSettings
from mel_opt.problems.adaptive_tau.control import scan
from mel_opt.problems.adaptive_tau.statistics import GradientStatistics, gradient_statistics
from mel_opt.problems.messages import ProbeReport, TrainReport
from mel_opt.training import load_dataset
from mel_opt.training.mlp import init_params, stacked_loss

SIGMA = np.array([4e-3, 8e-3, 1.6e-2])  # seconds per sample-pass of three slow learners


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def probe_all(run: LiveRun) -> None:
    for k in range(3):
        run.accept_probe(100 + k, ProbeReport(k, 100, SIGMA[k] * 1000, 1000.0).encode())


# -- med -----------------------------------------------------------------------------------------
def med_doc() -> dict[str, Any]:
    learner = {"price": 1.0, "state_probs": [1.0], "bandwidth_Bps": [1e6],
               "train_rate": [[1.0], [1.0]]}  # the rates are replaced by the measured ones
    return {"problem": "med", "schema_version": 1, "name": "live-med", "budget": 1e6,
            "min_shards_per_learner": 1, "states": ["on"],
            "tasks": [{"name": "a", "model_bytes": 1e6, "shard_bytes": 1e5, "shards": 6,
                       "deadline_s": 20.0, "iterations": 2},
                      {"name": "b", "model_bytes": 2e6, "shard_bytes": 1e5, "shards": 4,
                       "deadline_s": 8.0, "iterations": 1}],
            "learners": [{"name": f"w{j}", **learner} for j in range(3)]}


def test_med_round_solves_the_measured_tasks_and_sends_each_its_task(digits: Any) -> None:
    run = LiveRun(LiveSettings(instance=med_doc(), seed=2, model="softmax"), digits)
    probe_all(run)
    assert len(run.models) == 2  # one model per task, from different seeds
    assert not np.allclose(run.models[0][0], run.models[1][0])
    plan = run.plan(1)
    N = digits.y_train.size
    per = [N // 6, N // 4]  # samples per shard of each task: the data set over its D_i
    inst = run.cycle.live_instance(run.inst, run.active, run.estimates.seconds, N)
    for j in range(3):  # R_ij = 1 / (sigma_j x samples per shard of task i)
        assert inst.train_rate[j, :, 0] == pytest.approx([1 / (SIGMA[j] * p) for p in per])
    assert plan.allocation == api.solve(inst, "exact").solution
    assignment, d = plan.allocation["assignment"], np.array(plan.allocation["d"])
    assert sorted(set(assignment)) == [0, 1] and d.sum(axis=1).tolist() == [6, 4]
    Omega, alpha, tau, T = [1e6, 2e6], [1e5, 1e5], [2, 1], [20.0, 8.0]
    for j, order in plan.orders.items():
        i = assignment[j]
        shards = int(d[i, j])
        assert order.task == i and order.passes == tau[i]
        assert order.samples == shards * per[i]
        # Eq. (4.3) with tau_i on one state: (2 Omega_i + alpha_i d) / b + tau_i d / R_ij
        comm = (2 * Omega[i] + alpha[i] * shards) / 1e6
        assert order.comm_s == pytest.approx(comm)
        assert order.predicted_s == pytest.approx(comm + tau[i] * shards * SIGMA[j] * per[i])
        assert order.predicted_s <= T[i] * (1 + 1e-9)
        # the node starts from its own task's global model
        assert order.model is run.models[i]


def test_med_close_averages_each_task_and_judges_each_by_its_deadline(digits: Any) -> None:
    run = LiveRun(LiveSettings(instance=med_doc(), seed=2, model="softmax"), digits)
    probe_all(run)
    plan = run.plan(1)
    assignment, d = plan.allocation["assignment"], np.array(plan.allocation["d"], dtype=float)
    replies = []
    for j, order in plan.orders.items():
        # every learner is busy 14 s in all: past task b's deadline (8 s), within task a's (20 s)
        compute = 14.0 - order.comm_s
        work = order.samples * order.passes
        model = [np.full_like(a, float(j)) for a in run.models[order.task]]
        replies.append(Answer(j, TrainReport(j, compute, work, order.samples, order.passes,
                                             model).encode()))
    run.close(plan, replies, wall_s=1.0)
    rows = {r["learner"]: r for r in run.rows}
    for j in range(3):
        i = assignment[j]
        assert rows[j]["task"] == i and rows[j]["measured_s"] == pytest.approx(14.0)
        assert rows[j]["status"] == ("late" if i == 1 else "ok")
        assert rows[j]["deadline_met"] is (i == 0)
    for i in (0, 1):  # each task's model: its learners' models averaged by their shards
        mine = [j for j in range(3) if assignment[j] == i]
        want = sum(d[i, j] * j for j in mine) / sum(d[i, j] for j in mine)
        assert run.models[i][0] == pytest.approx(np.full_like(run.models[i][0], want))
    last = run.rounds[-1]
    assert [t["task"] for t in last["tasks"]] == [0, 1]
    assert last["accuracy"] == pytest.approx(np.mean([t["accuracy"] for t in last["tasks"]]))


# -- adaptive-tau --------------------------------------------------------------------------------
def tau_doc(budget: float = 15.0) -> dict[str, Any]:
    return {"problem": "adaptive-tau", "schema_version": 1, "name": "live-tau", "beta": 1.0,
            "delta": 0.1, "rho": 1.0, "step_size": 0.01, "phi": 0.025, "tau_current": 10,
            "resources": [{"name": "time", "budget": budget, "local_cost": 0.013015156,
                           "global_cost": 0.131604348}]}


def tau_replies(run: LiveRun, plan: Any, rho: list[float], beta: list[float],
                compute: list[float], grads: list[float]) -> list[Answer]:
    out = []
    for k, order in plan.orders.items():
        gradient = [np.full(a.shape, grads[k], dtype=np.float32) for a in run.model]
        report = TrainReport(k, compute[k], order.samples * order.passes, order.samples,
                             order.passes, [a.copy() for a in run.model],
                             extras={"rho": rho[k], "beta": beta[k]},
                             arrays={"gradient": gradient})
        out.append(Answer(k, report.encode()))
    return out


def test_adaptive_tau_sets_the_next_tau_from_the_reported_estimates(digits: Any) -> None:
    settings = LiveSettings(instance=tau_doc(), seed=0, model="softmax", batch_size=16,
                            learners=3)
    run = LiveRun(settings, digits)
    assert run.K == 3 and isinstance(run.cycle.learner_side, GradientStatistics)
    probe_all(run)
    plan = run.plan(1)
    tau1 = api.solve(run.inst, "scan").solution["tau"]  # round 1: the file's estimates
    assert plan.allocation == {"tau": tau1}
    for order in plan.orders.values():
        assert order.samples == tau1 * 16 and order.passes == 1
        assert order.predicted_s == pytest.approx(0.013015156 * tau1)
    weights = np.array([p.weight for p in plan.cycle.learners])
    w = weights / weights.sum()
    run.close(plan, tau_replies(run, plan, rho=[1.0, 2.0, 3.0], beta=[0.5, 0.5, 2.0],
                                compute=[0.1, 0.2, 0.4], grads=[0.0, 3.0, 6.0]), wall_s=1.0)
    inst = run.inst
    P = sum(a.size for a in run.model)
    mean = float(w @ [0.0, 3.0, 6.0])
    delta = float(w @ np.abs(np.array([0.0, 3.0, 6.0]) - mean)) * math.sqrt(P)
    assert inst.rho == pytest.approx(float(w @ [1.0, 2.0, 3.0]))
    assert inst.beta == pytest.approx(float(w @ [0.5, 0.5, 2.0]))
    assert inst.delta == pytest.approx(delta, rel=1e-5)
    assert inst.local_cost[0] == pytest.approx(0.4 / tau1)  # the slowest learner's update
    assert inst.global_cost[0] == pytest.approx(0.6)  # the rest of the round's wall time
    assert inst.used[0] == pytest.approx(1.0) and inst.tau_current == tau1
    control = run.rounds[-1]["control"]
    assert control["tau"] == tau1 and control["used"] == pytest.approx(1.0)
    assert not run.finished
    plan2 = run.plan(2)
    assert plan2.allocation == {"tau": scan(inst).tau}  # the control rule on the estimates
    # a learner reporting a non-finite rho is left out of that average, never poisons it
    # (its whole reply is refused as malformed)
    run.close(plan2, tau_replies(run, plan2, rho=[math.nan, 2.0, 2.0], beta=[1.0] * 3,
                                 compute=[0.1] * 3, grads=[1.0] * 3), wall_s=13.5)
    assert run.inst.rho == pytest.approx(2.0) and run.inst.delta == pytest.approx(0.0)
    row = next(r for r in run.rows if r["round"] == 2 and r["learner"] == 0)
    assert row["status"] == "ignored" and "x.rho must be a finite number" in row["reason"]
    # 14.5 s of 15 used: the end-of-budget rule shortens the next round and makes it the last
    plan3 = run.plan(3)
    R, c, b = 15.0, run.inst.local_cost[0], run.inst.global_cost[0]
    assert plan3.last
    assert plan3.allocation["tau"] == max(1, min(int((R - 14.5 - 2 * b - c) // c),
                                                 scan(dataclasses.replace(
                                                     run.inst, used=np.zeros(1))).tau))
    run.close(plan3, tau_replies(run, plan3, [1.0] * 3, [1.0] * 3, [0.01] * 3, [0.0] * 3),
              wall_s=0.2)
    assert run.finished


def test_gradient_statistics_match_finite_differences(digits: Any) -> None:
    data = digits.astype(np.dtype("float64"))
    local = LocalData(data, np.arange(60))
    w = init_params((data.features, data.classes), 0, np.float64)
    prev = [a + 0.01 * np.random.default_rng(1).standard_normal(a.shape) for a in w]
    none = gradient_statistics(w, None, local)
    assert none.rho is None and none.beta is None
    stats = gradient_statistics(w, prev, local)
    x, y = data.x_train[:60], data.y_train[:60]

    def loss(params: list[np.ndarray]) -> float:
        return float(stacked_loss([a[None] for a in params], x[None], y[None])[0])

    assert stats.loss == pytest.approx(loss(w))
    eps = 1e-6
    for idx in [(0, 0), (10, 3), (40, 9)]:  # d loss / d W[idx] by central differences
        up = [a.copy() for a in w]
        down = [a.copy() for a in w]
        up[0][idx] += eps
        down[0][idx] -= eps
        assert stats.gradient[0][idx] == pytest.approx((loss(up) - loss(down)) / (2 * eps),
                                                       rel=1e-4, abs=1e-8)
    dist = math.sqrt(sum(float(((a - b) ** 2).sum()) for a, b in zip(prev, w, strict=True)))
    assert stats.rho == pytest.approx(abs(loss(prev) - loss(w)) / dist)
    assert stats.beta is not None and stats.beta > 0
