"""Tests that start a Flower federation (processes, or Ray for the simulation) hold one lock
shared by every test run on this machine.

They measure real processes: two federations at once on a 2-core machine (as when two suites
run side by side) starve each other's learner processes, which then miss Flower's own start-up
limits and answer with errors. One federation at a time keeps them honest; the rest of the two
suites still runs in parallel.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
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


# --- processes a federation test started --------------------------------------------------

TAG = "MELOPT_TEST_RUN"
FLOWER = ("flower-superlink", "flower-supernode", "flower-superexec", "flwr-serverapp",
          "flwr-clientapp", "mel_opt.live.supernode", "mel_opt.live.superexec")
RAY = ("raylet", "gcs_server", "ray::")


@pytest.fixture(autouse=True)
def tagged(monkeypatch: pytest.MonkeyPatch) -> str:
    """Every process a test starts inherits a tag in its environment, so the checks below find
    exactly those (another suite may run Flower or Ray beside this one)."""
    tag = uuid.uuid4().hex
    monkeypatch.setenv(TAG, tag)
    return tag


class Started:
    """The live processes whose command line names one of ``names`` and that this test
    started (they carry its tag); zombies count as gone."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    def alive(self) -> list[str]:
        marker = f"{TAG}={os.environ.get(TAG, '')}".encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                env = (proc / "environ").read_bytes()
            except OSError:
                continue
            if state != "Z" and marker in env.split(b"\0") and any(n in cmd for n in self.names):
                found.append(cmd)
        return found

    def gone(self, seconds: float) -> bool:
        """Whether all of them have ended, waiting up to ``seconds`` for the last ones."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            if not self.alive():
                return True
            time.sleep(0.2)
        return not self.alive()


@pytest.fixture
def flower() -> Started:
    return Started(FLOWER)


@pytest.fixture
def ray() -> Started:
    return Started(RAY)


@pytest.fixture
def mel_async_file(tmp_path: Path) -> Callable[[int, float], Path]:
    """Writes a small mel-async instance: K alike learners, 100 samples each, cycle clock T."""

    def write(K: int, T: float) -> Path:
        learners = [{"name": f"n{k}", "c2": 1e-3, "c1": 1e-3, "c0": 0.05} for k in range(K)]
        doc = {"problem": "mel-async", "schema_version": 1, "name": f"live{K}",
               "cycle_time_s": T, "total_samples": 100 * K, "min_samples": 10,
               "max_samples": 100 * K, "learners": learners}
        path = tmp_path / f"live{K}.json"
        path.write_text(json.dumps(doc))
        return path

    return write
