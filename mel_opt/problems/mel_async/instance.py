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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mel_opt.io.fields import Field, Form, number
from mel_opt.io.reader import Rows, read_table
from mel_opt.io.validate import Validator, join, readonly_array
from mel_opt.problems.base import Instance, Shortfall, round_up

MODES = ("task-parallel", "distributed-data")
#: Most local updates a learner may manage in one cycle on d_l samples. Beyond it the units
#: are almost surely wrong, the exact window scan would walk that many candidate windows, and
#: the fit test t_k <= T (1 + 1e-12) could no longer tell tau from tau + 1.
MAX_UPDATES = 10**6

#: The fields of a mel-async file (SI units). Rates and clock speeds up to 1e15 and sizes up
#: to 1e15 bits keep every coefficient of Eq. (2)-(4) a normal float64.
FIELDS: tuple[Field, ...] = (
    number("cycle_time_s", 1e-9, 1e9, unit="s", doc="T, the global cycle clock"),
    number("total_samples", 1, 10**12, integer=True, unit="sample", doc="d, samples per cycle"),
    number("min_samples", 1, 10**12, integer=True, unit="sample", doc="d_l, least per learner"),
    number("max_samples", 1, 10**12, integer=True, unit="sample", doc="d_u, most per learner"),
    Field("mode", "string", required=False, default="task-parallel", choices=MODES,
          doc="task-parallel (samples are sent) or distributed-data (samples are local)"),
    Field("model", "object", required=False, doc="the learning task (physical form only)",
          fields=(
              number("cycles_per_sample", 1e-3, 1e15, unit="cycle",
                     doc="CPU cycles of one update on one sample (Eq. 2)"),
              number("sample_bits", 0, 1e15, unit="bit", sign="non-negative",
                     doc="F P_d, bits of one sample (Eq. 4)"),
              number("model_bits", 1, 1e15, unit="bit", doc="P_m S_m, bits of the model"),
              number("model_bits_per_sample", 0, 1e15, unit="bit", sign="non-negative",
                     required=False, default=0.0,
                     doc="P_m S_d, model bits that grow with the samples (Eq. 4)"),
          )),
    Field("learners", "list", doc="the learners", names="learner", name_default="learner{i}",
          fields=(
              number("time_cv", 0.0, 2.0, sign="non-negative", required=False, default=0.0,
                     doc="coefficient of variation of the learner's actual time around t_k, "
                         "run to run (training emulator and arena only; the methods plan on "
                         "t_k)"),
          ),
          forms=(
              Form("physical", ("cpu_hz", "rate_bps"), (
                  number("cpu_hz", 1e-3, 1e15, unit="Hz", doc="f_k, CPU clock"),
                  number("rate_bps", 1e-3, 1e15, unit="bit/s", doc="R_k, link rate"),
              )),
              Form("coefficient", ("c2", "c1", "c0"), (
                  number("c2", 1e-18, 1e9, unit="s/(sample update)", doc="C2_k of Eq. (5)"),
                  number("c1", 0, 1e9, unit="s/sample", sign="non-negative",
                         doc="C1_k of Eq. (5)"),
                  number("c0", 0, 1e9, unit="s", sign="non-negative", doc="C0_k of Eq. (5)"),
              )),
          )),
)


#: Rules of :func:`parse` beyond the field table, as (JSON path, rule): JSON Schema cannot
#: express them, so the published schema lists them and mel_opt alone checks them.
CROSS_FIELD_RULES: tuple[tuple[str, str], ...] = (
    ("model", "required when a learner is given in the physical form"),
    ("model.sample_bits", "positive in the task-parallel mode (samples are sent)"),
    ("min_samples", "at most max_samples (d_l <= d_u)"),
    ("max_samples", "K * max_samples >= total_samples (K learners)"),
    ("min_samples", "K * min_samples <= total_samples (K learners)"),
    ("learners[]", "can finish one update on min_samples samples within cycle_time_s, "
     f"and at most {MAX_UPDATES:,} of them"),
)


@dataclass(frozen=True, eq=False, kw_only=True)
class MelAsyncInstance(Instance):
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
    time_cv : ndarray, shape (K,), or None
        Run-to-run spread (coefficient of variation) of each learner's actual time around t_k
        (0: it runs exactly to Eq. (5); None: not given). The methods plan on t_k; the
        training emulator and the arena draw each time with it.
    """

    problem: ClassVar[str] = "mel-async"
    cycle_time: float
    total_samples: int
    min_samples: int
    max_samples: int
    c2: np.ndarray
    c1: np.ndarray
    c0: np.ndarray
    learner_names: tuple[str, ...]
    mode: str = "task-parallel"
    time_cv: np.ndarray | None = None

    @property
    def K(self) -> int:
        return int(self.c2.shape[0])

    def times(self, d: np.ndarray, tau: np.ndarray) -> np.ndarray:
        """t_k of Eq. (5) for allocations ``d`` and update counts ``tau`` [s]."""
        return self.c2 * tau * d + self.c1 * d + self.c0


def parse(doc: Mapping[str, Any], source: str | None = None) -> MelAsyncInstance:
    """Validate a mel-async document against :data:`FIELDS` and build the instance.

    Raises
    ------
    InstanceError
        Listing every problem with its JSON path. Besides types and ranges this rejects
        d_l > d_u, K d_u < d, K d_l > d, any learner that cannot finish even one update on
        d_l samples within T (its cycle time is infeasible whatever the allocation), and any
        learner that could do more than :data:`MAX_UPDATES` updates on d_l samples.
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None
    f = read_table(v, root, FIELDS)
    _model_checks(v, f, "model" in root)
    coeffs = _coefficients(f)
    if v.ok:
        _cross_checks(v, f, *coeffs)
    v.finish()
    c2, c1, c0 = coeffs
    desc = root.get("description", "")
    return MelAsyncInstance(
        name=str(root.get("name", "instance")),
        cycle_time=float(f["cycle_time_s"]),
        total_samples=int(f["total_samples"]),
        min_samples=int(f["min_samples"]),
        max_samples=int(f["max_samples"]),
        c2=readonly_array(c2),
        c1=readonly_array(c1),
        c0=readonly_array(c0),
        learner_names=tuple(f["learners"].names),
        mode=f["mode"],
        description=desc if isinstance(desc, str) else "",
        time_cv=readonly_array(f["learners"].col("time_cv")),
    )


def _model_checks(v: Validator, f: dict[str, Any], has_model: bool) -> None:
    rows: Rows | None = f["learners"]
    if rows is not None and not has_model and "physical" in rows.forms:
        v.error("model", "is required when learners are given in the physical form")
    model = f["model"]
    if model is not None and f["mode"] == "task-parallel" and model["sample_bits"] == 0:
        v.error("model.sample_bits", "must be positive in the task-parallel mode "
                "(samples are sent to the learners)")


def _coefficients(f: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """C2, C1, C0 of every learner (Eq. 2-4 for the physical form; NaN where unknown)."""
    rows: Rows | None = f["learners"]
    if rows is None:
        return np.empty(0), np.empty(0), np.empty(0)
    c2, c1, c0 = rows.col("c2"), rows.col("c1"), rows.col("c0")
    model = f["model"] or {}
    phys = rows.of_form("physical")
    if phys.any() and model and None not in model.values():
        fk, rk = rows.col("cpu_hz")[phys], rows.col("rate_bps")[phys]
        sample_bits = model["sample_bits"] if f["mode"] == "task-parallel" else 0.0
        c2[phys] = model["cycles_per_sample"] / fk  # Eq. (2)
        c1[phys] = (sample_bits + 2.0 * model["model_bits_per_sample"]) / rk  # Eq. (4)
        c0[phys] = 2.0 * model["model_bits"] / rk  # Eq. (3)-(4)
    return c2, c1, c0


def _cross_checks(v: Validator, f: dict[str, Any], c2: np.ndarray, c1: np.ndarray,
                  c0: np.ndarray) -> None:
    """Sizes against each other, then what each learner can do within one cycle."""
    T, d, dl, du = f["cycle_time_s"], f["total_samples"], f["min_samples"], f["max_samples"]
    K = len(f["learners"])
    if dl > du:
        v.error("min_samples", f"d_l = {dl} exceeds max_samples d_u = {du}")
    if K * du < d:
        v.error("max_samples", f"K * d_u = {K} * {du} = {K * du} < total_samples = {d}: "
                "the data cannot be placed")
    if K * dl > d:
        v.error("min_samples", f"K * d_l = {K} * {dl} = {K * dl} > total_samples = {d}")
    with np.errstate(over="ignore", invalid="ignore"):
        need = c2 * dl + c1 * dl + c0
        updates = (T - c1 * dl - c0) / (c2 * dl)
    names = f["learners"].names
    bad = ~np.isfinite(need)
    slow = ~bad & (need > T)
    many = ~bad & ~slow & (updates > MAX_UPDATES)
    _learner_issues(v, bad, None, names, lambda k: "coefficients overflow",
                    "have coefficients that overflow")
    _learner_issues(v, slow, need, names,
                    lambda k: f"cannot finish one update on min_samples = {dl} within "
                              f"cycle_time_s = {T:g}: it needs {need[k]:.6g} s (infeasible "
                              "cycle time)",
                    f"cannot finish one update on min_samples = {dl} within cycle_time_s = "
                    f"{T:g} (infeasible cycle time); the slowest need")
    _learner_issues(v, many, updates, names,
                    lambda k: f"could do {updates[k]:.3g} updates on min_samples = {dl} within "
                              f"cycle_time_s = {T:g}, more than {MAX_UPDATES:,}: check the units",
                    f"could do more than {MAX_UPDATES:,} updates on min_samples = {dl} within "
                    f"cycle_time_s = {T:g} (check the units); the most")


#: Learners named one by one in a validation message; past this, one summary issue.
NAMED_LEARNERS = 3


def _learner_issues(v: Validator, which: np.ndarray, worst: np.ndarray | None,
                    names: list[str], one: Any, many: str) -> None:
    """One issue per learner flagged in ``which`` while they are at most
    :data:`NAMED_LEARNERS`, else one issue at ``learners`` with their count and the worst few
    (largest ``worst``) by name, at the worst one's path, so that a fleet of hundreds gives
    a short message."""
    idx = np.flatnonzero(which)
    if idx.size <= NAMED_LEARNERS:
        for k in idx.tolist():
            v.error(join("learners", k), one(k))
        return
    if worst is not None:
        idx = idx[np.argsort(-worst[idx], kind="stable")]
        top = ", ".join(f"learners[{k}] {names[k]!r:.40} {worst[k]:.4g}"
                        + (" s" if "need" in many else "")
                        for k in idx[:NAMED_LEARNERS].tolist())
    else:
        top = ", ".join(f"learners[{k}] {names[k]!r:.40}" for k in idx[:NAMED_LEARNERS].tolist())
    v.error(join("learners", int(idx[0])),
            f"{idx.size} of {len(names)} learners {many}: {top}, ...")


def solvable(doc: Mapping[str, Any]) -> Shortfall | None:
    """Whether a mel-async document can be solved at all, before it is written.

    (7) has a solution exactly when every learner can finish one update on d_l samples within
    T and the learners' capacities at one update each, cap_k = min(d_u, floor((T - C0_k) /
    (C2_k + C1_k))), add up to at least d: any d_k between d_l and cap_k summing to d is then
    feasible with tau_k = 1, and no learner can take more than cap_k. Documents with other
    faults (field types, sizes) give None here: :func:`parse` names those.

    Returns
    -------
    Shortfall or None
        The learners at fault (count and the slowest few) or the capacity against d, and the
        smallest ``cycle_time_s`` (rounded up to 4 significant digits) at which both hold.
    """
    v = Validator(None)
    root = v.obj(doc, "$")
    if root is None:
        return None
    f = read_table(v, root, FIELDS)
    if not v.ok:
        return None
    c2, c1, c0 = _coefficients(f)
    T, d, dl, du = (float(f["cycle_time_s"]), int(f["total_samples"]), int(f["min_samples"]),
                    int(f["max_samples"]))
    per = c2 + c1
    K = per.size
    if not K or dl > du or K * du < d or K * dl > d or not np.all(np.isfinite(per) & (per > 0)
                                                                  & np.isfinite(c0)):
        return None
    need = per * dl + c0

    def capacity(t: float) -> int:
        with np.errstate(over="ignore", invalid="ignore"):
            cap = np.minimum(du, np.floor((t - c0) / per))
        return int(np.where(need <= t, cap, 0).sum())

    slow = need > T
    if not slow.any() and capacity(T) >= d:
        return None
    # at hi every learner takes d_u (and K d_u >= d)
    lo, hi = float(need.max()), float((per * du + c0).max()) * (1 + 1e-9)
    for _ in range(200):
        if capacity(lo) >= d or hi - lo <= 1e-9 * hi:
            break
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if capacity(mid) >= d else (mid, hi)
    fix = round_up(hi if capacity(lo) < d else lo)
    names = f["learners"].names
    why = []
    if slow.any():
        order = np.flatnonzero(slow)[np.argsort(-need[slow], kind="stable")]
        worst = ", ".join(f"{names[k]!r:.40} {need[k]:.4g} s" for k in order[:3].tolist())
        why.append(f"{order.size} of {K} learners cannot finish one update on d_l = {dl} "
                   f"samples within T = {T:g} s (slowest: {worst}"
                   f"{', ...' if order.size > 3 else ''})")
    if capacity(T) < d and not slow.all():
        why.append(f"{'the others' if slow.any() else f'the {K} learners'} can take "
                   f"{capacity(T):,} of the {d:,} samples at most within T = {T:g} s (one "
                   "update each, at most d_u)")
    return Shortfall(f"mel-async cannot be solved by any method: {'; '.join(why)}; it can from "
                     f"cycle_time_s = {fix:g}", "cycle_time_s", fix)

