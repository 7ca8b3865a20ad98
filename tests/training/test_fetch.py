"""``melopt data fetch`` and its library side, against a loopback HTTP server the tests start.

The server serves small IDX files the tests write and gzip; the source table points at it, so
nothing here touches the real sources. Covered: a fetch that loads with ``load_dataset``,
a resume after a cut transfer (the Range asked for), a server ignoring Range, a bad digest,
a deadline on a trickling server, a redirect to ftp refused, the cache not fetched again,
the lookup order (cache, then Debian's folder) and the CLI's exit codes and one-line errors.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.cli import cli
from mel_opt.errors import UsageError
from mel_opt.training import fetch as fetch_mod
from mel_opt.training.data import KNOWN_IDX_DIRS, cache_dir, dataset_dir, load_dataset
from mel_opt.training.fetch import (
    SOURCES,
    ChecksumError,
    FetchError,
    FetchTimeout,
    RemoteFile,
    Source,
    fetch_dataset,
    known_datasets,
)

pytestmark = pytest.mark.timeout(120)  # a broken deadline fails the test instead of hanging

NAMES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
BIG = NAMES[0]


def _idx(arr: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes: magic 0x00000800 + ndim, big-endian sizes, the body."""
    head = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(n).to_bytes(4, "big")
                                                     for n in arr.shape)
    return head + arr.astype(np.uint8).tobytes()


@dataclass
class Data:
    """The arrays of a small data set and its four gzip files (name -> bytes)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    files: dict[str, bytes] = field(default_factory=dict)


def _data() -> Data:
    rng = np.random.default_rng(7)
    # random pixels hardly compress: the training images stay about 25 kB, many blocks
    d = Data(rng.integers(0, 256, (400, 8, 8)), np.arange(400) % 4,
             rng.integers(0, 256, (20, 8, 8)), np.arange(20) % 4)
    for name, arr in zip(NAMES, (d.x_train, d.y_train, d.x_test, d.y_test), strict=True):
        d.files[name] = gzip.compress(_idx(arr), mtime=0)
    return d


DATA = _data()


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


class Server:
    """A loopback HTTP server of ``files`` (path -> bytes) with switchable misbehaviour."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.cut_once: set[str] = set()  # paths whose first answer stops half-way
        self.trickle: set[str] = set()  # paths sent 10 bytes every 0.2 s (at most 30 s)
        self.paced: set[str] = set()  # paths sent 4 kB every 20 ms (several blocks for sure)
        self.redirects: dict[str, str] = {}
        self.ignore_range = False
        self.base = ""


def _handler(srv: Server) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            rng = self.headers.get("Range")
            srv.requests.append((self.path, rng))
            if self.path in srv.redirects:
                self.send_response(302)
                self.send_header("Location", srv.redirects[self.path])
                self.end_headers()
                return
            body = srv.files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            start = 0
            if rng and not srv.ignore_range:
                start = int(rng.removeprefix("bytes=").rstrip("-"))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            self._send(body[start:])

        def _send(self, payload: bytes) -> None:
            if self.path in srv.cut_once:  # half the bytes, then close the connection
                srv.cut_once.discard(self.path)
                self.wfile.write(payload[:len(payload) // 2])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_WR)
                self.close_connection = True
            elif self.path in srv.trickle or self.path in srv.paced:
                step, pause = (10, 0.2) if self.path in srv.trickle else (4096, 0.02)
                end = time.monotonic() + 30
                with contextlib.suppress(OSError):
                    for i in range(0, len(payload), step):
                        if time.monotonic() > end:
                            break
                        self.wfile.write(payload[i:i + step])
                        self.wfile.flush()
                        time.sleep(pause)
            else:
                self.wfile.write(payload)

    return Handler


@pytest.fixture()
def server() -> Iterator[Server]:
    srv = Server()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(srv))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    srv.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    srv.files = {f"/fm/{n}": b for n, b in DATA.files.items()}
    try:
        yield srv
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache in the test's folder, no Debian folders, no mirror override."""
    monkeypatch.setenv("MELOPT_DATA_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MELOPT_DATA_MIRROR", raising=False)
    for name in ("fashion-mnist", "mnist"):
        monkeypatch.setitem(KNOWN_IDX_DIRS, name, str(tmp_path / "debian" / name))
    return tmp_path / "cache"


def _source(server: Server, *, mirrors: tuple[str, ...] | None = None,
            digests: dict[str, str] | None = None, name: str = "fashion-mnist") -> Source:
    files = tuple(RemoteFile(n, len(b), (digests or {}).get(n, _sha(b)))
                  for n, b in DATA.files.items())
    return Source(name, "test set", "test licence", mirrors or (f"{server.base}/fm/",), files)


def _table(source: Source) -> dict[str, Source]:
    return {source.name: source}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------------------
# the library
# ------------------------------------------------------------------------------------------
def test_a_fetch_completes_and_loads(server: Server, _cache: Path) -> None:
    seen: list[tuple[str, int, int]] = []
    got = fetch_dataset("fashion-mnist", sources=_table(_source(server)), timeout=30,
                        on_progress=lambda *a: seen.append(a))
    assert got.directory == _cache / "fashion-mnist"
    assert [f for f, _ in got.files] == list(NAMES)
    assert all(how == f"fetched from {server.base}/fm/{f}" for f, how in got.files)
    for name, body in DATA.files.items():
        assert (got.directory / name).read_bytes() == body
    assert sorted(p.name for p in got.directory.iterdir()) == sorted(NAMES)  # no .part left
    # each file's progress starts at 0 and ends at its size
    for name, body in DATA.files.items():
        mine = [(done, total) for f, done, total in seen if f == name]
        assert mine[0] == (0, len(body)) and mine[-1] == (len(body), len(body))
    assert dataset_dir("fashion-mnist") == got.directory
    ds = load_dataset("fashion-mnist")
    assert ds.name == "fashion-mnist" and ds.classes == 4
    np.testing.assert_array_equal(ds.x_train, DATA.x_train.reshape(400, 64) / 255.0)
    np.testing.assert_array_equal(ds.y_train, DATA.y_train)
    np.testing.assert_array_equal(ds.x_test, DATA.x_test.reshape(20, 64) / 255.0)
    np.testing.assert_array_equal(ds.y_test, DATA.y_test)


def test_a_cut_transfer_resumes_with_a_range_request(server: Server, _cache: Path) -> None:
    table = _table(_source(server))
    path = f"/fm/{BIG}"
    server.cut_once.add(path)
    size = len(DATA.files[BIG])
    half = size // 2  # what the server sends before it closes the connection
    with pytest.raises(FetchError, match=rf"the transfer ended after {half} of {size} bytes"
                                         rf" \({half} bytes kept in .*{BIG}\.part"):
        fetch_dataset("fashion-mnist", sources=table, timeout=30)
    part = _cache / "fashion-mnist" / f"{BIG}.part"
    assert part.read_bytes() == DATA.files[BIG][:half]
    assert not (_cache / "fashion-mnist" / BIG).exists()
    server.requests.clear()
    seen: list[tuple[str, int, int]] = []
    got = fetch_dataset("fashion-mnist", sources=table, timeout=30,
                        on_progress=lambda *a: seen.append(a))
    assert server.requests[0] == (path, f"bytes={half}-")
    assert [f for f, _, _ in seen].count(BIG) >= 2 and seen[0] == (BIG, half, size)
    assert dict(got.files)[BIG] == f"resumed from {server.base}{path}"
    assert (_cache / "fashion-mnist" / BIG).read_bytes() == DATA.files[BIG]
    assert not part.exists()


def test_a_server_that_ignores_range_starts_over(server: Server, _cache: Path) -> None:
    folder = _cache / "fashion-mnist"
    folder.mkdir(parents=True)
    (folder / f"{BIG}.part").write_bytes(b"\xff" * 1000)  # not even a prefix of the file
    server.ignore_range = True
    got = fetch_dataset("fashion-mnist", sources=_table(_source(server)), timeout=30)
    assert server.requests[0] == (f"/fm/{BIG}", "bytes=1000-")
    assert dict(got.files)[BIG] == f"fetched from {server.base}/fm/{BIG}"
    assert (folder / BIG).read_bytes() == DATA.files[BIG]
    assert not (folder / f"{BIG}.part").exists()


def test_an_interrupted_fetch_keeps_its_part_and_resumes(server: Server, _cache: Path) -> None:
    table = _table(_source(server))
    server.paced.add(f"/fm/{BIG}")
    stopped: list[int] = []

    def stop(name: str, done: int, total: int) -> None:
        if name == BIG and 0 < done < total:
            stopped.append(done)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fetch_dataset("fashion-mnist", sources=table, timeout=30, on_progress=stop)
    part = _cache / "fashion-mnist" / f"{BIG}.part"
    assert part.read_bytes() == DATA.files[BIG][:stopped[0]]
    server.requests.clear()
    fetch_dataset("fashion-mnist", sources=table, timeout=30)
    assert server.requests[0] == (f"/fm/{BIG}", f"bytes={stopped[0]}-")
    assert (_cache / "fashion-mnist" / BIG).read_bytes() == DATA.files[BIG]


def test_a_bad_checksum_is_an_error_and_leaves_no_file(server: Server, _cache: Path) -> None:
    wrong = "0" * 64
    table = _table(_source(server, digests={NAMES[1]: wrong}))
    with pytest.raises(ChecksumError) as caught:
        fetch_dataset("fashion-mnist", sources=table, timeout=30)
    text = str(caught.value)
    assert text == (f"{NAMES[1]} from {server.base}/fm/{NAMES[1]}: SHA-256 mismatch: expected "
                    f"{wrong}, got {_sha(DATA.files[NAMES[1]])}; the partial file was deleted")
    folder = _cache / "fashion-mnist"
    assert sorted(p.name for p in folder.iterdir()) == [NAMES[0]]  # the one before it only
    assert caught.value.exit_code == 1


def test_the_deadline_stops_a_trickling_server(server: Server, _cache: Path) -> None:
    server.trickle.add(f"/fm/{BIG}")  # 25 kB at 50 bytes/s: over eight minutes
    with pytest.raises(FetchTimeout, match=r"did not finish within --timeout 1\.5 s \(stopped "
                                           r"during .*; \d+ of \d+ bytes kept in .*\.part"):
        fetch_dataset("fashion-mnist", sources=_table(_source(server)), timeout=1.5)
    part = _cache / "fashion-mnist" / f"{BIG}.part"
    held = part.stat().st_size
    assert 0 < held < len(DATA.files[BIG])
    assert part.read_bytes() == DATA.files[BIG][:held]


def test_a_redirect_to_ftp_is_refused(server: Server) -> None:
    ftp = socket.socket()
    ftp.bind(("127.0.0.1", 0))
    ftp.listen(1)
    ftp.settimeout(0.2)
    target = f"ftp://127.0.0.1:{ftp.getsockname()[1]}/{BIG}"
    server.redirects[f"/to-ftp/{BIG}"] = target
    with ftp:
        with pytest.raises(FetchError, match=rf"could not fetch {BIG}: download of "
                                             rf"{server.base}/to-ftp/{BIG} refused: the server "
                                             rf"redirected to '{target}'; only http:// and "
                                             rf"https:// are followed"):
            fetch_dataset("fashion-mnist", sources=_table(_source(
                server, mirrors=(f"{server.base}/to-ftp/",))), timeout=30)
        with pytest.raises(socket.timeout):
            ftp.accept()  # nothing connected to the ftp:// target
        # the next mirror serves it: mirrors are tried in order
        got = fetch_dataset("fashion-mnist", sources=_table(_source(
            server, mirrors=(f"{server.base}/to-ftp/", f"{server.base}/fm/"))), timeout=30)
    assert dict(got.files)[BIG] == f"fetched from {server.base}/fm/{BIG}"


def test_cached_files_are_not_fetched_again(server: Server, _cache: Path) -> None:
    table = _table(_source(server))
    fetch_dataset("fashion-mnist", sources=table, timeout=30)
    server.requests.clear()
    got = fetch_dataset("fashion-mnist", sources=table, timeout=30)
    assert server.requests == []
    assert got.files == tuple((n, "cached") for n in NAMES)
    # a cached file whose digest no longer matches is fetched again, alone
    (_cache / "fashion-mnist" / NAMES[3]).write_bytes(b"spoilt")
    got = fetch_dataset("fashion-mnist", sources=table, timeout=30)
    assert server.requests == [(f"/fm/{NAMES[3]}", None)]
    assert (_cache / "fashion-mnist" / NAMES[3]).read_bytes() == DATA.files[NAMES[3]]


def test_every_mirror_failing_names_each(server: Server) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}/x/"
    with pytest.raises(FetchError, match=rf"could not fetch {BIG}: download of "
                                         rf"{server.base}/missing/{BIG} failed: HTTP 404 .*; "
                                         rf"download of {dead}{BIG} failed: "):
        fetch_dataset("fashion-mnist", sources=_table(_source(
            server, mirrors=(f"{server.base}/missing/", dead))), timeout=30)


def test_the_mirror_variable_replaces_the_sources(server: Server,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}/never/"
    monkeypatch.setenv("MELOPT_DATA_MIRROR", f" {server.base}/fm , {dead}")
    got = fetch_dataset("mnist", sources=_table(_source(server, mirrors=(dead,), name="mnist")),
                        timeout=30)
    assert all(how.startswith(f"fetched from {server.base}/fm/") for _, how in got.files)
    monkeypatch.setenv("MELOPT_DATA_MIRROR", "ftp://example.org/mnist/")
    with pytest.raises(UsageError, match="MELOPT_DATA_MIRROR: 'ftp://example.org/mnist/' is "
                                         "not an http:// or https:// URL"):
        fetch_dataset("mnist", sources=_table(_source(server, name="mnist")))


def test_bad_requests_are_usage_errors(server: Server) -> None:
    with pytest.raises(UsageError, match="no source for data set 'cifar'"):
        fetch_dataset("cifar", sources=_table(_source(server)))
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="timeout must be a number > 0"):
            fetch_dataset("fashion-mnist", sources=_table(_source(server)), timeout=bad)
    assert server.requests == []


def test_the_real_table_is_the_published_one() -> None:
    # the sizes and digests the sources publish (Fashion-MNIST's README, MNIST's mirrors)
    fm = {f.name: (f.size, f.sha256[:8]) for f in SOURCES["fashion-mnist"].files}
    assert fm == {"train-images-idx3-ubyte.gz": (26421880, "3aede38d"),
                  "train-labels-idx1-ubyte.gz": (29515, "a04f1713"),
                  "t10k-images-idx3-ubyte.gz": (4422102, "346e55b9"),
                  "t10k-labels-idx1-ubyte.gz": (5148, "67da17c7")}
    mn = {f.name: (f.size, f.sha256[:8]) for f in SOURCES["mnist"].files}
    assert mn == {"train-images-idx3-ubyte.gz": (9912422, "440fcabf"),
                  "train-labels-idx1-ubyte.gz": (28881, "3552534a"),
                  "t10k-images-idx3-ubyte.gz": (1648877, "8d422c7b"),
                  "t10k-labels-idx1-ubyte.gz": (4542, "f7ae60f9")}
    assert SOURCES["mnist"].mirrors == ("https://storage.googleapis.com/cvdf-datasets/mnist/",
                                        "https://ossci-datasets.s3.amazonaws.com/mnist/")
    assert all(len(f.sha256) == 64 for s in SOURCES.values() for f in s.files)


# ------------------------------------------------------------------------------------------
# where a data set is found
# ------------------------------------------------------------------------------------------
def _write_set(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in DATA.files.items():
        (folder / name).write_bytes(body)


def test_the_cache_comes_before_debian_and_the_message_says_how(tmp_path: Path,
                                                                _cache: Path) -> None:
    assert dataset_dir("mnist") is None and dataset_dir("digits") is None
    with pytest.raises(UsageError) as caught:
        load_dataset("mnist")
    assert str(caught.value) == (
        f"data set 'mnist' is not installed: neither the cache {_cache / 'mnist'} nor "
        f"{tmp_path / 'debian' / 'mnist'} holds it (get it with: melopt data fetch mnist; "
        f"or pass --dataset idx:DIR)")
    with pytest.raises(UsageError, match=r"melopt data fetch fashion-mnist; Debian: apt-get "
                                         r"install dataset-fashion-mnist;"):
        load_dataset("fashion-mnist")
    debian = tmp_path / "debian" / "mnist"
    _write_set(debian)
    assert dataset_dir("mnist") == debian
    (_cache / "mnist").mkdir(parents=True)
    (_cache / "mnist" / f"{BIG}.part").write_bytes(b"x")  # a partial fetch is not the set
    assert dataset_dir("mnist") == debian
    _write_set(_cache / "mnist")
    assert dataset_dir("mnist") == cache_dir("mnist") == _cache / "mnist"
    assert load_dataset("mnist").x_train.shape == (400, 64)
    assert dataset_dir(f"idx:{debian}") == debian and dataset_dir(f"idx:{tmp_path}/no") is None
    with pytest.raises(UsageError, match="unknown dataset 'cifar'"):
        dataset_dir("cifar")


def test_the_cache_follows_xdg_and_the_override(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MELOPT_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir("mnist") == tmp_path / "xdg" / "mel_opt" / "datasets" / "mnist"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir("mnist") == tmp_path / "home" / ".cache" / "mel_opt" / "datasets" / "mnist"
    monkeypatch.setenv("MELOPT_DATA_DIR", str(tmp_path / "own"))
    assert cache_dir("mnist") == tmp_path / "own" / "mnist"


def test_known_datasets_say_where_and_how(tmp_path: Path, _cache: Path) -> None:
    _write_set(tmp_path / "debian" / "fashion-mnist")
    _write_set(_cache / "mnist")
    rows = {r.name: r for r in known_datasets()}
    assert list(rows) == ["digits", "fashion-mnist", "mnist"]
    assert (rows["fashion-mnist"].found, rows["fashion-mnist"].where) == (
        "debian", tmp_path / "debian" / "fashion-mnist")
    assert (rows["mnist"].found, rows["mnist"].where) == ("cache", _cache / "mnist")
    (_cache / "mnist" / NAMES[2]).unlink()
    assert known_datasets()[2].found == "nowhere"
    assert known_datasets()[2].how == "melopt data fetch mnist"
    assert rows["fashion-mnist"].licence == "Zalando Research, MIT licence"


# ------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------
def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error:")]


def test_cli_fetch_then_list(server: Server, _cache: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SOURCES, "mnist", _source(server, name="mnist"))
    runner = CliRunner()
    res = runner.invoke(cli, ["data", "fetch", "mnist", "--timeout", "30"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == f"mnist: {_cache / 'mnist'}"
    assert f"{NAMES[0]}: fetched from {server.base}/fm/{NAMES[0]}" in res.stderr
    res = runner.invoke(cli, ["data", "fetch", "mnist"])
    assert res.exit_code == 0 and f"{NAMES[3]}: cached" in res.stderr
    res = runner.invoke(cli, ["data", "list", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert (rows["mnist"]["found"], rows["mnist"]["where"]) == ("cache", str(_cache / "mnist"))
    assert (rows["fashion-mnist"]["found"], rows["fashion-mnist"]["how"]) == (
        "nowhere", "melopt data fetch fashion-mnist (or apt-get install dataset-fashion-mnist)")
    for args in (["data"], ["data", "list"]):
        res = runner.invoke(cli, args)
        assert res.exit_code == 0, res.output
        row = next(line for line in res.stdout.splitlines() if "fashion-mnist" in line)
        assert "nowhere" in row and "melopt data fetch" in row
        assert f"cache: {_cache / 'NAME'} (set MELOPT_DATA_DIR to move it)" in res.stdout


def test_cli_bad_checksum_exit_1_one_line(server: Server, _cache: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SOURCES, "mnist", _source(server, name="mnist",
                                                  digests={NAMES[0]: "f" * 64}))
    res = CliRunner().invoke(cli, ["data", "fetch", "mnist"])
    assert res.exit_code == 1
    assert _errors(res.output) == [
        f"error: {NAMES[0]} from {server.base}/fm/{NAMES[0]}: SHA-256 mismatch: expected "
        f"{'f' * 64}, got {_sha(DATA.files[NAMES[0]])}; the partial file was deleted"]
    assert "Traceback" not in res.output
    assert list((_cache / "mnist").iterdir()) == []


def test_cli_deadline_exit_1(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SOURCES, "mnist", _source(server, name="mnist"))
    server.trickle.add(f"/fm/{BIG}")
    res = CliRunner().invoke(cli, ["data", "fetch", "mnist", "--timeout", "1"])
    assert res.exit_code == 1
    [line] = _errors(res.output)
    assert line.startswith("error: the fetch did not finish within --timeout 1 s (stopped "
                           f"during {server.base}/fm/{BIG};")
    assert line.endswith(".part: fetch again to resume)")


def test_cli_ctrl_c_keeps_the_part_and_exits_130(server: Server, _cache: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SOURCES, "mnist", _source(server, name="mnist"))
    server.paced.add(f"/fm/{BIG}")
    real = fetch_mod.fetch_dataset

    def interrupted(name: str, **kw: object) -> object:
        shown = kw.pop("on_progress")

        def on_progress(file: str, done: int, total: int) -> None:
            shown(file, done, total)  # type: ignore[operator]
            if 0 < done < total:
                raise KeyboardInterrupt

        return real(name, on_progress=on_progress, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr("mel_opt.cli.data.fetch_dataset", interrupted)
    res = CliRunner().invoke(cli, ["data", "fetch", "mnist"])
    assert res.exit_code == 130
    assert _errors(res.output) == [f"error: interrupted; kept {BIG}.part for the next fetch"]
    assert (_cache / "mnist" / f"{BIG}.part").is_file()


@pytest.mark.parametrize("args", [["data", "fetch", "cifar"], ["data", "fetch"],
                                  ["data", "fetch", "mnist", "--timeout", "0"],
                                  ["data", "nothing"]])
def test_cli_usage_errors_exit_2(args: list[str]) -> None:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2
    assert len(_errors(res.output)) == 1 and "Traceback" not in res.output
