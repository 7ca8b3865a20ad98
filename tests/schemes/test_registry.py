"""The scheme registry: every scheme declared once, listed and configured from there."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mel_opt.api import load_instance
from mel_opt.arena.settings import ALTERNATIVES, ARENA_SETTINGS, ArenaSettings
from mel_opt.errors import SettingError
from mel_opt.live.settings import SCHEMES as LIVE_SCHEMES
from mel_opt.live.settings import LiveSettings
from mel_opt.problems import get_problem
from mel_opt.schemes import (
    ALLOCATION,
    SCHEMES,
    Loop,
    SchemeSpec,
    get_scheme,
    scheme_options,
    schemes_for,
)
from mel_opt.schemes import deadline as deadline_module
from mel_opt.settings import Setting

DOC = {"problem": "mel-async", "schema_version": 1, "name": "two", "cycle_time_s": 10.0,
       "total_samples": 100, "min_samples": 10, "max_samples": 100,
       "learners": [{"name": "a", "c2": 0.01, "c1": 0.001, "c0": 0.5},
                    {"name": "b", "c2": 0.02, "c1": 0.002, "c0": 1.0}]}


def test_every_scheme_is_declared_once_with_what_its_loop_needs() -> None:
    assert list(SCHEMES) == ["allocation", "deadline", "oort", "fedbuff", "fedprox", "staggered",
                             "fill", "equal-data"]
    for name, spec in SCHEMES.items():
        assert spec.name == name and spec.summary and spec.title
        assert (spec.policy is not None) == (spec.loop is Loop.ROUNDS)
        assert (spec.serve is not None) == (spec.loop is Loop.BUFFERED)
    assert SCHEMES["allocation"] is ALLOCATION and ALLOCATION.loop is Loop.ALLOCATION


def test_the_engines_list_their_schemes_from_the_registry() -> None:
    assert [s.name for s in schemes_for("live")] == ["allocation", "fedbuff", "staggered"]
    assert LIVE_SCHEMES == ("allocation", "fedbuff", "staggered")
    assert LiveSettings.setting("scheme").choices == LIVE_SCHEMES
    assert list(ALTERNATIVES) == ["deadline", "oort", "fedbuff", "fedprox", "staggered",
                                  "fill", "equal-data"]
    doc = ArenaSettings.setting("schemes").doc
    assert all(name in doc for name in ALTERNATIVES)
    with pytest.raises(Exception, match="unknown scheme 'oort'; choose from allocation, "
                                        "fedbuff, staggered"):
        get_scheme("oort", "live")


def test_the_schemes_options_are_the_engines_settings() -> None:
    arena = [o.name for o in scheme_options("arena")]
    assert arena == ["participation", "overcommit", "passes", "local_steps", "alpha",
                     "concurrency", "buffer", "server_lr", "mu", "groups", "period", "phi",
                     "rechoose"]
    assert all(o in ARENA_SETTINGS for o in scheme_options("arena"))
    assert [o.name for o in scheme_options("live")] == ["buffer", "concurrency", "server_lr",
                                                        "groups", "period", "period_rule",
                                                        "horizon", "phi"]
    # deadline and oort share one declaration of overcommit
    assert deadline_module.OVERCOMMIT in SCHEMES["oort"].options_for("arena")


def test_two_declarations_of_one_option_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    twin = dataclasses.replace(SCHEMES["fedprox"], name="fedprox2", options={
        "arena": (Setting("mu", float, 0.5, "another mu", minimum=0.0),)})
    monkeypatch.setitem(SCHEMES, "fedprox2", twin)
    with pytest.raises(ValueError, match="two declarations of the arena option 'mu'"):
        scheme_options("arena")


def test_a_declaration_says_what_its_loop_needs() -> None:
    policy = SCHEMES["deadline"].policy
    with pytest.raises(ValueError, match="a policy is what a rounds scheme declares"):
        SchemeSpec("x", "no policy", Loop.ROUNDS)
    with pytest.raises(ValueError, match="a policy is what a rounds scheme declares"):
        SchemeSpec("x", "policy on an async scheme", Loop.BUFFERED, policy=policy,
                   serve=lambda *a, **k: None)
    with pytest.raises(ValueError, match="unknown engines"):
        SchemeSpec("x", "nowhere", Loop.ALLOCATION, engines=("moon",))


def test_what_a_scheme_needs_of_a_problem_is_read_from_its_declarations() -> None:
    fedbuff = SCHEMES["fedbuff"]
    mel = load_instance("instances/mel-async/k5_T15.json")
    med = load_instance("instances/med/mays2023_n4_m1.json")
    assert fedbuff.lacks(get_problem("mel-async").learning, mel) == ""
    assert "declares no work clock" in fedbuff.lacks(get_problem("med").learning, med)
    assert ALLOCATION.lacks(get_problem("med").learning, med) == ""


def test_an_option_of_another_scheme_is_refused_naming_it() -> None:
    with pytest.raises(SettingError, match="server_lr is FedBuff or staggered allocation's: "
                                           "it needs scheme fedbuff or staggered"):
        LiveSettings(instance=DOC, server_lr=0.5)
    with pytest.raises(SettingError, match="groups is staggered allocation's: it needs scheme "
                                           "staggered"):
        LiveSettings(instance=DOC, scheme="fedbuff", groups=3)
    with pytest.raises(SettingError, match="period_rule is staggered allocation's: it needs "
                                           "scheme staggered"):
        LiveSettings(instance=DOC, scheme="fedbuff", period_rule="bound")
    with pytest.raises(SettingError, match="period_rule must be one of fixed, bound"):
        LiveSettings(instance=DOC, scheme="staggered", period_rule="tuned")
    for name, value in (("horizon", 3.0), ("phi", 0.025)):  # the bound's own, without it
        with pytest.raises(SettingError, match=f"{name} is read only with period_rule bound"):
            LiveSettings(instance=DOC, scheme="staggered", **{name: value})
        s = LiveSettings(instance=DOC, scheme="staggered", period_rule="bound", **{name: value})
        assert getattr(s, name) == value
    LiveSettings(instance=DOC, server_lr=1.0)  # the default: nothing asked
    s = LiveSettings(instance=DOC, scheme="fedbuff", server_lr=0.5, buffer=2)
    assert (s.server_lr, s.buffer) == (0.5, 2)


def test_the_summary_names_the_scheme_and_its_options() -> None:
    from mel_opt.live.rounds import LiveRun
    from mel_opt.training import load_dataset

    data = load_dataset("digits", max_train=100, max_test=50)
    alloc = LiveRun(LiveSettings(instance=DOC, model="softmax"), data).summary()
    assert alloc["method"] == "exact" and alloc["scheme"] == "allocation"
    assert "buffer" not in alloc["settings"]
    buff = LiveRun(LiveSettings(instance=DOC, model="softmax", scheme="fedbuff", buffer=1),
                   data).summary()
    assert buff["method"] == "fedbuff" and buff["scheme"] == "fedbuff"
    assert {k: buff["settings"][k] for k in ("buffer", "concurrency", "server_lr")} == {
        "buffer": 1, "concurrency": None, "server_lr": 1.0}
    assert np.isnan(np.array(buff["estimates_s_per_sample"], dtype=float)).all()
