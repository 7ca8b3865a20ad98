"""The BLAS numpy runs on, for a run's provenance (``summary.json`` of ``melopt train``).

OpenBLAS picks its matrix kernels for the CPU when the library loads, unless the environment
variable ``OPENBLAS_CORETYPE`` names a core type: then it uses that one's kernels, even older
ones than the CPU can run. The training's products are what a full-size run spends its time
on, so the kernels decide its wall time (paper 000's network at full size, one learner
thread: 157 s with the AVX2 ``Haswell`` kernels against 102 s with the AVX-512 ``SkylakeX`` ones
on an AMD Zen 5). ``melopt train`` records and prints which kernels ran and whether the environment
chose them.
"""

from __future__ import annotations

import os
from typing import Any

ENV = "OPENBLAS_CORETYPE"


def _numpy_first(libs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The BLAS libraries loaded, numpy's first: the one in numpy's own install (a wheel's
    ``numpy.libs``) or the one numpy was built against (same version), else the first loaded."""
    import numpy

    home = os.path.dirname(os.path.abspath(numpy.__file__))
    try:
        built = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"].get("version")
    except Exception:  # noqa: BLE001 (an older numpy's config: no dicts)
        built = None

    def rank(lib: dict[str, Any]) -> int:
        if str(lib.get("filepath", "")).startswith(home):
            return 0
        return 1 if built is not None and lib.get("version") == built else 2

    return sorted(libs, key=rank)


def describe() -> dict[str, Any]:
    """Library, version, kernels (``architecture``) and ``forced_by`` (``OPENBLAS_CORETYPE=...``
    when the environment names the core type, else None) of numpy's BLAS, and ``also_loaded``:
    the other BLAS libraries in the process (scipy's, which the trainer's one-pass update of a
    large layer runs on), each as library, version and kernels."""
    import numpy  # noqa: F401  (loads the BLAS that threadpoolctl then reports)
    from threadpoolctl import threadpool_info

    forced = f"{ENV}={os.environ[ENV]}" if os.environ.get(ENV) else None
    libs = _numpy_first([lib for lib in threadpool_info() if lib.get("user_api") == "blas"])
    brief = [{"library": lib.get("internal_api"), "version": lib.get("version"),
              "architecture": lib.get("architecture")} for lib in libs]
    if not brief:
        brief = [{"library": None, "version": None, "architecture": None}]
    return {**brief[0], "forced_by": forced, "also_loaded": brief[1:]}
