"""Ctrl-C on a running batch, and the lock that keeps two runs out of one output folder."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from mel_opt.cli import cli
from mel_opt.problems import all_problems

MELOPT = [sys.executable, "-m", "mel_opt.cli"]
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def _instances(root: Path, count: int) -> None:
    gen = all_problems()["mel-async"].generate
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        doc = gen("random", learners=200, seed=i, params={})
        (root / f"r{i:02d}.json").write_text(json.dumps(doc))


def default_sigint() -> None:
    """Ctrl-C acts in the child as at a terminal, even when this suite runs as a background
    job (a non-interactive shell starts those with SIGINT ignored, and the child would
    inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _summary_files(out: Path) -> list[str]:
    with open(out / "summary.csv", newline="") as fh:
        return sorted(r["result_file"] for r in csv.DictReader(fh))


def _result_files(out: Path) -> list[str]:
    return sorted(str(p) for p in (out / "results").glob("*.json"))


def _wait_for_results(proc: subprocess.Popen, out: Path, at_least: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "results").exists() and len(_result_files(out)) >= at_least:
            return
        time.sleep(0.02)
    raise AssertionError(f"no {at_least} results before the batch ended or 60 s passed")


# 40 instances x 3 methods: a batch long enough that the lock checks below (a few seconds on a
# loaded machine) end well before it does
INSTANCES, RESULTS = 40, 120


def test_ctrl_c_stops_batch_keeps_results_and_resume_finishes(tmp_path):
    root, out = tmp_path / "in", tmp_path / "out"
    _instances(root, INSTANCES)
    args = [*MELOPT, "batch", str(root), "-o", str(out), "-j", "2", "--methods",
            "exact,kkt-sai,eta"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV, start_new_session=True, preexec_fn=default_sigint)
    try:
        _wait_for_results(proc, out, 4)
        # while it runs, the folder is locked against a second batch and a sweep
        second = CliRunner().invoke(cli, ["batch", str(root), "-o", str(out)])
        assert second.exit_code == 2, second.output
        assert f"in use by another melopt batch (pid {proc.pid})" in second.output
        sweep = CliRunner().invoke(cli, ["sweep", "mel-async", "--learners", "3", "--seeds",
                                         "1", "--force", "-o", str(out)])
        assert sweep.exit_code == 2 and f"(pid {proc.pid})" in sweep.output, sweep.output
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        _, stderr = proc.communicate(timeout=60)
        stopped = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, stderr
    # Wall clock by nature: only waiting can tell a child that stops from one that finishes
    # its solves first (that is also caught below: fewer than all results kept). The bound
    # is generous for a loaded machine; how fast the batch runs is bench_batch.py's business.
    assert stopped < 30, f"took {stopped:.1f} s to stop"
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert "interrupted:" in stderr and "--resume" in stderr
    kept = _result_files(out)
    assert 4 <= len(kept) < RESULTS, "the interrupt must land mid-run"
    assert _summary_files(out) == kept  # summary.csv lists exactly the finished results
    assert f"interrupted: {len(kept)} of {RESULTS} results kept" in stderr
    # the progress bar's last state counts every result kept (a pool returns rows in chunks,
    # the files found after the stop count too), and the stopped pool leaves nothing behind
    # for multiprocessing's resource tracker to report
    assert re.findall(rf"(\d+)/{RESULTS}\b", stderr)[-1] == str(len(kept)), stderr
    assert "leaked semaphore" not in stderr and "resource_tracker" not in stderr, stderr

    res = subprocess.run([*args, "--resume"], capture_output=True, text=True, env=ENV,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"resuming: {len(kept)} of {RESULTS} already done" in res.stderr
    assert len(_result_files(out)) == RESULTS and _summary_files(out) == _result_files(out)
    assert not list((out / "results").glob(".*.tmp*"))  # writes cut short were cleaned up


def test_lock_dies_with_its_holder(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from mel_opt.io.lock import output_lock\n"
         "with output_lock(sys.argv[1], 'sweep'):\n"
         "    print('locked', flush=True)\n"
         "    time.sleep(60)\n", str(out)],
        stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        (tmp_path / "in").mkdir()
        (tmp_path / "in" / "a.json").write_text(json.dumps(
            all_problems()["mel-async"].generate("random", learners=3, seed=0, params={})))
        busy = CliRunner().invoke(cli, ["batch", str(tmp_path / "in"), "-o", str(out)])
        assert busy.exit_code == 2
        assert f"in use by another melopt sweep (pid {holder.pid})" in busy.output
    finally:
        holder.kill()  # SIGKILL: no clean-up code runs, the kernel still drops the flock
        holder.wait()
    free = CliRunner().invoke(cli, ["batch", str(tmp_path / "in"), "-o", str(out)])
    assert free.exit_code == 0, free.output
    assert len(_summary_files(out)) == 1


def test_a_finished_run_leaves_no_lock_file(tmp_path) -> None:
    from mel_opt.io.lock import LOCK_NAME, output_lock

    with output_lock(tmp_path / "out", "batch"):
        assert (tmp_path / "out" / LOCK_NAME).exists()
    assert not (tmp_path / "out" / LOCK_NAME).exists()
    with output_lock(tmp_path / "out", "batch"):  # and the folder can be locked again
        pass
    assert list((tmp_path / "out").iterdir()) == []
