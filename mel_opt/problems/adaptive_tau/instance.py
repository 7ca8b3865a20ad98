"""adaptive-tau instances (paper 003: the control rule of Wang et al. behind the demo).

Fields (design brief): ``beta`` (smoothness estimate), ``delta`` (gradient divergence), ``rho``
(Lipschitz constant of the loss), ``step_size`` eta, ``phi`` (control parameter),
``tau_current`` (the tau in use; the search covers 1 .. search_factor * tau_current),
``tau_max`` (cap, default 100), ``use_min_loss`` (default true) and ``resources``
[{``budget`` R_m, ``local_cost`` c_m (per local update), ``global_cost`` b_m (per global
aggregation)}], one entry per resource type (the JSAC form; one entry for time alone).
Extensions of ours, all optional: ``resources[m].used`` (s_m, consumed so far, default 0; it
drives the end-of-budget rule), ``resources[m].name`` and ``search_factor`` (default 10, the
authors' code).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from mel_opt.io.fields import Field, number
from mel_opt.io.reader import Rows, read_table
from mel_opt.io.validate import Validator, join, readonly_array
from mel_opt.problems.base import Instance

MAX_SEARCH = 1_000_000  # largest scan we accept (memory of the vectorised scan)

#: The fields of an adaptive-tau file. Costs and budgets share one unit per resource (e.g.
#: seconds); their ranges keep R_m / c_m and the scan of G(tau) finite in float64 (a power
#: (eta beta + 1)^tau that overflows is handled by the scan itself).
FIELDS: tuple[Field, ...] = (
    number("beta", 0, 1e9, doc="estimated smoothness of the loss", sign="non-negative"),
    number("delta", 0, 1e9, doc="estimated gradient divergence", sign="non-negative"),
    number("rho", 0, 1e9, doc="estimated Lipschitz constant of the loss", sign="non-negative"),
    number("step_size", 1e-12, 1e3, doc="eta, the learning rate"),
    number("phi", 1e-12, 1e12, doc="control parameter"),
    number("tau_current", 1, MAX_SEARCH, integer=True, doc="the tau in use"),
    number("tau_max", 1, MAX_SEARCH, integer=True, required=False, default=100,
           doc="cap on the chosen tau"),
    number("search_factor", 1, MAX_SEARCH, integer=True, required=False, default=10,
           doc="the scan covers 1 .. search_factor * tau_current"),
    Field("use_min_loss", "bool", required=False, default=True,
          doc="keep one iteration of each kind for the final loss (R'_m = R_m - c_m - b_m)"),
    Field("resources", "list", names="resource", name_default="resource{i}",
          name_default_single="time", doc="one entry per resource type", fields=(
              number("budget", 1e-12, 1e15, unit="resource", doc="R_m, total budget"),
              number("local_cost", 1e-12, 1e15, unit="resource",
                     doc="c_m, cost of one local update"),
              number("global_cost", 0, 1e15, unit="resource", sign="non-negative",
                     doc="b_m, cost of one global aggregation"),
              number("used", 0, 1e15, unit="resource", sign="non-negative", required=False,
                     default=0.0, doc="s_m, consumed so far"),
          )),
)


#: Rules of :func:`parse` beyond the field table, as (JSON path, rule): JSON Schema cannot
#: express them, so the published schema lists them and mel_opt alone checks them.
CROSS_FIELD_RULES: tuple[tuple[str, str], ...] = (
    ("resources[].budget", "exceeds local_cost + global_cost when use_min_loss is true"),
    ("resources[].used", "at most budget"),
    ("tau_current", f"search_factor * tau_current <= {MAX_SEARCH:,}"),
)


@dataclass(frozen=True, eq=False, kw_only=True)
class AdaptiveTauInstance(Instance):
    """A validated adaptive-tau instance (arrays are read-only).

    Attributes
    ----------
    name : str
    beta, delta, rho : float
        Estimated smoothness, gradient divergence and Lipschitz constant (beta is floored at
        1e-5 when used, as in the authors' code).
    step_size : float
        eta.
    phi : float
        Control parameter.
    tau_current, tau_max, search_factor : int
    use_min_loss : bool
    budget, local_cost, global_cost, used : ndarray, shape (M,)
        R_m, c_m, b_m and s_m per resource type (same unit per resource, e.g. seconds).
    resource_names : tuple of str
    """

    problem: ClassVar[str] = "adaptive-tau"
    beta: float
    delta: float
    rho: float
    step_size: float
    phi: float
    tau_current: int
    tau_max: int
    use_min_loss: bool
    budget: np.ndarray
    local_cost: np.ndarray
    global_cost: np.ndarray
    used: np.ndarray
    resource_names: tuple[str, ...]
    search_factor: int = 10

    @property
    def M(self) -> int:
        return int(self.budget.shape[0])

    @property
    def search_max(self) -> int:
        """Top of the scanned range 1 .. search_factor * tau_current."""
        return self.search_factor * self.tau_current


def parse(doc: Mapping[str, Any], source: str | None = None) -> AdaptiveTauInstance:
    """Validate an adaptive-tau document against :data:`FIELDS` and build the instance.

    Raises
    ------
    InstanceError
        Listing every problem with its JSON path. Besides types and ranges this rejects a budget
        that leaves no effective iteration (R_m <= c_m + b_m with ``use_min_loss``), consumption
        beyond the budget, and a search range above 1,000,000 values.
    """
    v = Validator(source)
    root = v.obj(doc, "$")
    v.finish()
    assert root is not None  # finish() raised otherwise
    f = read_table(v, root, FIELDS)
    _cross_checks(v, f)
    v.finish()
    rows: Rows = f["resources"]
    desc = root.get("description", "")
    return AdaptiveTauInstance(
        name=str(root.get("name", "instance")),
        beta=float(f["beta"]),
        delta=float(f["delta"]),
        rho=float(f["rho"]),
        step_size=float(f["step_size"]),
        phi=float(f["phi"]),
        tau_current=int(f["tau_current"]),
        tau_max=int(f["tau_max"]),
        use_min_loss=bool(f["use_min_loss"]),
        budget=readonly_array(rows.col("budget")),
        local_cost=readonly_array(rows.col("local_cost")),
        global_cost=readonly_array(rows.col("global_cost")),
        used=readonly_array(rows.col("used")),
        resource_names=tuple(rows.names),
        search_factor=int(f["search_factor"]),
        description=desc if isinstance(desc, str) else "",
    )


def _cross_checks(v: Validator, f: dict[str, Any]) -> None:
    """Room for one effective iteration, consumption within budget, the scan's size."""
    rows: Rows | None = f["resources"]
    if rows is not None:
        R, c, b, s = (rows.col(k) for k in ("budget", "local_cost", "global_cost", "used"))
        for m in range(rows.n):  # NaN (a refused value) fails every comparison: no issue
            p = join("resources", m)
            if f["use_min_loss"] is True and R[m] <= c[m] + b[m]:
                v.error(join(p, "budget"),
                        f"must exceed local_cost + global_cost = {c[m] + b[m]:g} when "
                        f"use_min_loss is true (no effective iteration fits in {R[m]:g})")
            if s[m] > R[m]:
                v.error(join(p, "used"), f"consumption {s[m]:g} exceeds the budget {R[m]:g}")
    tau_cur, factor = f["tau_current"], f["search_factor"]
    if tau_cur is not None and factor is not None and tau_cur * factor > MAX_SEARCH:
        v.error("tau_current", f"search range search_factor * tau_current = "
                f"{tau_cur * factor} exceeds {MAX_SEARCH}")
