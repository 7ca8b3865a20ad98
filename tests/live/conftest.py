"""Tests that start a Flower federation (processes, or Ray for the simulation) hold one lock
shared by every test run on this machine.

They measure real processes: two federations at once on a 2-core machine (as when two suites
run side by side) starve each other's learner processes, which then miss Flower's own start-up
limits and answer with errors. One federation at a time keeps them honest; the rest of the two
suites still runs in parallel.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

LOCK = Path(tempfile.gettempdir()) / "mel_opt-tests-federation.lock"


@pytest.fixture(autouse=True)
def one_federation_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("federation") is None:
        yield
        return
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits while another run's federation test runs
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
