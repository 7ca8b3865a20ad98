"""Certificates made per run: a private CA and a SuperLink certificate signed by it.

A deployment with TLS needs a server certificate whose subjectAltName lists every address the
nodes connect to (a node dialing 10.201.0.1 checks that this IP is in the certificate), and a
CA certificate the nodes and ``flwr run`` trust. :func:`make_run_certificates` makes both for
one run, in a directory of that run, with the private keys readable by the owner only; they are
valid for a few days and are thrown away with the run's directory.

Keys are ECDSA on P-256 (what gRPC and every TLS 1.3 stack accept; fast to make: the whole set
takes milliseconds). Each file is written to a temporary name and renamed into place
(:func:`mel_opt.io.atomic.atomic_path`), so a reader never sees half a key; the key's file is
owner-only before its first byte is written.

SuperNode authentication (:func:`make_node_key`) uses a second kind of key: one ECDSA key pair
per SuperNode, on P-384 (the curve of Flower's guide; any NIST curve is accepted), in the
OpenSSH formats Flower reads: ``flower-supernode --auth-supernode-private-key`` loads the
private key with ``load_ssh_private_key`` (``-----BEGIN OPENSSH PRIVATE KEY-----``, no
passphrase) and ``flwr supernode register`` the public key with ``load_ssh_public_key``
(one line ``ecdsa-sha2-nistp384 AAAA... comment``).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mel_opt.errors import UsageError
from mel_opt.io.atomic import atomic_path

VALID_DAYS = 3
#: the SuperNode keys' file names: ``<name>.key`` (private, 0600) and ``<name>.pub``
PRIVATE_SUFFIX, PUBLIC_SUFFIX = ".key", ".pub"


@dataclass(frozen=True)
class NodeKey:
    """Where one SuperNode's authentication key pair is.

    Attributes
    ----------
    private : Path
        The private key, OpenSSH format, mode 0600
        (``flower-supernode --auth-supernode-private-key``).
    public : Path
        The public key, one OpenSSH line (``flwr supernode register``).
    """

    private: Path
    public: Path


@dataclass(frozen=True)
class RunCertificates:
    """Where one run's TLS files are.

    Attributes
    ----------
    ca : Path
        The CA certificate (PEM): what SuperNodes and ``flwr run`` trust
        (``--root-certificates``).
    certificate, key : Path
        The SuperLink's certificate and private key (PEM; the key mode 0600)
        (``--ssl-certfile``, ``--ssl-keyfile``; ``--ssl-ca-certfile`` is ``ca``).
    hosts : tuple of str
        The addresses and names the certificate is valid for.
    """

    ca: Path
    certificate: Path
    key: Path
    hosts: tuple[str, ...]


def _write(path: Path, data: bytes, mode: int) -> None:
    """``data`` into ``path`` by rename, the file at ``mode`` before the first byte lands."""
    with atomic_path(path, durable=False, keep_suffix=False) as tmp:
        os.chmod(tmp, mode)
        tmp.write_bytes(data)


def _subject_names(hosts: Sequence[str]) -> list:  # type: ignore[type-arg]
    from cryptography import x509

    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if not host or any(c.isspace() for c in host):
                raise UsageError(
                    f"not an address or host name for a certificate: {host!r}") from None
            names.append(x509.DNSName(host))
    return names


def make_run_certificates(directory: str | os.PathLike[str], hosts: Sequence[str],
                          *, name: str = "mel_opt run") -> RunCertificates:
    """Make a CA and a SuperLink certificate for ``hosts`` in ``directory``.

    Parameters
    ----------
    directory
        Existing directory of the run (the files are ``ca.crt``, ``server.pem``, ``server.key``).
    hosts
        Every IP address or DNS name nodes use to reach the SuperLink (at least one).
    name
        Common name of the CA (shown by tools that print certificates).

    Returns
    -------
    RunCertificates
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not hosts:
        raise UsageError("a SuperLink certificate needs at least one address")
    san = x509.SubjectAlternativeName(_subject_names(hosts))
    out = Path(directory)
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(minutes=5), now + dt.timedelta(days=VALID_DAYS)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
    server = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_name)
              .public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(start).not_valid_after(end)
              .add_extension(san, critical=False)
              .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
              .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))

    pem = serialization.Encoding.PEM
    files = RunCertificates(out / "ca.crt", out / "server.pem", out / "server.key", tuple(hosts))
    _write(files.ca, ca.public_bytes(pem), 0o644)
    _write(files.certificate, server.public_bytes(pem), 0o644)
    _write(files.key, key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption()), 0o600)
    return files


def make_node_key(directory: str | os.PathLike[str], name: str = "supernode", *,
                  comment: str | None = None) -> NodeKey:
    """Make a SuperNode's authentication key pair in ``directory``.

    Parameters
    ----------
    directory
        Existing directory (``<name>.key`` and ``<name>.pub`` are written there; an existing
        pair of that name is replaced).
    name
        The files' stem.
    comment
        Text after the public key on its line (default ``name``).

    Returns
    -------
    NodeKey
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"not a key name: {name!r}")
    note = name if comment is None else comment
    if any(c in note for c in "\r\n"):
        raise UsageError("a key comment is one line")
    key = ec.generate_private_key(ec.SECP384R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH)
    line = public + (f" {note}".encode() if note else b"") + b"\n"
    out = Path(directory)
    files = NodeKey(out / f"{name}{PRIVATE_SUFFIX}", out / f"{name}{PUBLIC_SUFFIX}")
    _write(files.private, private, 0o600)
    _write(files.public, line, 0o644)
    return files
