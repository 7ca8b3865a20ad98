"""The CSA rule as the thesis author's experiment code applied it (thesis Section 3.4 baseline).

Weights w_k = (c_k + b_k) / sum(c + b) with both rates in shard units, shards
d_k = max(1, round(w_k * total)), and iterations
tau_k = max(1, round(c_k / d_k * (D - (2 Omega + d_k) / b_k))) with the model size Omega in
shards. The rounding (and the floor of one iteration) can overshoot the deadline: its truancy
is the model's counterpart of thesis Fig. 3.7. mel_opt's own ``csa`` method solves the CSA
allocation exactly instead.
"""

from __future__ import annotations

import numpy as np

from mel_opt.problems.dab.instance import DabInstance


def author_csa(inst: DabInstance) -> dict[str, list[int]]:
    """Shards and iterations per learner by the author's rounded CSA rule.

    Returns
    -------
    dict
        ``{"shards": [d_k], "tau": [tau_k]}``, a solution for :func:`mel_opt.problems.dab.verify`.
    """
    b = inst.bandwidth / inst.shard_bytes  # shards/s
    om = inst.model_bytes / inst.shard_bytes  # shards
    c = inst.train_rate
    w = (c + b) / (c + b).sum()
    d = np.maximum(np.round(w * inst.total_shards).astype(int), 1)  # type: ignore[operator]
    tau = np.maximum(1, np.round(c / d * (inst.deadline - (2 * om + d) / b))).astype(int)
    return {"shards": d.tolist(), "tau": tau.tolist()}
