"""Where the emulator trains: numpy on the host (``--device cpu``, the default) or a GPU through
CuPy (``--device cuda``, the ``gpu`` extra).

A :class:`Device` is an array module with numpy's interface (:attr:`Device.xp`) and the
explicit transfers between the host and it: :meth:`Device.put` (host to device),
:meth:`Device.get` (device to host) and :meth:`Device.resident` (a host array's device copy,
uploaded once and kept while the host array lives: the data set of a run crosses the bus once,
not every round). The trainer (:mod:`mel_opt.training.local`), the MLP (:mod:`mel_opt.mlp`)
and FedProx's local solver are written once against the array module of the arrays they are
given (:func:`mel_opt.arrays.array_module`); on the host every call is numpy's, as before.

``cuda`` imports CuPy when it is first asked for, never before; without CuPy, or with no CUDA
device visible, :func:`get_device` refuses in one line naming the ``gpu`` extra
(:class:`~mel_opt.errors.SettingError` on ``--device``: exit code 2). What stays on the host:
the random draws (the schedules are drawn by numpy's generator, so a seed gives the same
minibatches on either device), the aggregation (:func:`mel_opt.problems.aggregate.combine`),
the attacks, Oort's utilities and the live runs.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mel_opt.arrays import register
from mel_opt.errors import SettingError, install_hint

__all__ = ["ACCURACY_SAMPLES", "CPU", "DEVICES", "GPU_EXTRA", "LOSS_RTOL", "Device",
           "get_device", "params_on_host", "rows_differ"]

DEVICES = ("cpu", "cuda")
#: The optional extra that brings CuPy (pyproject.toml: cupy-cuda12x).
GPU_EXTRA = "gpu"
#: How far a row's loss on another device may be from the host's on the same seed, relative,
#: in float32 (the rows agree within this and :data:`ACCURACY_SAMPLES`): a GPU sums the
#: products of a matrix product in another order than the host's BLAS and rounds exp and log
#: its own way, about 1e-7 relative a step; over the thousands of steps of a run the
#: differences grow with the steps but SGD does not amplify them much (a contraction near a
#: minimum); 1e-3 leaves a wide margin over what such a run drifts and is still far below a
#: difference between two seeds (1e-2 and more on these losses).
LOSS_RTOL = 1e-3
#: Validation samples whose predicted class may differ between devices on the same seed: a
#: sample whose two best scores are within a rounding of each other may go either way.
ACCURACY_SAMPLES = 3


class Device:
    """An array module and the transfers between the host and it.

    Parameters
    ----------
    name : str
        ``cpu``, ``cuda`` (or a test's).
    xp : module
        numpy's interface over this device's arrays.
    to_device, to_host : callable
        Host array to device array, and back (``cupy.asarray``, ``cupy.asnumpy``).
    synchronize : callable, optional
        Waits until the device has done what it was given (timing).

    Attributes
    ----------
    uploaded, downloaded : int
        Bytes moved to and from the device so far (0 on the host).
    """

    def __init__(self, name: str, xp: Any, to_device: Callable[[np.ndarray], Any],
                 to_host: Callable[[Any], np.ndarray],
                 synchronize: Callable[[], None] | None = None) -> None:
        self.name = name
        self.xp = xp
        self._to_device = to_device
        self._to_host = to_host
        self._synchronize = synchronize
        self.uploaded = 0
        self.downloaded = 0
        self._resident: dict[int, tuple[weakref.ref[np.ndarray], Any]] = {}

    def __repr__(self) -> str:
        return f"Device({self.name!r})"

    @property
    def host(self) -> bool:
        """True for numpy on the host (no transfer ever happens)."""
        return self.xp is np

    def put(self, a: np.ndarray) -> Any:
        """``a`` (a host array) on the device: a copy there (the host's array itself on the
        host)."""
        if self.host:
            return a
        self.uploaded += int(a.nbytes)
        return self._to_device(np.ascontiguousarray(a))

    def get(self, a: Any) -> np.ndarray:
        """``a`` (a device array) on the host."""
        if self.host:
            return np.asarray(a)
        self.downloaded += int(a.nbytes)
        return self._to_host(a)

    def resident(self, a: np.ndarray) -> Any:
        """The device's copy of the host array ``a``, uploaded on the first call and kept
        while ``a`` lives (read-only data: the data set, a validation split)."""
        if self.host:
            return a
        key = id(a)
        held = self._resident.get(key)
        if held is not None and held[0]() is a:
            return held[1]
        copy = self.put(a)
        self._resident[key] = (weakref.ref(a), copy)
        weakref.finalize(a, self._resident.pop, key, None)
        return copy

    def synchronize(self) -> None:
        """Wait until the device has done its queued work (for timing; a no-op on the
        host)."""
        if self._synchronize is not None:
            self._synchronize()


#: numpy on the host.
CPU = Device("cpu", np, np.asarray, np.asarray)


def _cpu() -> Device:
    return CPU


def _refuse(detail: str) -> SettingError:
    return SettingError("device", "--device", detail, " ")


def _cuda() -> Device:
    """CuPy on the current CUDA device, or the one-line refusal."""
    try:
        import cupy  # type: ignore[import-not-found, unused-ignore]
    except Exception as exc:  # not installed, or built for another CUDA: no GPU path
        gone = isinstance(exc, ModuleNotFoundError) and exc.name == "cupy"
        why = "" if gone else f" (importing cupy failed: {type(exc).__name__}: {exc})"
        raise _refuse(f"cuda needs the {GPU_EXTRA} extra{why}: {install_hint(GPU_EXTRA)}; with "
                      "CUDA 13 drivers pip install cupy-cuda13x instead") from None
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
        why = "no CUDA device is visible"
    except Exception as exc:  # no driver, no device, a driver too old for this CuPy
        count, why = 0, f"no CUDA device is usable ({type(exc).__name__}: {exc})"
    if count < 1:
        raise _refuse(f"cuda: {why}; run on a machine with an NVIDIA GPU, or --device cpu")
    register(cupy.ndarray, cupy)
    return Device("cuda", cupy, cupy.asarray, cupy.asnumpy,
                  lambda: cupy.cuda.get_current_stream().synchronize())


#: How each device name is loaded (a test may put its own array module in for ``cuda``).
LOADERS: dict[str, Callable[[], Device]] = {"cpu": _cpu, "cuda": _cuda}
_LOADED: dict[str, Device] = {}


def get_device(name: str) -> Device:
    """The device ``name`` (one of :data:`DEVICES`), loaded once per process.

    Raises
    ------
    SettingError
        An unknown name; ``cuda`` without CuPy (the ``gpu`` extra) or without a visible CUDA
        device (the message says which, and how to install).
    """
    if name not in LOADERS:
        raise _refuse(f"must be one of {', '.join(DEVICES)}, got {name!r}")
    if name not in _LOADED:
        _LOADED[name] = LOADERS[name]()
    return _LOADED[name]


def forget_devices() -> None:
    """Load every device anew on its next :func:`get_device` (tests that swap a loader)."""
    _LOADED.clear()


def params_on_host(device: Device, params: list[Any]) -> list[np.ndarray]:
    """``params`` (arrays on ``device``) on the host."""
    return [device.get(a) for a in params]


#: Row columns read off the model (loss and accuracy: compared within the tolerances); every
#: other column (time, bytes, updates...) comes from the clock and the random draws, which
#: stay on the host, and must be equal.
MODEL_COLUMNS = ("loss", "accuracy", "val_accuracy")


def rows_differ(reference: Sequence[dict[str, Any]], other: Sequence[dict[str, Any]],
                samples: int, validation: int | None = None) -> list[str]:
    """Where ``other``'s rows (trained on another device, same seeds) differ from
    ``reference``'s beyond float32 rounding: a loss more than :data:`LOSS_RTOL` apart
    (relative), an accuracy more than :data:`ACCURACY_SAMPLES` of the ``samples`` test samples
    apart (``val_accuracy``: of ``validation``), any other column not equal (a float to
    1e-9). Empty: they agree."""
    out = []
    if len(reference) != len(other):
        out.append(f"{len(other)} rows against {len(reference)}")
    for i, (a, b) in enumerate(zip(reference, other, strict=False)):
        if set(a) != set(b):
            out.append(f"row {i}: columns {sorted(set(a) ^ set(b))} in one only")
            continue
        for col, x in a.items():
            y = b[col]
            if col == "loss":
                ok = math.isclose(x, y, rel_tol=LOSS_RTOL, abs_tol=LOSS_RTOL * 1e-3) or (
                    math.isnan(x) and math.isnan(y))
            elif col in MODEL_COLUMNS and x is not None and y is not None:
                n = samples if col == "accuracy" else (validation or samples)
                ok = abs(float(x) - float(y)) <= ACCURACY_SAMPLES / n + 1e-12
            elif isinstance(x, float) and isinstance(y, float):
                ok = math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
            else:
                ok = x == y
            if not ok:
                out.append(f"row {i} ({', '.join(str(a[k]) for k in a if k in KEYS)}): "
                           f"{col} {y!r} against {x!r}")
    return out


#: Columns that name a row (shown where it differs).
KEYS = ("scheme", "seed", "cycle", "step")
