"""The array module a computation runs on: numpy for host arrays, a device's for its arrays.

The MLP (:mod:`mel_opt.mlp`) and the emulator's trainer are written once against an *array
module* ``xp`` with numpy's interface. :func:`array_module` picks it from the arrays an
operation is given, so the same code runs where its arrays live: numpy for numpy arrays (and
for any type nothing is registered for), CuPy for arrays on a GPU (registered by
:mod:`mel_opt.training.device` when ``--device cuda`` loads it), or a module a test registers.

A few numpy functions differ between the modules in what they take; :func:`put_along_axis`
and :func:`take_rows` call numpy's exactly as before on the host and a form every device
module has elsewhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["array_module", "put_along_axis", "register", "take_rows"]

_MODULES: dict[type, Any] = {}


def register(array_type: type, module: Any) -> None:
    """Arrays of ``array_type`` compute with ``module`` (numpy's interface)."""
    _MODULES[array_type] = module


def array_module(*arrays: Any) -> Any:
    """The module of the first of ``arrays`` whose type is registered (or a subclass of one),
    else numpy."""
    for a in arrays:
        kind = type(a)
        module = _MODULES.get(kind)
        if module is not None:
            return module
        if kind is not np.ndarray:
            for registered, module in _MODULES.items():
                if isinstance(a, registered):
                    return module
    return np


def put_along_axis(xp: Any, arr: Any, indices: Any, values: Any, axis: int) -> None:
    """``arr``'s entries at ``indices`` along ``axis`` set to ``values`` (numpy's
    ``put_along_axis``; on a module without one, CuPy before 13, as one fancy-index
    assignment: the indices along the other axes are their positions)."""
    if xp is np or hasattr(xp, "put_along_axis"):
        xp.put_along_axis(arr, indices, values, axis=axis)
        return
    index = []
    for d in range(arr.ndim):
        if d == axis:
            index.append(indices)
        else:
            shape = [1] * arr.ndim
            shape[d] = arr.shape[d]
            index.append(xp.arange(arr.shape[d]).reshape(shape))
    arr[tuple(index)] = values


def take_rows(xp: Any, x: Any, rows: Any, out: Any) -> Any:
    """``x[rows]`` along the first axis, written into ``out``. numpy's ``take`` with
    ``mode="clip"`` (it skips the buffered bounds check ``out`` would otherwise cost); CuPy's
    ``take`` has no ``mode`` (its rows here are always in range)."""
    if xp is np:
        return np.take(x, rows, axis=0, out=out, mode="clip")
    return xp.take(x, rows, axis=0, out=out)
