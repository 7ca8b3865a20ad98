"""The Flower deployments of ``melopt live``: on loopback (``--engine local``) and remote.

:class:`LocalFederation` starts a Flower deployment on loopback: one SuperLink and ``nodes``
SuperNodes, processes of this virtual environment, each in its own process group (session),
logging into a fresh temporary directory that is also their ``FLWR_HOME``, optionally each node
at a fraction of a core (:class:`~mel_opt.live.throttle.Throttle`).
:class:`RemoteFederation` reaches an existing SuperLink. Both run an app directory
(:func:`mel_opt.live.appdir.write_app_dir`) with ``flwr run <app> <federation> --stream``
(:func:`mel_opt.live.flwr_cli.run_flwr_app`), each output line to a callback.

Addresses: Flower 1.42 serves the SuperLink's Fleet, Control and server-app Runtime APIs over
one HTTP server bound by ``--host``/``--port`` (default 127.0.0.1:8000); its legacy gRPC Fleet
and Control servers (0.0.0.0:9092/9093) start only when ``FLWR_INTERNAL_GRPC_FLEET_API`` or
``FLWR_INTERNAL_GRPC_CONTROL_API`` is ``1``, so both are removed from the environment
(:func:`~mel_opt.live.flwr_cli.flower_env`). A SuperNode serves its ClientApps' Runtime API on
its own ``--host``/``--port`` (default 127.0.0.1:9094). Nothing else listens (no
``--health-server-address``). Ports are chosen free and held until the processes that bind
them have ended (:class:`HeldPorts`).

Ends: the SuperLink starts a SuperExec in a new session, which starts a ``flwr-serverapp`` per
run; each SuperNode starts a SuperExec, which starts a ClientApp process per message. The
federation is a :class:`~mel_opt.live.process_trees.ProcessTrees`: every descendant is recorded
while the trees are intact, and on exit (also on error and Ctrl-C) each one still alive gets
SIGTERM, then SIGKILL after a grace period, and the directory is removed.

Authentication: with TLS (the default) the SuperLink runs ``--enable-supernode-auth``, so it
admits only SuperNodes whose public key was registered through its Control API. Each node gets
its own ECDSA key pair, made for the run (:func:`~mel_opt.live.certs.make_node_key`) in the
run's owner-only directory; once the SuperLink listens the public keys are registered
(``flwr supernode register``, all at once, inside the hub namespace across links), and only
then do the nodes start, each with ``--auth-supernode-private-key``. A node whose key was not
registered is refused at activation and exits ("Failed to activate SuperNode").

Waits: the SuperNodes' polls, their SuperExecs' polls for work and the object pulls' back-off
are the :class:`~mel_opt.live.tuning.NodeTuning`'s (Flower's own timings, and where mel_opt
changes them: :mod:`mel_opt.live.flower_patches`); ``Grid.send_and_receive`` sleeps 3 s between
its pulls on the server side, which only the ServerApp can avoid (by its own loop over
``push_messages`` and ``pull_messages``).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from mel_opt.errors import UsageError
from mel_opt.live.certs import NodeKey, RunCertificates, make_node_key, make_run_certificates
from mel_opt.live.flwr_cli import (
    FederationError,
    Stream,
    executable,
    flower_env,
    register_supernodes,
    run_flwr_app,
    write_flower_config,
)
from mel_opt.live.netns import ShapedLinks
from mel_opt.live.process_trees import ProcessTrees
from mel_opt.live.tuning import DEFAULT_TUNING, NodeTuning
from mel_opt.processes import send

__all__ = ["LOCAL_FEDERATION", "LOOPBACK", "REMOTE_FEDERATION", "FederationError",
           "HeldPorts", "LocalFederation", "RemoteFederation", "check_address", "free_ports",
           "node_env",
           "port_open", "supernode_command"]

LOCAL_FEDERATION = "melopt-local"
REMOTE_FEDERATION = "melopt-remote"
LOOPBACK = "127.0.0.1"
_NODE_ID = re.compile(r"SuperNode ID: (\d+)")


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct ports that were free on ``host`` a moment ago (bound to port 0)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:  # all held until all are chosen, so that no two are the same
        for s in socks:
            s.close()


#: Whether a bound socket that does not listen can hold its port for another process to bind
#: (Linux: both set ``SO_REUSEADDR``; BSD's ``SO_REUSEADDR`` never binds one address and port
#: twice, so there the ports are only chosen, as :func:`free_ports` does).
HOLDS_PORTS = sys.platform.startswith("linux")


class HeldPorts:
    """``count`` distinct ports on ``host``, held for processes about to bind them.

    A port found free and released (:func:`free_ports`) can be taken by anyone in the seconds
    before the process it was chosen for has started and bound it: by another process's bind
    to port 0, or as the local port of any outgoing connection. Here each port stays bound by
    a socket of this process (``SO_REUSEADDR``, never listening) until :meth:`close`: the
    kernel hands it to no bind to port 0 and to no outgoing connection, while the process it
    is meant for still binds it (uvicorn, which serves Flower's SuperLink and SuperNodes, sets
    ``SO_REUSEADDR`` too, and Linux lets such a socket bind beside one that does not listen).
    Where that does not hold (:data:`HOLDS_PORTS`) the ports are released at once.
    """

    def __init__(self, count: int, host: str = LOOPBACK) -> None:
        self._socks: list[socket.socket] = []
        try:
            for _ in range(count):  # each held while the next is bound: all distinct
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self._socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, 0))
        except BaseException:
            self.close()
            raise
        self.ports = [int(s.getsockname()[1]) for s in self._socks]
        if not HOLDS_PORTS:
            self.close()

    def close(self) -> None:
        """Release the ports (idempotent)."""
        socks, self._socks = self._socks, []
        for s in socks:
            s.close()



def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def check_address(superlink: str) -> str:
    """``superlink`` if it is ``HOST:PORT`` (a UsageError otherwise)."""
    host, _, port = superlink.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"the SuperLink address must be HOST:PORT, got {superlink!r}")
    return superlink


def node_env(tuning: NodeTuning, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment settings of a SuperNode as mel_opt starts it (on top of
    :func:`~mel_opt.live.flwr_cli.flower_env`): ``extra``, the ``tuning`` over it
    (:meth:`~mel_opt.live.tuning.NodeTuning.env`), and no proxy for loopback."""
    env = {**(extra or {}), **tuning.env()}
    no_proxy = os.environ.get("NO_PROXY", os.environ.get("no_proxy", ""))
    env["NO_PROXY"] = env["no_proxy"] = ",".join(
        p for p in (no_proxy, "127.0.0.1,localhost") if p)
    return env


def supernode_command(superlink: str, partition_id: int, num_partitions: int, *, port: int,
                      root_certificates: str | os.PathLike[str] | None = None,
                      insecure: bool = False, auth_key: str | os.PathLike[str] | None = None,
                      patched: bool = True) -> list[str]:
    """The command line of one SuperNode (``python -m mel_opt.live.supernode``, or Flower's
    own ``flower-supernode`` when not ``patched``), its ClientApp API on 127.0.0.1:``port``.

    ``root_certificates`` is the CA to trust (``None`` and not ``insecure``: the system's),
    ``auth_key`` the node's private key for SuperNode authentication."""
    head = ([sys.executable, "-m", "mel_opt.live.supernode"] if patched
            else [executable("flower-supernode")])
    security = (["--insecure"] if insecure else [] if root_certificates is None
                else ["--root-certificates", str(root_certificates)])
    auth = [] if auth_key is None else ["--auth-supernode-private-key", str(auth_key)]
    return [*head, *security, *auth, "--superlink", superlink, "--host", LOOPBACK,
            "--port", str(port),
            "--node-config", f"partition-id={partition_id} num-partitions={num_partitions}"]


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class RemoteFederation:
    """An existing SuperLink, reached at its Control API with ``flwr run``.

    Parameters
    ----------
    superlink
        ``HOST:PORT`` of the SuperLink's Control API.
    root_certificates
        PEM root certificate (or bundle) that signed the SuperLink's certificate; ``None``
        trusts the system's certificate store.
    insecure
        Plain HTTP without TLS (only for a SuperLink started with ``--insecure``).
    env
        Extra environment for ``flwr`` (e.g. ``PYTHONPATH``).

    Raises
    ------
    UsageError
        An address without a port, a missing certificate file, or a certificate together with
        ``insecure``.
    """

    def __init__(self, superlink: str, root_certificates: str | os.PathLike[str] | None = None,
                 insecure: bool = False, *, env: Mapping[str, str] | None = None) -> None:
        check_address(superlink)
        if insecure and root_certificates is not None:
            raise UsageError("a root certificate is for TLS: give it or --insecure, not both")
        self.superlink = superlink
        self.insecure = bool(insecure)
        self.root_certificates: str | None = None
        if root_certificates is not None:
            cert = Path(root_certificates).expanduser().resolve()
            if not cert.is_file():
                raise UsageError(f"root certificate {cert} not found")
            self.root_certificates = str(cert)  # Flower wants an absolute path
        self.extra_env = dict(env or {})

    def write_config(self, home: str | os.PathLike[str]) -> Path:
        """Write the connection into ``home/config.toml``."""
        return write_flower_config(home, REMOTE_FEDERATION, self.superlink,
                                   insecure=self.insecure,
                                   root_certificates=self.root_certificates)

    def run_app(self, app_dir: str | os.PathLike[str], stream: Stream | None = None,
                timeout: float | None = None) -> int:
        """Run the app on the SuperLink (see :func:`run_flwr_app`); the exit code.

        A fresh ``FLWR_HOME`` holds the connection, so the user's own Flower configuration is
        never touched (nor used: SuperLinks that want an account login are not supported)."""
        home = Path(tempfile.mkdtemp(prefix="melopt-flwr-remote-"))
        try:
            self.write_config(home)
            return run_flwr_app(flower_env(home, self.extra_env), REMOTE_FEDERATION, app_dir,
                                stream, timeout)
        finally:
            shutil.rmtree(home, ignore_errors=True)


# -- the local deployment ----------------------------------------------------------------------
class LocalFederation(ProcessTrees):
    """A SuperLink and ``nodes`` SuperNodes on 127.0.0.1, ended with the context.

    Parameters
    ----------
    nodes
        Number of SuperNodes; node ``i`` gets the node config ``partition-id=i
        num-partitions=nodes``.
    speeds
        One fraction of a core per node in (0, 1] (:class:`~mel_opt.live.throttle.Throttle`);
        ``None`` runs every node at full speed.
    env
        Extra environment of every process (``PYTHONPATH`` for apps outside the installed
        packages: the SuperLink's ServerApp and the nodes' ClientApps import them).
    tuning
        The SuperNodes' polls, pull back-off, warm SuperExec and what it preloads, the
        throttle's period and the grace between SIGTERM and SIGKILL when the federation ends
        (:class:`~mel_opt.live.tuning.NodeTuning`; its defaults are ``melopt live``'s).
    start_timeout
        Seconds the SuperLink may take to accept connections before the nodes start.
    tls
        Serve with TLS (the default): a CA and a SuperLink certificate are made for the run
        (:func:`~mel_opt.live.certs.make_run_certificates`), the nodes and ``flwr run`` trust
        that CA alone. ``False`` runs the SuperLink ``--insecure`` (for measuring what TLS
        costs).
    auth
        SuperNode authentication (see the module's notes): the SuperLink admits only the
        nodes whose keys this run made and registered. ``None`` (the default): on whenever
        ``tls`` is (Flower allows it only with TLS); ``False`` lets any SuperNode that reaches
        the SuperLink join.
    links
        Real links (:class:`~mel_opt.live.netns.ShapedLinks`, already started, one link per
        node): the SuperLink runs in the hub namespace, node ``i`` in link ``i``'s namespace and
        reaches the SuperLink at its hub address, so every message crosses that node's shaped
        link; ``flwr run`` runs inside the hub. ``None``: everything on 127.0.0.1.
    """

    def __init__(self, nodes: int = 2, speeds: Sequence[float] | None = None, *,
                 env: Mapping[str, str] | None = None, tuning: NodeTuning = DEFAULT_TUNING,
                 start_timeout: float = 60.0, tls: bool = True,
                 links: ShapedLinks | None = None, auth: bool | None = None) -> None:
        if nodes < 1:
            raise UsageError(f"a local federation needs at least one node, got {nodes}")
        if speeds is not None and len(speeds) != nodes:
            raise UsageError(f"{len(speeds)} speeds for {nodes} nodes")
        if speeds is not None and not all(0 < float(s) <= 1 for s in speeds):
            raise UsageError(f"speeds are fractions of a core in (0, 1], got {list(speeds)}")
        self.nodes, self.speeds = nodes, None if speeds is None else [float(s) for s in speeds]
        super().__init__(tuning.grace)
        self.tuning, self.start_timeout = tuning, start_timeout
        self.extra_env = dict(env or {})
        self.tls = bool(tls)
        if auth and not self.tls:
            raise UsageError("SuperNode authentication needs TLS (Flower refuses it over "
                             "--insecure)")
        self.auth = self.tls if auth is None else bool(auth)
        self.keys: list[NodeKey] = []
        self.registered: dict[int, int] = {}  # partition id -> node id given at registration
        if links is not None and len(links.links) != nodes:
            raise UsageError(f"{len(links.links)} links for {nodes} nodes")
        self.links = links
        self.certificates: RunCertificates | None = None
        self.port = 0
        self._link: subprocess.Popen[bytes] | None = None
        self._nodes: list[subprocess.Popen[bytes]] = []
        self._killed: set[int] = set()
        self._node_ids: dict[int, int] = {}

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start the SuperLink, wait until it listens, then start the SuperNodes."""
        home = self.open_home("melopt-flower-")
        try:
            ports = self.hold(HeldPorts(1 + self.nodes)).ports
            self.port = ports[0]
            self.env = flower_env(home, node_env(self.tuning, self.extra_env))
            self._link = self.spawn([
                *self._hub_prefix(), executable("flower-superlink"), *self._link_security(),
                *self._link_auth(),
                "--disable-runtime-dependency-installation",
                "--host", LOOPBACK if self.links is None else "0.0.0.0",  # only the run's links
                "--port", str(self.port)], log="superlink")
            self.start_monitor()
            # nodes started before the link listens back off for seconds between retries
            self._wait(self._link_listens, self.start_timeout,
                       "the SuperLink did not accept connections")
            if self.auth:
                self._register_nodes()
            for i, port in enumerate(ports[1:]):
                self._nodes.append(self.spawn(self._node_command(i, port), log=f"supernode-{i}"))
            if self.speeds is not None and any(s < 1 for s in self.speeds):
                self.throttle({p.pid: s for p, s in zip(self._nodes, self.speeds, strict=True)},
                              self.tuning.throttle_period)
        except BaseException:
            self.close()
            raise

    def _roots(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in (self._link, *self._nodes) if p is not None]

    def _forget(self) -> None:
        self.certificates = None
        self.keys, self.registered = [], {}

    def _link_security(self) -> list[str]:
        """The SuperLink's TLS flags (certificates made now), or ``--insecure``."""
        if not self.tls:
            return ["--insecure"]
        assert self.home is not None
        tls_dir = self.home / "tls"
        tls_dir.mkdir(mode=0o700)
        hubs = [] if self.links is None else sorted({li.hub_address for li in self.links.links})
        self.certificates = make_run_certificates(tls_dir, [LOOPBACK, "localhost", *hubs])
        c = self.certificates
        return ["--ssl-ca-certfile", str(c.ca), "--ssl-certfile", str(c.certificate),
                "--ssl-keyfile", str(c.key)]

    def _link_auth(self) -> list[str]:
        return ["--enable-supernode-auth"] if self.auth else []

    def _register_nodes(self) -> None:
        """Make each node's key pair and register its public key with the SuperLink."""
        assert self.home is not None
        key_dir = self.home / "keys"
        key_dir.mkdir(mode=0o700)
        self.keys = [make_node_key(key_dir, f"supernode-{i}", comment=f"melopt-node-{i}")
                     for i in range(self.nodes)]
        self.write_config()
        ids = register_supernodes(self.env, LOCAL_FEDERATION, [k.public for k in self.keys],
                                  timeout=self.start_timeout, prefix=self._hub_prefix(),
                                  track=self.track)
        self.registered = dict(enumerate(ids))

    def _node_command(self, i: int, port: int) -> list[str]:
        prefix: list[str] = []
        if self.links is not None:
            link = self.links.links[i]
            prefix = self.links.prefix(link.namespace)
            superlink = f"{link.hub_address}:{self.port}"
        else:
            superlink = f"{LOOPBACK}:{self.port}"
        return [*prefix, *supernode_command(
            superlink, i, self.nodes, port=port,
            root_certificates=None if self.certificates is None else self.certificates.ca,
            insecure=self.certificates is None,
            auth_key=self.keys[i].private if self.keys else None,
            patched=self.tuning.patched)]

    def kill_node(self, i: int) -> None:
        """SIGKILL node ``i``'s whole process tree (to test a node dying mid-round)."""
        root = self._nodes[i].pid
        victims = self.tree(root)
        send(root, signal.SIGKILL)  # first, so that it starts nothing new
        self.terminate(victims, 5.0, signals=(signal.SIGKILL,))
        self._nodes[i].wait(timeout=5)
        self._killed.add(i)

    def pause_node(self, i: int) -> None:
        """Pause node ``i``'s whole process tree (SIGSTOP) until :meth:`resume_node` or the
        end: its learner is offline (:mod:`mel_opt.live.availability`)."""
        if i not in self._killed:
            self.pause(self._nodes[i].pid)

    def resume_node(self, i: int) -> None:
        """Continue node ``i``'s tree paused by :meth:`pause_node`."""
        if i not in self._killed:
            self.resume(self._nodes[i].pid)

    def link_alive(self) -> bool:
        """Whether the SuperLink process is still running."""
        return self._link is not None and self._link.poll() is None

    def kill_superlink(self) -> None:
        """SIGKILL the SuperLink process alone (to test a SuperLink dying mid-run); what it
        started is left to :meth:`close`, as after a crash."""
        if self._link is not None and self._link.poll() is None:
            send(self._link.pid, signal.SIGKILL)
            self._link.wait(timeout=5)

    # -- readiness and runs --------------------------------------------------------------------
    def _log(self, name: str) -> Path:
        assert self.home is not None
        return self.home / f"{name}.log"

    def _check_running(self) -> None:
        if self.home is None or self._link is None:
            raise FederationError("the local federation is not running")
        if self._link.poll() is not None:
            raise FederationError(f"the SuperLink exited ({self._link.returncode}):\n"
                                  + _tail(self._log("superlink")))
        for i, proc in enumerate(self._nodes):
            if i not in self._killed and proc.poll() is not None:
                raise FederationError(f"SuperNode {i} exited ({proc.returncode}):\n"
                                      + _tail(self._log(f"supernode-{i}")))

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self._check_running()
            if ready():
                return
            if time.monotonic() > deadline:
                raise FederationError(f"{what} within {timeout:g} s; the SuperLink's log ends:\n"
                                      + _tail(self._log("superlink")))
            time.sleep(0.1)

    def _registered(self) -> bool:
        for i in range(self.nodes):
            if i in self._node_ids or i in self._killed:
                continue
            text = self._log(f"supernode-{i}").read_text(encoding="utf-8", errors="replace")
            if m := _NODE_ID.search(text):
                self._node_ids[i] = int(m.group(1))
        # the nodes first: across links the link's check starts a process in its namespace
        return all(i in self._node_ids or i in self._killed
                   for i in range(self.nodes)) and self._link_listens()

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until the SuperLink accepts connections and every node has registered.

        A node has registered when its log shows its node id, which Flower prints once the
        SuperLink has activated it (nodes then appear ``online`` in ``flwr supernode ls``).

        Raises
        ------
        FederationError
            A process exited, or the federation was not ready within ``timeout`` seconds.
        """
        self._wait(self._registered, timeout, "not every SuperNode registered")

    def node_ids(self) -> dict[int, int]:
        """Partition id -> Flower node id of every registered node (after :meth:`wait_ready`)."""
        return dict(self._node_ids)

    def write_config(self) -> Path:
        """Write ``$FLWR_HOME/config.toml`` with the loopback connection ``melopt-local``."""
        self._check_running()
        assert self.home is not None
        ca = None if self.certificates is None else str(self.certificates.ca.resolve())
        return write_flower_config(self.home, LOCAL_FEDERATION, f"{LOOPBACK}:{self.port}",
                                   insecure=ca is None, root_certificates=ca)

    def run_app(self, app_dir: str | os.PathLike[str], stream: Stream | None = None,
                timeout: float | None = None) -> int:
        """Run the app on this federation (see :func:`run_flwr_app`); the exit code."""
        self.write_config()
        return run_flwr_app(self.env, LOCAL_FEDERATION, app_dir, stream, timeout,
                            track=self.track, prefix=self._hub_prefix())

    def _hub_prefix(self) -> list[str]:
        return [] if self.links is None else self.links.prefix(self.links.hub)

    def _link_listens(self) -> bool:
        if self.links is None:
            return port_open(LOOPBACK, self.port)
        probe = (f"import socket; socket.create_connection(('{LOOPBACK}', {self.port}), "
                 "timeout=0.5).close()")
        return subprocess.run([*self._hub_prefix(), sys.executable, "-c", probe],
                              capture_output=True, timeout=30, check=False).returncode == 0

    # -- for tests -----------------------------------------------------------------------------
    def node_pids(self) -> list[int]:
        """The pid of every SuperNode process started (killed ones included)."""
        return [p.pid for p in self._nodes]
