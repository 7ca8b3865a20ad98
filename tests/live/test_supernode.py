"""The SuperNode wrapper (``python -m mel_opt.live.supernode``): the patches its tuning asks
for, then Flower's own SuperNode. The patches themselves are tested against Flower in
test_flower_patches.py."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from mel_opt.live import flower_patches, supernode
from mel_opt.live.tuning import BY_HAND, TUNING_ENV, NodeTuning


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What main() patched and started, Flower's SuperNode replaced by a stub."""
    seen: dict[str, Any] = {}
    monkeypatch.setattr(flower_patches, "for_supernode",
                        lambda tuning: seen.setdefault("tuning", tuning) and [])
    cli = types.ModuleType("flwr.supernode.cli")
    cli.flower_supernode = lambda: seen.setdefault("argv0", sys.argv[0])  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flwr.supernode.cli", cli)
    monkeypatch.setattr(sys, "argv", ["x", "--insecure"])
    return seen


def test_the_wrapper_applies_the_tuning_of_its_environment(started: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch):
    tuning = NodeTuning(idle_poll=0.5, warm=False)
    monkeypatch.setenv(TUNING_ENV, tuning.env()[TUNING_ENV])
    supernode.main()
    assert started == {"tuning": tuning, "argv0": "flower-supernode"}


def test_started_by_hand_the_wrapper_keeps_its_short_polls_only(started: dict[str, Any],
                                                               monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(TUNING_ENV, raising=False)
    supernode.main()
    assert started["tuning"] == BY_HAND
    assert BY_HAND.idle_poll == 0.2 and not BY_HAND.warm and BY_HAND.pull_backoff is None


def test_the_servers_patch_follows_the_environment_only(monkeypatch: pytest.MonkeyPatch):
    applied: list[Any] = []
    monkeypatch.setattr(flower_patches, "short_object_pulls",
                        lambda initial, cap: applied.append((initial, cap)))
    def server(env: dict[str, str]) -> None:  # what the server app applies
        flower_patches.for_serverapp(NodeTuning.from_env(env))

    server({})  # unset: nothing
    server({TUNING_ENV: "not json"})  # unreadable: nothing
    server(NodeTuning(pull_backoff=None).env())  # none asked: nothing
    assert applied == []
    server(NodeTuning().env())
    assert applied == [(0.02, 0.2)]
