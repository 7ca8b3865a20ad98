"""The one atomic writer: whole files or nothing, no temporary file left, umask modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mel_opt.io.atomic import atomic_path, atomic_write


@pytest.fixture
def umask():
    """Set the process umask for one test and restore it afterwards."""
    saved = os.umask(0o022)
    os.umask(saved)

    def set_(mask: int) -> None:
        os.umask(mask)

    yield set_
    os.umask(saved)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_text_and_bytes_round_trip_and_replace(tmp_path):
    target = tmp_path / "sub" / "r.json"  # the missing folder is created
    atomic_write(target, "h\u00e9")
    assert target.read_bytes() == "h\u00e9".encode()
    atomic_write(target, b"\x00\x01" * 5000, durable=False)
    assert target.read_bytes() == b"\x00\x01" * 5000
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_mode_follows_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    written = tmp_path / "a.json"
    atomic_write(written, "{}")
    with atomic_path(tmp_path / "b.png") as tmp:
        tmp.write_bytes(b"png")
    plain = tmp_path / "c.txt"
    with open(plain, "w") as fh:  # what an ordinary open() gives, the reference
        fh.write("x")
    assert _mode(plain) == expected
    assert _mode(written) == expected
    assert _mode(tmp_path / "b.png") == expected


def test_replacing_a_private_file_gives_the_umask_mode(tmp_path, umask):
    umask(0o022)
    target = tmp_path / "r.json"
    target.write_text("old")
    target.chmod(0o600)
    atomic_write(target, "new")
    assert _mode(target) == 0o644 and target.read_text() == "new"


def test_failed_rename_keeps_old_file_and_removes_temp(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    atomic_write(target, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize("exc", [RuntimeError("writer failed"), KeyboardInterrupt()])
def test_writer_failure_keeps_old_file_and_removes_temp(tmp_path, exc):
    target = tmp_path / "plot.png"
    target.write_bytes(b"old")
    seen: list[Path] = []
    with pytest.raises(type(exc)):
        with atomic_path(target) as tmp:
            seen.append(tmp)
            tmp.write_bytes(b"half a pl")
            raise exc
    assert target.read_bytes() == b"old"
    assert not seen[0].exists()
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_temp_path_is_a_reserved_hidden_sibling(tmp_path):
    target = tmp_path / "fig.svg"
    with atomic_path(target) as tmp:
        # same folder (the rename stays atomic), reserved (it exists), the target's suffix
        # (writers that pick their format from the name), and not the target itself
        assert tmp.parent == tmp_path and tmp.exists() and tmp.suffix == ".svg"
        assert tmp.name.startswith(".fig.svg.") and tmp != target
        assert not target.exists()
        tmp.write_text("<svg/>")
    assert target.read_text() == "<svg/>"
    with atomic_path(tmp_path / "r.json", keep_suffix=False) as tmp:
        assert tmp.suffix == ".tmp"  # a file left by a killed process is no *.json
        tmp.write_text("{}")


def test_failing_savefig_leaves_no_temp_file(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    from mel_opt.plot import save_figure

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    calls: list[str] = []

    def broken_savefig(fname, **kw):
        calls.append(str(fname))
        Path(fname).write_bytes(b"\x89PNG partial")  # wrote some bytes, then failed
        raise OSError("no space left on device")

    fig.savefig = broken_savefig
    target = tmp_path / "fig.png"
    with pytest.raises(OSError, match="no space"):
        save_figure(fig, target, dpi=50)
    assert calls and Path(calls[0]).parent == tmp_path
    assert list(tmp_path.iterdir()) == []
    assert fig.number not in plt.get_fignums()  # closed even on failure


def test_plot_with_unsupported_format_leaves_nothing(tmp_path):
    pytest.importorskip("matplotlib")
    from mel_opt.plot import plot_sweep

    rows = [{"learners": "3", "method": "exact", "status": "optimal", "feasible": "True",
             "t": "1.5"}]
    with pytest.raises(ValueError, match="not supported"):  # matplotlib's own savefig error
        plot_sweep(rows, "learners", ["t"], tmp_path / "plot.xyz")
    assert list(tmp_path.iterdir()) == []
    out = plot_sweep(rows, "learners", ["t"], tmp_path / "plot.png")
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_a_durable_write_flushes_the_file_and_then_its_folder(tmp_path, monkeypatch) -> None:
    import os
    import stat

    from mel_opt.io import atomic as A

    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(A.os, "fsync", spy)
    A.atomic_write(tmp_path / "r.json", "{}")
    assert synced == ["file", "folder"]  # data before the rename, the rename after it
    synced.clear()
    with A.atomic_path(tmp_path / "fig.png") as tmp:
        tmp.write_bytes(b"png")
    assert synced == ["file", "folder"]
    synced.clear()
    A.atomic_write(tmp_path / "quick.json", "{}", durable=False)
    assert synced == []
