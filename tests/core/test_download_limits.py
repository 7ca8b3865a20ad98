"""Downloads of ``melopt benchmark --download``: http(s) only, even after a redirect, and an
overall deadline per transfer however slowly the server sends."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from mel_opt.cli import cli
from mel_opt.subset_benchmarking.download import BenchmarkError, time_download


class _Handler(http.server.BaseHTTPRequestHandler):
    ftp_port = 0
    request_times: list[float] = []

    def log_message(self, *args: object) -> None:  # keep the test output quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.request_times.append(time.monotonic())
        if self.path == "/to-ftp":
            self.send_response(302)
            self.send_header("Location", f"ftp://127.0.0.1:{self.ftp_port}/file.bin")
            self.end_headers()
        elif self.path == "/to-data":
            self.send_response(302)
            self.send_header("Location", "/data")
            self.end_headers()
        elif self.path == "/data":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 1000)
        elif self.path.startswith("/slowish"):  # each shard whole, after 0.4 s
            time.sleep(0.4)
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"z" * 100)
        elif self.path == "/slow-body":  # 10 bytes every 0.5 s of a 10 kB body
            self.send_response(200)
            self.send_header("Content-Length", "10000")
            self.end_headers()
            self._dribble(b"y" * 10_000)
        elif self.path == "/slow-headers":  # the status line and headers, 10 bytes at a time
            self._dribble(b"HTTP/1.0 200 OK\r\n" + b"X-Pad: " + b"p" * 200 + b"\r\n\r\nbody")

    def _dribble(self, data: bytes) -> None:
        with contextlib.suppress(OSError):
            for i in range(0, len(data), 10):
                self.wfile.write(data[i:i + 10])
                self.wfile.flush()
                time.sleep(0.5)


@contextlib.contextmanager
def _servers() -> Iterator[tuple[str, socket.socket]]:
    """An http server on 127.0.0.1 and a bare TCP listener standing in for an FTP server."""
    ftp = socket.socket()
    ftp.bind(("127.0.0.1", 0))
    ftp.listen(1)
    ftp.settimeout(0.2)
    _Handler.ftp_port = ftp.getsockname()[1]
    _Handler.request_times = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", ftp
    finally:
        server.shutdown()
        server.server_close()
        ftp.close()


def test_redirect_to_ftp_is_refused_and_nothing_connects():
    with _servers() as (base, ftp):
        with pytest.raises(BenchmarkError, match=r"refused: the server redirected to "
                                                 r"'ftp://127\.0\.0\.1:\d+/file\.bin'; only "
                                                 r"http:// and https:// are followed"):
            time_download([base + "/to-ftp"], timeout=5)
        with pytest.raises(socket.timeout):
            ftp.accept()  # no connection was ever made to the ftp:// target
        # an http redirect is still followed and every byte counted
        assert time_download([base + "/to-data"], timeout=5).bytes == 1000


@pytest.mark.parametrize("path", ["/slow-body", "/slow-headers"])
def test_slow_server_hits_the_overall_deadline(path):
    with _servers() as (base, _):
        start = time.monotonic()
        with pytest.raises(BenchmarkError, match=r"did not finish within --timeout 2 s"):
            time_download([base + path], timeout=2)
        elapsed = time.monotonic() - start
    # each read gets 10 bytes well within 2 s, so only an overall deadline stops it. Wall
    # clock by nature: that deadline is a timer thread shutting the socket. Not before the
    # 2 s; at most 2 + 5 s (generous for a loaded machine), well short of the ~12 s the slow
    # headers and the ~500 s the slow body would take without it.
    assert 1.9 <= elapsed < 2.0 + 5.0


def test_benchmark_command_fails_cleanly_at_the_deadline():
    with _servers() as (base, _):
        res = CliRunner().invoke(cli, ["benchmark", "--shards", "1", "--no-flops",
                                       "--download", base + "/slow-body", "--timeout", "2"])
        ended = time.monotonic()
        assert _Handler.request_times, "the download never started"
        took = ended - _Handler.request_times[0]
    assert res.exit_code == 1, res.output
    assert "did not finish within --timeout 2 s" in res.output
    assert "Traceback" not in res.output
    # From the request to the command's exit: the 2 s deadline + 5 s (generous for a loaded
    # machine; the body alone would take ~500 s). Wall clock by nature, as above.
    assert took < 2.0 + 5.0


def test_the_timeout_bounds_the_whole_download_not_each_shard():
    with _servers() as (base, _):
        # six shards of 0.4 s each: every one is within 1 s, the whole is not
        with pytest.raises(BenchmarkError, match=r"did not finish within --timeout 1 s"):
            time_download([f"{base}/slowish{i}" for i in range(6)], timeout=1)
        # two of them fit (0.8 s; the limit is generous for a loaded machine, where the
        # helper server's threads may wait for a core)
        assert time_download([f"{base}/slowish{i}" for i in range(2)], timeout=30).bytes == 200


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999/x",
                                 "http://127.0.0.1:abc/x"])
def test_a_malformed_url_is_a_usage_error(url: str) -> None:
    res = CliRunner().invoke(cli, ["benchmark", "--download", url, "--shards", "2"])
    assert res.exit_code == 2 and "is not a valid URL" in res.output
    assert "internal error" not in res.output
