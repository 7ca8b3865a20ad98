"""The ``melopt`` executable leaves without the interpreter's teardown, output intact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _melopt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mel_opt.cli", *args], capture_output=True,
                          text=True, env=ENV, cwd=cwd, timeout=120)


def test_json_on_a_pipe_is_complete_and_the_code_kept(tmp_path: Path) -> None:
    ok = _melopt("solve", str(ROOT / "instances/mel-async/k5_T15.json"), "--json", cwd=tmp_path)
    assert ok.returncode == 0 and json.loads(ok.stdout)["status"] == "optimal"
    bad = _melopt("solve", str(tmp_path / "missing.json"), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and bad.stdout == ""


def test_written_output_and_version(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    done = _melopt("solve", str(ROOT / "instances/dab/worked_example.json"), "-o", str(out),
                   "--json", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(out.read_text()) == json.loads(done.stdout)
    version = _melopt("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("melopt, version ")


def test_exit_codes_and_when_the_teardown_is_kept(capsys, monkeypatch) -> None:
    import threading

    from mel_opt import cli

    calls: list[int] = []
    monkeypatch.setattr(os, "_exit", calls.append)
    # the test runner's own threads (a timeout watcher) would keep the ordinary exit, and so
    # would Ray, had an earlier test loaded it
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.main_thread()])
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    cli._leave("stopped: reason")
    cli._leave(None)
    cli._leave(130)
    assert calls == [1, 0, 130]
    assert "stopped: reason" in capsys.readouterr().err
    worker = threading.Thread(target=lambda: None)  # not started: stands for a live one
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.main_thread(), worker])
    cli._leave(0)
    assert calls == [1, 0, 130]  # a non-daemon thread keeps the ordinary exit
