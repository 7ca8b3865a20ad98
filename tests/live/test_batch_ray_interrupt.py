"""Ctrl-C on ``melopt batch --executor ray``: exit 130, the summary and the progress bar count
exactly the result files on disk (then and later: no actor writes after the summary), and no
Ray process the command started outlives it."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mel_opt.problems import all_problems

# Not importorskip: importing Ray while the suite is collected would change how every later
# command exits (the CLI keeps the ordinary teardown once Ray is loaded).
pytestmark = [pytest.mark.slow, pytest.mark.federation, pytest.mark.timeout(600),
              pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                 reason="needs the ray extra")]
ROOT = Path(__file__).resolve().parents[2]


def _files(out: Path) -> list[str]:
    return sorted(str(p) for p in (out / "results").glob("*.json"))


def test_ctrl_c_with_ray_keeps_summary_and_files_equal(tmp_path: Path, ray: Any) -> None:
    root, out = tmp_path / "in", tmp_path / "out"
    root.mkdir()
    gen = all_problems()["dab"].generate
    for i in range(300):  # short solves: many land while the actors are being stopped
        (root / f"d{i:03d}.json").write_text(json.dumps(gen("random", learners=8, seed=i,
                                                            params={})))
    proc = subprocess.Popen(
        [sys.executable, "-m", "mel_opt.cli", "batch", str(root), "-o", str(out), "-j", "2",
         "--executor", "ray"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and len(_files(out)) < 20:
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr, stderr
    assert ray.alive() == []  # ended by the command, not left to end by itself
    kept = _files(out)
    assert 20 <= len(kept) < 300
    with open(out / "summary.csv", newline="") as fh:
        assert sorted(r["result_file"] for r in csv.DictReader(fh)) == kept
    assert f"interrupted: {len(kept)} of 300 results kept" in stderr
    assert re.findall(r"(\d+)/300\b", stderr)[-1] == str(len(kept)), stderr
    time.sleep(2.0)  # an actor killed late would write now
    assert _files(out) == kept
