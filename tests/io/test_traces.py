"""The two public trace readers: FedScale's pickled capacity file, read safely, and FLASH's
speed JSON; every bad file refused with one message naming the file, client and field."""

from __future__ import annotations

import json
import math
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from mel_opt.errors import UsageError
from mel_opt.io import traces
from mel_opt.io.traces import MAX_TRACE_BYTES, read_fedscale_capacity, read_flash_speeds


def _pickle(tmp_path: Path, value: object, name: str = "capacity") -> Path:
    path = tmp_path / name
    path.write_bytes(pickle.dumps(value))
    return path


def test_fedscale_reads_ids_compute_and_bandwidth_in_file_order(tmp_path: Path) -> None:
    path = _pickle(tmp_path, {1: {"computation": 20.0, "communication": 8000.0},
                              "b": {"computation": 7, "communication": 512.5, "other": [1, 2]}})
    cap = read_fedscale_capacity(path)
    assert cap.ids == ("1", "b")
    np.testing.assert_array_equal(cap.compute_ms, [20.0, 7.0])
    np.testing.assert_array_equal(cap.bandwidth_kbps, [8000.0, 512.5])
    assert not cap.compute_ms.flags.writeable


class _Marker:
    """Unpickling this would call os.system and write a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = pickle.dumps({"c1": {"computation": _Marker(marker), "communication": 1.0}})
    path = tmp_path / "evil"
    path.write_bytes(payload)
    with pytest.raises(UsageError, match=r"evil: not read: refused the global (posix|os)\.system"):
        read_fedscale_capacity(path)
    assert not marker.exists()
    # the same bytes through the standard unpickler do run it: the test's payload is real
    pickle.loads(payload)
    assert marker.exists()


@pytest.mark.parametrize("value", [np.float64(1.0), {1, 2}.__class__, Path("x")])
def test_any_global_is_refused_even_harmless_ones(tmp_path: Path, value: object) -> None:
    path = _pickle(tmp_path, {"c": {"computation": value, "communication": 1.0}})
    with pytest.raises(UsageError, match="refused the global"):
        read_fedscale_capacity(path)


@pytest.mark.parametrize(("value", "match"), [
    ([1, 2], r"must be a dict of client id -> record, got list"),
    ({}, r"has no clients"),
    ({"c7": [20.0, 8000.0]}, r"client 'c7' must be a dict, got list"),
    ({"c7": {"computation": 20.0}}, r"client 'c7' has no 'communication'"),
    ({"c7": {"computation": -1.0, "communication": 5.0}},
     r"client 'c7': 'computation' must be a positive finite number, got -1.0"),
    ({"c7": {"computation": 1.0, "communication": math.nan}},
     r"client 'c7': 'communication' must be a positive finite number, got nan"),
    ({"c7": {"computation": 1.0, "communication": math.inf}}, r"got inf"),
    ({"c7": {"computation": "20", "communication": 5.0}},
     r"client 'c7': 'computation' must be a number, got str"),
    ({"c7": {"computation": True, "communication": 5.0}}, r"must be a number, got bool"),
    ({(1, 2): {"computation": 1.0, "communication": 5.0}}, r"client id \(1, 2\) must be"),
])
def test_bad_capacity_files_name_the_file_client_and_field(tmp_path: Path, value: object,
                                                           match: str) -> None:
    path = _pickle(tmp_path, value, "cap.pkl")
    with pytest.raises(UsageError, match=r"cap\.pkl: (.* )?" + match):
        read_fedscale_capacity(path)


def test_not_a_pickle_empty_missing_and_oversized(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"\x80\x05not a pickle at all")
    with pytest.raises(UsageError, match=r"junk: not (read|a readable pickle)"):
        read_fedscale_capacity(junk)
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    with pytest.raises(UsageError, match=r"empty: the trace file is empty"):
        read_fedscale_capacity(empty)
    with pytest.raises(UsageError, match=r"nothere: cannot read the trace file"):
        read_fedscale_capacity(tmp_path / "nothere")
    big = _pickle(tmp_path, {"c": {"computation": 1.0, "communication": 1.0}}, "big")
    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", 10)
    with pytest.raises(UsageError, match=r"big: \d+ bytes, more than the 10 a trace file"):
        read_fedscale_capacity(big)
    assert MAX_TRACE_BYTES == 64 * 2**20


def _json(tmp_path: Path, value: object, name: str = "speed_distri.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return path


def test_flash_reads_means_and_sigmas(tmp_path: Path) -> None:
    path = _json(tmp_path, {"u1": {"down_u": 3000, "down_sigma": 10.5, "up_u": 1000.0,
                                   "up_sigma": 0},
                            "u2": {"down_u": 1.5, "down_sigma": 0.5, "up_u": 2.5,
                                   "up_sigma": 1}})
    sp = read_flash_speeds(path)
    assert sp.ids == ("u1", "u2")
    np.testing.assert_array_equal(sp.down_mean, [3000.0, 1.5])
    np.testing.assert_array_equal(sp.down_sigma, [10.5, 0.5])
    np.testing.assert_array_equal(sp.up_mean, [1000.0, 2.5])
    np.testing.assert_array_equal(sp.up_sigma, [0.0, 1.0])


_GOOD = {"down_u": 3000, "down_sigma": 10, "up_u": 1000, "up_sigma": 5}


@pytest.mark.parametrize(("value", "match"), [
    ([_GOOD], r"must be a dict of client id -> record, got list"),
    ({}, r"has no clients"),
    ({"u1": 5}, r"client 'u1' must be a dict, got int"),
    ({"u1": {k: v for k, v in _GOOD.items() if k != "up_sigma"}}, r'\$\["u1"\]\.up_sigma is '
                                                                  r"missing"),
    ({"u1": {**_GOOD, "up_u": -2}}, r'\$\["u1"\]\.up_u must be a positive finite number, '
                                    r"got -2"),
    ({"u1": {**_GOOD, "down_u": 0}}, r'\$\["u1"\]\.down_u must be a positive'),
    ({"u1": {**_GOOD, "down_sigma": -1}}, r'\$\["u1"\]\.down_sigma must be a non-negative'),
    ({"u1": {**_GOOD, "up_u": "fast"}}, r'\$\["u1"\]\.up_u must be a number, got str'),
])
def test_bad_flash_files_name_the_json_path(tmp_path: Path, value: object, match: str) -> None:
    path = _json(tmp_path, value)
    with pytest.raises(UsageError, match=r"speed_distri\.json: (.* )?" + match):
        read_flash_speeds(path)


def test_flash_not_json_and_nan(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text('{"u1": ')
    with pytest.raises(UsageError, match=r"s\.json: not a JSON document"):
        read_flash_speeds(bad)
    bad.write_text('{"u1": {"down_u": NaN, "down_sigma": 1, "up_u": 1, "up_sigma": 1}}')
    with pytest.raises(UsageError, match=r"s\.json: "):
        read_flash_speeds(bad)
