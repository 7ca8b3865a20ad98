"""Two ablations that split what mel_opt's allocation adds (its optimiser sizes both each
learner's data and its work):

- ``fill``: every learner, an equal share of the data, as many whole minibatch steps as fit the
  round's budget (its own, by its own speed), none dropped, plain SGD; the round ends when the
  last learner is done, at the budget at the latest. What filling the budget alone gives,
  with no optimiser: every learner busy, no one waiting on a straggler's fixed work.
- ``equal-data``: every learner does the sample-updates the allocation gives it (d_k tau_k in
  mel-async's terms, the problem's plan's samples x passes), but over an equal share of the
  data; the cycle waits for the last learner (as the allocation's does). What the optimiser's
  work sizes give without its data sizes: the difference to the allocation is what allocating
  the data adds (its transfers, and each learner's weight in the average), the difference to
  ``fill`` what sizing the work by the optimiser adds.

Both run in the arena's synchronous rounds (:class:`~mel_opt.schemes.base.RoundPolicy`), on
the problem's work clock and its noise; ``equal-data`` reads the allocation's work from the
problem's own plan (the arena solves the problem's method for it), so it needs a problem with
an allocation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mel_opt.schemes.base import GRID_BATCH, GRID_LR, Loop, RoundClose, RoundContext, SchemeSpec
from mel_opt.schemes.fedprox import close_at_budget, fitting_work

__all__ = ["EQUAL_DATA", "FILL", "EqualDataPolicy", "FillPolicy"]


class _EveryLearner:
    """Every learner invited, none dropped, plain SGD; a learner slowed past the budget by the
    noise stops there with what it completed (``stop_at_budget``) or is waited for."""

    mu = 0.0
    stop_at_budget = True

    def __init__(self, ctx: RoundContext) -> None:
        self.ctx = ctx

    def invite(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        return np.arange(self.ctx.clock.K), np.empty(0, np.int64)

    def close(self, invited: np.ndarray, times: np.ndarray, passes: np.ndarray) -> RoundClose:
        if self.stop_at_budget:
            return close_at_budget(self.ctx.clock, invited, times, passes)
        return RoundClose(passes > 0, float(times.max()) if times.size else 0.0)

    def learned(self, model: Any, invited: np.ndarray, times: np.ndarray, close: RoundClose,
                r: int, exploited: np.ndarray) -> None:
        pass


class FillPolicy(_EveryLearner):
    """``fill``: the passes that fit the budget, each learner by its own speed."""

    def work(self, invited: np.ndarray) -> np.ndarray:
        clock = self.ctx.clock
        return fitting_work(np.inf, clock.per_pass_s[invited], clock.fixed_s[invited],
                            clock.budget_s)


class EqualDataPolicy(_EveryLearner):
    """``equal-data``: the allocation's sample-updates of each learner over its equal share;
    the cycle waits for its last learner, as the allocation's does."""

    stop_at_budget = False

    def work(self, invited: np.ndarray) -> np.ndarray:
        allocated = self.ctx.allocated
        if allocated is None:
            raise ValueError("equal-data needs the allocation's work (the arena solves the "
                             "problem's method for it)")
        return np.asarray(allocated, dtype=float)[invited] / np.maximum(
            self.ctx.sizes[invited], 1)


FILL = SchemeSpec(
    "fill", "ablation: every learner, equal data, as many passes as fit the budget",
    Loop.ROUNDS, needs=("work_clock",), policy=FillPolicy, title="fill the budget",
    equal_shares=True,
    # no options of their own: the allocation's grid (lr x batch_size, 9 points), so an
    # ablation differs from the allocation only in what it takes away, not in its tuning
    grid={"lr": GRID_LR, "batch_size": GRID_BATCH})
EQUAL_DATA = SchemeSpec(
    "equal-data", "ablation: the allocation's work per learner, on equal data shares",
    Loop.ROUNDS, needs=("work_clock", "allocation"), policy=EqualDataPolicy,
    title="the allocation's work on equal data", equal_shares=True,
    grid={"lr": GRID_LR, "batch_size": GRID_BATCH})  # as fill's: the allocation's grid
