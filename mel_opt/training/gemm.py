"""w := w - a^T g in one BLAS pass (gemm with alpha = -1, beta = 1), with the GIL released.

numpy has no product that adds into its output, so the trainer's update of a large weight
matrix would otherwise form the gradient in a buffer and subtract it: two passes over the
matrix. BLAS's ``?gemm`` does both in one. scipy's Python wrappers of it
(``scipy.linalg.blas``) hold the GIL while BLAS runs, which serialises the learner threads of
:func:`mel_opt.training.local.local_sgd` (the full-size run with two threads took longer than
with one); so the routine is called here through the C entry point scipy exports for Cython
(``scipy.linalg.cython_blas``), by ``ctypes``, which releases the GIL for the call.

Only where every BLAS loaded runs AVX-512 OpenBLAS kernels (:data:`ONE_PASS_CORES`): there the
one pass measured 10-15 % faster a step of mlp000 on 784 pixels (``SkylakeX`` kernels on an
AMD Zen 5); with the AVX2 ``Haswell`` kernels on the same machine it measured 8 % slower than
the product into a buffer and the subtraction, which other kernels keep.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

import numpy as np

#: OpenBLAS core types (as the library names them, lower case) with AVX-512 kernels
ONE_PASS_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})

Subtract = Callable[[np.ndarray, np.ndarray, np.ndarray], bool]


def _avx512_openblas_only() -> bool:
    """Every BLAS in the process (numpy's, scipy's) is OpenBLAS with AVX-512 kernels."""
    from threadpoolctl import threadpool_info

    libs = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return bool(libs) and all(lib.get("internal_api") == "openblas"
                              and str(lib.get("architecture")).lower() in ONE_PASS_CORES
                              for lib in libs)


def _entry_point(name: str) -> int:
    """Address of scipy's BLAS routine ``name`` (``sgemm``, ``dgemm``): the pointer in the
    capsule ``scipy.linalg.cython_blas`` exports for it."""
    from scipy.linalg import cython_blas

    capsule = cython_blas.__pyx_capi__[name]  # type: ignore[attr-defined]
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return int(api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule)))


def blas_subtract(dtype: np.dtype) -> Subtract | None:
    """``subtract(w, a, g)``: w -= a^T g in place by BLAS gemm (w: (n_in, n_out) C-ordered,
    a: (m, n_in), g: (m, n_out), rows of unit stride), True when done, False when the
    operands do not fit (the caller then does it itself). scipy's ``?gemm`` through ``ctypes``
    (Fortran calling convention: every argument by reference, column-major), whatever
    :data:`ONE_PASS_CORES` says."""
    real = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}.get(
        np.dtype(dtype))
    if real is None:
        return None
    ref_int, ref_real, ptr = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(real), ctypes.c_void_p
    proto = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_char_p, ref_int, ref_int, ref_int,
                             ref_real, ptr, ref_int, ptr, ref_int, ref_real, ptr, ref_int)
    gemm = proto(_entry_point("sgemm" if real is ctypes.c_float else "dgemm"))
    item = np.dtype(dtype).itemsize
    minus_one, one = real(-1.0), real(1.0)

    def subtract(w: np.ndarray, a: np.ndarray, g: np.ndarray) -> bool:
        m, n_in = a.shape
        n_out = g.shape[1]
        if (w.dtype != dtype or a.dtype != dtype or g.dtype != dtype
                or not w.flags.c_contiguous or w.shape != (n_in, n_out) or g.shape[0] != m
                or m < 1 or a.strides[1] != item or g.strides[1] != item
                or a.strides[0] < item * max(n_in, 1) or g.strides[0] < item * max(n_out, 1)
                or a.strides[0] % item or g.strides[0] % item):
            return False
        # column-major: w^T (n_out x n_in, leading dimension n_out) := w^T - g^T a, where
        # g's rows are the columns of g^T (as given, "N") and a's rows those of a^T ("T")
        c_int = ctypes.c_int
        gemm(b"N", b"T", c_int(n_out), c_int(n_in), c_int(m), minus_one,
             g.ctypes.data, c_int(g.strides[0] // item), a.ctypes.data,
             c_int(a.strides[0] // item), one, w.ctypes.data, c_int(n_out))
        return True

    return subtract


@functools.cache
def one_pass(dtype: np.dtype) -> Subtract | None:
    """:func:`blas_subtract` for ``dtype`` where every BLAS loaded runs AVX-512 OpenBLAS
    kernels, else None (product into a buffer, then the subtraction). Decided once per
    process and type; scipy.linalg is imported here, on the first large step, not with the
    training package (it adds about 0.15 s to every import)."""
    from scipy.linalg import cython_blas  # noqa: F401  (loads scipy's BLAS before the check)

    if not _avx512_openblas_only():
        return None
    return blas_subtract(dtype)
