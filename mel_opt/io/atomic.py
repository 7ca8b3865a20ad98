"""The one atomic file writer of mel_opt: a temporary file beside the target, then a rename.

A reader (or a resumed batch) sees either the old file or the complete new one, never a
half-written file, even if the process is killed mid-write: the rename of a file within one
folder is atomic on POSIX and on Windows (``os.replace``). Every file mel_opt writes goes
through :func:`atomic_write` (bytes or text in memory) or :func:`atomic_path` (a writer that
wants a file name, such as matplotlib's ``savefig`` or Pyomo's ``model.write``).

Written files get the mode of an ordinary ``open(path, "w")``: 0666 less the process umask
(0644 under umask 022), not the 0600 of :func:`tempfile.mkstemp`.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

# O_BINARY only exists (and matters) on Windows; O_EXCL never lets two writers share a name
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _reserve_temp(target: Path, suffix: str) -> Path:
    """Create an empty, unique, hidden temporary file in the target's folder.

    ``os.open`` with mode 0o666 lets the umask decide the permissions, as ``open()`` does.
    """
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp{suffix}")
        try:
            fd = os.open(tmp, _CREATE, 0o666)
        except FileExistsError:  # 32 random bits collided: draw again
            continue
        os.close(fd)
        return tmp


_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{8}\.tmp")


def target_of_temp(path: str | os.PathLike[str]) -> Path | None:
    """The file a temporary name of :func:`_reserve_temp` stands for (None for other names).

    Lets an error message about a failed write name the file the user asked for.
    """
    p = Path(path)
    m = _TEMP_NAME.match(p.name)
    return p.with_name(m.group("name")) if m else None


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (the rename that put the new file in place) to disk, where
    the platform allows it (POSIX; Windows cannot open a folder for this and needs nothing)."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # some file systems refuse fsync on a folder
            os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, durable: bool = True,
                keep_suffix: bool = True) -> Iterator[Path]:
    """Yield a temporary file name beside ``path``; rename it onto ``path`` if the block succeeds.

    The temporary file exists (empty) when the block starts, so its name is reserved; the
    writer overwrites it. On any exception (including KeyboardInterrupt) the temporary file is
    removed and the exception propagates; an existing file at ``path`` is left as it was.
    The parent folder is created if missing.

    Parameters
    ----------
    path
        The file to (re)place.
    durable
        Flush the written data to disk before the rename, and the folder after it, so the new
        file also survives a power cut (a few milliseconds per file).
    keep_suffix
        End the temporary name with the target's suffix (``.png``, ``.nl``), for writers that
        choose their format from the file name. With False it ends in ``.tmp``, so a file left
        by a killed process is never taken for a finished one (e.g. by a ``*.json`` scan).
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _reserve_temp(target, target.suffix if keep_suffix else "")
    except OSError as exc:
        _raise_naming(exc, target)
    try:
        yield tmp
        if durable:
            _fsync(tmp)
        os.replace(tmp, target)
        if durable:
            _fsync_folder(target.parent)  # the rename itself must reach the disk too
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _raise_naming(exc, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _raise_naming(exc: OSError, target: Path) -> NoReturn:
    """Raise ``exc`` as an error about ``target`` (the file the caller asked for).

    A failed ``write`` or ``fsync`` (a full disk: ``ENOSPC``; a quota; a file size limit)
    raises an OSError without a file name, and a writer such as matplotlib or Pyomo may name
    the temporary file; the message must name the file the user gave. Errors that name
    another file (a missing parent folder, a parent that is a file) keep their name.
    """
    name = exc.filename
    if name is not None and target_of_temp(name) is None:
        raise exc
    # OSError(errno, ...) is the subclass of that errno (FileNotFoundError, PermissionError)
    raise OSError(exc.errno, exc.strerror or str(exc), str(target)) from exc


def atomic_write(path: str | os.PathLike[str], data: bytes | str, *,
                 durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (text is encoded as UTF-8).

    ``durable=True`` flushes the data to disk before the rename (see :func:`atomic_path`); the
    batch runner skips that for its many small result files, since ``--resume`` re-validates
    every result it finds and re-solves anything that does not parse.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path, durable=False, keep_suffix=False) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(raw)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
    if durable:
        _fsync_folder(Path(path).parent)
