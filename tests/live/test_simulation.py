"""Live runs on Flower's simulation runtime: the strategy and client apps for real, small.

Each run starts a local Ray (on 127.0.0.1) and ends it; the rounds are short (a cycle clock of
a fraction of a second), so the tests check behaviour, never wall-clock time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("flwr")

from mel_opt.cli import cli  # noqa: E402
from mel_opt.live.report import rows_from_csv  # noqa: E402
from mel_opt.live.run import LiveOptions, check, live, load_settings  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.federation, pytest.mark.timeout(600)]


def test_mel_async_rounds_reallocate_from_measurements(tmp_path: Path, ray: Any,
                                                       mel_async_file: Any) -> None:
    settings = load_settings(mel_async_file(3, 0.6), rounds=2, seed=3, model="softmax",
                             lr=0.3, grace_s=60.0)  # a round ends as soon as all answered
    out = tmp_path / "out"
    summary = live(check(settings, LiveOptions(engine="simulation", emulate=True)), out)
    rows = rows_from_csv(out / "rounds.csv")
    assert [(r["round"], r["learner"]) for r in rows] == [(1, 0), (1, 1), (1, 2),
                                                          (2, 0), (2, 1), (2, 2)]
    for r in rows:
        assert r["status"] in ("ok", "late")  # every learner answered
        assert r["node"] and r["measured_s"] > 0 and r["compute_measured_s"] > 0
        # the transfer time is the file's model for this allocation, emulated
        assert r["comm_emulated_s"] == pytest.approx(1e-3 * r["d"] + 0.05, rel=1e-5)
        assert r["predicted_s"] <= 0.6 * (1 + 1e-6)  # Eq. (5) within the cycle clock
        assert r["deadline_met"] == (r["measured_s"] <= 0.6 * (1 + 1e-9))
        assert r["samples"] >= 1 and r["passes"] == r["tau"] >= 1
    rounds = summary["rounds"]
    assert [r["round"] for r in rounds] == [0, 1, 2]
    assert rounds[2]["accuracy"] > rounds[0]["accuracy"] + 0.3  # it learned
    # each round's allocation was solved from the speeds measured so far
    assert all(r["allocation"]["d"] and r["method"] == "exact" for r in rounds[1:])
    assert all(v is not None and v > 0 for v in summary["estimates_s_per_sample"])
    assert summary["figure"] == "live.png" and (out / "live.png").stat().st_size > 0
    # --emulate: the same instance, method, seed and rounds on the emulator, beside
    emulated = summary["emulated"]
    assert list(emulated["schemes"]) == ["exact"]
    assert (out / "emulated" / "train.csv").read_text().count("\nexact,0,") == 3  # cycles 0-2
    assert ray.gone(20.0), ray.alive()


def test_dab_learners_decide_alone(tmp_path: Path, ray: Any) -> None:
    root = Path(__file__).resolve().parents[2]
    settings = load_settings(root / "instances/dab/mnist_ffn_testbed.json", rounds=1,
                             model="softmax", grace_s=60.0)
    out = tmp_path / "dab"
    summary = live(check(settings, LiveOptions(engine="simulation", nodes=3)), out)
    rows = rows_from_csv(out / "rounds.csv")
    assert [r["learner"] for r in rows] == [0, 1, 2]  # --nodes 3: the first three learners
    # every learner answered and was aggregated; whether by the deadline is a wall-clock
    # verdict: each claims the most shards its own probe says fit in D, so its plan ends
    # within a shard's time of D and a busy machine makes it late
    assert all(r["status"] in ("ok", "late") and r["shards"] >= 1 for r in rows), rows
    # each learner claimed its shards, and they came with the model: a_k shards of 1437 // 60
    # 8 x 8 digits in float32 and their one-byte labels
    assert all(r["shipped_bytes"] == r["shards"] * (1437 // 60) * (64 * 4 + 1) for r in rows)
    # the server never learned a speed: every estimate stays unknown
    assert summary["estimates_s_per_sample"] == [None] * 5
    assert summary["rounds"][1]["method"] == "decentralised"
    assert ray.gone(20.0), ray.alive()


@pytest.mark.parametrize("args, words", [
    (["--engine", "remote", "--superlink", "h:1", "--speeds", "1,0.5"],
     "--speeds throttles learners on this machine"),
    (["--speeds", "1,0.5"], "--speeds needs one value or one per node (3), got 2"),
    (["--nodes", "9"], "--nodes must be between 1"),
    (["--engine", "remote"], "--engine remote needs --superlink"),
    (["--model", "resnet"], "unknown model"),
    (["-m", "nope"], "has no method 'nope'"),
    (["--buffer", "2"], "--buffer is FedBuff's: it needs --scheme fedbuff"),
    (["--scheme", "fedbuff", "--concurrency", "4"], "--concurrency must be at most the 3"),
    (["--scheme", "fedbuff", "--buffer", "3", "--concurrency", "2"],
     "--buffer must be at most the concurrency (2), got 3"),
    (["--scheme", "fedbuff", "--emulate"], "FedBuff's emulated twin is `melopt arena`"),
    (["--probe", "0"], "'--probe': 0.0 is not in the range x>0.0"),
    (["--transfers", "measured"], "--transfers measured needs a deployment"),
    (["--period-rule", "bound"], "--period-rule is staggered allocation's: it needs --scheme "
                                 "staggered"),
    (["--scheme", "staggered", "--horizon", "4"], "--horizon is read only with --period-rule "
                                                  "bound"),
])
def test_bad_requests_exit_2_before_anything_starts(tmp_path: Path, args: list[str],
                                                    words: str, mel_async_file: Any) -> None:
    res = CliRunner().invoke(cli, ["live", str(mel_async_file(3, 0.6)), "-o",
                                   str(tmp_path / "o"), *args])
    assert res.exit_code == 2, res.output
    assert words in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o" / "rounds.csv").exists()


def test_fedbuff_is_refused_for_a_problem_without_a_work_clock(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    res = CliRunner().invoke(cli, ["live", str(root / "instances/med/mays2023_n4_m2.json"),
                                   "--scheme", "fedbuff", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert ("--scheme: fedbuff does not run med: its model gives no time for a fixed local "
            "work (its learning cycle declares no work clock)") in res.output


@pytest.mark.parametrize("args, words", [
    (["--transfers", "measured", "--engine", "local"], "--transfers measured is not "
     "defined for med: its plans take the transfers from the file"),
    (["--transfers", "learned"], "'--transfers': 'learned' is not one of 'file', 'measured'"),
    (["--shards", "lent"], "'--shards': 'lent' is not one of 'shipped', 'held'"),
])
def test_transfers_and_shards_refuse_what_they_cannot_do(tmp_path: Path, args: list[str],
                                                         words: str) -> None:
    root = Path(__file__).resolve().parents[2]
    res = CliRunner().invoke(cli, ["live", str(root / "instances/med/mays2023_n4_m2.json"),
                                   "-o", str(tmp_path / "o"), *args])
    assert res.exit_code == 2, res.output
    assert words in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output


def test_fedbuff_in_the_simulation(tmp_path: Path, ray: Any, mel_async_file: Any) -> None:
    settings = load_settings(mel_async_file(3, 0.6), rounds=3, model="softmax", lr=0.3,
                             grace_s=60.0, scheme="fedbuff", concurrency=2)
    out = tmp_path / "out"
    summary = live(check(settings, LiveOptions(engine="simulation")), out)
    steps = summary["rounds"][1:]
    assert [r["round"] for r in steps] == [1, 2, 3]
    assert all(r["learners"] == 1 for r in steps)  # default K: half of C = 2
    rows = rows_from_csv(out / "rounds.csv")
    assert [r["status"] for r in rows] == ["ok"] * 3
    assert all(r["samples"] == 100 and r["passes"] >= 1 for r in rows)  # d / K each
    assert steps[-1]["accuracy"] > summary["rounds"][0]["accuracy"] + 0.2
    assert ray.gone(20.0), ray.alive()


def test_staggered_takes_the_bounds_period_from_constants_sent_over_flower(
        tmp_path: Path, ray: Any, mel_async_file: Any) -> None:
    """``--period-rule bound`` on Flower's runtime: every learner's gradient and constants
    cross as its probe reply's arrays and numbers, and every step's period is the bound's pick
    from them (the numbers themselves, and a period that stays while the speeds stay, are
    worked on the in-process clock, in test_staggered_live.py; here a learner's speed over
    its first window of T of real compute can move by more than a quarter from its probe's,
    and the period is then chosen again)."""
    settings = load_settings(mel_async_file(3, 0.6), rounds=3, model="softmax", lr=0.3,
                             grace_s=60.0, scheme="staggered", period_rule="bound")
    summary = live(check(settings, LiveOptions(engine="simulation")), tmp_path / "out")
    assert summary["stopped"] is None
    # every learner's constants were taken (a busy machine may add other warnings, about a
    # speed measurement, which this test does not judge)
    assert not [w for w in summary["warnings"] if "constants" in w]
    periods = [r["control"]["period_s"] for r in summary["rounds"][1:]]
    assert len(summary["rounds"]) == 4
    # each a candidate of the bound: positive, at most the cycle T = 0.6 s, and not the
    # fixed option's quarter of it (no learner's constants would leave it there)
    assert all(0 < p <= 0.6 and p != pytest.approx(0.25 * 0.6) for p in periods)
    assert summary["settings"]["period_rule"] == "bound"
    assert ray.gone(20.0), ray.alive()


def test_emulate_is_refused_for_a_cycle_only_live_runs_train(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    res = CliRunner().invoke(cli, ["live", str(root / "instances/med/mays2023_n4_m2.json"),
                                   "--emulate", "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "emulator does not train med" in res.output


def test_med_trains_one_model_per_task(tmp_path: Path, ray: Any) -> None:
    root = Path(__file__).resolve().parents[2]
    settings = load_settings(root / "instances/med/mays2023_n4_m2.json", rounds=2,
                             model="softmax", grace_s=60.0)
    out = tmp_path / "med"
    summary = live(check(settings, LiveOptions(engine="simulation")), out)
    rows = rows_from_csv(out / "rounds.csv")
    # every learner answered and was aggregated (by its task's deadline or late: a
    # wall-clock verdict on plans solved to fill the deadlines from measured speeds)
    assert len(rows) == 8 and all(r["status"] in ("ok", "late") for r in rows), rows
    for r in rows:  # each learner trained its round's task and shards
        alloc = summary["rounds"][r["round"]]["allocation"]
        assert r["task"] == alloc["assignment"][r["learner"]]
        assert r["shards"] == alloc["d"][r["task"]][r["learner"]] >= 1
    last = summary["rounds"][-1]
    assert [t["task"] for t in last["tasks"]] == [0, 1]
    first = summary["rounds"][0]["tasks"]
    assert all(t["accuracy"] > f["accuracy"] + 0.2 for t, f in zip(last["tasks"], first,
                                                                    strict=True))
    assert ray.gone(20.0), ray.alive()


def test_adaptive_tau_runs_the_control_rule_on_reported_statistics(tmp_path: Path,
                                                                   ray: Any) -> None:
    root = Path(__file__).resolve().parents[2]
    settings = load_settings(root / "instances/adaptive-tau/svm_defaults.json", rounds=3,
                             model="softmax", lr=0.05, grace_s=60.0, learners=2)
    out = tmp_path / "tau"
    summary = live(check(settings, LiveOptions(engine="simulation", nodes=2)), out)
    rounds = summary["rounds"][1:]
    assert len(rounds) == 3 and all(r["learners"] == 2 for r in rounds)
    control = [r["control"] for r in rounds]
    # round 1 runs the file's estimates; from then on rho and beta are the learners' (they
    # need a previous local model), delta the spread of their gradients, c and b measured
    assert control[0]["rho"] == 1.0 and control[0]["beta"] == 1.0
    assert all(c["rho"] != 1.0 and c["beta"] != 1.0 for c in control[1:])
    assert all(c["delta"] > 0 and c["local_update_s"] > 0 for c in control)
    assert control[-1]["used"] == pytest.approx(sum(r["round_wall_s"] for r in rounds))
    assert [r["allocation"]["tau"] for r in rounds] == [c["tau"] for c in control]
    assert summary["rounds"][-1]["accuracy"] > summary["rounds"][0]["accuracy"] + 0.3
    assert ray.gone(20.0), ray.alive()
