"""The public IDX data sets fetched from their canonical sources, checked and cached.

:func:`fetch_dataset` downloads the four gzip-compressed IDX files of a known data set
(:data:`SOURCES`) into its cache folder (:func:`mel_opt.training.data.cache_dir`), where
:func:`mel_opt.training.data.load_dataset` looks first.

- Each file is trusted by its SHA-256, not by the host it came from: mirrors are tried in
  order, and a file is put in place (under its own name) only after its digest matches.
  A file already in the cache is not fetched again (files are named there only after the
  check, so one found under its name has passed it).
- A transfer in progress is written to ``<file>.part`` beside the target. A fetch stopped by
  its deadline, a broken connection or Ctrl-C keeps it, and the next fetch continues it with
  an HTTP ``Range`` request (a server that ignores Range sends the whole file: start over).
- One deadline bounds the whole fetch, every file and mirror included, however slowly a
  server sends, and redirects are followed to http(s) only
  (:mod:`mel_opt.subset_benchmarking.transfer`, shared with ``melopt benchmark --download``).
- :envvar:`MELOPT_DATA_MIRROR` (comma-separated base URLs) replaces the mirrors of every data
  set: an institution's own copy; the digests still decide.

Failures are :class:`FetchError` (exit code 1): a bad digest is :class:`ChecksumError` (the
partial file is deleted; the message names the file, the expected and the got digest), the
deadline :class:`FetchTimeout` (the partial file is kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import math
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mel_opt.errors import UsageError, install_hint
from mel_opt.io.atomic import atomic_path
from mel_opt.subset_benchmarking.transfer import (
    Deadline,
    DeadlineExpired,
    DownloadError,
    check_url,
    get,
)
from mel_opt.training.data import DEBIAN_PACKAGES, KNOWN_IDX_DIRS, cache_dir, dataset_dir

__all__ = [
    "MIRROR_ENV",
    "SOURCES",
    "ChecksumError",
    "FetchError",
    "FetchTimeout",
    "Fetched",
    "RemoteFile",
    "Source",
    "fetch_dataset",
    "mirrors_of",
]

#: The environment variable whose comma-separated base URLs replace every data set's mirrors.
MIRROR_ENV = "MELOPT_DATA_MIRROR"
#: Default limit of a whole fetch (every file, every mirror) [s].
DEFAULT_TIMEOUT = 1800.0

#: Progress: (file name, bytes in hand, bytes expected), after every block received.
Progress = Callable[[str, int, int], None]


class FetchError(DownloadError):
    """A data set could not be fetched (every mirror failed, or the deadline passed)."""

    exit_code = 1


class ChecksumError(FetchError):
    """A file came with another SHA-256 than the source table's (the partial file is gone)."""


class FetchTimeout(FetchError):
    """The fetch did not finish within its deadline (the partial file is kept to resume)."""


@dataclass(frozen=True)
class RemoteFile:
    """One file of a data set as its source publishes it.

    Attributes
    ----------
    name : str
        The file name, the same at every mirror and in the cache.
    size : int
        Its length [bytes].
    sha256 : str
        Its SHA-256, 64 lower-case hex digits.
    """

    name: str
    size: int
    sha256: str


@dataclass(frozen=True)
class Source:
    """Where a data set comes from.

    Attributes
    ----------
    name : str
        The data set's name (``--dataset`` and ``melopt data fetch``).
    title : str
        What it is, in words.
    licence : str
        Its authors and licence.
    mirrors : tuple of str
        Base URLs (ending in ``/``) tried in order; a file's URL is base + its name.
    files : tuple of RemoteFile
        The four IDX files.
    """

    name: str
    title: str
    licence: str
    mirrors: tuple[str, ...]
    files: tuple[RemoteFile, ...]


# Sizes and digests as the sources publish them; the digest, not the host, is what is trusted.
SOURCES: dict[str, Source] = {
    "fashion-mnist": Source(
        "fashion-mnist", "Fashion-MNIST: 70,000 28 x 28 grey images of clothes, 10 classes",
        "Zalando Research, MIT licence",
        ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
        (RemoteFile("train-images-idx3-ubyte.gz", 26421880,
                    "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84"),
         RemoteFile("train-labels-idx1-ubyte.gz", 29515,
                    "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845"),
         RemoteFile("t10k-images-idx3-ubyte.gz", 4422102,
                    "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073"),
         RemoteFile("t10k-labels-idx1-ubyte.gz", 5148,
                    "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"))),
    # LeCun's own site (http://yann.lecun.com/exdb/mnist/) often refuses downloads; these
    # mirrors serve the same files
    "mnist": Source(
        "mnist", "MNIST: 70,000 28 x 28 grey images of handwritten digits, 10 classes",
        "Y. LeCun, C. Cortes, C. Burges; CC BY-SA 3.0",
        ("https://storage.googleapis.com/cvdf-datasets/mnist/",
         "https://ossci-datasets.s3.amazonaws.com/mnist/"),
        (RemoteFile("train-images-idx3-ubyte.gz", 9912422,
                    "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"),
         RemoteFile("train-labels-idx1-ubyte.gz", 28881,
                    "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"),
         RemoteFile("t10k-images-idx3-ubyte.gz", 1648877,
                    "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"),
         RemoteFile("t10k-labels-idx1-ubyte.gz", 4542,
                    "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"))),
}


@dataclass(frozen=True)
class Fetched:
    """What :func:`fetch_dataset` did.

    Attributes
    ----------
    name : str
    directory : Path
        The cache folder now holding the four files.
    files : tuple of (str, str)
        Each file's name and how it came: ``"cached"`` (already there, not fetched),
        ``"fetched from URL"`` or ``"resumed from URL"``.
    """

    name: str
    directory: Path
    files: tuple[tuple[str, str], ...]


def mirrors_of(source: Source) -> tuple[str, ...]:
    """The base URLs to try for ``source``: :envvar:`MELOPT_DATA_MIRROR` if set, else its own."""
    own = [u.strip() for u in os.environ.get(MIRROR_ENV, "").split(",") if u.strip()]
    for base in own:
        check_url(base, MIRROR_ENV)
    bases = tuple(own) or source.mirrors
    return tuple(b if b.endswith("/") else b + "/" for b in bases)


def sha256_of(path: Path) -> str:
    """The SHA-256 of the file ``path``, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def fetch_dataset(name: str, *, timeout: float = DEFAULT_TIMEOUT,
                  on_progress: Progress | None = None,
                  sources: Mapping[str, Source] | None = None) -> Fetched:
    """Fetch the four files of the data set ``name`` into its cache folder.

    Parameters
    ----------
    name : str
        A key of ``sources`` (``fashion-mnist`` or ``mnist``).
    timeout : float
        Limit of the whole fetch: every file, mirror, connection, redirect and byte [s].
    on_progress : callable, optional
        Called with (file name, bytes in hand, bytes expected) when a file starts and after
        every block received.
    sources : mapping of str to Source, optional
        The source table (default :data:`SOURCES`).

    Raises
    ------
    UsageError
        ``name`` is not in the source table; ``timeout`` is not a finite number > 0.
    ChecksumError
        A file's SHA-256 differs from the table's at every mirror (its partial file deleted).
    FetchTimeout
        The deadline passed (the partial file is kept; fetching again resumes it).
    FetchError
        Every mirror failed for a file (each one's reason in the message).
    KeyboardInterrupt
        Passed on; the partial file is kept.
    """
    table = SOURCES if sources is None else sources
    if name not in table:
        raise UsageError(f"no source for data set {name!r}; known: {', '.join(sorted(table))}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(f"the timeout must be a number > 0, got {timeout!r}")
    source = table[name]
    mirrors = mirrors_of(source)  # a bad MELOPT_DATA_MIRROR is refused before any work
    directory = cache_dir(name)
    directory.mkdir(parents=True, exist_ok=True)
    report: Progress = on_progress or (lambda _name, _done, _total: None)
    deadline = Deadline(timeout)
    done = []
    try:
        for remote in source.files:
            target = directory / remote.name
            if target.is_file() and sha256_of(target) == remote.sha256:
                report(remote.name, remote.size, remote.size)
                done.append((remote.name, "cached"))
                continue
            how = _from_mirrors(remote, target, mirrors, deadline, report)
            done.append((remote.name, how))
    finally:
        deadline.cancel()
    return Fetched(name, directory, tuple(done))


def _from_mirrors(remote: RemoteFile, target: Path, mirrors: tuple[str, ...],
                  deadline: Deadline, report: Progress) -> str:
    """Fetch ``remote`` to ``target`` from the first mirror that gives it with its digest;
    how it came (``"fetched from URL"``, ``"resumed from URL"``)."""
    failures: list[FetchError | DownloadError] = []
    for base in mirrors:
        url = base + remote.name
        try:
            return _one(remote, target, url, deadline, report)
        except DeadlineExpired:
            part = _part(target)
            held = part.stat().st_size if part.is_file() else 0
            raise FetchTimeout(
                f"the fetch did not finish within --timeout {deadline.seconds:g} s (stopped "
                f"during {url}; {held} of {remote.size} bytes kept in {part}: fetch again to "
                f"resume)") from None
        except DownloadError as exc:  # this mirror failed: the next may serve it
            failures.append(exc)
    if failures and all(isinstance(f, ChecksumError) for f in failures):
        raise failures[-1] if len(failures) == 1 else ChecksumError(
            "; ".join(str(f) for f in failures))
    part = _part(target)
    held = part.stat().st_size if part.is_file() else 0
    kept = f" ({held} bytes kept in {part}: fetch again to resume)" if held else ""
    raise FetchError(f"could not fetch {remote.name}: " + "; ".join(str(f) for f in failures)
                     + kept)


def _part(target: Path) -> Path:
    return target.with_name(target.name + ".part")


_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")


def _one(remote: RemoteFile, target: Path, url: str, deadline: Deadline,
         report: Progress) -> str:
    """Fetch (or resume) ``url`` into ``target``'s partial file, check it and put it in place."""
    part = _part(target)
    held = part.stat().st_size if part.is_file() else 0
    if held > remote.size:  # longer than the file can be: not a prefix of it
        part.unlink()
        held = 0
    how = "fetched"
    if held < remote.size:
        headers = {"Range": f"bytes={held}-"} if held else {}
        with get(url, deadline, headers=headers) as reply:
            if held and reply.status == 206:
                m = _CONTENT_RANGE.match(reply.headers.get("Content-Range", ""))
                if m is None or int(m.group(1)) != held:
                    raise DownloadError(f"download of {url} failed: asked for bytes {held}- "
                                        f"but got Content-Range "
                                        f"{reply.headers.get('Content-Range')!r}")
                how = "resumed"
            else:  # a whole file (a server that ignores Range answers 200): start over
                held = 0
            report(remote.name, held, remote.size)
            held = _write(reply.blocks(), part, held, remote, url, report)
    if held < remote.size:
        raise DownloadError(f"download of {url} failed: the transfer ended after {held} of "
                            f"{remote.size} bytes")
    _install(part, target, remote, url)
    return f"{how} from {url}"


def _write(blocks: Iterable[bytes], part: Path, held: int, remote: RemoteFile, url: str,
           report: Progress) -> int:
    """Append ``blocks`` to ``part`` (from scratch when ``held`` is 0); the bytes it holds.

    The partial file is written in place, not through the atomic writer: it must survive an
    interrupted transfer so that the next fetch can continue it; the finished file is put in
    place atomically by :func:`_install`.
    """
    with open(part, "ab" if held else "wb") as fh:
        for block in blocks:
            if held + len(block) > remote.size:
                fh.close()
                part.unlink()
                raise ChecksumError(f"{remote.name} from {url}: the server sent more than its "
                                    f"{remote.size} bytes; the partial file was deleted")
            fh.write(block)
            held += len(block)
            report(remote.name, held, remote.size)
    return held


def _install(part: Path, target: Path, remote: RemoteFile, url: str) -> None:
    """Check ``part``'s digest; if it matches, put it in place as ``target``, else delete it."""
    got = sha256_of(part)
    if got != remote.sha256:
        with contextlib.suppress(OSError):
            part.unlink()
        raise ChecksumError(f"{remote.name} from {url}: SHA-256 mismatch: expected "
                            f"{remote.sha256}, got {got}; the partial file was deleted")
    # copied through the atomic writer (every file mel_opt writes goes through it), so the
    # target appears whole or not at all; the partial file goes once the copy is in place
    with atomic_path(target, keep_suffix=False) as tmp:
        shutil.copyfile(part, tmp)
    part.unlink()


@dataclass(frozen=True)
class Known:
    """Where a known data set is found and how to get it.

    Attributes
    ----------
    name : str
    title : str
        What it is.
    licence : str
    where : Path or None
        The folder it is read from (None: not found; digits ships inside scikit-learn).
    found : str
        ``"cache"``, ``"debian"``, ``"scikit-learn"`` or ``"nowhere"``.
    how : str
        How to get it (empty when found).
    """

    name: str
    title: str
    licence: str
    where: Path | None
    found: str
    how: str


def known_datasets(sources: Mapping[str, Source] | None = None) -> list[Known]:
    """Every known data set: digits, then each one of the source table, with where it is."""
    table = SOURCES if sources is None else sources
    sklearn = importlib.util.find_spec("sklearn") is not None
    rows = [Known("digits", "scikit-learn's digits: 1,797 8 x 8 grey images, 10 classes",
                  "scikit-learn, BSD-3-Clause (from the UCI optical digits)", None,
                  "scikit-learn" if sklearn else "nowhere",
                  "" if sklearn else install_hint("train"))]
    for name, source in table.items():
        where = dataset_dir(name) if name in KNOWN_IDX_DIRS else None
        if where is None:
            debian = DEBIAN_PACKAGES.get(name)
            how = f"melopt data fetch {name}" + (f" (or apt-get install {debian})"
                                                if debian else "")
            rows.append(Known(name, source.title, source.licence, None, "nowhere", how))
            continue
        found = "cache" if where == cache_dir(name) else "debian"
        rows.append(Known(name, source.title, source.licence, where, found, ""))
    return rows
