"""The BLAS numpy runs on: which one (a run's provenance) and how many threads it gets.

:func:`describe` says which BLAS and kernels ran (``summary.json`` of ``melopt train``).
OpenBLAS picks its matrix kernels for the CPU when the library loads, unless the environment
variable ``OPENBLAS_CORETYPE`` names a core type: then it uses that one's kernels, even older
ones than the CPU can run. The training's products are what a full-size run spends its time
on, so the kernels decide its wall time (paper 000's network at full size, one learner
thread: 157 s with the AVX2 ``Haswell`` kernels against 102 s with the AVX-512 ``SkylakeX`` ones
on an AMD Zen 5). ``melopt train`` records and prints which kernels ran and whether the environment
chose them.

:func:`blas_threads` runs a block with one BLAS thread while subset benchmarking measures and
while learners train. The products in a TwoNN pass (a 32 x 784 batch times a 784 x 50 weight
matrix, and smaller ones after it) are too small for a BLAS to gain anything from splitting them
across threads: handing the pieces out costs more than it saves. Worse, when the machine's other
cores are busy, a multithreaded BLAS waits at every product for threads that cannot get a core,
so the same measurement can take several times longer beside a single busy process, and the rate
SB reports would say more about the neighbours than about the device. Measurements therefore run
with one BLAS thread unless the caller asks for another count; SB and the FLOPS baseline use
the same setting, so the two stay comparable.

The count is set with threadpoolctl, which looks through the shared libraries already loaded
into this process and recognises the BLAS implementations among them: the OpenBLAS bundled in
the numpy and scipy wheels of PyPI, a system OpenBLAS (Debian's numpy), MKL (conda's default
numpy), BLIS and FlexiBLAS. Every BLAS it finds is limited for the duration of the block and
gets its previous count back afterwards. A library is only found once it is loaded, hence the
numpy import below. Where threadpoolctl finds no BLAS it can control (a reference BLAS without
a thread setting, say), nothing is changed and :func:`blas_threads` yields False.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy  # noqa: F401  (loads numpy's BLAS, so that threadpoolctl can find it)
from threadpoolctl import threadpool_info, threadpool_limits

ENV = "OPENBLAS_CORETYPE"


def _numpy_first(libs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The BLAS libraries loaded, numpy's first: the one in numpy's own install (a wheel's
    ``numpy.libs``) or the one numpy was built against (same version), else the first loaded."""
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


_API = "blas"


def _load_scipy_blas() -> None:
    """Load scipy's BLAS (its wheel bundles its own OpenBLAS) so the limit covers it too: the
    trainer updates large layers through it (:mod:`mel_opt.training.gemm`), and a library
    loaded inside the block would keep its default threads (measured: the full-size run with
    two learner threads took 121 s instead of about 55 s, each learner's update starting BLAS
    threads of its own)."""
    with contextlib.suppress(ImportError):
        import scipy.linalg.cython_blas  # noqa: F401


def blas_control_available() -> bool:
    """True when threadpoolctl finds a BLAS in this process whose thread count it can set."""
    return any(lib.get("user_api") == _API for lib in threadpool_info())


@contextlib.contextmanager
def blas_threads(n: int | None) -> Iterator[bool]:
    """Run the block with ``n`` BLAS threads (None or 0: leave as is); yields whether set.

    Every BLAS threadpoolctl finds (numpy's and scipy's, loaded first) gets ``n`` threads;
    each one's previous count is restored when the block ends, also when it ends with an
    exception.
    """
    count = int(n or 0)
    if count > 0:
        _load_scipy_blas()
    if count <= 0 or not blas_control_available():
        yield False
        return
    with threadpool_limits(limits=count, user_api=_API):
        yield True
