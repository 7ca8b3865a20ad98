"""An advisory lock on an output folder, so two batches or sweeps never write into one folder.

Two runs writing the same folder interleave their result files and each rewrites the summary
from its own rows, so the summary disagrees with the files. :func:`output_lock` takes an
exclusive ``flock`` on ``DIR/.melopt.lock`` without waiting; a second run gets a
:class:`~mel_opt.errors.UsageError` naming the holder's pid. The kernel drops a ``flock`` when
its holder exits, however it exits (even SIGKILL), so a lock can never go stale: a leftover
lock file (after a kill) is harmless. A run that ends normally removes the file while it still
holds the lock; a run that locked the file just before it was removed sees that its file is no
longer the one at the path and takes the lock again on the new file. The lock is re-entrant
within one process (a sweep holds it and runs a batch into the same folder).

The lock file is the one file mel_opt writes in place rather than through the atomic writer:
its content (the holder's pid and command) is only a hint for the error message, while the
lock itself is the ``flock`` on the open file, which a rename would break.

On systems without ``fcntl`` (Windows) no lock is taken.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from mel_opt.errors import UsageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".melopt.lock"

# folders this process holds, by resolved path -> depth (re-entrancy)
_held: dict[Path, int] = {}


def _holder(fd: int) -> str:
    """The pid and command the current holder wrote, as text for the error message."""
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
    except OSError:
        return "unknown pid"
    if len(text) >= 2:
        return f"{text[1]}, pid {text[0]}"
    return f"pid {text[0]}" if text else "unknown pid"


@contextlib.contextmanager
def output_lock(folder: str | os.PathLike[str], command: str) -> Iterator[Path]:
    """Hold the lock of ``folder`` (created if missing) for the duration of the block.

    Parameters
    ----------
    folder
        The output folder.
    command
        What holds it (``batch``, ``sweep``), named in the message a second run gets.

    Raises
    ------
    UsageError
        Another process holds the folder: "DIR is in use by another melopt batch (pid N)".
    """
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    key = path.resolve()
    if key in _held or fcntl is None:
        _held[key] = _held.get(key, 0) + 1
        try:
            yield path
        finally:
            _held[key] -= 1
            if not _held[key]:
                del _held[key]
        return
    lock_file = path / LOCK_NAME
    fd = _locked(lock_file, path)
    try:
        os.ftruncate(fd, 0)
        # who holds it, for a second run's message; the flock is the lock, so a full disk
        # (or quota) leaves the holder unnamed rather than failing here
        with contextlib.suppress(OSError):
            os.pwrite(fd, f"{os.getpid()} {command}\n".encode(), 0)
        _held[key] = 1
        try:
            yield path
        finally:
            del _held[key]
            with contextlib.suppress(OSError):
                os.unlink(lock_file)  # still holding the lock: nobody else holds this file
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def _locked(lock_file: Path, folder: Path) -> int:
    """A descriptor of ``lock_file`` holding its exclusive lock (UsageError when another
    process holds it). If the file was removed or replaced between opening and locking (its
    holder ended and removed it), the lock is taken again on the file now at the path."""
    assert fcntl is not None
    while True:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _holder(fd)
            os.close(fd)
            kind, _, pid = who.partition(", ")
            detail = f"{kind} ({pid})" if pid else f"run ({who})"
            raise UsageError(f"{folder} is in use by another melopt {detail}; wait for it to "
                             f"finish or choose another output folder") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock_file).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # we locked a file that is gone: try the one at the path now
