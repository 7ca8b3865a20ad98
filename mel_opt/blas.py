"""The BLAS numpy runs on, for a run's provenance (``summary.json`` of ``melopt train``).

OpenBLAS picks its matrix kernels for the CPU when the library loads, unless the environment
variable ``OPENBLAS_CORETYPE`` names a core type: then it uses that one's kernels, even older
ones than the CPU can run. The training's products are what a full-size run spends its time
on, so the kernels decide its wall time (paper 000's network at full size: about 170 s of CPU
time with the AVX2 ``Haswell`` kernels against 120 s with the AVX-512 ``SkylakeX`` ones on an
AMD Zen 5). ``melopt train`` records and prints which kernels ran and whether the environment
chose them.
"""

from __future__ import annotations

import os
from typing import Any

ENV = "OPENBLAS_CORETYPE"


def describe() -> dict[str, Any]:
    """Library, version, kernels (``architecture``) and ``forced_by`` (``OPENBLAS_CORETYPE=...``
    when the environment names the core type, else None) of numpy's BLAS."""
    import numpy  # noqa: F401  (loads the BLAS that threadpoolctl then reports)
    from threadpoolctl import threadpool_info

    forced = f"{ENV}={os.environ[ENV]}" if os.environ.get(ENV) else None
    for lib in threadpool_info():
        if lib.get("user_api") == "blas":
            return {"library": lib.get("internal_api"), "version": lib.get("version"),
                    "architecture": lib.get("architecture"), "forced_by": forced}
    return {"library": None, "version": None, "architecture": None, "forced_by": forced}
