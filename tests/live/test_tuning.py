"""The SuperNodes' tuning (mel_opt.live.tuning): declared once, checked when made, carried to
Flower's processes by one environment variable and read back in one place."""

from __future__ import annotations

import json

import pytest

from mel_opt.errors import UsageError
from mel_opt.live.federation import LocalFederation, node_env
from mel_opt.live.tuning import (
    BY_HAND,
    DEFAULT_TUNING,
    TASK_POLL_ENV,
    TUNING_ENV,
    NodeTuning,
    WarmData,
)


def test_the_defaults_are_the_local_engines() -> None:
    t = DEFAULT_TUNING
    assert (t.idle_poll, t.reply_poll, t.task_poll, t.pull_backoff) == (0.2, 0.02, 0.25,
                                                                        (0.02, 0.2))
    assert t.warm and t.warm_data is None and t.patched
    assert (t.throttle_period, t.grace) == (0.1, 5.0)
    # Flower's own SuperNode only when neither its poll nor the warm SuperExec is asked for
    assert not NodeTuning(idle_poll=None, warm=False).patched
    assert NodeTuning(idle_poll=None).patched and BY_HAND.patched


def test_the_tuning_travels_in_the_environment_and_back() -> None:
    tuning = NodeTuning(idle_poll=None, task_poll=0.1, pull_backoff=(0.05, 0.5),
                        warm_data=WarmData("digits", 200, None), grace=2.0)
    env = tuning.env()
    assert env[TASK_POLL_ENV] == "0.1"  # Flower's own setting, as Flower reads it
    assert set(env) == {TASK_POLL_ENV, TUNING_ENV}
    assert NodeTuning.from_env(env) == tuning
    assert NodeTuning.from_env(DEFAULT_TUNING.env()) == DEFAULT_TUNING


@pytest.mark.parametrize("value", [None, "", "not json", "[]", json.dumps({"nope": 1}),
                                   json.dumps({"task_poll": -1}),
                                   json.dumps({"warm_data": {"size": 3}})])
def test_an_absent_or_unreadable_tuning_is_none(value: str | None) -> None:
    assert NodeTuning.from_env({} if value is None else {TUNING_ENV: value}) is None


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"idle_poll": 0.0}, "idle_poll must be a positive"),
    ({"reply_poll": float("nan")}, "reply_poll must be a positive"),
    ({"task_poll": 0.001}, r"task_poll must be in \[0.01, 60\]"),
    ({"task_poll": 120.0}, r"task_poll must be in \[0.01, 60\]"),
    ({"pull_backoff": (0.5, 0.1)}, "initial <= cap"),
    ({"pull_backoff": (0.0, 0.1)}, "pull_backoff must be a positive"),
    ({"throttle_period": -1.0}, "throttle_period must be a positive"),
    ({"grace": -1.0}, "grace must be >= 0"),
])
def test_a_bad_knob_is_refused_when_the_tuning_is_made(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        NodeTuning(**kwargs)


def test_a_nodes_environment_holds_the_tuning_over_the_extra_one() -> None:
    env = node_env(DEFAULT_TUNING, {"PYTHONPATH": "/x", TUNING_ENV: "overridden"})
    assert env["PYTHONPATH"] == "/x"
    assert NodeTuning.from_env(env) == DEFAULT_TUNING
    assert "127.0.0.1" in env["NO_PROXY"] and env["NO_PROXY"] == env["no_proxy"]


def test_the_federation_and_the_device_share_the_tuning() -> None:
    from mel_opt.live.device import DeviceNode

    tuning = NodeTuning(grace=1.5, warm=False)
    fed = LocalFederation(nodes=1, tuning=tuning)
    node = DeviceNode("127.0.0.1:9", 0, 1, insecure=True, tuning=tuning)
    assert fed.tuning is tuning and node.tuning is tuning
    assert fed.grace == node.grace == 1.5
    assert LocalFederation(nodes=1).tuning == DeviceNode("h:1", 0, 1).tuning == DEFAULT_TUNING
