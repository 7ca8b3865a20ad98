"""dab instances (thesis Chapter 3) and their validation.

Fields (design brief): ``deadline_s`` D [s], ``iterations`` mu (passes over the local shards),
``model_bytes`` Omega_m, ``shard_bytes`` Omega_d, ``total_shards`` (the fixed amount the
centralised ``csa`` baseline splits; optional, DAB itself does not need it) and ``learners``
[{``name``, ``train_rate`` c_k [shards/s], ``bandwidth_Bps`` b_k [bytes/s]}].
Optional for ``csa`` (the d_l and d_u of the mel-async problem): ``min_shards`` (default 1) and
``max_shards`` (default ``total_shards``).

Optional per learner: ``time_cv``, the coefficient of variation of the learner's actual time
around its Eq. (3.4) time eta_k, run to run (the same meaning, law and range as med's field:
a lognormal factor with mean 1, :func:`mel_opt.stats.lognormal_factors`). It defaults to 0 here,
unlike med's 0.06: DAB plans on the times its subset benchmarking measured (Section 3.3), and
the methods and the verifier use exactly those; the noise is what a real run adds on top, so
only the training emulator's dab cycle (``melopt train``) reads it, and an instance without
it runs exactly to the time model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mel_opt.io.fields import Field, number
from mel_opt.io.reader import read_table
from mel_opt.io.validate import Validator, readonly_array
from mel_opt.problems.base import Instance, Shortfall, round_up

#: The fields of a dab file. Ranges: a deadline up to 1e9 s with training rates up to 1e6
#: shards/s keeps every shard bound a_k < D c_k / mu (Eq. 3.5) below 1e15, exact in float64.
FIELDS: tuple[Field, ...] = (
    number("deadline_s", 1e-9, 1e9, unit="s", doc="deadline D of one global cycle"),
    number("iterations", 1, 10**6, integer=True, doc="mu, training passes over the shards"),
    number("model_bytes", 1, 1e15, unit="byte", doc="Omega_m, size of the model"),
    number("shard_bytes", 1, 1e15, unit="byte", doc="Omega_d, size of one shard"),
    number("total_shards", 1, 10**12, integer=True, required=False, unit="shard",
           doc="shards the centralised baseline csa splits (csa only)"),
    number("min_shards", 1, 10**12, integer=True, required=False, default=1, unit="shard",
           doc="d_l, least shards csa gives a learner it uses"),
    number("max_shards", 1, 10**12, integer=True, required=False, unit="shard",
           doc="d_u, most shards csa gives one learner (default total_shards)"),
    Field("learners", "list", doc="the learners", names="learner", name_default="learner{i}",
          fields=(
              number("train_rate", 1e-6, 1e6, unit="shard/s",
                     doc="c_k, shards trained per second for one pass"),
              number("bandwidth_Bps", 1e-3, 1e15, unit="byte/s", doc="b_k, link bandwidth"),
              number("time_cv", 0.0, 2.0, sign="non-negative", required=False, default=0.0,
                     doc="coefficient of variation of the learner's actual time around eta_k, "
                         "run to run (training emulator only; the methods plan on eta_k)"),
          )),
)


#: Rules of :func:`parse` beyond the field table, as (JSON path, rule): JSON Schema cannot
#: express them, so the published schema lists them and mel_opt alone checks them.
CROSS_FIELD_RULES: tuple[tuple[str, str], ...] = (
    ("min_shards", "at most max_shards, or at most total_shards when max_shards is absent"),
)


@dataclass(frozen=True, eq=False, kw_only=True)
class DabInstance(Instance):
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
    time_cv : ndarray, shape (K,)
        Run-to-run coefficient of variation of each learner's time (0: none).
    """

    problem: ClassVar[str] = "dab"
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
    time_cv: np.ndarray

    @property
    def K(self) -> int:
        return int(self.train_rate.shape[0])


def parse(doc: Mapping[str, Any], source: str | None = None) -> DabInstance:
    """Validate a dab document against :data:`FIELDS` and build the instance.

    Raises
    ------
    InstanceError
        Listing every problem with its JSON path (wrong types, NaN/inf, values outside the
        documented ranges, duplicate names, ``min_shards`` > ``max_shards``).
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None  # finish() raised otherwise
    f = read_table(v, root, FIELDS)
    _cross_checks(v, f)
    v.finish()
    rows = f["learners"]
    desc = root.get("description", "")
    total, dmax = f["total_shards"], f["max_shards"]
    return DabInstance(
        name=str(root.get("name", "instance")),
        deadline=float(f["deadline_s"]),
        iterations=int(f["iterations"]),
        model_bytes=float(f["model_bytes"]),
        shard_bytes=float(f["shard_bytes"]),
        train_rate=readonly_array(rows.col("train_rate")),
        bandwidth=readonly_array(rows.col("bandwidth_Bps")),
        learner_names=tuple(rows.names),
        total_shards=None if total is None else int(total),
        min_shards=int(f["min_shards"]),
        max_shards=None if dmax is None else int(dmax),
        time_cv=readonly_array(rows.col("time_cv")),
        description=desc if isinstance(desc, str) else "",
    )


def _cross_checks(v: Validator, f: dict[str, Any]) -> None:
    """d_l <= d_u, and d_l <= total_shards when d_u defaults to it."""
    dmin, dmax, total = f["min_shards"], f["max_shards"], f["total_shards"]
    if dmin is not None and dmax is not None and dmin > dmax:
        v.error("min_shards", f"min_shards = {dmin} exceeds max_shards = {dmax}")
    if dmin is not None and total is not None and dmax is None and dmin > total:
        v.error("min_shards", f"min_shards = {dmin} exceeds total_shards = {total}")


def solvable(doc: Mapping[str, Any]) -> Shortfall | None:
    """Whether DAB (the default method) can place any shard of a dab document.

    DAB gives each learner a_k, the most shards with eta_k < D (Eq. 3.5); it has no answer
    when no learner can download, train and upload even one shard before D. Documents that do
    not validate give None here: :func:`parse` names their faults.

    Returns
    -------
    Shortfall or None
        The count and the fastest learners' one-shard times, and the smallest ``deadline_s``
        (rounded up to 4 significant digits, above the fastest one-shard time) that lets one
        learner in.
    """
    from mel_opt.errors import InstanceError
    from mel_opt.problems.dab.latency import one_shard_time

    try:
        inst = parse(doc)
    except InstanceError:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        t1 = one_shard_time(inst.iterations, inst.model_bytes, inst.shard_bytes,
                            inst.train_rate, inst.bandwidth)
    if bool((t1 < inst.deadline).any()) or not np.isfinite(t1).any():
        return None
    best = float(np.nanmin(t1))
    fix = round_up(best)
    if fix <= best:
        fix = round_up(best * (1 + 1e-4))
    order = np.argsort(t1, kind="stable")[:3].tolist()
    fastest = ", ".join(f"{inst.learner_names[k]!r:.40} {t1[k]:.4g} s" for k in order)
    return Shortfall(f"DAB cannot place one shard: none of the {inst.K} learners can download, "
                     f"train ({inst.iterations} passes) and upload one shard before D = "
                     f"{inst.deadline:g} s (fastest: {fastest}); it can from deadline_s = "
                     f"{fix:g}", "deadline_s", fix)
