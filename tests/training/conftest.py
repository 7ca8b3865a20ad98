"""A device for the tests on the CPU that behaves as CuPy does where it matters (``strict``).

:class:`StrictArray` holds a numpy array and refuses what CuPy's arrays refuse: implicit
conversion to numpy (``__array__`` raises TypeError, so ``np.asarray``, a numpy function or a
numpy operator given one fails), and mixing with host arrays (a numpy array as an operand, an
index or an argument of the device module is a TypeError; numpy scalars and Python numbers
are fine, as they are for CuPy). :class:`StrictModule` is its array module: only the numpy
functions the trainer needs that CuPy 13 and 14 have too (:data:`CUPY_FUNCTIONS`: another
name is an AttributeError, so code that calls a function CuPy lacks fails here), with CuPy's
limits (``take`` has no ``mode``), and the explicit transfers ``asarray`` (host to device)
and ``asnumpy`` (back), which it counts. A path that falls back to numpy silently, mixes host
and device arrays or calls a function CuPy lacks fails a test run on it; the counts show that
the path ran on the device at all (and that the data set was uploaded once).

The fixture ``strict_cuda`` makes ``--device cuda`` load this device for one test.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from mel_opt import arrays
from mel_opt.training import device as dev

#: numpy functions the strict module offers: those the emulator's device path calls, each of
#: which CuPy 13 and 14 have with the arguments used here (docs.cupy.dev's API reference)
CUPY_FUNCTIONS = frozenset({
    "argmax", "empty", "empty_like", "exp", "expand_dims", "greater", "log", "matmul", "max",
    "maximum", "ones", "put_along_axis", "repeat", "squeeze", "sum", "take", "take_along_axis",
    "zeros", "zeros_like", "arange", "array",
})
#: Methods of a device array the strict array forwards (CuPy's ndarray has each).
METHODS = frozenset({"transpose", "reshape", "copy", "astype", "fill", "sum", "mean", "max",
                     "argmax", "ravel", "item", "tolist"})
#: Attributes that are not arrays.
PLAIN = frozenset({"shape", "dtype", "ndim", "size", "nbytes", "itemsize", "strides"})


def _host_refused(what: str) -> TypeError:
    return TypeError(f"a host (numpy) array {what}: CuPy refuses it; transfer it explicitly")


def _un(x: Any, what: str = "given to the device") -> Any:
    """The numpy array inside a strict array; refuses numpy arrays (host data)."""
    if isinstance(x, StrictArray):
        return x.a
    if isinstance(x, np.ndarray):
        raise _host_refused(what)
    if isinstance(x, tuple):
        return tuple(_un(v, what) for v in x)
    if isinstance(x, list):
        if any(isinstance(v, (StrictArray, np.ndarray, list)) for v in x):
            raise TypeError("a list of arrays given to the device (CuPy takes arrays)")
        return x
    return x


def _wrap(r: Any) -> Any:
    if isinstance(r, np.ndarray):
        return StrictArray(r)
    if isinstance(r, np.generic):  # CuPy's reductions return 0-d device arrays
        return StrictArray(np.asarray(r))
    if isinstance(r, tuple):
        return tuple(_wrap(v) for v in r)
    return r


class StrictArray:
    """A device array as the tests see it (module docstring)."""

    __slots__ = ("a",)
    __array_ufunc__ = None  # numpy's ufuncs and operators refuse it (TypeError)

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("implicit conversion of a device array to numpy (CuPy refuses it; "
                        "use asnumpy)")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise TypeError(f"numpy.{func.__name__} called on a device array (CuPy refuses it)")

    def __getattr__(self, name: str) -> Any:
        if name in PLAIN:
            return getattr(self.a, name)
        if name == "T":
            return StrictArray(self.a.T)
        if name in METHODS:
            method = getattr(self.a, name)
            return lambda *args, **kwargs: _wrap(method(*_un(args), **{
                k: _un(v) for k, v in kwargs.items()}))
        raise AttributeError(f"the strict device array has no {name!r}")

    def __repr__(self) -> str:
        return f"StrictArray({self.a!r})"

    def __len__(self) -> int:
        return len(self.a)

    def __float__(self) -> float:
        return float(self.a)

    def __int__(self) -> int:
        return int(self.a)

    def __bool__(self) -> bool:
        return bool(self.a)

    def __getitem__(self, index: Any) -> StrictArray:
        return _wrap(self.a[_un(index, "as an index")])

    def __setitem__(self, index: Any, value: Any) -> None:
        self.a[_un(index, "as an index")] = _un(value)


def _binary(op: str, inplace: bool = False) -> Any:
    fn = getattr(np.ndarray, op)

    def method(self: StrictArray, other: Any) -> Any:
        if inplace:
            fn(self.a, _un(other, "as an operand"))
            return self
        return _wrap(fn(self.a, _un(other, "as an operand")))

    return method


for _op in ("add", "sub", "mul", "truediv", "pow", "matmul", "and", "or", "floordiv", "mod"):
    setattr(StrictArray, f"__{_op}__", _binary(f"__{_op}__"))
    setattr(StrictArray, f"__r{_op}__", _binary(f"__r{_op}__"))
    setattr(StrictArray, f"__i{_op}__", _binary(f"__i{_op}__", inplace=True))
for _op in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(StrictArray, f"__{_op}__", _binary(f"__{_op}__"))
for _op in ("neg", "pos", "invert", "abs"):
    setattr(StrictArray, f"__{_op}__",
            (lambda name: lambda self: StrictArray(getattr(self.a, name)()))(f"__{_op}__"))
StrictArray.__hash__ = None  # type: ignore[assignment]


class StrictModule:
    """The strict device's array module (module docstring), with its transfer counts."""

    ndarray = StrictArray

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.uploads: list[tuple[tuple[int, ...], str]] = []
        self.downloads = 0

    def asarray(self, a: Any, dtype: Any = None) -> StrictArray:
        if isinstance(a, StrictArray):
            return a if dtype is None else StrictArray(a.a.astype(dtype))
        host = np.array(a, dtype=dtype, copy=True)
        self.uploads.append((host.shape, str(host.dtype)))
        return StrictArray(host)

    def asnumpy(self, a: Any) -> np.ndarray:
        if not isinstance(a, StrictArray):
            raise TypeError(f"asnumpy of {type(a).__name__}, not a device array")
        self.downloads += 1
        return a.a.copy()

    def __getattr__(self, name: str) -> Any:
        if name not in CUPY_FUNCTIONS:
            if isinstance(getattr(np, name, None), type):  # dtypes: np.float32 ...
                return getattr(np, name)
            raise AttributeError(f"the strict device module has no {name!r} (not in the "
                                 "CuPy functions this test backend vouches for)")
        fn = getattr(np, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "take" and "mode" in kwargs:
                raise TypeError("cupy.take has no mode")
            self.calls[name] += 1
            return _wrap(fn(*_un(args), **{k: _un(v) for k, v in kwargs.items()}))

        return call


@pytest.fixture
def strict_cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[StrictModule]:
    """``--device cuda`` is the strict device for this test; yields its module (counts)."""
    module = StrictModule()
    arrays.register(StrictArray, module)

    def load() -> dev.Device:
        return dev.Device("cuda", module, module.asarray, module.asnumpy)

    monkeypatch.setitem(dev.LOADERS, "cuda", load)
    dev.forget_devices()
    yield module
    dev.forget_devices()
    arrays._MODULES.pop(StrictArray, None)


@pytest.fixture
def fresh_devices() -> Iterator[None]:
    """Devices loaded anew before and after the test (one that swaps what ``cuda`` finds)."""
    dev.forget_devices()
    yield
    dev.forget_devices()
