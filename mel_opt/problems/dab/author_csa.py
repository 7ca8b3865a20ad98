"""The CSA rule as the thesis author's experiment code applied it (thesis Section 3.4 baseline).

With both rates in shard units (c_k shards/s trained for one pass, b_k = bandwidth / shard
bytes shards/s downloaded) and the model size Omega in shards (model bytes / shard bytes):

- weights w_k = (c_k + b_k) / sum_l (c_l + b_l);
- shards d_k = round(w_k * total_shards);
- passes tau_k = max(1, round(c_k / d_k * (D - (2 Omega + d_k) / b_k))): the passes that fit in
  what is left of D after the model goes down and up and the shards come down.

Rounding is Python's and numpy's round half to even. A learner whose rounded share is 0 takes
no part (tau_k = 0; the author's formula would divide by zero there). Nothing makes the shares
add up to ``total_shards`` exactly, and the floor of one pass (or a share too large for D)
overshoots the deadline: the rule's truancy is the time model's counterpart of thesis Figs.
3.6-3.7. mel_opt's own ``csa`` method solves the CSA allocation exactly instead.
"""

from __future__ import annotations

import numpy as np

from mel_opt.problems.dab.instance import DabInstance


def author_csa(inst: DabInstance) -> dict[str, list[int]]:
    """Shards and passes per learner by the author's rounded CSA rule (module docstring).

    Returns
    -------
    dict
        ``{"shards": [d_k], "tau": [tau_k]}``, a solution for :func:`mel_opt.problems.dab.verify`.

    Raises
    ------
    ValueError
        When the instance has no ``total_shards`` (the rule splits a fixed total).
    """
    if inst.total_shards is None:
        raise ValueError("the CSA rule splits total_shards, which the instance does not give")
    b = inst.bandwidth / inst.shard_bytes  # shards/s
    om = inst.model_bytes / inst.shard_bytes  # shards
    c = inst.train_rate
    w = (c + b) / (c + b).sum()
    d = np.round(w * inst.total_shards).astype(np.int64)
    used = d > 0
    fit = inst.deadline - (2 * om + d) / b  # s left for training after the transfers
    with np.errstate(divide="ignore", invalid="ignore"):
        passes = np.round(c / d * fit)
    tau = np.where(used, np.maximum(1, np.where(used, passes, 1)), 0).astype(np.int64)
    return {"shards": d.tolist(), "tau": tau.tolist()}
