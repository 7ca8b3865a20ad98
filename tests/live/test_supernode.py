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
