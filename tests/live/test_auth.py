"""SuperNode authentication on the deployments mel_opt starts, and the remote engine against a
SuperLink in another network namespace.

Every :class:`~mel_opt.live.federation.LocalFederation` with TLS runs its SuperLink with
``--enable-supernode-auth`` and registers one key pair per node, made for the run, before the
nodes start. The first test starts such a federation with the tiny app of
``tests/live/tinyapp``, then two more SuperNodes with ``melopt node`` (the command a device
runs): one whose key was registered, which gets work, and one whose key was not, which is
refused and never gets a node id. The second runs ``melopt live --engine remote``'s code path
against a SuperLink that lives in the hub namespace of shaped links.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr")

from mel_opt.live import netns  # noqa: E402
from mel_opt.live.appdir import write_app_dir  # noqa: E402
from mel_opt.live.certs import make_node_key  # noqa: E402
from mel_opt.live.federation import (  # noqa: E402
    LOCAL_FEDERATION,
    HeldPorts,
    LocalFederation,
    port_open,
)
from mel_opt.live.flwr_cli import register_supernodes, supernode_ids  # noqa: E402
from mel_opt.processes import command_line, is_alive  # noqa: E402

HERE = Path(__file__).resolve().parent
TINY = {"serverapp": "tinyapp.app:server_app", "clientapp": "tinyapp.app:client_app"}
WHY = netns.unavailable()
ON_PROC = pytest.mark.skipif(not os.path.exists("/proc/self/stat"),
                             reason="checks processes and sockets in /proc")


def test_authentication_follows_tls_and_needs_it() -> None:
    from mel_opt.errors import UsageError

    assert LocalFederation(nodes=1).auth  # TLS is the default, and with it authentication
    assert not LocalFederation(nodes=1, tls=False).auth
    assert not LocalFederation(nodes=1, auth=False).auth
    with pytest.raises(UsageError, match="SuperNode authentication needs TLS"):
        LocalFederation(nodes=1, tls=False, auth=True)


def _melopt_node(log: Path, *args: str) -> subprocess.Popen[bytes]:
    """``melopt node ARGS`` in a session of its own, its output into ``log``."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}  # the tiny app's ClientApp
    with open(log, "wb") as f:
        return subprocess.Popen([sys.executable, "-m", "mel_opt.cli", "node", *args], env=env,
                                stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _wait_for(path: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The log at ``path`` once it shows ``text`` (or ``proc`` ended, or time is up)."""
    end = time.monotonic() + timeout
    while True:
        seen = path.read_text(errors="replace")
        if text in seen or proc.poll() is not None or time.monotonic() > end:
            return seen
        time.sleep(0.1)


@ON_PROC
@pytest.mark.slow
@pytest.mark.federation
@pytest.mark.timeout(300)
def test_only_registered_supernodes_join_and_everything_ends(tmp_path: Path,
                                                             flower: Any) -> None:
    fed = LocalFederation(nodes=2, env={"PYTHONPATH": str(HERE)})
    with fed:
        fed.wait_ready(timeout=90)
        home, port = fed.home, fed.port
        assert home is not None and fed.certificates is not None and fed._link is not None
        assert "--enable-supernode-auth" in (command_line(fed._link.pid) or [])
        # one key pair per node, owner-only, in the run's owner-only directory
        assert fed.auth and len(fed.keys) == 2
        assert all(stat.S_IMODE(k.private.stat().st_mode) == 0o600 for k in fed.keys)
        assert stat.S_IMODE(fed.keys[0].private.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        assert fed.registered == fed.node_ids()  # each node came up as the id registered

        # a device whose key the operator registered, and one whose key nobody registered
        good, bad = make_node_key(tmp_path, "device"), make_node_key(tmp_path, "rogue")
        [device_id] = register_supernodes(fed.env, LOCAL_FEDERATION, [good.public])
        common = ["--superlink", f"127.0.0.1:{port}", "--root-certificates",
                  str(fed.certificates.ca), "--num-partitions", "3"]
        rogue_log, device_log = tmp_path / "rogue.log", tmp_path / "device.log"
        rogue = _melopt_node(rogue_log, *common, "--partition-id", "2",
                             "--auth-key", str(bad.private))
        # held until the device has ended: a port only found free could be taken by another
        # process in the seconds before the device binds it
        held = HeldPorts(1)
        device_port = held.ports[0]
        device = _melopt_node(device_log, *common, "--partition-id", "2", "--auth-key",
                              str(good.private), "--clientapp-port", str(device_port))
        try:
            # the unregistered node is refused at once and exits (code 1, one line of ours)
            assert rogue.wait(timeout=60) == 1
            refused = rogue_log.read_text(errors="replace")
            assert "Failed to activate SuperNode" in refused, refused
            assert "the SuperNode exited with code" in refused
            seen = _wait_for(device_log, f"SuperNode ID: {device_id}", device, 60)
            assert f"SuperNode ID: {device_id}" in seen, seen

            # the SuperLink knows the three registered nodes and no other
            known = sorted([*fed.registered.values(), device_id])
            assert supernode_ids(fed.env, LOCAL_FEDERATION) == known
            app = write_app_dir(tmp_path / "app", {"tiny-rounds": 1, "tiny-nodes": 3,
                                                   "tiny-timeout": 60}, **TINY)
            lines: list[str] = []
            assert fed.run_app(app, lines.append, timeout=120) == 0, lines
            rounds = [line for line in lines if "tinyapp round=" in line]
            # work went to the two nodes and the registered device, whose ClientApp ran in
            # its warm SuperExec as the federation's do
            assert len(rounds) == 1 and "partitions=[0, 1, 2]" in rounds[0], lines
            assert "warm=[1, 1, 1]" in rounds[0], rounds
            assert supernode_ids(fed.env, LOCAL_FEDERATION) == known

            # SIGTERM ends the device with every process it started, and nothing listens
            device.send_signal(signal.SIGTERM)
            assert device.wait(timeout=30) == 0, device_log.read_text(errors="replace")
            assert "melopt node: stopped" in device_log.read_text(errors="replace")
            assert not port_open("127.0.0.1", device_port)
        finally:
            # SIGTERM first: `melopt node` ends the SuperNode it started in a session of its
            # own (a SIGKILL of its group alone would leave that running when a check failed)
            for proc in (rogue, device):
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
            held.close()
        processes = fed.processes()
    assert fed.home is None and not home.exists()
    assert not any(is_alive(p, s) for p, s in processes.items())
    assert not port_open("127.0.0.1", port)
    assert flower.gone(30.0), flower.alive()


REMOTE = """
import sys
from mel_opt.live.run import LiveOptions, check, live, load_settings
path, superlink, ca, out = sys.argv[1:]
settings = load_settings(path, rounds=1, model="softmax", grace_s=60.0)
live(check(settings, LiveOptions(engine="remote", superlink=superlink, root_certificates=ca,
                                 nodes=2)), out)
"""


@pytest.mark.skipif(WHY is not None, reason=f"no shaped links here: {WHY}")
@pytest.mark.slow
@pytest.mark.federation
@pytest.mark.timeout(300)
def test_the_remote_engine_reaches_a_superlink_in_another_namespace(
        tmp_path: Path, flower: Any, mel_async_file: Any) -> None:
    """The SuperLink (authentication on) lives in the hub namespace of shaped links, its nodes
    behind their links. The default namespace has no route to the hub (nothing is bridged to
    the host, by design), so the remote engine runs where a device would: in a namespace the
    run made, learner 0's, reaching the SuperLink at that link's hub address, with the run's
    CA, as ``melopt live --engine remote --superlink HUB:PORT --root-certificates CA``
    does."""
    from mel_opt.live.netns import ShapedLinks
    from mel_opt.live.report import rows_from_csv

    path, out = mel_async_file(2, 0.5), tmp_path / "out"
    with ShapedLinks([(50e6, 50e6), (50e6, 50e6)], tag="remote") as links:
        with LocalFederation(nodes=2, links=links) as fed:
            fed.wait_ready()
            assert fed.certificates is not None and fed.auth and len(fed.registered) == 2
            link = links.links[0]
            res = subprocess.run([*links.prefix(link.namespace), sys.executable, "-c", REMOTE,
                                  str(path), f"{link.hub_address}:{fed.port}",
                                  str(fed.certificates.ca), str(out)],
                                 capture_output=True, text=True, timeout=240, check=False)
            assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        during = set(netns.namespaces())
    rows = rows_from_csv(out / "rounds.csv")
    assert [(r["round"], r["learner"]) for r in rows] == [(1, 0), (1, 1)]
    assert all(r["status"] in ("ok", "late") for r in rows), rows
    assert {links.hub, link.namespace} <= during  # the namespaces of the run, now gone
    assert not [n for n in netns.namespaces()
                if n.startswith(f"{netns.PREFIX}{os.getpid()}-remote")]
    assert flower.gone(30.0), flower.alive()
