"""The two public trace readers: FedScale's pickled capacity file, read safely, and FLASH's
speed JSON; every bad file refused with one message naming the file, client and field."""

from __future__ import annotations

import io
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


@pytest.mark.parametrize("value", [{1, 2}.__class__, Path("x"), print])
def test_any_global_is_refused_even_harmless_ones(tmp_path: Path, value: object) -> None:
    path = _pickle(tmp_path, {"c": {"computation": value, "communication": 1.0}})
    with pytest.raises(UsageError, match="refused the global"):
        read_fedscale_capacity(path)


@pytest.mark.parametrize("protocol", range(6))
def test_numpy_scalars_are_rebuilt_from_type_and_bytes(tmp_path: Path, protocol: int) -> None:
    path = tmp_path / "cap"
    path.write_bytes(pickle.dumps({np.int64(7): {"computation": np.float64(12.5),
                                                 "communication": np.float32(0.25)},
                                   "b": {"computation": np.int32(3),
                                         "communication": np.uint16(640)}},
                                  protocol=protocol))
    cap = read_fedscale_capacity(path)
    assert cap.ids == ("7", "b")
    assert cap.compute_ms.tolist() == [12.5, 3.0]
    assert cap.bandwidth_kbps.tolist() == [0.25, 640.0]


def test_a_big_endian_numpy_scalar_is_read_in_its_byte_order(tmp_path: Path) -> None:
    # numpy writes native (little-endian here) scalars; the same value stated big-endian:
    # the state's byte order '<' -> '>' and the 8 bytes reversed must give 12.5 again
    data = pickle.dumps({"c": {"computation": np.float64(12.5), "communication": 1.0}},
                        protocol=4)
    raw = np.float64(12.5).tobytes()
    assert raw in data and b"\x8c\x01<" in data
    path = tmp_path / "cap"
    path.write_bytes(data.replace(raw, raw[::-1]).replace(b"\x8c\x01<", b"\x8c\x01>"))
    assert read_fedscale_capacity(path).compute_ms.tolist() == [12.5]


@pytest.mark.parametrize(("value", "match"), [
    (np.array([1.0, 2.0]), r"refused the global numpy\S* \(numpy scalars are read, arrays "
                           r"and other numpy objects are not\); convert the file's numbers to "
                           r"plain floats first"),
    (np.datetime64("2020-01-01"), r"refused the numpy type 'M8'"),
    (np.str_("12"), r"refused the numpy type 'U2'"),
    (np.bool_(True), r"client 'c': 'computation' must be a number, got bool"),
    (np.float64("nan"), r"client 'c': 'computation' must be a positive finite number, got nan"),
])
def test_other_numpy_values_are_refused_with_the_fix(tmp_path: Path, value: object,
                                                      match: str) -> None:
    path = _pickle(tmp_path, {"c": {"computation": value, "communication": 1.0}})
    with pytest.raises(UsageError, match=match):
        read_fedscale_capacity(path)


class _Reduce:
    """Unpickling this calls ``func(*args)``."""

    def __init__(self, func: object, *args: object) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (self.func, self.args)


def _evil_pickles(marker: Path) -> list[bytes]:
    """Pickles that reach for code: ``touch marker`` by reduce in protocols 0-5, by INST, by a
    copyreg extension code, by a persistent id; and the numpy stand-ins misused."""
    cmd = f"touch {marker}".encode()
    out = [pickle.dumps({"c": {"computation": _Reduce(os.system, cmd.decode()),
                               "communication": 1.0}}, protocol=p) for p in range(6)]
    out.append(b"(S'" + cmd + b"'\nios\nsystem\n.")  # INST: import and call in one opcode
    # the stand-ins take only their own kinds of argument: an object dtype (whose scalars
    # would be any object), a scalar of text instead of bytes, a codec other than latin-1
    out.append(b"cnumpy\ndtype\n(S'O'\ntR.")
    out.append(b"cnumpy.core.multiarray\nscalar\n(cnumpy\ndtype\n(S'f8'\ntRS'12345678'\ntR.")
    out.append(b"c_codecs\nencode\n(S'" + cmd + b"'\nS'rot13'\ntR.")
    import copyreg
    copyreg.add_extension("os", "system", 0xBEEF)
    try:
        out.append(pickle.dumps(_Reduce(os.system, cmd.decode()), protocol=2))  # EXT2
    finally:
        copyreg.remove_extension("os", "system", 0xBEEF)

    class _Persist(pickle.Pickler):
        def persistent_id(self, obj: object) -> object:
            return cmd.decode() if obj == "payload" else None

    buf = io.BytesIO()
    _Persist(buf, protocol=2).dump({"c": "payload"})
    out.append(buf.getvalue())
    return out


def test_every_code_running_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payloads = _evil_pickles(marker)
    assert len(payloads) == 12
    for i, payload in enumerate(payloads):
        path = tmp_path / f"evil{i}"
        path.write_bytes(payload)
        with pytest.raises(UsageError, match=rf"evil{i}: not (read: refused|a readable pickle)"):
            read_fedscale_capacity(path)
        assert not marker.exists(), i
    pickle.loads(payloads[6])  # the INST payload is real: the standard unpickler runs it
    assert marker.exists()


@pytest.mark.parametrize(("record", "match"), [
    ({"computation": 10**400, "communication": 1.0},
     r"client '1': 'computation' is an integer of about 401 digits, too large for a float"),
    ({"computation": 5e-324, "communication": 1.0},
     r"client '1': 'computation' = 4.94066e-324 ms is outside 0.001 to 1e\+07 ms"),
    ({"computation": 1.0, "communication": 1e308},
     r"client '1': 'communication' = 1e\+308 kbit/s is outside 0.001 to 1e\+09 kbit/s"),
    ({"computation": -math.inf, "communication": 1.0},
     r"client '1': 'computation' must be a positive finite number, got -inf"),
    ({"computation": [1.0], "communication": 1.0},
     r"client '1': 'computation' must be a number, got list"),
    ({"computation": [10**5000], "communication": 1.0},  # repr() itself would refuse it
     r"client '1': 'computation' must be a number, got list <list too large to show>"),
    ({"computation": None, "communication": 1.0},
     r"client '1': 'computation' must be a number, got NoneType"),
])
def test_extreme_and_wrong_values_name_file_client_and_field(tmp_path: Path, record: dict,
                                                              match: str) -> None:
    path = _pickle(tmp_path, {1: record}, "cap.pkl")
    with pytest.raises(UsageError, match=r"cap\.pkl: " + match):
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


@pytest.mark.parametrize(("text", "match"), [
    ('{"u1": {"down_u": 1' + "0" * 400 + ', "down_sigma": 1, "up_u": 1, "up_sigma": 1}}',
     r'\$\["u1"\]\.down_u is an integer of 401 digits, too large for a float'),
    ('{"u1": {"down_u": 1e308, "down_sigma": 1, "up_u": 1, "up_sigma": 1}}',
     r'\$\["u1"\]\.down_u = 1e\+308 KB/s is outside'),
    ('{"u1": {"down_u": 1, "down_sigma": 1e300, "up_u": 1, "up_sigma": 1}}',
     r'\$\["u1"\]\.down_sigma = 1e\+300 KB/s sigma is outside 0 to 1e\+09'),
    ('{"u1": {"down_u": 1, "down_sigma": 1, "up_u": Infinity, "up_sigma": 1}}',
     r'\$\["u1"\]\.up_u must be a positive finite number, got inf'),
])
def test_flash_extreme_values_name_the_user_and_field(tmp_path: Path, text: str,
                                                      match: str) -> None:
    path = tmp_path / "speed_distri.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=r"speed_distri\.json: " + match):
        read_flash_speeds(path)


def test_flash_not_json_and_nan(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text('{"u1": ')
    with pytest.raises(UsageError, match=r"s\.json: not a JSON document"):
        read_flash_speeds(bad)
    bad.write_text('{"u1": {"down_u": NaN, "down_sigma": 1, "up_u": 1, "up_sigma": 1}}')
    with pytest.raises(UsageError, match=r"s\.json: "):
        read_flash_speeds(bad)


def test_colliding_and_empty_ids_are_refused_naming_them(tmp_path: Path) -> None:
    rec = {"computation": 1.0, "communication": 1.0}
    path = _pickle(tmp_path, {1: rec, "1": rec}, "cap.pkl")
    with pytest.raises(UsageError, match=r"cap\.pkl: client ids 1 and '1' collide \(both are "
                                         r"learner '1'\)"):
        read_fedscale_capacity(path)
    path = _pickle(tmp_path, {"": rec}, "cap.pkl")
    with pytest.raises(UsageError, match=r"cap\.pkl: client id '' must be 1 to 200 characters"):
        read_fedscale_capacity(path)
    path = _pickle(tmp_path, {10**5000: rec}, "cap.pkl")
    with pytest.raises(UsageError, match=r"cap\.pkl: client id \(an integer of about 5001 "
                                         r"digits\) must be 1 to 200 characters"):
        read_fedscale_capacity(path)


@pytest.mark.parametrize(("text", "match"), [
    ('{"u1": %s, "u2": %s, "u1": %s}', r"client id 'u1' appears more than once in the file"),
    ('{"u1": {"down_u": 1, "down_u": 2, "down_sigma": 1, "up_u": 1, "up_sigma": 1}}',
     r"client 'u1': field 'down_u' appears more than once"),
])
def test_flash_duplicate_keys_are_refused_naming_them(tmp_path: Path, text: str,
                                                      match: str) -> None:
    good = json.dumps(_GOOD)
    path = tmp_path / "speed_distri.json"
    path.write_text(text.replace("%s", good))
    with pytest.raises(UsageError, match=r"speed_distri\.json: " + match):
        read_flash_speeds(path)
