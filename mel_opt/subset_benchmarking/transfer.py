"""HTTP(S) transfers under one overall deadline, redirects followed to http(s) only.

The generic part of a download, shared by the timed download of subset benchmarking
(:mod:`mel_opt.subset_benchmarking.download`) and the data-set fetch
(:mod:`mel_opt.training.fetch`):

- :class:`Deadline`: one wall-clock limit across connect, redirects, headers and body of every
  connection opened under it. ``urllib``'s ``timeout`` is per socket operation, so a server
  sending a few bytes at a time never hits it; here a timer shuts every tracked socket at the
  deadline, which ends a blocked read however slowly the server sends.
- :func:`get`: one GET (optional extra headers, such as ``Range``) under a deadline; its
  :class:`HttpReply` gives the status and headers, then the body in small blocks.
- Redirects are followed only to another ``http://`` or ``https://`` URL; only the http and
  https handlers are installed (no ftp, file or data URLs); loopback hosts bypass any proxy.

Failures are :class:`DownloadError` (exit code 1) with one line naming the URL;
:class:`DeadlineExpired` says the deadline passed, and the caller words what was stopped.
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
from collections.abc import Iterator, Mapping
from email.message import Message
from typing import Any

from mel_opt.errors import MelOptError, UsageError

__all__ = ["Deadline", "DeadlineExpired", "DownloadError", "HttpReply", "get"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_SCHEMES = ("http", "https")


def check_url(url: str, where: str) -> None:
    """Refuse ``url`` unless it is a well-formed http:// or https:// URL (a port that is no
    number is caught here, not mid-download); ``where`` names the setting in the error."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError as exc:
        raise UsageError(f"{where}: {url!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{where}: {url!r} is not an http:// or https:// URL")


class DownloadError(MelOptError):
    """A transfer failed: HTTP error, refused connection, redirect to another scheme."""

    exit_code = 1


class DeadlineExpired(DownloadError):
    """The overall deadline of a transfer passed (the caller says which limit and what)."""


class Deadline:
    """The overall time limit of one or more transfers.

    At ``seconds`` after it is made, every socket a transfer under it opened is shut down;
    a socket connected after that is shut at once. Call :meth:`cancel` when done (the timer
    is a daemon thread, so a forgotten one never keeps the process alive).

    Parameters
    ----------
    seconds : float
        The limit from now [s].
    """

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
        """Seconds left, at least 1 ms (a socket timeout of 0 would mean non-blocking) [s]."""
        return max(self.end - time.monotonic(), 1e-3)

    def track(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (at once if it has passed)."""
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
        """Stop the timer (the transfers are over)."""
        self._timer.cancel()


class _HttpOnlyRedirect(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to another http(s) URL.

    urllib's own handler also follows ``ftp://``, which would send the server's choice of
    request (an anonymous FTP login) from a command that was only asked to fetch http(s).
    """

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:
        scheme = urllib.parse.urlsplit(newurl).scheme
        if scheme not in _SCHEMES:
            raise DownloadError(f"download of {req.full_url} refused: the server redirected "
                                f"to {newurl!r}; only http:// and https:// are followed")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _tracked(base: type[http.client.HTTPConnection], deadline: Deadline) -> Any:
    """``base`` whose socket is handed to ``deadline`` as soon as it is connected."""

    class Connection(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            self.timeout = deadline.remaining()  # connect and each read: the time left
            super().connect()
            deadline.track(self.sock)

    return Connection


def _opener(url: str, deadline: Deadline) -> urllib.request.OpenerDirector:
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


def _failure(url: str, exc: BaseException, deadline: Deadline) -> DownloadError:
    """The error for ``exc`` raised while talking to ``url``."""
    if deadline.expired:
        return DeadlineExpired(f"the deadline of {deadline.seconds:g} s passed during {url}")
    if isinstance(exc, urllib.error.HTTPError):
        return DownloadError(f"download of {url} failed: HTTP {exc.code} {exc.reason}")
    reason = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
    return DownloadError(f"download of {url} failed: {reason}")


_NETWORK_ERRORS = (urllib.error.URLError, OSError, http.client.HTTPException)


class HttpReply:
    """The answer to :func:`get`: status and headers, then the body by :meth:`blocks`.

    Attributes
    ----------
    url : str
        The URL asked for.
    final_url : str
        The URL that answered (after redirects).
    status : int
        HTTP status code (2xx; other codes are a :class:`DownloadError` of :func:`get`).
    headers : email.message.Message
        The response headers.
    """

    def __init__(self, url: str, response: Any, deadline: Deadline) -> None:
        self.url = url
        self.final_url: str = response.geturl()
        self.status: int = response.status
        self.headers: Message = response.headers
        self._response = response
        self._deadline = deadline

    def blocks(self, chunk_bytes: int = 1 << 16) -> Iterator[bytes]:
        """The body, one receive at a time (at most ``chunk_bytes`` each).

        ``read1`` returns what one receive brings, so the deadline is checked between small
        reads instead of after a full chunk. Only the network reads are mapped to
        :class:`DownloadError` / :class:`DeadlineExpired`; what the caller does with a block
        raises its own errors.
        """
        while True:
            try:
                block = self._response.read1(chunk_bytes)
            except _NETWORK_ERRORS as exc:
                raise _failure(self.url, exc, self._deadline) from None
            if self._deadline.expired:
                raise _failure(self.url, TimeoutError(), self._deadline)
            if not block:
                return
            yield block

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._response.close()

    def __enter__(self) -> HttpReply:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def get(url: str, deadline: Deadline, *, headers: Mapping[str, str] | None = None) -> HttpReply:
    """Send one GET for ``url`` under ``deadline``; the reply once its headers are read.

    Parameters
    ----------
    url : str
        An http(s) URL; a redirect is followed only to another http(s) URL.
    deadline : Deadline
        Bounds the connection, redirects and headers here, and the body read from the reply.
    headers : mapping of str to str, optional
        Extra request headers (``Range: bytes=N-`` to resume).

    Raises
    ------
    DeadlineExpired
        The deadline passed before the headers arrived.
    DownloadError
        An HTTP status other than 2xx, a refused or broken connection, a redirect to another
        scheme.
    """
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        response = _opener(url, deadline).open(request, timeout=deadline.remaining())
    except _NETWORK_ERRORS as exc:
        raise _failure(url, exc, deadline) from None
    return HttpReply(url, response, deadline)
