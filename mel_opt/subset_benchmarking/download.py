"""The timed download of subset benchmarking (Algorithm 10, lines 9-12: b_k = n / T_d).

The learner fetches n shards over HTTP(S) and divides the bytes received by the wall time.
A URL containing ``{i}`` is expanded to n URLs (``{i}`` = 0 .. n-1), one per shard; a plain URL
is fetched once. The transfer itself (one overall deadline, http(s)-only redirects) is
:mod:`mel_opt.subset_benchmarking.transfer`, shared with the data-set fetch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from mel_opt.errors import MelOptError, UsageError
from mel_opt.subset_benchmarking.transfer import (
    Deadline,
    DeadlineExpired,
    DownloadError,
    check_url,
    get,
)


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
    check_url(url, "--download")
    if "{i}" not in url:
        return [url]
    return [url.replace("{i}", str(i)) for i in range(n)]


def _fetch(url: str, timeout: float, chunk_bytes: int, limit: float | None = None) -> int:
    """Bytes received from ``url`` within ``timeout`` seconds (else BenchmarkError naming the
    whole download's ``limit``)."""
    limit = timeout if limit is None else limit
    deadline = Deadline(timeout)
    total = 0
    try:
        with get(url, deadline) as reply:
            for block in reply.blocks(chunk_bytes):
                total += len(block)
    except DownloadError as exc:
        # a socket timeout set to the time left can fire a moment before the deadline's own
        # timer: past the deadline, either way it is the deadline that stopped the download
        if isinstance(exc, DeadlineExpired) or deadline.expired \
                or time.monotonic() >= deadline.end - 0.05:
            raise BenchmarkError(f"the download did not finish within --timeout {limit:g} s "
                                 f"(stopped during {url}, {total} bytes of it received)"
                                 ) from None
        raise BenchmarkError(str(exc)) from None
    finally:
        deadline.cancel()
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
