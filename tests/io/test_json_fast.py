"""The fast JSON reading (orjson) gives the document the reference reading (the standard
library with mel_opt's hooks) gives, value for value and type for type, or hands the text to
the reference: NaN and infinities, integer literals beyond 64 bits (HugeInt past 30 digits),
lone surrogates and every syntax error keep the reference's value or message."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mel_opt.errors import InstanceError
from mel_opt.io import json_io
from mel_opt.io.validate import HugeInt


def _same(a, b) -> bool:
    """Equal values of equal types, all the way down (NaN equals NaN; HugeInt by its text)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                     math.copysign(1, b))
    if isinstance(a, HugeInt):
        return repr(a) == repr(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


def _both(text: str):
    """(fast, reference): each a value or the InstanceError's issues."""
    out = []
    for parse in (json_io.parse_json_text, json_io._parse_reference):
        try:
            out.append(parse(text, "f.json"))
        except InstanceError as exc:
            out.append(("error", [(i.path, i.message) for i in exc.issues]))
    return out


LITERALS = [
    "1", "-0", "-0.0", "0.1", "1e400", "-1e400", "1e-400", "NaN", "[Infinity, -Infinity]",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "18446744073709551615", "18446744073709551616",
    "123456789012345678901234567890", "1234567890123456789012345678901",
    "-1234567890123456789012345678901", "[1, 12345678901234567890123]",
    '{"a": 99999999999999999999}', "1.5e-1234567890123456789", "12345678901234567890.5",
    "0.000320187346509384141", "1e0000000000000000000019", '"\\ud800"', '"\\ud83d\\ude00"',
    '{"a": 1, "a": 2}', "[1,]", "{", "", "  [1]  ", "[1] x", '"\t"', "01", "[.5]",
    '{"learners": [{"c2": 5e-5, "name": "n1"}]}', "2.2250738585072014e-308", "5e-324",
    "1.7976931348623157e308", "1.7976931348623159e308", "0.30000000000000004",
]


@pytest.mark.parametrize("text", LITERALS)
def test_literals_read_as_the_reference_reads_them(text):
    fast, ref = _both(text)
    assert _same(fast, ref), (fast, ref)


_SCALARS = (st.none() | st.booleans() | st.floats(allow_nan=True, allow_infinity=True)
            | st.integers(min_value=-(10**40), max_value=10**40) | st.text(max_size=8))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=5)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=5), max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.booleans())
def test_random_documents_read_as_the_reference_reads_them(value, compact):
    text = json.dumps(value, separators=(",", ":") if compact else None, ensure_ascii=compact)
    fast, ref = _both(text)
    assert _same(fast, ref), (text, fast, ref)


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False),
       st.sampled_from(["{!r}", "{:.17g}", "{:.3e}", "{:.25f}", "{:.0f}"]))
def test_numbers_in_any_notation_read_as_the_reference_reads_them(x, fmt):
    text = fmt.format(x)
    if text in ("inf", "-inf", "nan"):
        return
    fast, ref = _both(f"[{text}]")
    assert _same(fast, ref), (text, fast, ref)


@pytest.mark.parametrize(("raw", "long"), [
    (b"1234567890123456789", True), (b"[-1234567890123456789]", True),
    (b'{"a":1234567890123456789}', True), (b"123456789012345678", False),
    (b"0.1234567890123456789", False), (b"[1e1234567890123456789]", False),
    (b"[1E+1234567890123456789]", False), (b"[4.3011565786466556e-05]", False),
])
def test_long_integer_runs_are_found(raw, long):
    assert json_io._long_integer(raw) is long


def test_a_file_with_a_bom_and_a_long_integer_deep_inside(tmp_path):
    f = tmp_path / "x.json"
    body = '{"learners": [' + ", ".join(['{"c2": 1.5}'] * 50) + ', {"c2": ' + "7" * 35 + "}]}"
    f.write_bytes(b"\xef\xbb\xbf" + body.encode())
    doc = json_io.read_json_file(f)
    assert isinstance(doc["learners"][50]["c2"], HugeInt)
    assert doc["learners"][49] == {"c2": 1.5}


@pytest.mark.parametrize("raw", [
    b'{"a": "\xff"}', b'{"a": "\xed\xa0\x80"}', b'{"a": "\xc0\xaf"}', b'{"a": "\xf4\x90\x80\x80"}',
    b'{"a": "\xe2\x82"}', b'{"a": "\xf8\x88\x80\x80\x80"}', b'\xef\xbb\xbf{"a": "\xff"}',
    b'\xef\xbb\xbf{"a": "\xe2\x82\xac"}', b'{"a": "\xe2\x82\xac", "b": [1, 2.5]}', b'\xef\xbb\xbf',
    b'\xef\xbb\xbf\xef\xbb\xbf[1]', b'[1]\xef\xbb\xbf',
])
def test_files_read_from_their_bytes_as_the_reference_reads_them(tmp_path, raw):
    # orjson reads the bytes (no decoded copy); what is not UTF-8 is refused with the
    # reference's message, a byte order mark is skipped once
    f = tmp_path / "x.json"
    f.write_bytes(raw)
    try:
        want = ("value", json_io._parse_reference(raw.decode("utf-8-sig"), str(f)))
    except UnicodeDecodeError as exc:
        want = ("error", [("$", f"not UTF-8 text ({exc.reason})")])
    except InstanceError as exc:
        want = ("error", [(i.path, i.message) for i in exc.issues])
    try:
        got = ("value", json_io.read_json_file(f))
    except InstanceError as exc:
        got = ("error", [(i.path, i.message) for i in exc.issues])
    assert got[0] == want[0] and (_same(got[1], want[1]) if got[0] == "value" else
                                  got[1] == want[1]), (got, want)
