"""The SuperNode wrapper: Flower's idle wait shortened, nothing else touched."""

from __future__ import annotations

import time

import pytest

from mel_opt.live.supernode import patch_idle_poll


def test_the_supernode_wrapper_shortens_only_the_loops_sleeps(monkeypatch):
    loop = pytest.importorskip("flwr.supernode.start_client_internal")
    monkeypatch.setattr(loop, "time", loop.time)  # put back after the test
    assert patch_idle_poll(0.01)
    began = time.monotonic()
    loop.time.sleep(3)  # Flower's idle wait
    assert time.monotonic() - began < 2.5
    assert loop.time.monotonic is time.monotonic  # everything else passes through
    assert time.sleep is not loop.time.sleep  # the process's own time module is untouched


def test_the_waits_for_a_reply_are_capped_apart_from_the_idle_wait(monkeypatch):
    loop = pytest.importorskip("flwr.supernode.start_client_internal")
    monkeypatch.setattr(loop, "time", loop.time)  # put back after the test
    slept: list[float] = []

    class Clock:
        def sleep(self, seconds: float) -> None:
            slept.append(seconds)

    from mel_opt.live.supernode import _ShortSleep

    proxy = _ShortSleep(Clock(), 0.2, 0.02)  # type: ignore[arg-type]
    proxy.sleep(3)  # Flower's idle wait between pulls
    proxy.sleep(0.5)  # its wait for a ClientApp's reply
    proxy.sleep(0.01)  # shorter than both caps: unchanged
    assert slept == [0.2, 0.02, 0.01]
