"""The wire format of live messages (mel_opt.live.wire): each list of arrays packed into one
array with its layout in the config record, read back exactly; a layout that does not describe
its bytes is a ReplyError naming the list; content of Flower's own several-array records is read
as it is."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr")
from flwr.app import ArrayRecord, ConfigRecord, RecordDict  # noqa: E402
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects  # noqa: E402

from mel_opt.live.wire import LAYOUT, content_of, pack, records_of, unpack  # noqa: E402
from mel_opt.problems.messages import Records, ReplyError, TrainReport  # noqa: E402
from mel_opt.training.mlp import init_params, layers_for  # noqa: E402


def test_mixed_dtypes_a_scalar_and_an_empty_list_come_back_exactly():
    model = [np.arange(6, dtype=np.float32).reshape(3, 2), np.array([1.5, -2.0])]
    shipped = [np.ones((2, 4), np.float32), np.array([7, 9], np.uint8), np.float32(3.0)]
    back = records_of(content_of(Records({"round": 2, "name": "x"},
                                         {"model": model, "shipped": shipped, "none": []})))
    assert back.config == {"round": 2, "name": "x"}  # the layouts are the wire's own
    assert back.arrays["none"] == []
    for sent, got in zip(model + shipped, back.arrays["model"] + back.arrays["shipped"],
                         strict=True):
        assert got.dtype == np.asarray(sent).dtype and got.shape == np.asarray(sent).shape
        assert np.array_equal(got, sent) and got.flags.writeable and got.flags.aligned


def test_a_twonn_reply_is_five_objects_where_its_six_arrays_made_fifteen():
    model = init_params(layers_for("twonn", 64, 10), 0, np.float32)
    records = TrainReport(0, 1.0, 10.0, 10, 1, model).encode()
    packed = get_all_nested_objects(content_of(records))
    # record dict, config record, array record, one array, one chunk
    assert len(packed) == 5
    plain = RecordDict({"config": ConfigRecord({"a": 1}), "model": ArrayRecord(model)})
    assert len(get_all_nested_objects(plain)) == 3 + 2 * len(model) == 15


def test_a_layout_is_checked_against_its_bytes():
    buffer, layout = pack([np.zeros((2, 3), np.float32), np.zeros(4, np.uint8)])
    assert layout == ["<f4:2x3", "|u1:4"] and buffer.size == 2 * 3 * 4 + 4
    with pytest.raises(ReplyError, match=r"model: its layout needs more than the 27 bytes"):
        unpack(buffer[:-1], layout, "model")
    with pytest.raises(ReplyError, match=r"model: 4 bytes beyond what its layout describes"):
        unpack(buffer, layout[:1], "model")
    with pytest.raises(ReplyError, match=r"model\[1\] has an unreadable layout"):
        unpack(buffer, [layout[0], "no-dtype:4"], "model")
    with pytest.raises(ReplyError, match=r"model\[0\] has an unreadable layout"):
        unpack(buffer, ["<f4:-1"], "model")
    with pytest.raises(ReplyError, match=r"model\[0\] has an unreadable layout"):
        unpack(buffer, ["|O:1"], "model")  # never Python objects


def test_flowers_own_array_record_is_read_as_it_is_and_a_bad_packed_record_refused():
    arrays = [np.ones(3, np.float32), np.zeros((2, 2), np.float64)]
    content = RecordDict({"config": ConfigRecord({"a": 1}), "model": ArrayRecord(arrays)})
    got = records_of(content).arrays["model"]
    assert [a.shape for a in got] == [(3,), (2, 2)]
    two = RecordDict({"config": ConfigRecord({LAYOUT + "model": ["<f4:3"]}),
                      "model": ArrayRecord(arrays)})
    with pytest.raises(ReplyError, match="a packed list is one array"):
        records_of(two)
    with pytest.raises(ReplyError, match="no config record"):
        records_of(RecordDict({"model": ArrayRecord(arrays)}))
