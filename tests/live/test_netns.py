"""Shaped links between network namespaces (:mod:`mel_opt.live.netns`).

These tests make real namespaces, veth pairs and token-bucket filters: they need Linux, root and
iproute2 (CI has them) and are skipped with the reason otherwise. Traffic stays between the
namespaces a test made. Time is only asserted as a lower bound (a shaped link cannot be faster
than its rate, however loaded the machine), with the upper bounds wide.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mel_opt.errors import UsageError
from mel_opt.live import netns
from mel_opt.live.netns import ShapedLinks, burst_bytes, namespaces, remove_stale

WHY = netns.unavailable()
needs_links = pytest.mark.skipif(WHY is not None, reason=f"no shaped links here: {WHY}")

# The hub receives PAYLOAD bytes (the learner's upload), then sends PAYLOAD back (its download);
# each side times what it receives, from the first byte to the end.
PAYLOAD = 500_000
SERVER = f"""
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 9500)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0; t0 = None
while n < {PAYLOAD}:
    b = c.recv(65536)
    if not b: break
    t0 = t0 or time.monotonic(); n += len(b)
print(n, time.monotonic() - t0, flush=True)
c.sendall(b"x" * {PAYLOAD}); c.close()
"""
CLIENT = f"""
import socket, sys, time
c = socket.create_connection((sys.argv[1], 9500)); c.sendall(b"y" * {PAYLOAD})
n = 0; t0 = None
while True:
    b = c.recv(65536)
    if not b: break
    t0 = t0 or time.monotonic(); n += len(b)
print(n, time.monotonic() - t0, flush=True)
"""


def _ours() -> list[str]:
    return [n for n in namespaces() if n.startswith(f"{netns.PREFIX}{os.getpid()}-")]


def test_bursts_hold_a_packet_and_a_tick() -> None:
    assert burst_bytes(1e6) == 16 * 1024  # 1 Mbit/s: 1,250 B a tick, the floor wins
    assert burst_bytes(100e6) == 125_000  # 100 Mbit/s: 10 ms of data


def test_rates_out_of_range_are_refused_by_learner() -> None:
    with pytest.raises(UsageError, match=r"learner 1's download rate must be in"):
        ShapedLinks([(1e6, 1e6), (1e6, 0.0)])
    with pytest.raises(UsageError, match="at least one learner"):
        ShapedLinks([])


def test_without_root_one_line_says_what_to_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UsageError, match=r"need root .*use --engine local"):
        netns.require()


@needs_links
def test_a_link_is_shaped_each_way() -> None:
    """8 Mbit/s up, 2 Mbit/s down: 500 kB takes 0.5 s up and 2 s down."""
    with ShapedLinks([(8e6, 2e6)], tag="shape") as links:
        link = links.links[0]
        assert sorted(_ours()) == sorted([links.hub, link.namespace])
        server = subprocess.Popen([*links.prefix(links.hub), sys.executable, "-c", SERVER,
                                   link.hub_address], stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "ready"
            client = subprocess.run([*links.prefix(link.namespace), sys.executable, "-c",
                                     CLIENT, link.hub_address], capture_output=True, text=True,
                                    timeout=60, check=True)
            up_n, up_s = server.communicate(timeout=60)[0].split()
        finally:
            server.kill()
        down_n, down_s = client.stdout.split()
    assert int(up_n) == int(down_n) == PAYLOAD
    assert float(down_s) >= 0.7 * PAYLOAD * 8 / 2e6  # the download link cannot beat 2 Mbit/s
    assert float(up_s) >= 0.7 * PAYLOAD * 8 / 8e6
    assert float(up_s) < float(down_s)  # the faster direction is faster
    assert _ours() == []


@needs_links
def test_an_error_inside_removes_namespaces_and_processes() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with ShapedLinks([(1e6, 1e6), (4e6, 4e6)], tag="err") as links:
            # it says when it runs inside the namespace (ip netns exec joins it, then execs the
            # shell): a fixed pause could end before that on a busy machine
            sleeper = subprocess.Popen([*links.prefix(links.links[1].namespace), "sh", "-c",
                                        "echo ready; exec sleep 60"], stdout=subprocess.PIPE,
                                       text=True)
            assert sleeper.stdout is not None and sleeper.stdout.readline() == "ready\n"
            sleeper.stdout.close()
            assert netns.pids_in(links.links[1].namespace) == [sleeper.pid]
            raise RuntimeError("boom")
    assert sleeper.wait(timeout=10) != 0  # ended by the clean-up, not by itself
    assert _ours() == []


@needs_links
def test_leftovers_of_a_dead_run_are_removed() -> None:
    ghost = f"{netns.PREFIX}999999999-x-hub"  # no process has this id (pid_max is 2^22)
    subprocess.run(["ip", "netns", "add", ghost], check=True)
    try:
        assert ghost in remove_stale()
    finally:
        subprocess.run(["ip", "netns", "del", ghost], capture_output=True)
    assert ghost not in namespaces()


def _generate(tmp_path: Path) -> Path:
    from click.testing import CliRunner

    from mel_opt.cli import cli

    path = tmp_path / "four.json"
    res = CliRunner().invoke(cli, ["generate", "mel-async", "--preset", "mohammad2020",
                                   "--learners", "4", "--seed", "5", "-o", str(path)])
    assert res.exit_code == 0, res.output
    return path


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "local", "--link-rate", "4"], "--link-rate shapes the links of --engine netns"),
    (["--engine", "netns", "--nodes", "2", "--link-rate", "4,8,16"],
     r"--link-rate needs one value or one per node \(2\), got 3"),
    (["--engine", "netns", "--link-rate", "0"], "--link-rate"),
])
def test_link_rates_are_checked_before_anything_starts(tmp_path: Path, args: list[str],
                                                        message: str) -> None:
    from click.testing import CliRunner

    from mel_opt.cli import cli

    res = CliRunner().invoke(cli, ["live", str(_generate(tmp_path)), *args, "-o",
                                   str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert re.search(message, res.output), res.output


def test_netns_without_root_is_one_line_and_exit_2(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("flwr")
    from click.testing import CliRunner

    from mel_opt.cli import cli

    path = _generate(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    res = CliRunner().invoke(cli, ["live", str(path), "--engine", "netns", "--nodes", "2",
                                   "-o", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert "need root" in res.output and "--engine local" in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert _ours() == []


def _dab_file(tmp_path: Path) -> Path:
    """Two dab learners on links of 0.5 and 2 MB/s (4 and 16 Mbit/s), a shard of 500 digits
    (500 x 64 float32 = 128,000 bytes; the 1,437 training digits over 2 shards hold more),
    the softmax model's 650 float32 (2,600 bytes), mu = 1, D = 1 s: learner 0 can take about
    three shards, learner 1 about fifteen."""
    import json

    learners = [{"name": f"n{k}", "train_rate": 100.0, "bandwidth_Bps": b}
                for k, b in enumerate((500_000.0, 2_000_000.0))]
    doc = {"problem": "dab", "schema_version": 1, "name": "links", "deadline_s": 1.0,
           "iterations": 1, "model_bytes": 2600, "shard_bytes": 128_000, "total_shards": 2,
           "learners": learners}
    path = tmp_path / "links.json"
    path.write_text(json.dumps(doc))
    return path


@needs_links
@pytest.mark.slow
@pytest.mark.federation
def test_melopt_live_across_shaped_links(tmp_path: Path) -> None:
    """``melopt live --engine netns`` on dab: the SuperLink in the hub namespace with TLS for
    the hub addresses, two learners behind links shaped to their files' rates (8 b_k: 4 and 16
    Mbit/s; a node whose hub address were missing from the certificate would never connect);
    each claims its a_k shards and they cross its link with the model: no faster than the
    link's rate lets them. Afterwards no namespace is left, and with them every process of the
    run (each ran inside one, and a namespace goes only once empty)."""
    pytest.importorskip("flwr")
    from click.testing import CliRunner

    from mel_opt.cli import cli
    from mel_opt.live.report import rows_from_csv

    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["live", str(_dab_file(tmp_path)), "--engine", "netns",
                                   "--nodes", "2", "--rounds", "1", "--model", "softmax",
                                   "--max-train", "2000", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "links: node 0 4 Mbit/s, node 1 16 Mbit/s" in res.output
    rows = rows_from_csv(out / "rounds.csv")
    # both answered and were aggregated (on a loaded machine a reply may come after D: late)
    assert [r["learner"] for r in rows] == [0, 1], rows
    assert all(r["status"] in ("ok", "late") and r["compute_measured_s"] > 0 for r in rows), rows
    for r, rate in zip(rows, (4e6, 16e6), strict=True):
        # a_k shards of 500 samples: 64 float32 features and a one-byte label each
        assert r["shards"] >= 1 and r["shipped_bytes"] == r["shards"] * 500 * (64 * 4 + 1)
        # the shards came down the link: beyond its bucket, at its rate at most
        assert r["comm_measured_s"] >= (r["shipped_bytes"] - burst_bytes(rate)) * 8 / rate, r
    assert _ours() == []
