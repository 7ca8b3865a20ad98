"""dab instances (thesis Chapter 3) and their validation.

Fields (design brief): ``deadline_s`` D [s], ``iterations`` mu (passes over the local shards),
``model_bytes`` Omega_m, ``shard_bytes`` Omega_d, ``total_shards`` (the fixed amount the
centralised ``csa`` baseline splits; optional, DAB itself does not need it) and ``learners``
[{``name``, ``train_rate`` c_k [shards/s], ``bandwidth_Bps`` b_k [bytes/s]}].
Optional for ``csa`` (the d_l and d_u of the mel-async problem): ``min_shards`` (default 1) and
``max_shards`` (default ``total_shards``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.io.validate import Validator, readonly_array


@dataclass(frozen=True, eq=False)
class DabInstance:
    """A validated dab instance (arrays are read-only).

    Attributes
    ----------
    name : str
    deadline : float
        D [s].
    iterations : int
        mu, training passes over the allocated shards per global cycle.
    model_bytes, shard_bytes : float
        Omega_m and Omega_d [bytes].
    train_rate : ndarray, shape (K,)
        c_k [shards/s] for one pass.
    bandwidth : ndarray, shape (K,)
        b_k [bytes/s].
    learner_names : tuple of str
    total_shards : int or None
        Shards the centralised baseline ``csa`` must place (None: csa is not applicable).
    min_shards : int
        Least shards ``csa`` gives a learner it uses (d_l).
    max_shards : int or None
        Most shards ``csa`` gives one learner (d_u; None: ``total_shards``).
    """

    name: str
    deadline: float
    iterations: int
    model_bytes: float
    shard_bytes: float
    train_rate: np.ndarray
    bandwidth: np.ndarray
    learner_names: tuple[str, ...]
    total_shards: int | None = None
    min_shards: int = 1
    max_shards: int | None = None
    description: str = ""

    problem = "dab"

    @property
    def K(self) -> int:
        return int(self.train_rate.shape[0])


def parse(doc: Mapping[str, Any], source: str | None = None) -> DabInstance:
    """Validate a dab document and build the instance.

    Raises
    ------
    InstanceError
        Listing every problem with its JSON path (wrong types, NaN/inf, non-positive rates,
        sizes or deadline, duplicate names, ``min_shards`` > ``max_shards``).
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None  # finish() raised otherwise
    D = v.number(root, "deadline_s", "$", positive=True)
    mu = v.number(root, "iterations", "$", integer=True, positive=True)
    om = v.number(root, "model_bytes", "$", positive=True)
    od = v.number(root, "shard_bytes", "$", positive=True)
    total = v.number(root, "total_shards", "$", default=None, integer=True, positive=True)
    dmin = v.number(root, "min_shards", "$", default=1, integer=True, positive=True)
    dmax = v.number(root, "max_shards", "$", default=None, integer=True, positive=True)
    learners = v.list(root, "learners", "$")

    rates: list[float] = []
    bws: list[float] = []
    names: list[str] = []
    for i, p, lr in v.objects(learners, "learners"):
        v.unique_name(lr, p, f"learner{i}", names, "learner")
        c = v.number(lr, "train_rate", p, positive=True)
        b = v.number(lr, "bandwidth_Bps", p, positive=True)
        if c is not None and b is not None:
            rates.append(float(c))
            bws.append(float(b))

    if dmin is not None and dmax is not None and dmin > dmax:
        v.error("min_shards", f"min_shards = {dmin} exceeds max_shards = {dmax}")
    if dmin is not None and total is not None and dmax is None and dmin > total:
        v.error("min_shards", f"min_shards = {dmin} exceeds total_shards = {total}")
    v.finish()
    desc = root.get("description", "")
    return DabInstance(
        name=str(root.get("name", "instance")),
        deadline=float(D),
        iterations=int(mu),
        model_bytes=float(om),
        shard_bytes=float(od),
        train_rate=readonly_array(rates),
        bandwidth=readonly_array(bws),
        learner_names=tuple(names),
        total_shards=None if total is None else int(total),
        min_shards=int(dmin),
        max_shards=None if dmax is None else int(dmax),
        description=desc if isinstance(desc, str) else "",
    )
