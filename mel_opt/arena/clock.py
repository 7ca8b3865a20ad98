"""Each learner's time for a given local work, from the problem instance's own time model.

The alternatives do not allocate: every learner holds an equal share of the data (the
population's data split evenly) and does a number of passes over it. Its busy time for ``p``
passes is ``fixed_s + p * per_pass_s``, both from the instance:

- mel-async (paper 000, Eq. (5)): an equal share is u = d / K of the d samples of a cycle, so
  t_k = C2_k p u + C1_k u + C0_k (computation C2_k p u, transfers C1_k u + C0_k); the round's
  budget is the cycle clock T;
- dab (thesis Ch. 3, Eq. (3.1)-(3.4)): an equal share is a = S / K shards of the S the
  population holds (``total_shards``, or the shards Eq. (3.5) places where the file gives
  none), so eta_k = (Omega_m + Omega_d a) / b_k + p a / c_k + Omega_m / b_k; the budget is the
  deadline D, and each time varies from run to run by the learner's ``time_cv`` (a lognormal
  factor of mean 1, as the emulator draws it).

:func:`work_clock` picks the clock by the instance's problem; a problem without one here has
no arena.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.stats import lognormal_factors

__all__ = ["CLOCKS", "WorkClock", "work_clock"]


@dataclass(frozen=True)
class WorkClock:
    """The population's time model for equal shares of the data.

    Attributes
    ----------
    budget_s : float
        The round's budget: mel-async's T, dab's D [s].
    per_pass_s : ndarray, shape (K,)
        Computing time of one pass over a learner's equal share [s].
    fixed_s : ndarray, shape (K,)
        Its transfers, whatever the work [s].
    passes : float
        The fixed local work of the alternatives (E passes), the problem's own: dab's mu;
        mel-async's passes the median learner fits in T (the paper's model fixes none).
    time_cv : ndarray or None
        Run-to-run spread of each learner's time (None: deterministic).
    share : float
        A learner's equal share in the problem's unit (mel-async: samples d / K; dab: shards
        S / K).
    """

    budget_s: float
    per_pass_s: np.ndarray
    fixed_s: np.ndarray
    passes: float
    time_cv: np.ndarray | None = None
    share: float = 0.0

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


def _mel_async(inst: Any) -> WorkClock:
    u = float(inst.total_samples) / inst.K
    per = np.asarray(inst.c2, dtype=float) * u
    fixed = np.asarray(inst.c1, dtype=float) * u + np.asarray(inst.c0, dtype=float)
    T = float(inst.cycle_time)
    fits = np.floor((T - fixed) / per)
    return WorkClock(T, per, fixed, float(max(1.0, np.median(fits))), share=u)


def _dab(inst: Any) -> WorkClock:
    from mel_opt.problems.dab.latency import shard_bound

    c = np.asarray(inst.train_rate, dtype=float)
    b = np.asarray(inst.bandwidth, dtype=float)
    S = inst.total_shards
    if S is None:
        S = int(np.asarray(shard_bound(float(inst.deadline), int(inst.iterations),
                                       float(inst.model_bytes), float(inst.shard_bytes),
                                       c, b)).sum())
    a = max(float(S), 1.0) / inst.K
    fixed = (2.0 * float(inst.model_bytes) + float(inst.shard_bytes) * a) / b  # Eq. (3.1), (3.3)
    per = a / c  # Eq. (3.2) per pass
    return WorkClock(float(inst.deadline), per, fixed, float(inst.iterations),
                     np.asarray(inst.time_cv, dtype=float), share=a)


#: problem name -> its clock (the problems whose instances give a time for any work).
CLOCKS: dict[str, Callable[[Any], WorkClock]] = {"mel-async": _mel_async, "dab": _dab}


def work_clock(inst: Any) -> WorkClock:
    """The clock of ``inst``'s problem, or UsageError naming the problems the arena runs."""
    make = CLOCKS.get(str(inst.problem))
    if make is None:
        raise UsageError(f"the arena runs the problems {', '.join(CLOCKS)}; this instance is "
                         f"{inst.problem!r}")
    return make(inst)
