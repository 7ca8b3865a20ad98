"""One SuperNode on a device joining an existing SuperLink (``melopt node``).

:class:`DeviceNode` starts the SuperNode a local federation starts for each of its nodes
(:func:`~mel_opt.live.federation.supernode_command` in
:func:`~mel_opt.live.federation.node_env`: Flower's SuperNode with the same
:class:`~mel_opt.live.tuning.NodeTuning`, its shorter polls and its warm SuperExec), with the
same process tracking and clean-up (:class:`~mel_opt.live.process_trees.ProcessTrees`).
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from mel_opt.errors import UsageError
from mel_opt.live.federation import HeldPorts, check_address, node_env, supernode_command
from mel_opt.live.flwr_cli import flower_env
from mel_opt.live.process_trees import ProcessTrees
from mel_opt.live.tuning import DEFAULT_TUNING, NodeTuning

__all__ = ["DeviceNode", "check_private_key"]


class DeviceNode(ProcessTrees):
    """One SuperNode joining an existing SuperLink (``melopt node``), as the local federation
    starts its nodes: :func:`supernode_command` in :func:`node_env`, its output to this
    process's, its whole tree ended by :meth:`close`.

    Parameters
    ----------
    superlink
        ``HOST:PORT`` of the SuperLink's Fleet API.
    partition_id, num_partitions
        The node config: this node's partition of the data set, and how many there are.
    root_certificates
        The CA (PEM) that signed the SuperLink's certificate; ``None`` trusts the system's.
    insecure
        Plain HTTP (only for a SuperLink started ``--insecure``).
    auth_key
        The node's private key (OpenSSH, :func:`~mel_opt.live.certs.make_node_key`) for a
        SuperLink with SuperNode authentication; its public key must be registered there.
    speed
        Fraction of a core in (0, 1] (:class:`~mel_opt.live.throttle.Throttle`); ``None``: all.
    port
        Port of the node's ClientApp API on 127.0.0.1 (``None``: a free one).
    tuning
        The node's polls, pull back-off, warm SuperExec, throttle period and grace
        (:class:`~mel_opt.live.tuning.NodeTuning`; its defaults are ``melopt node``'s, the
        local federation's nodes').
    env
        Extra environment of the node's processes.

    Raises
    ------
    UsageError
        A bad address, partition, speed or file, or a key that is not an OpenSSH EC private key.
    """

    def __init__(self, superlink: str, partition_id: int, num_partitions: int, *,
                 root_certificates: str | os.PathLike[str] | None = None,
                 insecure: bool = False, auth_key: str | os.PathLike[str] | None = None,
                 speed: float | None = None, port: int | None = None,
                 tuning: NodeTuning = DEFAULT_TUNING,
                 env: Mapping[str, str] | None = None) -> None:
        super().__init__(tuning.grace)
        self.superlink = check_address(superlink)
        if num_partitions < 1 or not 0 <= partition_id < num_partitions:
            raise UsageError(f"the partition id must be in [0, {num_partitions - 1}] for "
                             f"{num_partitions} partitions, got {partition_id}")
        if speed is not None and not 0 < float(speed) <= 1:
            raise UsageError(f"the speed is a fraction of a core in (0, 1], got {speed}")
        if insecure and (root_certificates is not None or auth_key is not None):
            raise UsageError("--insecure is plain HTTP: no root certificate and no "
                             "authentication key with it (Flower refuses both)")
        self.partition_id, self.num_partitions = int(partition_id), int(num_partitions)
        self.root_certificates = None if root_certificates is None else _existing(
            root_certificates, "root certificate")
        self.auth_key = None if auth_key is None else _existing(auth_key, "private key")
        if self.auth_key is not None:
            check_private_key(self.auth_key)
        self.insecure, self.speed, self.port = bool(insecure), speed, port
        self.tuning = tuning
        self.extra_env = dict(env or {})
        self._proc: subprocess.Popen[bytes] | None = None

    def _roots(self) -> list[subprocess.Popen[bytes]]:
        return [] if self._proc is None else [self._proc]

    def command(self, port: int) -> list[str]:
        """The SuperNode's command line."""
        return supernode_command(self.superlink, self.partition_id, self.num_partitions,
                                 port=port, root_certificates=self.root_certificates,
                                 insecure=self.insecure, auth_key=self.auth_key,
                                 patched=self.tuning.patched)

    def start(self) -> None:
        """Start the SuperNode (its output goes to this process's stdout and stderr)."""
        home = self.open_home("melopt-node-")
        try:
            port = self.port
            if port is None:  # a free one, held until the node has ended
                port = self.hold(HeldPorts(1)).ports[0]
            self.env = flower_env(home, node_env(self.tuning, self.extra_env))
            self._proc = self.spawn(self.command(port))  # its output: this process's
            self.start_monitor()
            if self.speed is not None and self.speed < 1:
                self.throttle({self._proc.pid: float(self.speed)}, self.tuning.throttle_period)
        except BaseException:
            self.close()
            raise

    def wait(self, stop: threading.Event | None = None) -> int | None:
        """Wait until the SuperNode exits (its exit code) or ``stop`` is set (``None``)."""
        if self._proc is None:
            raise RuntimeError("this node is not running")
        while self._proc.poll() is None:
            if stop is not None and stop.wait(0.2):
                return None
            if stop is None:
                time.sleep(0.2)
        return self._proc.returncode


def _existing(path: str | os.PathLike[str], what: str) -> str:
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise UsageError(f"{what} {p} not found")
    return str(p)


def check_private_key(path: str | os.PathLike[str]) -> None:
    """UsageError unless ``path`` holds an EC private key in OpenSSH format without a
    passphrase (what ``flower-supernode --auth-supernode-private-key`` reads)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key

    try:
        key = load_ssh_private_key(Path(path).read_bytes(), None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise UsageError(f"{path} is not an OpenSSH private key without a passphrase "
                         f"({exc}); make one with: melopt node keygen DIR") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise UsageError(f"{path} is not an ECDSA key (Flower's SuperNode authentication "
                         "needs one on a NIST curve); make one with: melopt node keygen DIR")
