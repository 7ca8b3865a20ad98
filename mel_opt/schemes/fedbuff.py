"""FedBuff: buffered asynchronous aggregation (Nguyen et al., AISTATS 2022).

Learners train asynchronously, at most ``C`` at once (the concurrency). Each finished learner
sends its delta (its local model minus the global model it started from); the server keeps
them in a buffer and, once the buffer holds ``K`` updates, takes one server step and empties
the buffer (the paper's Algorithm 1). An update trained from a global model ``s`` server steps
old (its staleness) is weighted by ``1 / sqrt(1 + s)``, the paper's staleness function.

The server step of Algorithm 1 sums the weighted deltas, divides by ``K`` and applies the
server learning rate ``eta_g``::

    w <- w + eta_g * (1 / K) * sum_i delta_i / sqrt(1 + s_i)

(the paper's clients send ``w_start - w_local`` and the server subtracts; here deltas are
``w_local - w_start`` and are added, which is the same step).
"""

from __future__ import annotations

from typing import overload

import numpy as np
from numpy.typing import NDArray

__all__ = ["FedBuffBuffer", "staleness_weight"]


@overload
def staleness_weight(s: int | float) -> float: ...


@overload
def staleness_weight(s: NDArray[np.generic]) -> NDArray[np.float64]: ...


def staleness_weight(s: int | float | NDArray[np.generic]) -> float | NDArray[np.float64]:
    """FedBuff's staleness weight ``1 / sqrt(1 + s)``.

    Parameters
    ----------
    s : int, float or array
        Staleness: how many server steps were taken between the global model a learner
        started from and the step its update joins (0 = fresh). Must be >= 0.

    Returns
    -------
    float or numpy.ndarray
        The weight, in (0, 1]; an array of the same shape for an array.

    Raises
    ------
    ValueError
        When any staleness is negative or not finite.
    """
    arr = np.asarray(s, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"staleness must be finite and >= 0, got {s!r}")
    w = 1.0 / np.sqrt(1.0 + arr)
    if w.ndim == 0:
        return float(w)
    return w


class FedBuffBuffer:
    """The server's buffer of weighted updates (FedBuff, Algorithm 1).

    Parameters
    ----------
    size : int
        ``K``, the number of updates that triggers a server step (>= 1).
    server_lr : float, optional
        ``eta_g``, the server learning rate applied to the buffered average (> 0; 1.0 by default).

    Examples
    --------
    >>> import numpy as np
    >>> b = FedBuffBuffer(2)
    >>> b.add([np.array([2.0])], staleness=0)
    False
    >>> b.add([np.array([4.0])], staleness=3)
    True
    >>> b.flush([np.array([1.0])])[0]
    array([3.])
    """

    def __init__(self, size: int, server_lr: float = 1.0) -> None:
        if int(size) != size or size < 1:
            raise ValueError(f"buffer size must be an integer >= 1, got {size!r}")
        if not np.isfinite(server_lr) or server_lr <= 0:
            raise ValueError(f"server_lr must be > 0, got {server_lr!r}")
        self.size = int(size)
        self.server_lr = float(server_lr)
        self._sum: list[NDArray[np.float64]] | None = None
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, delta: list[NDArray[np.floating]], staleness: int) -> bool:
        """Add one learner's update, weighted by its staleness.

        Parameters
        ----------
        delta : list of numpy.ndarray
            The learner's local model minus the global model it started from, one array per
            layer, shaped like the model.
        staleness : int
            Server steps taken since that learner's starting model (>= 0).

        Returns
        -------
        bool
            True once the buffer holds ``size`` updates (time for :meth:`flush`).
        """
        w = staleness_weight(staleness)
        if self._sum is None:
            self._sum = [w * np.asarray(d, dtype=float) for d in delta]
        else:
            if len(delta) != len(self._sum) or any(
                np.shape(d) != s.shape for d, s in zip(delta, self._sum, strict=True)
            ):
                raise ValueError("delta's layers do not match the buffered ones")
            for acc, d in zip(self._sum, delta, strict=True):
                acc += w * np.asarray(d, dtype=float)
        self._count += 1
        return self._count >= self.size

    def flush(self, model: list[NDArray[np.floating]]) -> list[NDArray[np.float64]]:
        """Take the server step and empty the buffer.

        Parameters
        ----------
        model : list of numpy.ndarray
            The current global model, one array per layer.

        Returns
        -------
        list of numpy.ndarray
            ``model + server_lr * (sum of weighted deltas) / size`` (Algorithm 1 divides by
            ``K``, the buffer size, also when flushed early with fewer updates); the model
            unchanged (copied) when the buffer is empty.
        """
        if self._sum is None:
            return [np.array(m, dtype=float) for m in model]
        out = [
            np.asarray(m, dtype=float) + self.server_lr * acc / self.size
            for m, acc in zip(model, self._sum, strict=True)
        ]
        self._sum = None
        self._count = 0
        return out
