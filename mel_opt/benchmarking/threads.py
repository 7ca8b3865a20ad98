"""Pinning the number of BLAS threads during a measurement.

TwoNN's matrix products (32 x 784 by 784 x 50) are too small to gain from several BLAS threads,
and on a machine whose other cores are busy a multithreaded OpenBLAS waits for its starved
threads, which can make the same run many times slower next to one busy process. Measurements
therefore run with one BLAS thread by default (both SB and the FLOPS baseline, so they stay
comparable). This talks to the OpenBLAS that numpy loaded, through its
exported ``*_set_num_threads`` functions; where none is found it does nothing and says so.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from collections.abc import Iterator
from functools import cache

import numpy as np

_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
            "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
            "openblas_get_num_threads64_", "openblas_get_num_threads")


@cache
def _openblas() -> tuple[object, object] | None:
    """(setter, getter) of the OpenBLAS numpy uses, or None."""
    base = os.path.dirname(os.path.dirname(np.__file__))
    candidates = sorted(glob.glob(os.path.join(base, "numpy.libs", "*openblas*")))
    candidates += sorted(glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs",
                                                "*openblas*")))
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, s) for s in _SETTERS if hasattr(lib, s)), None)
        getter = next((getattr(lib, g) for g in _GETTERS if hasattr(lib, g)), None)
        if setter is not None and getter is not None:
            getter.restype = ctypes.c_int
            return setter, getter
    return None


def blas_control_available() -> bool:
    """True when the BLAS thread count can be set from here."""
    return _openblas() is not None


@contextlib.contextmanager
def blas_threads(n: int | None) -> Iterator[bool]:
    """Run the block with ``n`` BLAS threads (None or 0: leave as is); yields whether set."""
    count = int(n or 0)
    lib = _openblas() if count > 0 else None
    if lib is None:
        yield False
        return
    setter, getter = lib
    before = int(getter())  # type: ignore[operator]
    setter(ctypes.c_int(count))  # type: ignore[operator]
    try:
        yield True
    finally:
        setter(ctypes.c_int(before))  # type: ignore[operator]
