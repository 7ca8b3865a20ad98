"""FedBuff's staleness weights and buffer, on numbers worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from mel_opt.schemes.fedbuff import FedBuffBuffer, staleness_weight


def test_staleness_weight_by_hand() -> None:
    # 1/sqrt(1+0) = 1, 1/sqrt(1+3) = 1/2, 1/sqrt(1+8) = 1/3, 1/sqrt(1+15) = 1/4
    assert staleness_weight(0) == 1.0
    assert staleness_weight(3) == 0.5
    np.testing.assert_allclose(staleness_weight(np.array([0, 3, 8, 15])), [1, 0.5, 1 / 3, 0.25])
    with pytest.raises(ValueError, match="staleness"):
        staleness_weight(-1)


def test_buffer_step_by_hand() -> None:
    # K = 3, eta_g = 0.5; model w = ([1, 1], [[0]])
    # deltas: ([3, 0], [[2]]) fresh (w 1), ([0, 4], [[4]]) s = 3 (w 1/2),
    #         ([6, 6], [[0]]) s = 8 (w 1/3)
    # weighted sum: ([3 + 0 + 2, 0 + 2 + 2], [[2 + 2 + 0]]) = ([5, 4], [[4]])
    # step: w + 0.5 * sum / 3 = ([1 + 5/6, 1 + 4/6], [[4/6]])
    buf = FedBuffBuffer(3, server_lr=0.5)
    model = [np.array([1.0, 1.0]), np.array([[0.0]])]
    assert buf.add([np.array([3.0, 0.0]), np.array([[2.0]])], staleness=0) is False
    assert buf.add([np.array([0.0, 4.0]), np.array([[4.0]])], staleness=3) is False
    assert len(buf) == 2
    assert buf.add([np.array([6.0, 6.0]), np.array([[0.0]])], staleness=8) is True
    new = buf.flush(model)
    np.testing.assert_allclose(new[0], [1 + 5 / 6, 1 + 4 / 6])
    np.testing.assert_allclose(new[1], [[4 / 6]])
    assert len(buf) == 0
    # the caller's model is not changed, and an empty buffer leaves the model as it is
    np.testing.assert_array_equal(model[0], [1.0, 1.0])
    np.testing.assert_array_equal(buf.flush(new)[0], new[0])


def test_buffer_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="buffer size"):
        FedBuffBuffer(0)
    with pytest.raises(ValueError, match="server_lr"):
        FedBuffBuffer(2, server_lr=0.0)
    buf = FedBuffBuffer(2)
    buf.add([np.zeros(2)], staleness=0)
    with pytest.raises(ValueError, match="layers"):
        buf.add([np.zeros(3)], staleness=0)


def test_an_answer_is_refused_for_any_non_finite_value_and_only_for_one() -> None:
    from mel_opt.schemes.fedbuff import _refusal

    model = [np.zeros((3, 2), np.float32), np.zeros(2, np.float32)]
    # the largest finite float32 in every entry: finite
    huge = [np.full((3, 2), 3.4e38, np.float32), np.full(2, -3.4e38, np.float32)]
    assert _refusal(huge, model) is None
    for bad in (np.nan, np.inf, -np.inf):
        sent = [a.copy() for a in huge]
        sent[1][1] = bad
        assert _refusal(sent, model) == "non-finite values"
    # and in float64
    wide = [np.full((3, 2), 1e308), np.full(2, 1e308)]
    assert _refusal(wide, [a.astype(float) for a in model]) is None
    wide[0][2, 1] = np.nan
    assert _refusal(wide, [a.astype(float) for a in model]) == "non-finite values"
    assert _refusal(None, model) == "error reply"
    assert _refusal([np.zeros(3, np.float32)], model) == "model of other shapes"
    assert staleness_weight(np.int64(8)) == staleness_weight(8) == pytest.approx(1 / 3)
