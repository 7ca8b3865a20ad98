"""The timed download of subset benchmarking (Algorithm 10, lines 9-12: b_k = n / T_d).

The learner fetches n shards over HTTP(S) and divides the bytes received by the wall time.
A URL containing ``{i}`` is expanded to n URLs (``{i}`` = 0 .. n-1), one per shard; a plain URL
is fetched once.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mel_opt.errors import MelOptError, UsageError


class BenchmarkError(MelOptError):
    """A measurement could not be made (a download failed or timed out)."""

    exit_code = 1


@dataclass(frozen=True)
class DownloadBenchmark:
    """A timed transfer.

    Attributes
    ----------
    transfers : int
        Number of URLs fetched.
    bytes : int
        Bytes received.
    seconds : float
        Wall time of all transfers, connection set-up included [s].
    """

    transfers: int
    bytes: int
    seconds: float

    @property
    def bandwidth(self) -> float:
        """b_k [bytes/s]."""
        return self.bytes / self.seconds

    def shards_per_second(self, shard_bytes: float) -> float:
        """b_k in shards/s for shards of ``shard_bytes`` bytes."""
        return self.bandwidth / shard_bytes


def expand_urls(url: str, n: int) -> list[str]:
    """``url`` with ``{i}`` replaced by 0 .. n-1, or ``[url]`` if it has no ``{i}``."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - a port that is no number raises here, not mid-download
    except ValueError as exc:
        raise UsageError(f"--download: {url!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--download needs an http:// or https:// URL, got {url!r}")
    if "{i}" not in url:
        return [url]
    return [url.replace("{i}", str(i)) for i in range(n)]


_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_SCHEMES = ("http", "https")


class _HttpOnlyRedirect(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to another http(s) URL.

    urllib's own handler also follows ``ftp://``, which would send the server's choice of
    request (an anonymous FTP login) from a command that was only asked to fetch http(s).
    """

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:
        scheme = urllib.parse.urlsplit(newurl).scheme
        if scheme not in _SCHEMES:
            raise BenchmarkError(f"download of {req.full_url} refused: the server redirected "
                                 f"to {newurl!r}; only http:// and https:// are followed")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _Deadline:
    """The overall time limit of one transfer: at ``seconds`` after start, every socket the
    transfer opened is shut down, which ends a blocked read however slowly the server sends
    (a per-read timeout alone never fires on a server sending a few bytes at a time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return max(self.end - time.monotonic(), 1e-3)

    def track(self, sock: socket.socket) -> None:
        with self._lock:
            if self.expired:
                sock.shutdown(socket.SHUT_RDWR)
            self._socks.append(sock)

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._socks:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def _tracked(base: type[http.client.HTTPConnection], deadline: _Deadline) -> Any:
    """``base`` whose socket is handed to ``deadline`` as soon as it is connected."""

    class Connection(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            self.timeout = deadline.remaining()  # connect and each read: the time left
            super().connect()
            deadline.track(self.sock)

    return Connection


def _opener(url: str, deadline: _Deadline) -> urllib.request.OpenerDirector:
    """An opener for http(s) only (no ftp/file/data handlers), redirects re-checked, every
    connection under ``deadline``; loopback hosts bypass any proxy (a proxy cannot reach
    them)."""

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(_tracked(http.client.HTTPConnection, deadline), req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(_tracked(http.client.HTTPSConnection, deadline), req,
                                context=ssl.create_default_context())

    opener = urllib.request.OpenerDirector()
    proxies: dict[str, str] | None = (
        {} if urllib.parse.urlsplit(url).hostname in _LOOPBACK else None)
    for handler in (urllib.request.ProxyHandler(proxies), urllib.request.UnknownHandler(),
                    Http(), Https(), urllib.request.HTTPDefaultErrorHandler(),
                    _HttpOnlyRedirect(), urllib.request.HTTPErrorProcessor()):
        opener.add_handler(handler)
    return opener


def _fetch(url: str, timeout: float, chunk_bytes: int, limit: float | None = None) -> int:
    """Bytes received from ``url`` within ``timeout`` seconds (else BenchmarkError naming the
    whole download's ``limit``)."""
    limit = timeout if limit is None else limit
    deadline = _Deadline(timeout)
    total = 0
    try:
        with _opener(url, deadline).open(url, timeout=timeout) as resp:
            while True:
                # read1: return what one receive brings, so the deadline is checked between
                # small reads instead of after a full chunk
                block = resp.read1(chunk_bytes)
                if deadline.expired:
                    break
                if not block:
                    break
                total += len(block)
    except urllib.error.HTTPError as exc:
        raise BenchmarkError(f"download of {url} failed: HTTP {exc.code} {exc.reason}") \
            from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        if not deadline.expired:
            reason = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
            raise BenchmarkError(f"download of {url} failed: {reason}") from None
    finally:
        deadline.cancel()
    if deadline.expired:
        raise BenchmarkError(f"the download did not finish within --timeout {limit:g} s "
                             f"(stopped during {url}, {total} bytes of it received)")
    return total


def time_download(urls: Sequence[str], *, timeout: float = 30.0,
                  chunk_bytes: int = 1 << 16) -> DownloadBenchmark:
    """Fetch every URL in turn and time the whole transfer.

    Parameters
    ----------
    urls : sequence of str
        http(s) URLs; a redirect is followed only to another http(s) URL.
    timeout : float
        Limit of the whole download, every URL's connection set-up and bytes included [s].
    chunk_bytes : int
        Largest read.

    Raises
    ------
    BenchmarkError
        A transfer failed (HTTP error, refused connection, redirect to another scheme), the
        download did not finish within ``timeout``, or nothing was received.
    """
    if not urls:
        raise UsageError("no URL to download")
    total = 0
    start = time.perf_counter()
    end = time.monotonic() + timeout
    for url in urls:
        left = end - time.monotonic()
        if left <= 0:
            raise BenchmarkError(f"the download did not finish within --timeout {timeout:g} s "
                                 f"(stopped before {url})")
        total += _fetch(url, left, chunk_bytes, timeout)
    seconds = time.perf_counter() - start
    if total == 0:
        raise BenchmarkError("the download returned no data; cannot estimate the bandwidth")
    return DownloadBenchmark(len(urls), total, seconds)
