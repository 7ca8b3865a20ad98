"""The Monte-Carlo evaluator: a tiny case worked by hand (with a halted learner), the shared
draws, reproducibility, reported infeasibility and the confidence intervals."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.api import parse_instance
from mel_opt.cli import cli
from mel_opt.problems.med.simulate import (
    Allocation,
    draw_states,
    evaluate,
    simulate,
)


@pytest.fixture
def tiny(make_doc):
    # one task: Omega = alpha = 1 MB, D = 10, tau = 1, T = 20; bandwidth 1 MB/s everywhere.
    # learner 0 trains at 1 shard/s in both states; learner 1 at 1 (state 0) or 0.25 (state 1).
    lrn = [
        {"state_probs": [0.5, 0.5], "bandwidth_Bps": [1e6, 1e6], "train_rate": [[1.0, 1.0]]},
        {"state_probs": [0.5, 0.5], "bandwidth_Bps": [1e6, 1e6], "train_rate": [[1.0, 0.25]]},
    ]
    return parse_instance(make_doc([{"shards": 10, "deadline_s": 20.0}], lrn))


def test_metrics_worked_by_hand(tiny):
    # allocation d = (6, 4) on task 0; two cycles.
    # cycle 0, states (0, 1):
    #   w0: download (1 + 6) MB / 1 MB/s = 7 s, trains 6 s -> 13 <= 20, upload 1 s -> t = 14
    #   w1: download 5 s, would train 4 / 0.25 = 16 s -> 21 > 20: halts at 20 having done
    #       (20 - 5) / 16 = 0.9375 of its 4 shards (3.75), uploads 1 s -> t = 21
    #   time 21; satisfaction 0 (w1 halted); learner satisfaction 1/2;
    #   fulfilment (6 + 3.75) / 10 = 0.975; drop 0.025; occupancy (14/21 + 21/21) / 2 = 5/6
    # cycle 1, states (0, 0): w1 downloads 5, trains 4 -> 9, t = 10; w0 t = 14:
    #   time 14; satisfaction 1; fulfilment 1; occupancy (14/14 + 10/14) / 2 = 6/7
    alloc = Allocation(task=np.zeros((1, 2, 2), dtype=int),
                       shards=np.array([[[6, 4], [6, 4]]]), ok=np.ones((1, 2), dtype=bool))
    states = np.array([[[0, 1], [0, 0]]])
    got = evaluate(tiny, alloc, states)
    assert got["training_time_s"][0].tolist() == pytest.approx([21.0, 14.0])
    assert got["satisfaction"][0].tolist() == [0.0, 1.0]
    assert got["learner_satisfaction"][0].tolist() == pytest.approx([0.5, 1.0])
    assert got["fulfilment"][0].tolist() == pytest.approx([0.975, 1.0])
    assert got["drop_rate"][0].tolist() == pytest.approx([0.025, 0.0])
    assert got["occupancy"][0].tolist() == pytest.approx([5 / 6, 6 / 7])


def test_download_past_the_deadline_trains_nothing(make_doc):
    # T = 4 s: w0 with 4 shards downloads (1 + 4) MB in 5 s > 4 s -> trains 0, t = 5 + 1 = 6
    lrn = [{"state_probs": [1.0], "bandwidth_Bps": [1e6], "train_rate": [[1.0]]}] * 2
    inst = parse_instance(make_doc([{"shards": 5, "deadline_s": 4.0}], lrn))
    alloc = Allocation(task=np.zeros((1, 1, 2), dtype=int), shards=np.array([[[4, 1]]]),
                       ok=np.ones((1, 1), dtype=bool))
    got = evaluate(inst, alloc, np.zeros((1, 1, 2), dtype=int))
    # w1: download 2 s, trains 1 s -> 3 <= 4, t = 4; fulfilment (0 + 1) / 5 = 0.2
    assert got["fulfilment"][0, 0] == pytest.approx(0.2)
    assert got["training_time_s"][0, 0] == pytest.approx(6.0)
    assert got["occupancy"][0, 0] == pytest.approx((6 / 6 + 4 / 6) / 2)


def test_certain_states_make_every_scheme_the_same(make_doc, learner):
    # one-hot probabilities: the benchmark state and every cycle state are the only state, so
    # MMTT-Uncertain and MMTT-Ideal solve the same problem as MED (paired draws, same answers);
    # time_cv = 0: no run-to-run noise, so the times are the state times exactly
    quiet = [{**learner(r), "time_cv": 0.0} for r in (1.0, 0.5)]
    inst = parse_instance(make_doc([{"shards": 10}], quiet))
    res = simulate(inst, trials=4, cycles=3, seed=5)
    base = res.schemes[0].per_trial
    for other in res.schemes[1:]:
        for key, vals in other.per_trial.items():
            assert np.allclose(vals, base[key])
    # the allocation is the 6/4 split of test_med_known: both learners finish at
    # download 7 + train 6 (+1 upload) = 14 and 5 + 8 (+1) = 14 s
    assert base["training_time_s"] == pytest.approx([14.0] * 4)
    assert base["satisfaction"] == pytest.approx([1.0] * 4)
    assert base["occupancy"] == pytest.approx([1.0] * 4)


def test_same_seed_same_result_and_shared_draws(tiny):
    a = simulate(tiny, trials=6, cycles=3, seed=11).to_dict()
    b = simulate(tiny, trials=6, cycles=3, seed=11).to_dict()
    for d in (a, b):
        d.pop("wall_time_s")
        for s in d["schemes"].values():
            s.pop("solve_time_s")
    assert a == b
    # the cycle states do not depend on which schemes run
    both = simulate(tiny, trials=6, cycles=3, seed=11)
    only = simulate(tiny, schemes=["mmtt-ideal"], trials=6, cycles=3, seed=11)
    assert np.array_equal(only.schemes[0].per_trial["training_time_s"],
                          both.schemes[2].per_trial["training_time_s"])
    s1, _ = draw_states(tiny, 6, 3, 11)
    s2, _ = draw_states(tiny, 6, 3, 12)
    assert s1.shape == (6, 3, 2) and not np.array_equal(s1, s2)


def test_draw_frequencies_follow_the_probabilities(make_doc):
    lrn = [{"state_probs": [0.2, 0.8], "bandwidth_Bps": [1e6, 1e6], "train_rate": [[1, 1]]}]
    inst = parse_instance(make_doc([{"shards": 3}], lrn))
    states, bench = draw_states(inst, 4000, 5, 3)
    assert states.mean() == pytest.approx(0.8, abs=0.01)
    assert bench.mean() == pytest.approx(0.8, abs=0.03)


def test_infeasible_solves_are_reported_not_redrawn(make_doc):
    # expected per-shard delay 1 + (0.5 * 1 + 0.5 * 10) = 6.5 s: MED cannot place 10 shards on
    # two learners within 20 s (best 2 + 6.5 * 5 = 34.5). Known states: fast is 2 s/shard
    # (cap (20 - 2) / 2 = 9 shards), slow 11 s/shard (cap 1): one fast learner suffices
    # (9 + 1 = 10), two slow ones hold only 2. MMTT solves fail exactly when both are slow.
    lrn = [{"state_probs": [0.5, 0.5], "bandwidth_Bps": [1e6, 1e6],
            "train_rate": [[1.0, 0.1]]}] * 2
    inst = parse_instance(make_doc([{"shards": 10, "deadline_s": 20.0}], lrn))
    res = simulate(inst, trials=5, cycles=4, seed=2)
    med, unc, ideal = res.schemes
    assert med.solves == 1 and med.failed_solves == 1
    assert med.cycles_without_allocation == 20
    assert np.all(np.isnan(med.per_trial["training_time_s"]))
    assert med.summary()["training_time_s"]["n"] == 0
    assert "infeasible" in med.messages[0]
    states, bench = draw_states(inst, 5, 4, 2)
    slow_bench = (bench == 1).all(axis=1)
    assert unc.cycles_without_allocation == 4 * int(slow_bench.sum())
    slow_cycle = (states == 1).all(axis=2)
    assert ideal.cycles_without_allocation == int(slow_cycle.sum())
    assert 0 < int(slow_bench.sum()) < 5  # the seed exercises both outcomes


def test_cli_simulate_json_and_errors(tmp_path, tiny, make_doc):
    doc = make_doc([{"shards": 10, "deadline_s": 20.0}], [
        {"state_probs": [0.5, 0.5], "bandwidth_Bps": [1e6, 1e6], "train_rate": [[1.0, 1.0]]},
        {"state_probs": [0.5, 0.5], "bandwidth_Bps": [1e6, 1e6], "train_rate": [[1.0, 0.25]]},
    ])
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(doc))
    out_file = tmp_path / "sim.json"
    res = CliRunner().invoke(cli, ["simulate", str(path), "--schemes", "med,mmtt-uncertain",
                                   "--cycles", "2", "--trials", "5", "--seed", "3", "--json",
                                   "-o", str(out_file)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data["schemes"]) == {"med", "mmtt-uncertain"}
    assert data["paired_difference_vs"] == "med"
    assert data["schemes"]["med"]["metrics"]["satisfaction"]["n"] == 5
    assert json.loads(out_file.read_text()) == data
    table = CliRunner().invoke(cli, ["simulate", str(path), "--trials", "3", "--cycles", "1"])
    assert table.exit_code == 0 and "data drop rate" in table.stdout
    bad = CliRunner().invoke(cli, ["simulate", str(path), "--schemes", "med,best"])
    assert bad.exit_code == 2 and "unknown scheme(s) best" in bad.stderr
