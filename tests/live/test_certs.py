"""Per-run certificates (:mod:`mel_opt.live.certs`): a real TLS handshake on 127.0.0.1 checks
them, as a SuperNode's gRPC channel would (the CA trusted, the address in subjectAltName)."""

from __future__ import annotations

import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest

from mel_opt.errors import UsageError

pytest.importorskip("cryptography", reason="certificates are made with the cryptography package "
                                           "(installed with the flower extra)")

from mel_opt.live.certs import make_node_key, make_run_certificates  # noqa: E402


def _handshake(certs_dir: Path, server_name: str) -> str:
    """Serve one TLS handshake with the run's certificate; connect trusting only its CA,
    checking ``server_name``. Returns the negotiated protocol (or raises ssl.SSLError)."""
    files = make_run_certificates(certs_dir, ["127.0.0.1", "10.201.0.1", "link.local"])
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(files.certificate, files.key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=str(files.ca))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                client_ctx.wrap_socket(raw, server_hostname=server_name) as tls:
            version = tls.version() or ""
            tls.sendall(b"x")
        return version
    finally:
        thread.join(timeout=10)
        listener.close()


def test_a_node_trusting_the_ca_connects_by_every_listed_address(tmp_path: Path) -> None:
    assert _handshake(tmp_path, "127.0.0.1").startswith("TLS")
    assert _handshake(tmp_path, "link.local").startswith("TLS")


def test_an_address_not_in_the_certificate_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
        _handshake(tmp_path, "10.201.0.2")


def test_another_runs_ca_is_not_trusted(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    mine = make_run_certificates(tmp_path / "a", ["127.0.0.1"])
    other = make_run_certificates(tmp_path / "b", ["127.0.0.1"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(mine.certificate, mine.key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    thread = threading.Thread(target=lambda: _accept_once(listener, ctx), daemon=True)
    thread.start()
    client = ssl.create_default_context(cafile=str(other.ca))
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            client.wrap_socket(raw, server_hostname="127.0.0.1")
    thread.join(timeout=10)
    listener.close()


def _accept_once(listener: socket.socket, ctx: ssl.SSLContext) -> None:
    conn, _ = listener.accept()
    try:
        ctx.wrap_socket(conn, server_side=True).close()
    except (ssl.SSLError, OSError):
        conn.close()


def test_the_key_is_the_owners_alone_and_bad_hosts_are_refused(tmp_path: Path) -> None:
    files = make_run_certificates(tmp_path, ["127.0.0.1"])
    assert stat.S_IMODE(files.key.stat().st_mode) == 0o600
    assert files.ca.read_text().startswith("-----BEGIN CERTIFICATE-----")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "server.key", "server.pem"]
    with pytest.raises(UsageError, match="at least one address"):
        make_run_certificates(tmp_path, [])
    with pytest.raises(UsageError, match="not an address or host name"):
        make_run_certificates(tmp_path, ["bad host"])


def test_a_node_key_pair_is_what_flower_reads_and_owner_only(tmp_path: Path) -> None:
    """The private key in OpenSSH format (``flower-supernode --auth-supernode-private-key``
    loads it with ``load_ssh_private_key``), the public key one OpenSSH line (``flwr supernode
    register`` loads it with ``load_ssh_public_key``), both of one ECDSA P-384 pair."""
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        PublicFormat,
        load_ssh_private_key,
        load_ssh_public_key,
    )

    key = make_node_key(tmp_path, "node-3", comment="melopt-node-3")
    assert (key.private.name, key.public.name) == ("node-3.key", "node-3.pub")
    assert stat.S_IMODE(key.private.stat().st_mode) == 0o600
    private = load_ssh_private_key(key.private.read_bytes(), None)
    public = load_ssh_public_key(key.public.read_bytes())
    assert isinstance(private, ec.EllipticCurvePrivateKey) and private.curve.name == "secp384r1"
    assert isinstance(public, ec.EllipticCurvePublicKey)
    same = Encoding.OpenSSH, PublicFormat.OpenSSH
    assert private.public_key().public_bytes(*same) == public.public_bytes(*same)
    assert key.public.read_text().endswith(" melopt-node-3\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node-3.key", "node-3.pub"]
    before = key.private.read_bytes()
    assert make_node_key(tmp_path, "node-3").private.read_bytes() != before  # a fresh pair
    for bad in ("", "../x", ".hidden"):
        with pytest.raises(UsageError, match="not a key name"):
            make_node_key(tmp_path, bad)
