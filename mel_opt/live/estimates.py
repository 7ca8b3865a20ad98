"""What the server believes about each live learner, and how a measurement may change it.

Pure functions, no Flower: the strategy feeds them what the learners report.

A learner's speed is one number, its *seconds per sample-pass* sigma_k: the wall time of one
training sample through one pass of forward, backward and update on that learner, measured by
subset benchmarking in the probe round and then on every cycle's real work (compute time over
samples x passes). Each problem turns sigma_k into its own compute coefficient (mel-async's C2,
dab's c_k, feel's cycles per sample over the clock). The estimate follows the measurements by
an exponentially weighted average, so a learner that slows down (or was throttled) is tracked
within a few cycles, and one outlier moves it by at most the weight ``alpha``.

A measurement is ignored, with a reason, when it is not a finite positive number, lies outside
[:data:`MIN_SECONDS`, :data:`MAX_SECONDS`] per sample-pass, or jumps more than :data:`MAX_JUMP`
times away from the current estimate: a confused or hostile learner can never poison the
allocation. One jump is an outlier; the same jump twice in a row (two measurements off by more
than :data:`MAX_JUMP` that agree within :data:`AGREE` times) is the learner's speed: the
estimate starts again from the newer one (a probe taken while the learner was starved of its
core would otherwise have every later reply refused for the rest of the run).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mel_opt.live.settings import LiveSettings

__all__ = ["AGREE", "Estimates", "Measurement", "StartCost", "Transfers", "fold",
           "read_measurement", "start_cost"]

#: Weight of the newest measurement in the average (the run's ``alpha`` setting's default).
ALPHA: float = LiveSettings.setting("alpha").default
MIN_SECONDS = 1e-9  # seconds per sample-pass: faster than any CPU does a TwoNN sample
MAX_SECONDS = 60.0  # slower than a minute per sample is a stalled or broken learner
MAX_JUMP = 100.0  # a measurement this many times off the estimate is not believed...
AGREE = 2.0  # ... unless the one refused before it was as far off, within this factor


def fold(now: float, x: float, alpha: float) -> float:
    """``x`` folded into the average ``now`` with weight ``alpha`` (``x`` itself where ``now``
    is not a number yet: the first measurement).

    >>> fold(float("nan"), 2.0, 0.5), fold(1.0, 2.0, 0.5)
    (2.0, 1.5)
    """
    return x if not math.isfinite(now) else (1.0 - alpha) * now + alpha * x


@dataclass(frozen=True)
class Measurement:
    """One learner's report of one cycle (or of the probe).

    Attributes
    ----------
    learner : int
        The learner's index in the instance.
    compute_s : float
        Wall time of its training [s].
    work : float
        Sample-passes it trained (samples x passes; samples for one full-batch step).
    """

    learner: int
    compute_s: float
    work: float

    @property
    def seconds_per_sample(self) -> float:
        return self.compute_s / self.work

    @classmethod
    def of(cls, learner: int, compute_s: float | None, work: float | None) -> Measurement | str:
        """The measurement, or why it cannot be used (both must be finite and positive)."""
        for key, value in (("compute_s", compute_s), ("work", work)):
            if value is None or not math.isfinite(value) or value <= 0:
                return f"{key} must be a finite positive number, got {value!r}"
        assert compute_s is not None and work is not None
        return cls(learner, float(compute_s), float(work))


def read_measurement(learner: int, metrics: Mapping[str, Any]) -> Measurement | str:
    """The measurement in a learner's metrics, or why it cannot be used.

    ``metrics`` must hold ``compute_s`` (seconds) and ``work`` (sample-passes), both finite and
    positive.
    """
    values: dict[str, float] = {}
    for key in ("compute_s", "work"):
        raw = metrics.get(key)
        try:
            values[key] = float(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return f"{key} is not a number ({raw!r})"
    return Measurement.of(learner, values["compute_s"], values["work"])


@dataclass(frozen=True)
class StartCost:
    """A learner's time of a start split into a fixed part and a rate (:func:`start_cost`).

    Attributes
    ----------
    start_s : float
        What every start costs whatever its work [s]: drawing the samples, building the
        schedule, the first touch of the model, a throttle's phase.
    seconds : float
        Seconds per sample-pass beyond it.
    """

    start_s: float
    seconds: float


def start_cost(steps: Sequence[tuple[float, float]]) -> StartCost | None:
    """The fixed cost of a start and the rate beyond it, from timed starts of different work
    (``(compute_s, work)`` each: the probe's doubling steps), by least squares on
    ``compute = start_s + seconds x work``.

    The fixed part is kept within ``[0, 0.9 x the shortest start's compute]`` (a negative one
    is noise, and so is one that leaves a start's work no time);
    the rate is then the one that keeps the steps' total: ``(sum of compute - starts x
    start_s) / sum of work``, which is the least-squares slope where nothing was clipped (the
    fitted line goes through the steps' mean). None where it cannot be told: fewer than two
    starts, or their work too alike (a spread under a tenth of the mean).

    >>> c = start_cost([(0.02 + 1e-4 * w, w) for w in (256, 512, 1024)])
    >>> round(c.start_s, 9), round(c.seconds, 12)
    (0.02, 0.0001)
    """
    if len(steps) < 2:
        return None
    c = np.array([s[0] for s in steps], dtype=float)
    w = np.array([s[1] for s in steps], dtype=float)
    if not (np.all(np.isfinite(c)) and np.all(np.isfinite(w)) and np.all(c > 0)
            and np.all(w > 0)) or np.std(w) < 0.1 * np.mean(w):
        return None
    slope = float(np.cov(w, c, bias=True)[0, 1] / np.var(w))
    fixed = float(np.mean(c) - slope * np.mean(w))
    fixed = min(max(fixed, 0.0), 0.9 * float(c.min()))
    return StartCost(fixed, float((c.sum() - c.size * fixed) / w.sum()))


@dataclass
class Estimates:
    """Seconds per sample-pass of each of K learners (NaN: not measured yet).

    Attributes
    ----------
    seconds : ndarray, shape (K,)
    alpha : float
        Weight of a new measurement in the exponentially weighted average.
    history : list of dict
        Every accepted or refused measurement, for the report.
    """

    seconds: np.ndarray
    alpha: float = ALPHA
    history: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def unknown(cls, K: int, alpha: float = ALPHA) -> Estimates:
        return cls(np.full(K, np.nan), alpha)

    @property
    def known(self) -> np.ndarray:
        """Learners with an estimate."""
        return np.flatnonzero(np.isfinite(self.seconds))

    def judge(self, m: Measurement) -> str:
        """Why ``m`` is not believed ('' when it is)."""
        x = m.seconds_per_sample
        if not math.isfinite(x) or not MIN_SECONDS <= x <= MAX_SECONDS:
            return (f"{x:.3g} s per sample-pass is outside [{MIN_SECONDS:g}, {MAX_SECONDS:g}]")
        now = float(self.seconds[m.learner])
        if math.isfinite(now) and not now / MAX_JUMP <= x <= now * MAX_JUMP:
            return (f"{x:.3g} s per sample-pass is more than {MAX_JUMP:g} times off the "
                    f"estimate {now:.3g}")
        return ""

    def _jumped_before(self, m: Measurement) -> bool:
        """Whether ``m`` is off the estimate by more than :data:`MAX_JUMP` (and within the
        bounds), as the learner's measurement before it was, within :data:`AGREE` times."""
        x = m.seconds_per_sample
        now = float(self.seconds[m.learner])
        if not (math.isfinite(x) and MIN_SECONDS <= x <= MAX_SECONDS and math.isfinite(now)):
            return False
        before = next((h for h in reversed(self.history) if h["learner"] == m.learner), None)
        if before is None or before["accepted"] or not before.get("jump"):
            return False
        y = float(before["seconds_per_sample"])
        return y / AGREE <= x <= y * AGREE

    def update(self, m: Measurement, cycle: int) -> str:
        """Fold ``m`` into the estimate; returns why it was refused ('' when accepted). The
        second of two measurements in a row that jump as far from the estimate (module
        docstring) replaces it."""
        why = self.judge(m)
        x = m.seconds_per_sample
        again = bool(why) and self._jumped_before(m)
        jump = bool(why) and not again and "times off the estimate" in why
        self.history.append({"cycle": cycle, "learner": m.learner, "seconds_per_sample": x,
                             "accepted": not why or again, "reason": why, "jump": jump})
        if again:  # the same jump twice: the learner's speed, not an outlier
            self.seconds[m.learner] = x
            return ""
        if why:
            return why
        self.seconds[m.learner] = fold(float(self.seconds[m.learner]), x, self.alpha)
        return ""


@dataclass
class Transfers:
    """What each of K learners' transfers were measured to take, learned from the rounds'
    replies (NaN: none measured yet).

    Attributes
    ----------
    seconds : ndarray, shape (K,)
        Each learner's messaging per round [s]: its replies' round trip beyond its compute
        time (``comm_measured_s``: the model down and up, shipped samples, the deployment's
        own messaging), exponentially weighted.
    rate_Bps : ndarray, shape (K,)
        Its effective link rate [bytes/s]: the bytes of a round that shipped samples (the
        samples and the model down, the model up) over that round's messaging, exponentially
        weighted. Only rounds that ship samples measure it: in the others a few hundred kB of
        model cannot be told apart from the deployment's own messaging.
    alpha : float
        Weight of a new measurement.
    """

    seconds: np.ndarray
    rate_Bps: np.ndarray
    alpha: float = ALPHA

    @classmethod
    def unknown(cls, K: int, alpha: float = ALPHA) -> Transfers:
        return cls(np.full(K, np.nan), np.full(K, np.nan), alpha)

    def _fold(self, values: np.ndarray, k: int, x: float) -> None:
        values[k] = fold(float(values[k]), x, self.alpha)

    def update(self, k: int, comm_s: float | None, shipped_bytes: int | None,
               model_bytes: int) -> None:
        """Fold learner ``k``'s round in: its messaging ``comm_s`` (None or not positive:
        nothing measured) and, where the round shipped ``shipped_bytes`` of samples, its
        rate."""
        if comm_s is None or not math.isfinite(comm_s) or comm_s <= 0:
            return
        self._fold(self.seconds, k, float(comm_s))
        if shipped_bytes:
            self._fold(self.rate_Bps, k, (shipped_bytes + 2 * model_bytes) / float(comm_s))
