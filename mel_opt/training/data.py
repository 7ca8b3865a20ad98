"""Real data sets for the training emulator, read offline.

- ``digits``: the handwritten digits that ship inside scikit-learn (1,797 images of 8 x 8
  pixels, 10 classes; no download). A fixed, stratified 80/20 split (seed 0) gives the
  training and the validation set, the same for every run.
- IDX files (the MNIST / Fashion-MNIST format: big-endian header, magic 0x0000080D with D
  dimensions, optionally gzip-compressed) from a directory holding ``train-images-idx3-ubyte``,
  ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``
  (each possibly with ``.gz``). ``fashion-mnist`` and ``mnist`` are looked for in mel_opt's
  cache (:func:`cache_dir`, filled by ``melopt data fetch``, :mod:`mel_opt.training.fetch`),
  then where Debian's packages put them (:data:`KNOWN_IDX_DIRS`; Debian packages
  Fashion-MNIST as ``dataset-fashion-mnist``); :func:`dataset_dir` says which.
  ``idx:DIR`` (or a directory path) reads any other.

Pixels are scaled to [0, 1]; images are flattened to feature vectors.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mel_opt.errors import UsageError, needs_extra

#: Where Debian's packages put the known IDX data sets (read when the cache has none).
KNOWN_IDX_DIRS = {
    "fashion-mnist": "/usr/share/datasets/fashion-mnist",
    "mnist": "/usr/share/datasets/mnist",
}
#: The Debian package of a known IDX data set, where Debian has one.
DEBIAN_PACKAGES = {"fashion-mnist": "dataset-fashion-mnist"}
DATASETS = ("digits", *KNOWN_IDX_DIRS, "idx:DIR")
#: The environment variable naming the folder of the data-set cache (one sub-folder per set).
DATA_DIR_ENV = "MELOPT_DATA_DIR"
#: The four files of an IDX data set, without the ``.gz`` they may carry.
IDX_STEMS = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte")

_IDX_TYPES: dict[int, str] = {0x08: "u1", 0x09: "i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4",
                              0x0E: ">f8"}


@dataclass(frozen=True, eq=False)
class Dataset:
    """A labelled classification data set split into training and validation parts.

    Attributes
    ----------
    name : str
    x_train, x_test : ndarray, shape (n, features)
        Features in [0, 1].
    y_train, y_test : ndarray of int64, shape (n,)
        Class indices 0 .. classes - 1.
    classes : int
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: int

    @property
    def features(self) -> int:
        return int(self.x_train.shape[1])

    def astype(self, dtype: np.dtype) -> Dataset:
        """The same data with features of ``dtype``."""
        return Dataset(self.name, self.x_train.astype(dtype, copy=False), self.y_train,
                       self.x_test.astype(dtype, copy=False), self.y_test, self.classes)


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read one IDX file (gzip-compressed if its name ends in ``.gz``).

    Raises
    ------
    UsageError
        If the file is missing, its magic number is not an IDX one or its size does not match
        the dimensions in its header.
    """
    p = Path(path)
    try:
        raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{p}: no such IDX file") from None
    except (OSError, EOFError) as exc:
        raise UsageError(f"{p}: cannot read ({exc})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES or raw[3] < 1:
        raise UsageError(f"{p}: not an IDX file (bad magic number)")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise UsageError(f"{p}: truncated IDX header")
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_TYPES[raw[2]])
    body = raw[4 + 4 * ndim:]
    if len(body) != int(np.prod(shape)) * dtype.itemsize:
        raise UsageError(f"{p}: IDX body has {len(body)} bytes, the header {shape} needs "
                         f"{int(np.prod(shape)) * dtype.itemsize}")
    return np.frombuffer(body, dtype=dtype).reshape(shape)


def _find_idx_file(directory: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"),
                 stem.replace("-idx", ".idx") + ".gz"):
        if (directory / name).is_file():
            return directory / name
    return None


def _idx_file(directory: Path, stem: str) -> Path:
    found = _find_idx_file(directory, stem)
    if found is not None:
        return found
    raise UsageError(f"{directory}: no {stem}[.gz] (an IDX data set needs train-images-idx3-"
                     "ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and "
                     "t10k-labels-idx1-ubyte)")


def load_idx_dir(directory: str | os.PathLike[str], name: str | None = None) -> Dataset:
    """The four MNIST-format files of ``directory`` as a :class:`Dataset`."""
    d = Path(directory)
    if not d.is_dir():
        raise UsageError(f"IDX directory {d} does not exist")
    parts = []
    for split in ("train", "t10k"):
        x = read_idx(_idx_file(d, f"{split}-images-idx3-ubyte"))
        y = read_idx(_idx_file(d, f"{split}-labels-idx1-ubyte")).astype(np.int64)
        if x.shape[0] != y.shape[0]:
            raise UsageError(f"{d}: {split} has {x.shape[0]} images but {y.shape[0]} labels")
        scale = 255.0 if x.dtype == np.uint8 else max(float(np.abs(x).max()), 1.0)
        parts.append((x.reshape(x.shape[0], -1).astype(np.float64) / scale, y))
    classes = int(max(parts[0][1].max(), parts[1][1].max())) + 1
    return Dataset(name or d.name, parts[0][0], parts[0][1], parts[1][0], parts[1][1], classes)


def _stratified_split(y: np.ndarray, test_fraction: float,
                      seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_test = int(round(test_fraction * idx.size))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def load_digits_dataset() -> Dataset:
    """scikit-learn's 8 x 8 digits, a fixed stratified 80/20 split (seed 0).

    The file scikit-learn ships (``datasets/data/digits.csv.gz``) is read directly when it can
    be found without importing scikit-learn (0.6 s of imports: every message of a live run
    starts a fresh learner process); otherwise through ``sklearn.datasets.load_digits``.
    """
    values = _digits_file()
    if values is None:
        try:
            from sklearn.datasets import load_digits
        except ImportError:
            raise UsageError(needs_extra("the digits data set (scikit-learn)", "train")) from None
        bunch = load_digits()
        data, target = np.asarray(bunch.data), np.asarray(bunch.target)
    else:
        data, target = values[:, :-1], values[:, -1]
    x = np.asarray(data, dtype=np.float64) / 16.0
    y = np.asarray(target, dtype=np.int64)
    tr, te = _stratified_split(y, 0.2, 0)
    return Dataset("digits", x[tr], y[tr], x[te], y[te], 10)


def _digits_file() -> np.ndarray | None:
    """scikit-learn's digits table (1,797 x 65: pixels, then the label) read from its file,
    or None where that file is not found."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            try:
                values = np.loadtxt(path, delimiter=",")
            except (OSError, ValueError):
                return None
            return values if values.ndim == 2 and values.shape[1] == 65 else None
    return None


def data_root() -> Path:
    """The folder of mel_opt's data-set cache: ``$MELOPT_DATA_DIR`` if set, else
    ``$XDG_CACHE_HOME/mel_opt/datasets`` (``~/.cache/mel_opt/datasets`` when
    ``XDG_CACHE_HOME`` is unset, empty or relative, as the XDG base-directory rules say)."""
    own = os.environ.get(DATA_DIR_ENV)
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "mel_opt" / "datasets"


def cache_dir(name: str) -> Path:
    """The cache folder of the data set ``name`` (it may not exist)."""
    return data_root() / name


def holds_idx_set(directory: str | os.PathLike[str]) -> bool:
    """True if ``directory`` holds the four IDX files of a data set (any of the names
    :func:`load_idx_dir` reads)."""
    d = Path(directory)
    return d.is_dir() and all(_find_idx_file(d, stem) is not None for stem in IDX_STEMS)


def dataset_dir(name: str) -> Path | None:
    """Where the data set ``name`` is read from, or None where it is not found.

    ``fashion-mnist`` and ``mnist``: the cache (:func:`cache_dir`) when it holds the four
    files, else Debian's folder (:data:`KNOWN_IDX_DIRS`) when it exists, else None.
    ``idx:DIR`` or a directory path: that folder if it exists. ``digits`` is not read from a
    folder (it ships inside scikit-learn): None.

    Raises
    ------
    UsageError
        A name :func:`load_dataset` does not know.
    """
    check_dataset_name(name)
    if name == "digits":
        return None
    if name in KNOWN_IDX_DIRS:
        if holds_idx_set(cache_dir(name)):
            return cache_dir(name)
        debian = Path(KNOWN_IDX_DIRS[name])
        return debian if debian.is_dir() else None
    folder = Path(name[4:] if name.startswith("idx:") else name)
    return folder if folder.is_dir() else None


def not_installed(name: str) -> str:
    """Why the known data set ``name`` cannot be read, and how to get it."""
    debian = DEBIAN_PACKAGES.get(name)
    other = f"; Debian: apt-get install {debian}" if debian else ""
    return (f"data set {name!r} is not installed: neither the cache {cache_dir(name)} nor "
            f"{KNOWN_IDX_DIRS[name]} holds it (get it with: melopt data fetch {name}{other}; "
            f"or pass --dataset idx:DIR)")


def check_dataset_name(name: str) -> None:
    """Refuse a name :func:`load_dataset` cannot mean (UsageError); whether its files are there
    is found when it is loaded."""
    if name == "digits" or name in KNOWN_IDX_DIRS or name.startswith("idx:") or os.sep in name \
            or Path(name).is_dir():
        return
    raise UsageError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")


def load_dataset(name: str, *, max_train: int | None = None,
                 max_test: int | None = None) -> Dataset:
    """A data set by name: ``digits``, ``fashion-mnist``, ``mnist``, ``idx:DIR`` or a directory.

    ``fashion-mnist`` and ``mnist`` are read from the folder :func:`dataset_dir` names: the
    cache first, then Debian's folder.

    Parameters
    ----------
    name : str
    max_train, max_test : int, optional
        Keep a fixed random subset (seed 0) of at most this many training / validation
        samples (a large IDX set trains faster on a subset).

    Raises
    ------
    UsageError
        Unknown name, missing directory or files, unreadable files.
    """
    if name == "digits":
        ds = load_digits_dataset()
    elif name in KNOWN_IDX_DIRS:
        directory = dataset_dir(name)
        if directory is None:
            raise UsageError(not_installed(name))
        ds = load_idx_dir(directory, name)
    elif name.startswith("idx:"):
        ds = load_idx_dir(name[4:])
    else:
        check_dataset_name(name)
        ds = load_idx_dir(name)
    return subsample(ds, max_train, max_test)


def hold_out(ds: Dataset, n: int) -> tuple[Dataset, tuple[np.ndarray, np.ndarray]]:
    """``ds`` without ``n`` of its training samples, and those samples (features, labels): a
    validation split disjoint from both the training and the test split (a fixed random
    subset, the same for every run on ``ds``).

    Raises
    ------
    UsageError
        When ``n`` is not in [1, training samples - 1].
    """
    total = int(ds.y_train.size)
    if not 1 <= n < total:
        raise UsageError(f"a validation split needs 1 to {total - 1} of the {total} training "
                         f"samples, got {n}")
    held = np.zeros(total, dtype=bool)
    held[np.random.default_rng(1).choice(total, n, replace=False)] = True
    rest = Dataset(ds.name, ds.x_train[~held], ds.y_train[~held], ds.x_test, ds.y_test,
                   ds.classes)
    return rest, (ds.x_train[held], ds.y_train[held])


def subsample(ds: Dataset, max_train: int | None, max_test: int | None) -> Dataset:
    """``ds`` with at most ``max_train`` / ``max_test`` samples (fixed random subsets)."""
    rng = np.random.default_rng(0)
    parts = []
    for x, y, cap in ((ds.x_train, ds.y_train, max_train), (ds.x_test, ds.y_test, max_test)):
        if cap is not None and cap < 1:
            raise UsageError(f"a subset size must be at least 1, got {cap}")
        if cap is not None and cap < x.shape[0]:
            keep = np.sort(rng.choice(x.shape[0], cap, replace=False))
            x, y = x[keep], y[keep]
        parts.append((x, y))
    return Dataset(ds.name, parts[0][0], parts[0][1], parts[1][0], parts[1][1], ds.classes)
