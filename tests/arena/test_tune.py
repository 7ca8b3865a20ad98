"""``melopt arena --tune``: the same number of trials for every scheme, drawn from its declared
grid, picked on the validation split and judged on the test split; worked by hand."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mel_opt.api import load_instance
from mel_opt.arena.report import summarise, verdict
from mel_opt.arena.run import ArenaRun, arena
from mel_opt.arena.settings import ArenaSettings
from mel_opt.arena.tune import default_validation, draw, points, score, tuning_seeds
from mel_opt.cli.app import cli
from mel_opt.errors import SettingError
from mel_opt.schemes import SCHEMES, Loop, schemes_for
from mel_opt.training import load_dataset

INSTANCE = "instances/mel-async/k5_T15.json"
SMALL = dict(seeds=1, cycles=2, model="softmax", max_train=300, max_test=100)
TUNE = dict(tune=True, trials=2, tune_seeds=1)


@pytest.fixture(scope="module")
def tuned() -> ArenaRun:
    """Every scheme tuned (2 trials, 1 tuning seed), fedprox's mu fixed by the user."""
    calls: list[tuple[int, int]] = []
    run = arena(load_instance(INSTANCE),
                ArenaSettings(**SMALL, **TUNE, per_scheme=("fedprox.mu=0.01",)),
                progress=lambda d, n: calls.append((d, n)))
    run.progress_calls = calls  # type: ignore[attr-defined]
    return run


# -- the grids and the draws --------------------------------------------------------------

def test_every_grid_gives_the_default_trials() -> None:
    trials = ArenaSettings().trials
    for spec in schemes_for("arena"):
        assert len(points(spec.grid)) >= trials, spec.name
        assert "lr" in spec.grid  # the client lr is tuned for every scheme
        # every point is what --set accepts for the scheme, and what it then runs
        name = "exact" if spec.loop is Loop.ALLOCATION else spec.name
        for p in points(spec.grid):
            items = tuple(f"{name}.{k}={'none' if v is None else v}" for k, v in p.items())
            s = ArenaSettings(per_scheme=items).for_scheme(name)
            assert {k: getattr(s, k) for k in p} == p


def test_a_grid_names_only_the_schemes_options() -> None:
    with pytest.raises(ValueError, match="its grid names 'mu'"):
        dataclasses.replace(SCHEMES["deadline"], grid={"mu": (0.1, 1.0)})
    with pytest.raises(ValueError, match="its grid's 'participation'"):
        dataclasses.replace(SCHEMES["deadline"], grid={"participation": (0.5, 2.0)})
    with pytest.raises(ValueError, match="distinct values"):
        dataclasses.replace(SCHEMES["fill"], grid={"lr": (0.1, 0.1)})
    # the shared options are every scheme's: the allocation has none of its own
    assert dataclasses.replace(SCHEMES["allocation"], grid={"batch_size": (8, 16)}).grid


def test_the_draw_is_the_same_every_run_and_of_the_count() -> None:
    grid = SCHEMES["fedbuff"].grid
    a = draw("fedbuff", grid, 8)
    assert a == draw("fedbuff", grid, 8) and len(a) == 8
    assert len({tuple(sorted(p.items(), key=str)) for p in a}) == 8  # without replacement
    assert all(p in points(grid) for p in a)
    assert draw("fedbuff", grid, 3) == a[:3]  # the same generator, the first three
    assert draw("fedprox", SCHEMES["fedprox"].grid, 15) != points(SCHEMES["fedprox"].grid)


def test_a_grid_smaller_than_the_trials_is_refused() -> None:
    with pytest.raises(SettingError, match="fedprox's grid has 3 points once mu is fixed by "
                                           "--set, fewer than the 4 trials"):
        draw("fedprox", {"lr": (0.03, 0.1, 0.3)}, 4, {"mu": 0.01})


def test_the_seeds_and_the_validation_split() -> None:
    assert tuning_seeds(ArenaSettings(seeds=10, tune_seeds=2)) == range(1000, 1002)
    # never an evaluation seed
    assert tuning_seeds(ArenaSettings(seeds=10, first_seed=995)) == range(1005, 1007)
    ds = load_dataset("digits", max_train=300, max_test=100)
    assert default_validation(ds) == 50  # min(100 test samples, 300 // 6)
    assert default_validation(load_dataset("digits")) == 1438 // 6  # 239 < 359 test samples


# -- the score --------------------------------------------------------------------------

def test_the_score_by_hand() -> None:
    rows = [{"time_s": 0.0, "val_accuracy": 0.5}, {"time_s": 5.0, "val_accuracy": 0.8}]
    assert score(rows, 10.0) == pytest.approx(0.65)  # (0.5 x 5 + 0.8 x 5) / 10
    # out of order, a first row after 0 (its value before it), a row past the horizon
    rows = [{"time_s": 8.0, "val_accuracy": 0.9}, {"time_s": 2.0, "val_accuracy": 0.4},
            {"time_s": 12.0, "val_accuracy": 1.0}]
    assert score(rows, 10.0) == pytest.approx((0.4 * 8 + 0.9 * 2) / 10)
    # early beats late at the same end
    early = [{"time_s": 0.0, "val_accuracy": 0.1}, {"time_s": 2.0, "val_accuracy": 0.9}]
    late = [{"time_s": 0.0, "val_accuracy": 0.1}, {"time_s": 8.0, "val_accuracy": 0.9}]
    assert score(early, 10.0) > score(late, 10.0)
    with pytest.raises(ValueError, match="lacks val_accuracy"):
        score([{"time_s": 0.0, "accuracy": 0.5}], 10.0)


# -- a tuned arena ----------------------------------------------------------------------

def test_the_trials_are_the_declared_draws(tuned: ArenaRun) -> None:
    assert tuned.tuning is not None
    assert list(tuned.tuning) == ["exact", "deadline", "oort", "fedbuff", "fedprox", "staggered",
                                  "fill", "equal-data"]
    for scheme, e in tuned.tuning.items():
        spec = SCHEMES["allocation" if scheme == "exact" else scheme]
        grid = {k: v for k, v in spec.grid.items() if k not in e["fixed"]}
        assert [t["values"] for t in e["trials"]] == draw(scheme, grid, 2)
        assert e["seeds"] == [1000]


def test_picked_on_validation_scores(tuned: ArenaRun) -> None:
    """Each trial's score is recomputed from its rows' val_accuracy, the chosen values are
    its argmax (ties: the earlier trial), and the final runs carry them."""
    assert tuned.tuning is not None
    runs: dict[tuple[str, int], dict[int, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list))
    for r in tuned.tuning_rows:
        runs[(r["scheme"], r["trial"])][r["seed"]].append(r)
    for scheme, e in tuned.tuning.items():
        scores = [sum(score(rs, tuned.horizon_s) for rs in runs[(scheme, i)].values())
                  / len(runs[(scheme, i)]) for i in range(2)]
        assert [t["score"] for t in e["trials"]] == pytest.approx(scores)
        best = max(range(2), key=lambda i: (scores[i], -i))
        assert e["chosen"] == e["trials"][best]["values"] and e["score"] == scores[best]
        s = tuned.settings.for_scheme(scheme)  # the final runs' settings
        assert {k: getattr(s, k) for k in e["chosen"]} == e["chosen"]
        # the chosen values at their grid's numeric edge are named
        for k, v in e["chosen"].items():
            nums = sorted({x for x in e["grid"][k] if isinstance(x, (int, float))})
            edge = ("lowest" if v == nums[0] else "highest" if v == nums[-1] else None) \
                if len(nums) > 1 and isinstance(v, (int, float)) else None
            assert e["edges"].get(k) == edge, (scheme, k, v)
    assert any(e["edges"] for e in tuned.tuning.values())  # the check above has cases


def test_a_users_value_is_not_tuned(tuned: ArenaRun) -> None:
    assert tuned.tuning is not None
    e = tuned.tuning["fedprox"]
    assert e["fixed"] == {"mu": 0.01} and "mu" not in e["grid"]
    assert all("mu" not in t["values"] for t in e["trials"])
    assert tuned.settings.for_scheme("fedprox").mu == 0.01


def test_judged_on_the_test_split(tuned: ArenaRun) -> None:
    """The final runs are the evaluation seeds' and the usual arena's (the chosen values as
    --set values); tuning read only the tuning seeds."""
    s = tuned.settings
    assert (s.tune, s.trials, s.tune_seeds, s.validation) == (True, 2, 1, 50)
    assert {r["seed"] for r in tuned.rows} == {0}
    assert {r["seed"] for r in tuned.tuning_rows} == {1000}
    again = arena(load_instance(INSTANCE), dataclasses.replace(s, tune=False))
    assert again.rows == tuned.rows
    summary = summarise(tuned)
    for scheme, e in summary["schemes"].items():
        last = [r for r in tuned.rows if r["scheme"] == scheme][-1]
        assert e["final_accuracy"]["mean"] == pytest.approx(last["accuracy"])  # the test's
    assert any(r["accuracy"] != r["val_accuracy"] for r in tuned.rows)
    assert summary["tuning"] == tuned.tuning and summary["settings"]["tune"] is True
    assert summarise(again)["tuning"] is None


def test_a_trial_never_sees_the_test_split(tuned: ArenaRun) -> None:
    """Trials are scored on the validation split and are not even shown the test split:
    their rows have no test accuracy, the evaluation's all have one."""
    assert tuned.tuning_rows
    assert all(math.isnan(r["accuracy"]) for r in tuned.tuning_rows)
    assert all(0.0 <= r["val_accuracy"] <= 1.0 for r in tuned.tuning_rows)
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in tuned.rows)


def test_progress_counts_every_trial(tuned: ArenaRun) -> None:
    calls = tuned.progress_calls  # type: ignore[attr-defined]
    total = 2 * 8 * 1 + 8 * 1  # trials x schemes x tuning seeds + the evaluation's runs
    assert calls[-1] == (total, total) and all(n == total for _, n in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert len(calls) == total + 1


# -- the command line ------------------------------------------------------------------

def test_the_command_line_tunes(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["arena", INSTANCE, "-o", str(tmp_path), "--tune",
                                   "--trials", "2", "--tune-seeds", "1", "--seeds", "1",
                                   "--cycles", "2", "--model", "softmax", "--max-train", "300",
                                   "--max-test", "100", "--schemes", "exact,fedprox",
                                   "--set", "fedprox.lr=0.1"])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["tuning"]) == {"exact", "fedprox"}
    assert summary["tuning"]["fedprox"]["fixed"] == {"lr": 0.1}
    assert {k: summary["settings"][k] for k in ("tune", "trials", "tune_seeds", "validation")
            } == {"tune": True, "trials": 2, "tune_seeds": 1, "validation": 50}
    assert "tuning: 2 trials per scheme" in res.output and "tuning.csv" in res.output
    with (tmp_path / "tuning.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert set(rows[0]) == {"scheme", "trial", "seed", "step", "time_s", "val_accuracy"}
    assert {(r["scheme"], r["trial"]) for r in rows} == {(s, t) for s in ("exact", "fedprox")
                                                         for t in ("0", "1")}
    with (tmp_path / "arena.csv").open() as f:
        assert {r["seed"] for r in csv.DictReader(f)} == {"0"}  # the evaluation's runs only


def test_the_command_line_refuses_a_small_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    small = dataclasses.replace(SCHEMES["fedprox"], grid={"mu": (0.1,)})
    monkeypatch.setitem(SCHEMES, "fedprox", small)
    res = CliRunner().invoke(cli, ["arena", INSTANCE, "-o", "/tmp/never-written", "--tune",
                                   "--trials", "2", "--schemes", "exact,fedprox"])
    assert res.exit_code == 2
    assert "--trials: fedprox's grid has 1 point, fewer than the 2 trials" in res.output


# -- the verdict says a shared reason once -----------------------------------------------

def test_too_few_seeds_said_once() -> None:
    times = {"exact": {0: (30.0, True), 1: (40.0, True)},
             "fedbuff": {0: (20.0, True), 1: (21.0, True)},
             "fedprox": {0: (50.0, True), 1: (60.0, True)}}
    medians = {"exact": 35.0, "fedbuff": 20.5, "fedprox": 55.0}
    who, why = verdict(times, medians, 100.0)
    assert who is None
    assert why == ("no clear winner: fedbuff has the least median (20.5 s), but 2 paired "
                   "seeds are too few for a 95% sign interval (6 needed)")
