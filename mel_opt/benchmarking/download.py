"""The timed download of subset benchmarking (Algorithm 10, lines 9-12: b_k = n / T_d).

The learner fetches n shards over HTTP(S) and divides the bytes received by the wall time.
A URL containing ``{i}`` is expanded to n URLs (``{i}`` = 0 .. n-1), one per shard; a plain URL
is fetched once.
"""

from __future__ import annotations

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
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--download needs an http:// or https:// URL, got {url!r}")
    if "{i}" not in url:
        return [url]
    return [url.replace("{i}", str(i)) for i in range(n)]


_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _open(url: str, timeout: float) -> Any:
    """urlopen, never through a proxy for loopback hosts (a proxy cannot reach them)."""
    if urllib.parse.urlsplit(url).hostname in _LOOPBACK:
        return _DIRECT.open(url, timeout=timeout)
    return urllib.request.urlopen(url, timeout=timeout)  # noqa: S310 (http(s) only)


def time_download(urls: Sequence[str], *, timeout: float = 30.0,
                  chunk_bytes: int = 1 << 16) -> DownloadBenchmark:
    """Fetch every URL in turn and time the whole transfer.

    Parameters
    ----------
    urls : sequence of str
        http(s) URLs.
    timeout : float
        Limit per connection and per read [s].
    chunk_bytes : int
        Read size.

    Raises
    ------
    BenchmarkError
        A transfer failed (HTTP error, refused connection, timeout) or nothing was received.
    """
    if not urls:
        raise UsageError("no URL to download")
    total = 0
    start = time.perf_counter()
    for url in urls:
        try:
            with _open(url, timeout) as resp:
                while True:
                    block = resp.read(chunk_bytes)
                    if not block:
                        break
                    total += len(block)
        except urllib.error.HTTPError as exc:
            raise BenchmarkError(f"download of {url} failed: HTTP {exc.code} {exc.reason}") \
                from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BenchmarkError(f"download of {url} failed: {reason}") from None
    seconds = time.perf_counter() - start
    if total == 0:
        raise BenchmarkError("the download returned no data; cannot estimate the bandwidth")
    return DownloadBenchmark(len(urls), total, seconds)
