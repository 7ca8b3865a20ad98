"""mel-async instances: the time model of paper 000, Eq. (1)-(5), and its validation.

Learner k given d_k samples and tau_k local updates is busy for (Eq. 5)

    t_k = C2_k tau_k d_k + C1_k d_k + C0_k        [s]

with, from the physical form (Eq. 1-4; rate R_k = W log2(1 + P h / N0) in bit/s),

    C2_k = cycles_per_sample / cpu_hz_k                          (Eq. 2)
    C1_k = (F P_d + 2 P_m S_d) / R_k = (sample_bits + 2 model_bits_per_sample) / R_k
    C0_k = 2 P_m S_m / R_k = 2 model_bits / R_k                  (Eq. 3-4)

In the distributed-data mode the samples are already on the learner, so the ``sample_bits``
term of C1 disappears (footnotes 1-2 of the paper).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.io.validate import Validator, join, readonly_array

MODES = ("task-parallel", "distributed-data")


@dataclass(frozen=True, eq=False)
class MelAsyncInstance:
    """A validated mel-async instance (coefficient form; arrays are read-only).

    Attributes
    ----------
    name : str
    cycle_time : float
        Global cycle clock T [s].
    total_samples, min_samples, max_samples : int
        d, d_l and d_u of (7c) and (7f).
    c2, c1, c0 : ndarray, shape (K,)
        Coefficients of Eq. (5) in s/(sample update), s/sample and s.
    learner_names : tuple of str
    mode : str
        ``task-parallel`` or ``distributed-data``.
    """

    name: str
    cycle_time: float
    total_samples: int
    min_samples: int
    max_samples: int
    c2: np.ndarray
    c1: np.ndarray
    c0: np.ndarray
    learner_names: tuple[str, ...]
    mode: str = "task-parallel"
    description: str = ""

    problem = "mel-async"

    @property
    def K(self) -> int:
        return int(self.c2.shape[0])

    def times(self, d: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """t_k of Eq. (5) for allocations ``d`` and update counts ``tau`` [s]."""
        return self.c2 * tau * d + self.c1 * d + self.c0


def parse(doc: Mapping[str, Any], source: str | None = None) -> MelAsyncInstance:
    """Validate a mel-async document (see the design brief) and build the instance.

    Raises
    ------
    InstanceError
        Listing every problem with its JSON path. Besides types and ranges this rejects
        d_l > d_u, K d_u < d, K d_l > d, and any learner that cannot finish even one update on
        d_l samples within T (its cycle time is infeasible whatever the allocation).
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None
    T = v.number(root, "cycle_time_s", "$", positive=True)
    d = v.number(root, "total_samples", "$", integer=True, positive=True)
    dl = v.number(root, "min_samples", "$", integer=True, positive=True)
    du = v.number(root, "max_samples", "$", integer=True, positive=True)
    mode = v.string(root, "mode", "$", default="task-parallel", choices=MODES)
    learners = v.list(root, "learners", "$")

    model = None
    needs_model = isinstance(learners, list) and any(
        isinstance(x, dict) and ("cpu_hz" in x or "rate_bps" in x) for x in learners
    )
    if "model" in root or needs_model:
        mdoc = v.obj(root.get("model"), "model") if "model" in root else None
        if "model" not in root:
            v.error("model", "is required when learners are given in the physical form")
        if mdoc is not None:
            model = {
                "cycles_per_sample": v.number(mdoc, "cycles_per_sample", "model", positive=True),
                "sample_bits": v.number(mdoc, "sample_bits", "model", nonnegative=True),
                "model_bits": v.number(mdoc, "model_bits", "model", positive=True),
                "model_bits_per_sample": v.number(
                    mdoc, "model_bits_per_sample", "model", default=0.0, nonnegative=True
                ),
            }
            if mode == "task-parallel" and model["sample_bits"] == 0:
                v.error("model.sample_bits", "must be positive in the task-parallel mode "
                        "(samples are sent to the learners)")

    c2: list[float] = []
    c1: list[float] = []
    c0: list[float] = []
    names: list[str] = []
    for i, p, lr in v.objects(learners, "learners"):
        v.unique_name(lr, p, f"learner{i}", names, "learner")
        physical = "cpu_hz" in lr or "rate_bps" in lr
        coeff = any(k in lr for k in ("c2", "c1", "c0"))
        if physical and coeff:
            v.error(p, "give either the physical form (cpu_hz, rate_bps) or the "
                    "coefficient form (c2, c1, c0), not both")
            continue
        if physical:
            f = v.number(lr, "cpu_hz", p, positive=True)
            r = v.number(lr, "rate_bps", p, positive=True)
            if f is None or r is None or model is None or None in model.values():
                continue
            sample_bits = model["sample_bits"] if mode == "task-parallel" else 0.0
            c2.append(model["cycles_per_sample"] / f)  # Eq. (2)
            c1.append((sample_bits + 2.0 * model["model_bits_per_sample"]) / r)  # Eq. (4)
            c0.append(2.0 * model["model_bits"] / r)  # Eq. (3)-(4)
        else:
            a = v.number(lr, "c2", p, positive=True)
            b = v.number(lr, "c1", p, nonnegative=True)
            c = v.number(lr, "c0", p, nonnegative=True)
            if a is None or b is None or c is None:
                continue
            c2.append(a)
            c1.append(b)
            c0.append(c)

    if v.ok and learners is not None:
        K = len(learners)
        if dl > du:
            v.error("min_samples", f"d_l = {dl} exceeds max_samples d_u = {du}")
        if K * du < d:
            v.error("max_samples", f"K * d_u = {K} * {du} = {K * du} < total_samples = {d}: "
                    "the data cannot be placed")
        if K * dl > d:
            v.error("min_samples", f"K * d_l = {K} * {dl} = {K * dl} > total_samples = {d}")
        for k in range(K):
            need = c2[k] * dl + c1[k] * dl + c0[k]
            if not math.isfinite(need):
                v.error(join("learners", k), "coefficients overflow")
            elif need > T:
                v.error(join("learners", k),
                        f"cannot finish one update on min_samples = {dl} within cycle_time_s = "
                        f"{T:g}: it needs {need:.6g} s (infeasible cycle time)")
    v.finish()
    desc = root.get("description", "")
    return MelAsyncInstance(
        name=str(root.get("name", "instance")),
        cycle_time=float(T),
        total_samples=int(d),
        min_samples=int(dl),
        max_samples=int(du),
        c2=readonly_array(c2),
        c1=readonly_array(c1),
        c0=readonly_array(c0),
        learner_names=tuple(names),
        mode=mode,
        description=desc if isinstance(desc, str) else "",
    )
