"""adaptive-tau instances (paper 003; formula in ../shared/reference/adaptive-tau.md).

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
from typing import Any

import numpy as np

from mel_opt.io.validate import Validator, join, readonly_array

MAX_SEARCH = 1_000_000  # largest scan we accept (memory of the vectorised scan)


@dataclass(frozen=True, eq=False)
class AdaptiveTauInstance:
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

    name: str
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
    description: str = ""

    problem = "adaptive-tau"

    @property
    def M(self) -> int:
        return int(self.budget.shape[0])

    @property
    def search_max(self) -> int:
        """Top of the scanned range 1 .. search_factor * tau_current."""
        return self.search_factor * self.tau_current


def parse(doc: Mapping[str, Any], source: str | None = None) -> AdaptiveTauInstance:
    """Validate an adaptive-tau document and build the instance.

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
    beta = v.number(root, "beta", "$", nonnegative=True)
    delta = v.number(root, "delta", "$", nonnegative=True)
    rho = v.number(root, "rho", "$", nonnegative=True)
    eta = v.number(root, "step_size", "$", positive=True)
    phi = v.number(root, "phi", "$", positive=True)
    tau_cur = v.number(root, "tau_current", "$", integer=True, positive=True)
    tau_max = v.number(root, "tau_max", "$", default=100, integer=True, positive=True)
    factor = v.number(root, "search_factor", "$", default=10, integer=True, positive=True)
    min_loss = v.boolean(root, "use_min_loss", "$", default=True)
    resources = v.list(root, "resources", "$")

    R: list[float] = []
    c: list[float] = []
    b: list[float] = []
    s: list[float] = []
    names: list[str] = []
    for m, p, res in v.objects(resources, "resources"):
        v.unique_name(res, p, "time" if len(resources) == 1 else f"resource{m}",
                      names, "resource")
        Rm = v.number(res, "budget", p, positive=True)
        cm = v.number(res, "local_cost", p, positive=True)
        bm = v.number(res, "global_cost", p, nonnegative=True)
        sm = v.number(res, "used", p, default=0.0, nonnegative=True)
        if None in (Rm, cm, bm, sm):
            continue
        if min_loss is True and Rm <= cm + bm:
            v.error(join(p, "budget"),
                    f"must exceed local_cost + global_cost = {cm + bm:g} when use_min_loss "
                    f"is true (no effective iteration fits in {Rm:g})")
        if sm > Rm:
            v.error(join(p, "used"), f"consumption {sm:g} exceeds the budget {Rm:g}")
        R.append(float(Rm))
        c.append(float(cm))
        b.append(float(bm))
        s.append(float(sm))
    if tau_cur is not None and factor is not None and tau_cur * factor > MAX_SEARCH:
        v.error("tau_current", f"search range search_factor * tau_current = "
                f"{tau_cur * factor} exceeds {MAX_SEARCH}")
    v.finish()
    desc = root.get("description", "")
    return AdaptiveTauInstance(
        name=str(root.get("name", "instance")),
        beta=float(beta),
        delta=float(delta),
        rho=float(rho),
        step_size=float(eta),
        phi=float(phi),
        tau_current=int(tau_cur),
        tau_max=int(tau_max),
        use_min_loss=bool(min_loss),
        budget=readonly_array(R),
        local_cost=readonly_array(c),
        global_cost=readonly_array(b),
        used=readonly_array(s),
        resource_names=tuple(names),
        search_factor=int(factor),
        description=desc if isinstance(desc, str) else "",
    )
