"""Real links for a deployment: network namespaces joined by shaped veth pairs (Linux, root).

:class:`ShapedLinks` makes one namespace for the SuperLink (the hub) and one per learner, joins
each learner to the hub with its own veth pair, and shapes each end with a token-bucket filter
(``tc qdisc ... tbf``): the hub's end at the learner's download rate (what the hub sends is the
learner's download), the learner's end at its upload rate. A process started under
:meth:`ShapedLinks.prefix` lives inside that namespace, so a model sent from the SuperLink to a
SuperNode crosses a link of the learner's speed and its time is measured, not computed.

Facts this relies on (checked with root on a 2-core machine like CI's):

- ``netem`` (delay, loss) is not in every kernel; ``tbf`` is, and shapes for real: with a rate
  of 8 Mbit/s a 2 MB TCP transfer takes about 2.1 s (7.5 Mbit/s of payload);
- the bucket must hold at least one packet: links keep the veth MTU of 1500 (a loopback device
  with its 64 KB MTU as the shaped device drops every packet), and the burst is at least
  16 KiB and at least one timer tick of data (``rate / 100``), so fast links are not capped by
  the bucket instead of the rate;
- deleting a namespace removes its veth ends, but not the processes inside it: :meth:`close`
  ends them first (SIGTERM, then SIGKILL), then deletes the namespaces.

Everything a run made is removed at the end of the ``with`` block, also on an exception or a
Ctrl-C; the names carry the process id, so :func:`remove_stale` cleans what a run killed
outright (SIGKILL) left.
Traffic stays inside the namespaces: the addresses are private (10.201.0.0/16), no namespace
has a route out, and nothing is bridged to the host's interfaces.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

from mel_opt.errors import UsageError

PREFIX = "melopt-"
SUBNET = "10.201"  # the private /16 every run's links are numbered in (namespaces are apart)
MIN_RATE_BPS = 8_000.0  # below this tbf's arithmetic degenerates; no learner is that slow
MAX_RATE_BPS = 1e9  # a 2-core box cannot shape faster than this honestly
MIN_BURST_B = 16 * 1024
LATENCY_MS = 400  # how long a packet may wait in the bucket before it is dropped


def unavailable() -> str | None:
    """Why shaped links cannot be made here (None when they can)."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "shaped links need Linux network namespaces"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"shaped links need {' and '.join(missing)} (iproute2) on PATH"
    if os.geteuid() != 0:
        return "shaped links need root (network namespaces and tc)"
    return None


def require() -> None:
    """UsageError (exit code 2) saying why, and what to use instead, when links cannot be made."""
    why = unavailable()
    if why is not None:
        raise UsageError(f"{why}; use --engine local (loopback, transfers emulated) instead")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=30)


def _tc(namespace: str, *args: str) -> None:
    subprocess.run(["ip", "netns", "exec", namespace, "tc", *args], capture_output=True,
                   text=True, check=True, timeout=30)


def namespaces() -> list[str]:
    """Names of every network namespace on this machine."""
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def pids_in(namespace: str) -> list[int]:
    """Processes running inside ``namespace``."""
    out = _ip("netns", "pids", namespace, check=False).stdout
    return [int(p) for p in out.split() if p.strip().isdigit()]


def _end_processes(namespace: str, grace: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids_in(namespace):
            try:
                os.kill(pid, sig)
                os.kill(pid, signal.SIGCONT)  # a stopped process acts on SIGTERM only then
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while pids_in(namespace) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not pids_in(namespace):
            return


def remove(namespace: str, grace: float = 3.0) -> None:
    """End every process inside ``namespace``, then delete it (with its veth ends)."""
    _end_processes(namespace, grace)
    _ip("netns", "del", namespace, check=False)


def remove_stale() -> list[str]:
    """Delete the namespaces of runs whose process is gone (a run killed by SIGKILL)."""
    gone = []
    for name in namespaces():
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            remove(name)
            gone.append(name)
    return gone


def burst_bytes(rate_bps: float) -> int:
    """The bucket of a link of ``rate_bps``: at least 16 KiB and one 10 ms tick of data."""
    return max(MIN_BURST_B, int(rate_bps / 8 / 100))


@dataclass(frozen=True)
class Link:
    """One learner's link to the hub.

    Attributes
    ----------
    namespace : str
        The learner's namespace.
    address : str
        The learner's address on the link.
    hub_address : str
        The hub's address on the same link (where the learner reaches the SuperLink).
    up_bps, down_bps : float
        Shaped rates [bit/s]: upload (learner to hub) and download (hub to learner).
    """

    namespace: str
    address: str
    hub_address: str
    up_bps: float
    down_bps: float


def _addresses(i: int) -> tuple[str, str]:
    """The hub's and the learner's address on link ``i`` (a /30 each, 16,384 links)."""
    base = 4 * i
    third, fourth = divmod(base, 256)
    if third > 255:
        raise UsageError(f"shaped links number at most 16384 learners, got link {i}")
    return f"{SUBNET}.{third}.{fourth + 1}", f"{SUBNET}.{third}.{fourth + 2}"


class ShapedLinks:
    """A hub namespace and one namespace per learner, joined by shaped veth pairs.

    Parameters
    ----------
    rates
        One ``(up_bps, down_bps)`` per learner [bit/s], each in [8 kbit/s, 1 Gbit/s].
    tag
        Distinguishes several sets of links made by one process (names are
        ``melopt-<pid>-<tag>-hub`` and ``melopt-<pid>-<tag>-<i>``).
    grace
        Seconds between SIGTERM and SIGKILL for processes left inside at the end.
    """

    def __init__(self, rates: Sequence[tuple[float, float]], *, tag: str = "0",
                 grace: float = 3.0) -> None:
        if not rates:
            raise UsageError("shaped links need at least one learner")
        for i, pair in enumerate(rates):
            for what, r in zip(("upload", "download"), pair, strict=True):
                if not MIN_RATE_BPS <= float(r) <= MAX_RATE_BPS:
                    raise UsageError(f"learner {i}'s {what} rate must be in "
                                     f"[{MIN_RATE_BPS:g}, {MAX_RATE_BPS:g}] bit/s, got {r:g}")
        self.rates = [(float(u), float(d)) for u, d in rates]
        self.grace = grace
        stem = f"{PREFIX}{os.getpid()}-{tag}"
        self.hub = f"{stem}-hub"
        self.links: list[Link] = []
        for i, (up, down) in enumerate(self.rates):
            hub_addr, addr = _addresses(i)
            self.links.append(Link(f"{stem}-{i}", addr, hub_addr, up, down))
        self._made: list[str] = []

    @staticmethod
    def prefix(namespace: str) -> list[str]:
        """The command prefix that runs a program inside ``namespace``."""
        return ["ip", "netns", "exec", namespace]

    def __enter__(self) -> ShapedLinks:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        """Make the namespaces and links; on any failure remove what was made and re-raise."""
        require()
        try:
            self._make(self.hub)
            for i, link in enumerate(self.links):
                self._make(link.namespace)
                self._join(i, link)
        except BaseException:
            self.close()
            raise

    def _make(self, namespace: str) -> None:
        if namespace in namespaces():
            raise UsageError(f"network namespace {namespace} already exists")
        _ip("netns", "add", namespace)
        self._made.append(namespace)
        _ip("-n", namespace, "link", "set", "lo", "up")

    def _join(self, i: int, link: Link) -> None:
        hub_dev, node_dev = f"mh{i}", f"mn{i}"  # interface names are at most 15 characters
        _ip("link", "add", hub_dev, "netns", self.hub, "mtu", "1500", "type", "veth",
            "peer", "name", node_dev, "netns", link.namespace, "mtu", "1500")
        _ip("-n", self.hub, "addr", "add", f"{link.hub_address}/30", "dev", hub_dev)
        _ip("-n", link.namespace, "addr", "add", f"{link.address}/30", "dev", node_dev)
        _ip("-n", self.hub, "link", "set", hub_dev, "up")
        _ip("-n", link.namespace, "link", "set", node_dev, "up")
        # egress shaping: the hub's end sends the learner's downloads, the learner's end its uploads
        for ns, dev, rate in ((self.hub, hub_dev, link.down_bps),
                              (link.namespace, node_dev, link.up_bps)):
            _tc(ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{int(rate)}bit",
                "burst", str(burst_bytes(rate)), "latency", f"{LATENCY_MS}ms")

    def close(self) -> None:
        """End every process inside the namespaces and delete them. Idempotent; a Ctrl-C
        during the clean-up does not cut it short (it is finished, then raised again)."""
        interrupted = False
        while self._made:
            name = self._made[-1]
            try:
                remove(name, self.grace)
            except KeyboardInterrupt:
                interrupted = True
                continue
            self._made.pop()
        if interrupted:
            raise KeyboardInterrupt
