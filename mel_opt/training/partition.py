"""Splitting a training set over K learners: IID, pathological non-IID and Dirichlet.

A partition gives every learner a *pool* of sample indices (the data it holds, or the data the
orchestrator sends it). What a learner trains on in a cycle is drawn from its pool with
:func:`draw`, so the partition (which labels a learner sees) and the allocation (how many
samples it processes) stay separate:

- ``iid``: a random permutation cut into pools of the requested sizes (paper 004, Section
  VI-A, case 1, with sizes proportional to the allocation);
- ``non-iid``: the pathological split of paper 004, Section VI-A, case 2 (and of federated
  averaging): the samples sorted by label are cut into 2K shards and every learner gets two
  at random. Here every shard holds a single label (a label's samples are cut into as many
  shards as its share of the data asks for), so a learner sees at most two labels;
- ``dirichlet:ALPHA``: the samples of every class are split over the learners in proportions
  drawn from Dirichlet(ALPHA, ..., ALPHA) times the requested sizes (small ALPHA: few labels
  per learner; large ALPHA: close to IID).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mel_opt.errors import UsageError


@dataclass(frozen=True)
class Partition:
    """A partition scheme: ``kind`` is ``iid``, ``non-iid`` or ``dirichlet`` (with ``alpha``)."""

    kind: str
    alpha: float = 0.0

    def __str__(self) -> str:
        return f"dirichlet:{self.alpha:g}" if self.kind == "dirichlet" else self.kind


def parse_partition(text: str) -> Partition:
    """``iid``, ``non-iid`` or ``dirichlet:ALPHA`` (ALPHA > 0)."""
    t = text.strip().lower()
    if t in ("iid", "non-iid"):
        return Partition(t)
    if t.startswith("dirichlet:"):
        try:
            alpha = float(t.split(":", 1)[1])
        except ValueError:
            alpha = float("nan")
        if not alpha > 0 or not np.isfinite(alpha):
            raise UsageError(f"dirichlet:ALPHA needs a positive number ALPHA, got {text!r}")
        return Partition("dirichlet", alpha)
    raise UsageError(f"unknown partition {text!r}; choose iid, non-iid or dirichlet:ALPHA")


@dataclass(frozen=True)
class Shares:
    """How large the learners' local data sets are relative to each other when nothing
    allocates them: ``equal``, or ``lognormal:SIGMA`` (each learner's share a lognormal draw
    of log-spread SIGMA: a few learners hold much of the data, as in the federated data sets
    FedScale collects)."""

    kind: str
    sigma: float = 0.0

    def __str__(self) -> str:
        return f"lognormal:{self.sigma:g}" if self.kind == "lognormal" else self.kind

    def draw(self, K: int, seed: int) -> np.ndarray:
        """K relative shares for the run of ``seed`` (their own generator, seeded
        ``[seed, 11]``: a run's other draws are untouched)."""
        if self.kind == "equal" or self.sigma == 0:
            return np.ones(K)
        return np.random.default_rng([seed, 11]).lognormal(0.0, self.sigma, K)


def parse_shares(text: str) -> Shares:
    """``equal`` or ``lognormal:SIGMA`` (SIGMA >= 0)."""
    t = text.strip().lower()
    if t == "equal":
        return Shares("equal")
    if t.startswith("lognormal:"):
        try:
            sigma = float(t.split(":", 1)[1])
        except ValueError:
            sigma = float("nan")
        if not sigma >= 0 or not np.isfinite(sigma) or sigma > 10:
            raise UsageError(f"lognormal:SIGMA needs a number SIGMA in [0, 10], got {text!r}")
        return Shares("lognormal", sigma)
    raise UsageError(f"unknown shares {text!r}; choose equal or lognormal:SIGMA")


def proportional_sizes(weights: np.ndarray, total: int) -> np.ndarray:
    """Whole sizes proportional to ``weights`` adding up to ``total``, each at least 1.

    Largest-remainder rounding of total * w_k / sum(w) (then one sample moved to any learner
    left with none, taken from the largest).
    """
    w = np.asarray(weights, dtype=float)
    K = w.size
    if total < K:
        raise UsageError(f"{total} training samples cannot give each of {K} learners one")
    exact = total * w / w.sum()
    n = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - n), kind="stable")
    n[order[: total - int(n.sum())]] += 1
    while (n < 1).any():
        n[int(np.argmax(n))] -= 1
        n[int(np.argmin(n))] += 1
    return n


def make_pools(labels: np.ndarray, sizes: np.ndarray, part: Partition, classes: int,
               rng: np.random.Generator) -> list[np.ndarray]:
    """Pools of sample indices, one per learner (see the module docstring).

    Parameters
    ----------
    labels : ndarray of int, shape (N,)
        Labels of the training set.
    sizes : ndarray of int, shape (K,)
        Requested pool sizes (sum at most N). ``iid`` meets them exactly, ``dirichlet`` in
        expectation, ``non-iid`` gives every learner two shards of about N / (2K) samples.
    part : Partition
    classes : int
    rng : numpy Generator
    """
    N, K = labels.size, sizes.size
    if part.kind == "iid":
        perm = rng.permutation(N)
        cuts = np.cumsum(sizes)[:-1]
        return [np.sort(p) for p in np.split(perm[: int(sizes.sum())], cuts)]
    if part.kind == "non-iid":
        return _label_shards(labels, K, classes, rng)
    pools: list[list[np.ndarray]] = [[] for _ in range(K)]
    share = sizes / sizes.sum()
    for c in range(classes):
        idx = rng.permutation(np.flatnonzero(labels == c))
        p = rng.dirichlet(np.full(K, part.alpha)) * share
        cuts = np.rint(np.cumsum(p)[:-1] / p.sum() * idx.size).astype(np.int64)
        for k, chunk in enumerate(np.split(idx, cuts)):
            pools[k].append(chunk)
    out = [np.sort(np.concatenate(p)) for p in pools]
    for k in range(K):  # a learner with nothing gets one sample of the largest pool
        if out[k].size == 0:
            j = int(np.argmax([p.size for p in out]))
            out[k], out[j] = out[j][-1:], out[j][:-1]
    return out


def _label_shards(labels: np.ndarray, K: int, classes: int,
                  rng: np.random.Generator) -> list[np.ndarray]:
    """2K single-label shards, two per learner, at random."""
    counts = np.bincount(labels, minlength=classes)
    present = np.flatnonzero(counts)
    n_shards = 2 * K
    if n_shards < present.size:  # fewer shards than labels: the most frequent labels only
        present = present[np.argsort(-counts[present], kind="stable")[:n_shards]]
        per_label = np.ones(present.size, dtype=np.int64)
    else:
        per_label = proportional_sizes(counts[present].astype(float), n_shards)
    shards: list[np.ndarray] = []
    for c, m in zip(present, per_label, strict=True):
        idx = rng.permutation(np.flatnonzero(labels == c))
        shards += np.array_split(idx, int(m))
    order = rng.permutation(n_shards)
    return [np.sort(np.concatenate([shards[order[2 * k]], shards[order[2 * k + 1]]]))
            for k in range(K)]


def draw(pool: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` sample indices from ``pool``: without replacement when the pool is large enough,
    else the whole pool plus random repeats (the thesis' "duplication if needed")."""
    if n <= pool.size:
        return pool if n == pool.size else rng.choice(pool, n, replace=False)
    return np.concatenate([pool, rng.choice(pool, n - pool.size, replace=True)])
