"""The simulator's run-to-run noise law, the per-trial redraw of learners (thesis 4.3.1) and the
thesis deadlines of both experiments (Table 4.1, Section 4.3.1.2)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import norm

from mel_opt.api import parse_instance
from mel_opt.cli import cli
from mel_opt.problems.med.generate import generate
from mel_opt.problems.med.simulate import (
    draw_states,
    noise_factors,
    redraw_learners,
    simulate,
)


def _one_learner(make_doc, cv: float, deadline: float = 100.0):
    # Omega = alpha = 1 MB, bandwidth 1 MB/s, 1 shard/s, 2 shards, tau = 1, one state:
    # download (1 + 2) / 1 = 3 s, training 2 s, upload 1 s: 6 s in the state
    lrn = [{"state_probs": [1.0], "bandwidth_Bps": [1e6], "train_rate": [[1.0]],
            "time_cv": cv}]
    return parse_instance(make_doc([{"shards": 2, "deadline_s": deadline}], lrn))


def test_noise_factor_of_a_fixed_seed_by_hand(make_doc):
    # cv = 0.5: sigma^2 = ln(1 + 0.25) = 0.22314..., F = exp(sigma z - sigma^2 / 2) with z the
    # first standard normal of the third child stream of SeedSequence(7)
    inst = _one_learner(make_doc, 0.5)
    z = np.random.default_rng(np.random.SeedSequence(7).spawn(4)[2]).standard_normal()
    s2 = math.log(1.25)
    f = math.exp(math.sqrt(s2) * z - s2 / 2)
    assert noise_factors(inst.time_cv, 1, 1, 7)[0, 0, 0] == pytest.approx(f, rel=1e-12)
    res = simulate(inst, trials=1, cycles=1, seed=7)
    for scheme in res.schemes:  # every scheme: the one learner holds both shards
        assert scheme.per_trial["training_time_s"][0] == pytest.approx(6.0 * f, rel=1e-12)


def test_noise_mean_one_and_the_declared_cv():
    # 40000 draws per learner: the standard error of the mean is cv / 200 (<= 0.002 here), of
    # the sample CV about cv / 280 for these small cvs (lognormal kurtosis): 5 sigma below
    cv = np.array([0.0, 0.06, 0.3])
    f = noise_factors(cv, 200, 200, 3).reshape(-1, 3)
    assert np.all(f[:, 0] == 1.0)
    assert np.all(f > 0)
    assert f.mean(axis=0) == pytest.approx([1.0, 1.0, 1.0], abs=0.01)
    assert f.std(axis=0, ddof=1) == pytest.approx(cv, abs=0.01)
    # log F is normal with variance ln(1 + cv^2)
    assert np.log(f[:, 2]).var(ddof=1) == pytest.approx(math.log(1 + 0.09), rel=0.03)


def test_noise_halts_a_learner_the_plan_says_finishes(make_doc):
    # deadline 6 s: the plan (download 3 + train 2 + upload 1 = 6 s) just fits (4.4b); training
    # ends at 5 F, so a factor F > 6 / 5 halts the learner. Over 2000 cycles with cv = 0.2 the
    # halting share is P(F > 1.2) = 1 - Phi((ln 1.2 + sigma^2 / 2) / sigma).
    inst = _one_learner(make_doc, 0.2, deadline=6.0)
    res = simulate(inst, schemes=["med"], trials=1, cycles=2000, seed=1)
    sigma = math.sqrt(math.log(1.04))
    p_halt = 1 - norm.cdf((math.log(1.2) + sigma**2 / 2) / sigma)  # 0.1542...
    halted = 1 - res.schemes[0].per_cycle["satisfaction"][0]
    assert halted.mean() == pytest.approx(p_halt, abs=4 * math.sqrt(p_halt * (1 - p_halt) / 2000))
    # with cv = 0 the plan holds every cycle
    quiet = simulate(_one_learner(make_doc, 0.0, 6.0), schemes=["med"], trials=1, cycles=50)
    assert np.all(quiet.schemes[0].per_cycle["satisfaction"] == 1.0)


def test_generated_instances_carry_the_default_cv():
    for preset in ("mays2023", "hetero"):
        doc = generate(preset, learners=4, tasks=2, seed=1)
        assert all(lr["time_cv"] == 0.06 for lr in doc["learners"])
    doc = generate("mays2023", learners=4, tasks=2, seed=1, params={"time_cv": "0"})
    assert parse_instance(doc).time_cv.tolist() == [0.0] * 4


def test_redraw_law_and_independence_of_trials():
    inst = parse_instance(generate("mays2023", learners=1, tasks=1, seed=0))
    probs, prices = redraw_learners(inst, 3000, 4)
    peak = math.exp(2) / (math.exp(2) + 2)  # softmax(one_hot / 0.5) over 3 states
    assert np.allclose(probs.max(axis=2), peak)
    shares = np.bincount(probs[:, 0].argmax(axis=1), minlength=3) / 3000
    assert shares == pytest.approx([1 / 3] * 3, abs=0.03)  # uniform peak state
    # price: N(1, 0.5) clipped to [0.1, 1.5]; its mean by hand
    a, b = (0.1 - 1) / 0.5, (1.5 - 1) / 0.5
    mean = (0.1 * norm.cdf(a) + 1.5 * norm.sf(b)
            + 1 * (norm.cdf(b) - norm.cdf(a)) + 0.5 * (norm.pdf(a) - norm.pdf(b)))
    assert prices.min() >= 0.1 and prices.max() <= 1.5
    assert prices.mean() == pytest.approx(mean, abs=0.015)


def test_redraw_changes_learners_per_trial_and_only_when_asked():
    inst = parse_instance(generate("mays2023", learners=5, tasks=2, seed=2))
    on = simulate(inst, trials=4, cycles=2, seed=9, redraw=True)
    off = simulate(inst, trials=4, cycles=2, seed=9)
    probs, prices = redraw_learners(inst, 4, 9)
    assert len({p.tobytes() for p in prices}) == 4  # a new price vector every trial
    assert not np.allclose(prices[0], inst.price)
    # MED solves once per trial with redraw, once in all without (same instance every trial)
    assert on.schemes[0].name == "med" and on.schemes[0].solves == 4
    assert off.schemes[0].solves == 1
    # the cycle states follow each trial's own distribution, from the same uniforms
    s_on, _ = draw_states(inst, 4, 2, 9, probs)
    s_off, _ = draw_states(inst, 4, 2, 9)
    u = np.random.default_rng(np.random.SeedSequence(9).spawn(4)[0]).random((4, 2, 5))
    by_hand = (u[..., None] > np.cumsum(probs, axis=2)[:, None]).sum(axis=-1)
    assert np.array_equal(s_on, np.minimum(by_hand, 2))
    assert not np.array_equal(s_on, s_off)
    assert on.to_dict()["redraw"] is True and off.to_dict()["redraw"] is False


def test_cli_simulate_redraw(tmp_path):
    path = tmp_path / "i.json"
    path.write_text(json.dumps(generate("mays2023", learners=4, tasks=2, seed=3)))
    res = CliRunner().invoke(cli, ["simulate", str(path), "--trials", "3", "--cycles", "2",
                                   "--redraw", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["redraw"] is True and data["schemes"]["med"]["solves"] == 3


@pytest.mark.parametrize("experiment, m, want", [
    ("learners", 3, [55.0, 40.0, 40.0]),  # thesis Table 4.1
    ("tasks", 4, [60.0, 45.0, 45.0, 45.0]),  # Table 4.1 + 5 s (Section 4.3.1.2), fashion_2
])
def test_thesis_deadlines_in_both_experiments(experiment, m, want):
    doc = generate("mays2023", learners=10, tasks=m, seed=0, params={"experiment": experiment})
    assert [t["deadline_s"] for t in doc["tasks"]] == want
    assert doc["budget"] == (300.0 if experiment == "learners" else 200.0)
