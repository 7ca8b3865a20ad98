"""Live runs on a real loopback deployment: a SuperLink and SuperNodes started, used, ended.

Slow (each run starts Flower's processes, and every message starts a learner process), so
the runs are few and short; assertions are about behaviour, never about wall-clock time.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr")

from mel_opt.live.appdir import write_app_dir  # noqa: E402
from mel_opt.live.federation import LocalFederation  # noqa: E402
from mel_opt.live.report import rows_from_csv  # noqa: E402
from mel_opt.live.run import LiveOptions, check, live, load_settings  # noqa: E402
from mel_opt.live.server import NODES_KEY, OUT_KEY, SETTINGS_KEY, settings_json  # noqa: E402
from mel_opt.processes import descendants, send  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.federation, pytest.mark.timeout(600)]


def _rounds_written(out: Path) -> int:
    """The last round ``out/summary.json`` shows (0 before it is written, or mid-write)."""
    try:
        return int(json.loads((out / "summary.json").read_text())["rounds"][-1]["round"])
    except (OSError, ValueError, KeyError, IndexError):
        return 0


def _freeze(root: int) -> None:
    """SIGSTOP a node's whole process tree (its SuperNode, SuperExec and learner)."""
    for pid in [root, *descendants([root])]:
        send(pid, signal.SIGSTOP)


def _ended(pids: list[int]) -> bool:
    """Whether every one of ``pids`` is gone (or a zombie)."""
    return all(not Path(f"/proc/{pid}").exists() or
               Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
               for pid in pids)


def test_two_nodes_two_rounds(tmp_path: Path, flower: Any,
                              mel_async_file: Any) -> None:
    settings = load_settings(mel_async_file(2, 0.5), rounds=2, model="softmax", lr=0.3,
                             grace_s=60.0)
    out = tmp_path / "out"
    summary = live(check(settings, LiveOptions(engine="local", nodes=2)), out)
    rows = rows_from_csv(out / "rounds.csv")
    assert [(r["round"], r["learner"]) for r in rows] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert all(r["status"] in ("ok", "late") and r["compute_measured_s"] > 0 for r in rows)
    assert len({r["node"] for r in rows}) == 2  # two SuperNodes, mapped by the probe
    assert summary["rounds"][-1]["accuracy"] > summary["rounds"][0]["accuracy"] + 0.3
    assert (out / "live.png").exists()
    # the messaging beyond compute is measured per reply, and learned from the probe on
    assert all(r["comm_measured_s"] > 0 and r["comm_predicted_s"] > 0 for r in rows)
    assert all(v > 0 for v in summary["estimates_comm_s"])
    assert flower.gone(30.0), flower.alive()


def test_a_node_killed_mid_round_is_missing_then_left_out(tmp_path: Path, flower: Any,
                                                          mel_async_file: Any) -> None:
    # the grace bounds the waits for the dead node (round 2, and its probe before round 3):
    # a deployment's default
    settings = load_settings(mel_async_file(3, 0.5), rounds=3, model="softmax",
                             grace_s=5.0)
    out = tmp_path / "out"
    out.mkdir()
    app = tmp_path / "app"
    config = {SETTINGS_KEY: settings_json(settings), NODES_KEY: 3, OUT_KEY: str(out)}
    write_app_dir(app, config)
    lines: list[str] = []
    killed = threading.Event()
    with LocalFederation(nodes=3) as fed:
        fed.wait_ready()

        def kill_after_round_1() -> None:
            # the server writes summary.json as round 1 closes and then sends round 2 at once:
            # node 2 (learner 2) is frozen as soon as the file shows round 1, so it cannot
            # answer round 2 (its learner process takes far longer to start than this poll),
            # then it dies
            until = time.monotonic() + 300
            while time.monotonic() < until:
                if _rounds_written(out) >= 1:
                    _freeze(fed.node_pids()[2])
                    fed.kill_node(2)
                    killed.set()
                    return
                time.sleep(0.05)

        watcher = threading.Thread(target=kill_after_round_1, daemon=True)
        watcher.start()
        code = fed.run_app(app, lines.append)
        watcher.join(timeout=10)
        pids = fed.pids()
    assert code == 0, "\n".join(lines[-30:])
    assert killed.is_set()
    rows = rows_from_csv(out / "rounds.csv")
    status = {(r["round"], r["learner"]): r["status"] for r in rows}
    assert status[(2, 2)] == "missing"
    assert status[(2, 0)] in ("ok", "late") and status[(2, 1)] in ("ok", "late")
    assert sorted(k for (r, k) in status if r == 3) == [0, 1]  # left out of round 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"][2]["missing"] == [2] and summary["rounds"][3]["learners"] == 2
    assert _ended(pids)
    assert flower.gone(30.0), flower.alive()


def test_remote_engine_rebuilds_the_outputs_then_fedbuff_runs_on_the_same_nodes(
        tmp_path: Path, flower: Any, mel_async_file: Any) -> None:
    # a "remote" SuperLink that happens to run here: the server writes no file of ours, the
    # runner rebuilds rounds.csv and summary.json from the records the server logs; then
    # FedBuff on the same three nodes (3 learners at once, a server step every 2 updates)
    settings = load_settings(mel_async_file(3, 0.5), rounds=1, model="softmax", grace_s=60.0)
    fedbuff = load_settings(mel_async_file(3, 0.5), rounds=4, model="softmax", lr=0.3,
                            grace_s=60.0, scheme="fedbuff", buffer=2)
    out, out_fb = tmp_path / "out", tmp_path / "fedbuff"
    with LocalFederation(nodes=3) as fed:
        fed.wait_ready()
        assert fed.certificates is not None  # the SuperLink serves TLS: trust its CA
        opts = LiveOptions(engine="remote", superlink=f"127.0.0.1:{fed.port}",
                           root_certificates=str(fed.certificates.ca), nodes=3)
        summary = live(check(settings, opts), out)
        async_summary = live(check(fedbuff, opts), out_fb)
    rows = rows_from_csv(out / "rounds.csv")
    assert [(r["round"], r["learner"]) for r in rows] == [(1, 0), (1, 1), (1, 2)]
    assert [r["round"] for r in summary["rounds"]] == [0, 1]

    steps = async_summary["rounds"][1:]
    assert [r["round"] for r in steps] == [1, 2, 3, 4] and async_summary["stopped"] is None
    assert all(r["learners"] == 2 and len(r["staleness"]) == 2 for r in steps)
    ok = [r for r in rows_from_csv(out_fb / "rounds.csv") if r["status"] == "ok"]
    assert len(ok) == 8 and all(r["compute_measured_s"] > 0 for r in ok)
    # every update joins the step its row names; the first step's are fresh
    assert sorted(r["staleness"] for r in ok if r["round"] == 1) == [0, 0]
    assert {r["learner"] for r in ok} == {0, 1, 2}  # all three took part
    assert async_summary["method"] == "fedbuff" and async_summary["settings"]["buffer"] == 2
    assert steps[-1]["accuracy"] > async_summary["rounds"][0]["accuracy"] + 0.3
    assert flower.gone(30.0), flower.alive()


def test_ctrl_c_ends_every_process_and_keeps_the_rounds_done(tmp_path: Path, flower: Any,
                                                             mel_async_file: Any) -> None:
    import subprocess
    import sys

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "mel_opt.cli", "live", str(mel_async_file(2, 0.5)),
           "--engine", "local", "--rounds", "50", "--model", "softmax", "-o", str(out)]
    log = (tmp_path / "live.log").open("wb")  # never a pipe: nobody reads it while it runs
    # SIGINT as at a terminal, even when this suite runs as a background job (started with
    # SIGINT ignored, which the child would inherit)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        until = time.monotonic() + 240
        done = 0
        while time.monotonic() < until and proc.poll() is None and done < 1:
            done = _rounds_written(out)
            time.sleep(0.5)
        assert done >= 1, "no round finished"
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    assert code == 130, (tmp_path / "live.log").read_text()[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds"][-1]["round"] >= 1  # what finished is kept
    assert flower.gone(30.0), flower.alive()


def test_a_node_stopped_for_good_then_the_superlink_killed(tmp_path: Path, flower: Any,
                                                           mel_async_file: Any,
                                                           monkeypatch: Any) -> None:
    """Node 1 is frozen (SIGSTOP, never continued) once round 1 is written: it is missing from
    round 2 on while learner 0 goes on. The SuperLink is then killed (SIGKILL) once round 2 is
    written: ``live`` ends with EndedEarly (exit 1) saying so, the rounds done keep their
    outputs and finite models, and nothing of the run is left (the frozen processes
    included)."""
    import math

    from mel_opt.live.run import EndedEarly

    settings = load_settings(mel_async_file(2, 0.5), rounds=6, model="softmax",
                             grace_s=5.0)
    out = tmp_path / "out"
    events: list[str] = []
    feds: list[LocalFederation] = []
    ready = LocalFederation.wait_ready

    def faults() -> None:
        until = time.monotonic() + 300
        while time.monotonic() < until:
            done = _rounds_written(out)
            if done >= 1 and "stopped" not in events:
                _freeze(feds[0].node_pids()[1])
                events.append("stopped")
            if done >= 2:
                feds[0].kill_superlink()
                events.append("killed")
                return
            time.sleep(0.05)

    def wait_ready(self: LocalFederation, *a: Any, **kw: Any) -> None:
        ready(self, *a, **kw)
        feds.append(self)
        threading.Thread(target=faults, daemon=True).start()

    monkeypatch.setattr(LocalFederation, "wait_ready", wait_ready)
    with pytest.raises(EndedEarly, match="SuperLink exited during the run") as err:
        live(check(settings, LiveOptions(engine="local", nodes=2)), out)
    assert err.value.exit_code == 1
    assert events == ["stopped", "killed"]
    rows = rows_from_csv(out / "rounds.csv")
    status = {(r["round"], r["learner"]): r["status"] for r in rows}
    assert status[(1, 0)] in ("ok", "late") and status[(1, 1)] in ("ok", "late")
    assert status[(2, 1)] == "missing" and status[(2, 0)] in ("ok", "late")
    summary = json.loads((out / "summary.json").read_text())
    done = summary["rounds"][-1]["round"]
    assert 2 <= done < 6 and f"{done} round(s) done" in str(err.value)
    assert all(math.isfinite(r["loss"]) and 0 <= r["accuracy"] <= 1
               for r in summary["rounds"])
    pids = feds[0].pids()
    assert feds[0].home is None
    assert _ended(pids)
    assert flower.gone(30.0), flower.alive()
