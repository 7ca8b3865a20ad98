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
