"""The catalogue's default data set follows what the machine can read, and the suite does not
depend on it: Fashion-MNIST where it is found (mel_opt's cache or Debian's folder), else the
digits. Both cases run here whatever this machine has: the test writes a small data set of IDX
files into a cache folder of its own and hides Debian's folder."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.cli import cli
from mel_opt.reproduce.catalogue import Context
from mel_opt.training import data as D


def _idx(arr: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes (magic 0x0800 + ndim, big-endian sizes, the body)."""
    head = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(n).to_bytes(4, "big")
                                                     for n in arr.shape)
    return head + arr.astype(np.uint8).tobytes()


def write_fake(folder: Path, n_train: int = 600, n_test: int = 200) -> None:
    """Ten classes of 8 x 8 images, each class a bright square at its own place."""
    rng = np.random.default_rng(3)
    folder.mkdir(parents=True)
    for part, n in (("train", n_train), ("t10k", n_test)):
        labels = np.arange(n) % 10
        images = rng.integers(0, 60, (n, 8, 8))
        for i, c in enumerate(labels):
            r, col = divmod(int(c), 4)
            images[i, 2 * r:2 * r + 2, 2 * col:2 * col + 2] = 250
        (folder / f"{part}-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(images)))
        (folder / f"{part}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(labels)))


@pytest.fixture
def no_debian(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of our own, and Debian's folders pointed where nothing is."""
    monkeypatch.setenv(D.DATA_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(D, "KNOWN_IDX_DIRS", {k: str(tmp_path / "no-debian" / k)
                                              for k in D.KNOWN_IDX_DIRS})
    return tmp_path / "cache"


def test_without_fashion_mnist_the_default_is_the_digits(no_debian: Path) -> None:
    assert D.dataset_dir("fashion-mnist") is None
    assert Context().training_data() == "digits"
    assert Context(dataset="mnist").training_data() == "mnist"  # said: kept


def test_with_fashion_mnist_the_default_is_it_end_to_end(no_debian: Path,
                                                         tmp_path: Path) -> None:
    write_fake(no_debian / "fashion-mnist")
    assert D.dataset_dir("fashion-mnist") == no_debian / "fashion-mnist"
    assert Context().training_data() == "fashion-mnist"
    out = tmp_path / "rep"
    res = CliRunner().invoke(cli, ["reproduce", "001-fig3.6-3.8-training", "--quick",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "001-fig3.6-3.8-training" / "outcome.json").read_text())
    assert any("fashion-mnist" in n for n in doc["notes"])
    # the fake set was read: 600 training images of 64 pixels, its own ten classes
    ds = D.load_dataset("fashion-mnist")
    assert ds.x_train.shape == (600, 64) and ds.classes == 10
