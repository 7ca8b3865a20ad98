"""The Flower deployments: remote connection settings, and the local deployment, which runs an
app, streams its output, survives a dead node, listens on loopback only and leaves no process
behind.

The deployment tests start real Flower processes on 127.0.0.1 with the tiny app of
``tests/live/tinyapp`` (one QUERY per node and round), found by the SuperLink's ServerApp and
the nodes' ClientApps through ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from mel_opt.errors import UsageError
from mel_opt.live.appdir import write_app_dir
from mel_opt.live.federation import (
    HOLDS_PORTS,
    REMOTE_FEDERATION,
    FederationError,
    HeldPorts,
    LocalFederation,
    RemoteFederation,
)
from mel_opt.processes import descendants, is_alive

HERE = Path(__file__).resolve().parent
TINY = {"serverapp": "tinyapp.app:server_app", "clientapp": "tinyapp.app:client_app"}
ON_PROC = pytest.mark.skipif(not os.path.exists("/proc/self/stat"),
                             reason="checks processes and sockets in /proc")

# -- the settings ----------------------------------------------------------------------------
def test_the_remote_connection_passes_the_root_certificate_through(tmp_path, monkeypatch):
    cert = tmp_path / "ca.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.chdir(tmp_path)
    remote = RemoteFederation("link.example.org:9093", "ca.pem")
    doc = tomllib.loads(remote.write_config(tmp_path / "home").read_text())
    conn = doc["superlink"][REMOTE_FEDERATION]
    assert doc["superlink"]["default"] == REMOTE_FEDERATION
    assert conn == {"address": "link.example.org:9093", "root-certificates": str(cert)}
    assert Path(conn["root-certificates"]).is_absolute()  # Flower refuses relative paths


def test_the_remote_connection_is_insecure_only_when_asked(tmp_path):
    secure = RemoteFederation("10.0.0.2:9093").write_config(tmp_path / "a")
    assert "insecure" not in tomllib.loads(secure.read_text())["superlink"][REMOTE_FEDERATION]
    plain = RemoteFederation("10.0.0.2:9093", insecure=True).write_config(tmp_path / "b")
    assert tomllib.loads(plain.read_text())["superlink"][REMOTE_FEDERATION]["insecure"] is True


@pytest.mark.parametrize("address, cert, insecure", [
    ("no-port", None, False), ("host:", None, False), ("host:99999", None, False),
    ("host:9093", "missing.pem", False), ("host:9093", __file__, True)])
def test_bad_remote_settings_are_usage_errors(address, cert, insecure):
    with pytest.raises(UsageError):
        RemoteFederation(address, cert, insecure)


@pytest.mark.parametrize("kwargs", [{"nodes": 0}, {"nodes": 2, "speeds": [1.0]},
                                    {"nodes": 1, "speeds": [0.0]}, {"nodes": 1, "speeds": [2]}])
def test_bad_local_settings_are_usage_errors(kwargs):
    with pytest.raises(UsageError):
        LocalFederation(**kwargs)


# -- ports ---------------------------------------------------------------------------------
@pytest.mark.skipif(not HOLDS_PORTS, reason="holds ports on Linux only")
def test_held_ports_go_to_no_one_else_but_their_process_binds_them():
    import socket

    held = HeldPorts(3)
    try:
        assert len(set(held.ports)) == 3
        for _ in range(2000):  # a bind to port 0 (as any other process's) never gets one
            with socket.socket() as other:
                other.bind(("127.0.0.1", 0))
                assert other.getsockname()[1] not in held.ports
        with socket.socket() as plain, pytest.raises(OSError):
            plain.bind(("127.0.0.1", held.ports[0]))  # nor an explicit one
        # the server it is held for binds and listens (uvicorn sets SO_REUSEADDR)
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", held.ports[1]))
            server.listen()
            socket.create_connection(("127.0.0.1", held.ports[1]), timeout=10).close()
    finally:
        held.close()
        held.close()  # idempotent


# -- the deployment --------------------------------------------------------------------------
def _leftovers(processes: dict[int, float | None], home: Path) -> list[str]:
    """Processes of a finished federation still alive: recorded ones, their descendants, and
    any process whose command line or environment names its directory."""
    alive = {p for p, start in processes.items() if is_alive(p, start)}
    alive |= descendants(alive)
    for name in os.listdir("/proc"):
        if not name.isdigit() or not is_alive(int(name)):
            continue
        for part in ("cmdline", "environ"):
            try:
                if str(home).encode() in Path(f"/proc/{name}/{part}").read_bytes():
                    alive.add(int(name))
            except OSError:
                pass
    return [Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace") for p in alive
            if is_alive(p)]


def _tiny_app(tmp_path: Path, name: str, **config: int | float) -> Path:
    return write_app_dir(tmp_path / name, {f"tiny-{k}": v for k, v in config.items()}, **TINY)


def _serves_tls_with_the_runs_ca(fed: LocalFederation) -> None:
    """The SuperLink's port completes a TLS handshake trusting only the run's CA (the nodes and
    ``flwr run`` connect the same way), and the config ``flwr run`` reads names that CA."""
    import socket
    import ssl

    assert fed.certificates is not None and fed.home is not None
    ctx = ssl.create_default_context(cafile=str(fed.certificates.ca))
    ctx.set_alpn_protocols(["h2"])  # gRPC speaks HTTP/2
    with socket.create_connection(("127.0.0.1", fed.port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert (tls.version() or "").startswith("TLS")
    config = fed.write_config().read_text()
    assert "insecure" not in config and str(fed.certificates.ca.resolve()) in config


@ON_PROC
@pytest.mark.slow
@pytest.mark.federation
def test_a_loopback_federation_runs_an_app_survives_a_dead_node_and_cleans_up(tmp_path):
    pytest.importorskip("flwr")
    fed = LocalFederation(nodes=2, env={"PYTHONPATH": str(HERE)})
    with fed:
        fed.wait_ready(timeout=90)
        assert sorted(fed.node_ids()) == [0, 1]
        home = fed.home
        assert home is not None and home.is_dir()
        _serves_tls_with_the_runs_ca(fed)

        lines: list[str] = []
        during: list[tuple[int, str, str, int]] = []

        def collect(line: str) -> None:
            lines.append(line)
            if "tinyapp round=0" in line and not during:  # the ServerApp is running now
                during.extend(fed.listening())

        app = _tiny_app(tmp_path, "both", rounds=2, nodes=2, timeout=120)
        assert fed.run_app(app, collect, timeout=180) == 0
        assert any("Successfully started run" in line for line in lines)  # flwr's own output
        rounds = [line for line in lines if "tinyapp round=" in line]
        assert len(rounds) == 2 and all("partitions=[0, 1]" in r for r in rounds), lines
        # every ClientApp ran in a process forked from its node's warm SuperExec (no fresh
        # flwr-clientapp interpreter per message)
        assert all("warm=[1, 1]" in r for r in rounds), rounds

        # every API of every process is bound to loopback (Fleet, Control, Runtime, nodes')
        sockets = fed.listening() + during
        assert {port for _, _, _, port in sockets} >= {fed.port}
        assert len(sockets) >= 3  # the SuperLink's and one per node
        assert all(host == "127.0.0.1" for _, _, host, _ in sockets), sockets

        # flwr run --stream exits 0 after a failed ServerApp too: the run's status decides
        lines.clear()
        assert fed.run_app(_tiny_app(tmp_path, "fail", fail=1), lines.append, timeout=180) == 1
        assert any("tinyapp fails as asked" in line for line in lines)
        assert any("finished:failed" in line for line in lines)

        # a node killed with its whole tree is gone; the other one still answers
        dead = fed.node_pids()[1]
        tree = {p: s for p, s in fed.processes().items() if p in descendants([dead])}
        fed.kill_node(1)
        assert not any(is_alive(p, s) for p, s in tree.items())
        lines.clear()
        # the SuperLink may still list the dead node, which never answers: the round ends
        # with the live node's reply (not after a wait that the live node must beat)
        app = _tiny_app(tmp_path, "one", rounds=1, nodes=1, replies=1, timeout=120)
        assert fed.run_app(app, lines.append, timeout=180) == 0
        assert any("tinyapp round=0" in line and "partitions=[0]" in line for line in lines), lines

        # a run that outlasts its time limit is an error, not a hang
        slow = _tiny_app(tmp_path, "slow", rounds=1, nodes=5, timeout=60)
        with pytest.raises(FederationError, match="did not end within"):
            fed.run_app(slow, None, timeout=4)
        processes = fed.processes()
        assert len(processes) >= 6  # link, nodes, SuperExecs, ServerApps, ClientApps
    assert fed.home is None and not home.exists()
    assert _leftovers(processes, home) == []


@ON_PROC
@pytest.mark.slow
@pytest.mark.federation
def test_an_interrupt_ends_a_throttled_federation_and_all_its_processes():
    pytest.importorskip("flwr")
    with pytest.raises(KeyboardInterrupt):
        with LocalFederation(nodes=1, speeds=[0.3]) as fed:
            fed.wait_ready(timeout=90)
            home = fed.home
            assert fed._throttle is not None  # the node runs at 0.3 of a core
            processes = fed.processes()
            raise KeyboardInterrupt
    assert home is not None and not home.exists()
    assert _leftovers(processes, home) == []
