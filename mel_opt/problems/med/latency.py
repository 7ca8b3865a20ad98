"""The expected-delay model of MED (thesis Eq. 4.2-4.3, with the local iterations).

Learner j holding d >= 1 shards of task i, in state k, is busy for (Eq. 4.2 with tau_i)

    t_ijk(d) = (2 Omega_i + alpha_i d) / b_jk + tau_i d / R_ijk            [s]

(download and upload of the model, download of the shards, tau_i passes over them). Its expected
delay (Eq. 4.3) is linear in d:

    delta_ij(d) = sum_k gamma_jk t_ijk(d) = A_ij + C_ij d,
    A_ij = 2 Omega_i E[1/b_j],   C_ij = alpha_i E[1/b_j] + tau_i E[1/R_ij].

How mel_opt reads (4.3)-(4.4) (the decisions table of the med page of the docs): the delay is
charged only to assigned pairs (d_ij >= 1; a learner holding no shard of a task neither downloads
its model nor delays it), as in the author's code where every term is multiplied by x_ij; the
iterations tau_i multiply the training term, which Eq. 4.2 omits. An assigned learner holds at
least max(D_l, 1) shards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mel_opt.problems.med.instance import MedInstance

EPS = 1e-9  # relative slack when a level H is compared with A + C d (float round-off only)


@dataclass(frozen=True, eq=False)
class Coefficients:
    """Expected-delay coefficients of every (task, learner) pair.

    Attributes
    ----------
    A : ndarray (m, n)
        Fixed part 2 Omega_i E[1/b_j] [s] (model download and upload).
    C : ndarray (m, n)
        Per-shard part alpha_i E[1/b_j] + tau_i E[1/R_ij] [s/shard].
    L : int
        Shards an assigned learner holds at least, max(D_l, 1).
    cap : ndarray (m, n) of int
        Most shards learner j can take while meeting deadline T_i in expectation (4.4b):
        floor((T_i - A_ij) / C_ij); below L the pair is not allowed.
    """

    A: np.ndarray
    C: np.ndarray
    L: int
    cap: np.ndarray

    @property
    def allowed(self) -> np.ndarray:
        """(m, n) boolean: learner j may serve task i (it meets T_i with L shards)."""
        return self.cap >= self.L


def coefficients(inst: MedInstance) -> Coefficients:
    """A_ij, C_ij of Eq. (4.3) (with tau_i) and the deadline caps of (4.4b)."""
    inv_b = (inst.probs / inst.bandwidth).sum(axis=1)  # E[1/b_j]            (n,)
    inv_r = np.einsum("jk,jik->ij", inst.probs, 1.0 / inst.train_rate)  # E[1/R_ij] (m, n)
    A = 2.0 * inst.model_bytes[:, None] * inv_b[None, :]
    C = inst.shard_bytes[:, None] * inv_b[None, :] + inst.iterations[:, None] * inv_r
    L = max(int(inst.min_shards), 1)
    cap = shards_within(A, C, inst.deadline[:, None])
    for arr in (A, C, cap):
        arr.setflags(write=False)
    return Coefficients(A=A, C=C, L=L, cap=cap)


def shards_within(A: np.ndarray, C: np.ndarray, H: np.ndarray | float) -> np.ndarray:
    """Largest whole d with A + C d <= H (may be negative), elementwise [shards].

    The relative slack ``EPS`` keeps a level that is exactly A + C d (up to round-off) at d.
    """
    x = (np.asarray(H, dtype=float) - A) / C
    return np.floor(x + EPS * np.maximum(1.0, np.abs(x))).astype(np.int64)


def state_times(inst: MedInstance, task: np.ndarray, d: np.ndarray, state: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Download, training and upload time of learners in given states (Eq. 4.2 with tau_i).

    Parameters
    ----------
    task : int array (..., n)
        Task served by each learner (any valid index where ``d`` is 0).
    d : int array (..., n)
        Shards held.
    state : int array (..., n)
        State of each learner.

    Returns
    -------
    download, train, upload : float arrays (..., n) [s]
        (Omega + alpha d) / b, tau d / R and Omega / b; all three are 0 where d == 0.
    """
    n = inst.n_learners
    j = np.broadcast_to(np.arange(n), np.shape(d))
    b = inst.bandwidth[j, state]
    r = inst.train_rate[j, task, state]
    used = d > 0
    omega = inst.model_bytes[task]
    download = np.where(used, (omega + inst.shard_bytes[task] * d) / b, 0.0)
    train = np.where(used, inst.iterations[task] * d / r, 0.0)
    upload = np.where(used, omega / b, 0.0)
    return download, train, upload


def learner_types(coef: Coefficients, price: np.ndarray | None = None) -> np.ndarray:
    """Type label per learner: learners with identical (A, C) columns (and price, if given).

    Learners of one type are interchangeable in (4.4) (when the budget can bind, only if their
    prices also match), which the exact method and the MILP's symmetry breaking exploit.
    """
    cols = [coef.A.T, coef.C.T]
    if price is not None:
        cols.append(np.asarray(price, dtype=float)[:, None])
    key = np.concatenate(cols, axis=1)
    _, labels = np.unique(key, axis=0, return_inverse=True)
    return labels.reshape(-1).astype(np.int64)


def budget_can_bind(inst: MedInstance) -> bool:
    """False when no allocation can exceed B: sum_i D_i * max_j p_j <= B (4.4d slack)."""
    return float(inst.shards.sum()) * float(inst.price.max()) > inst.budget * (1 + EPS)
