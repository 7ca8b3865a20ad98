"""What a fixed local work costs each learner, on a problem's own time model (its work clock).

The field's alternatives to per-learner allocation (deadline dropping, Oort, FedBuff, FedProx)
do not allocate: every learner holds an equal share of the population's data and does a number
of passes over it. A problem whose instances give a time for any such work declares it through
its learning cycle (:meth:`mel_opt.problems.learning.LearningCycle.work_clock`): learner k is
busy ``fixed_s[k] + p * per_pass_s[k]`` seconds for ``p`` passes over its equal share, within
the round's budget ``budget_s``. The arena (``melopt arena``) and FedBuff's live runs read
nothing else of the problem, so a problem with a work clock runs every scheme of the registry
(:mod:`mel_opt.schemes`) without naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mel_opt.stats import lognormal_factors

__all__ = ["WorkClock", "median_fit"]


def median_fit(budget_s: float, fixed_s: np.ndarray, per_pass_s: np.ndarray) -> float:
    """The median over the learners of the whole passes each fits in the budget:
    ``median(floor((budget_s - fixed_s) / per_pass_s))``."""
    fits = np.floor((float(budget_s) - np.asarray(fixed_s, dtype=float)) /
                    np.asarray(per_pass_s, dtype=float))
    return float(np.median(fits))


@dataclass(frozen=True)
class WorkClock:
    """The population's time model for equal shares of the data.

    Attributes
    ----------
    budget_s : float
        The round's budget (mel-async's cycle clock T, dab's deadline D) [s].
    per_pass_s : ndarray, shape (K,)
        Computing time of one pass over a learner's equal share [s].
    fixed_s : ndarray, shape (K,)
        Its transfers, whatever the work [s].
    passes : float
        The fixed local work of the alternatives (E passes), the problem's own (dab's mu), or,
        with :attr:`passes_fitted`, the passes the median learner fits in the budget.
    time_cv : ndarray or None
        Run-to-run spread of each learner's time (None: deterministic).
    share : float
        A learner's equal share in the problem's unit (mel-async: samples d / K; dab: shards
        S / K). With :attr:`passes_fitted` it is in samples.
    passes_fitted : bool
        True when :attr:`passes` is what the median learner fits in the budget (the problem
        fixes no work): a live run fits them again to the learners' measured speeds
        (:meth:`refitted`). False: the problem's own passes, kept as they are.
    """

    budget_s: float
    per_pass_s: np.ndarray
    fixed_s: np.ndarray
    passes: float
    time_cv: np.ndarray | None = None
    share: float = 0.0
    passes_fitted: bool = False

    @property
    def K(self) -> int:
        return int(self.per_pass_s.size)

    def seconds(self, learners: np.ndarray, passes: np.ndarray | float) -> np.ndarray:
        """Predicted busy time of ``learners`` for ``passes`` each [s]."""
        ids = np.asarray(learners, dtype=np.int64)
        return self.fixed_s[ids] + np.asarray(passes, dtype=float) * self.per_pass_s[ids]

    def noisy(self, learners: np.ndarray, seconds: np.ndarray,
              rng: np.random.Generator) -> np.ndarray:
        """``seconds`` times each learner's lognormal noise factor (none without a spread)."""
        if self.time_cv is None:
            return np.asarray(seconds, dtype=float)
        cv = self.time_cv[np.asarray(learners, dtype=np.int64)]
        return np.asarray(seconds) * lognormal_factors(cv, rng.standard_normal(cv.size))

    def refitted(self, seconds: np.ndarray) -> tuple[np.ndarray, int]:
        """Each learner's computing time per pass and the common passes, with the learners'
        measured seconds per sample-pass (``seconds``; NaN: not measured, the file's model
        stays) in place of the file's computation.

        Live, the allocation's rounds fit the measured speeds into the file's budget; a clock
        whose passes are fitted (:attr:`passes_fitted`) is fitted the same way: the measured
        learners' pass over the share costs ``seconds_k * share``, and the passes are again
        what the median learner fits (at least one). A clock with the problem's own passes
        keeps them and the file's per-pass times. The transfers stay the file's.
        """
        per_pass = np.asarray(self.per_pass_s, dtype=float).copy()
        if not self.passes_fitted:
            return per_pass, max(1, int(round(self.passes)))
        measured = np.isfinite(seconds)
        per_pass[measured] = np.asarray(seconds, dtype=float)[measured] * self.share
        return per_pass, max(1, int(median_fit(self.budget_s, self.fixed_s, per_pass)))
