"""Learners that lie: well-formed, wrong updates, to measure what an aggregation rule withstands.

A run's ``attack`` setting makes chosen learners (``liars``: a fraction of them, drawn once per
seed, or ``liar_ids``: their indices) send, from round ``attack_from`` on, instead of the
model ``w`` they trained from the round's start ``s``:

``scale:F``
    ``F w``: its model times ``F`` (a flipped exponent bit, or a boosting liar).
``sign``
    ``s - (w - s)``: its update with the sign flipped (the sign-flipping attack of the
    Byzantine-robustness benchmarks, e.g. Allen-Zhu et al. 2020, Karimireddy et al. 2021).
``noise:SIGMA``
    ``w + n`` with ``n`` Gaussian of standard deviation ``SIGMA`` in every coordinate.
``stale``
    The global model it received in its first lying round, every round from then on.

Every reply stays well formed (finite numbers of the right shapes), so the checks of a live
run's replies let it through; only the aggregation rule (:mod:`mel_opt.problems.aggregate`)
stands between it and the global model. The emulator and the arena apply :meth:`Attack.lie`
to the stacked trained models; a live learner's own process applies it to the model it sends
(:mod:`mel_opt.live.learner`), so the lie crosses the wire like any reply.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mel_opt.errors import UsageError

__all__ = ["ATTACKS", "Attack", "apply_lie", "check_fraction", "choose_liars", "make_attack",
           "parse_attack"]

Params = list[np.ndarray]

#: attack -> its one line.
ATTACKS = {
    "scale": "scale:F, its model times F",
    "sign": "sign, its update with the sign flipped",
    "noise": "noise:SIGMA, Gaussian noise of standard deviation SIGMA added to its model",
    "stale": "stale, the model it received in its first lying round, every round",
}


def parse_attack(text: str) -> tuple[str, float | None]:
    """``KIND`` or ``KIND:VALUE`` as ``(kind, value)``.

    Raises
    ------
    UsageError
        An unknown kind, a missing value, or one that is not a finite number (a noise size
        below 0).
    """
    kind, colon, value = str(text).strip().lower().partition(":")
    if kind not in ATTACKS:
        raise UsageError(f"{text!r} is not an attack (one of scale:F, sign, noise:SIGMA, "
                         "stale)")
    if kind in ("sign", "stale"):
        if colon:
            raise UsageError(f"{kind} takes no value, got {text!r}")
        return kind, None
    if not colon:
        raise UsageError(f"{kind} needs a value: {ATTACKS[kind].split(',')[0]}")
    try:
        v = float(value)
    except ValueError:
        raise UsageError(f"{text!r}: {value!r} is not a number") from None
    if not math.isfinite(v):
        raise UsageError(f"{text!r}: the {'factor' if kind == 'scale' else 'size'} must be "
                         "a finite number")
    if kind == "noise" and v < 0:
        raise UsageError(f"{text!r}: the noise's size must be >= 0")
    return kind, v


def check_fraction(value: float) -> None:
    """The liars' fraction must be in [0, 1) (UsageError)."""
    if not 0.0 <= value < 1.0:
        raise UsageError(f"must be in [0, 1), got {value:g}")


def choose_liars(K: int, fraction: float, ids: Sequence[int] | None, seed: int) -> frozenset[int]:
    """The lying learners of ``K``: ``ids`` where given (each must be < K), otherwise
    ``round(fraction K)`` of them drawn with the seed (at least one for a fraction > 0).

    Raises
    ------
    UsageError
        An index out of range.
    """
    if ids:
        bad = [k for k in ids if not 0 <= int(k) < K]
        if bad:
            raise UsageError(f"--liar-ids: learner {bad[0]} is out of range (the run has "
                             f"learners 0..{K - 1})")
        return frozenset(int(k) for k in ids)
    if fraction <= 0:
        return frozenset()
    n = min(K, max(1, round(fraction * K)))
    pick = np.random.default_rng([seed, 50]).permutation(K)[:n]
    return frozenset(int(k) for k in pick)


def apply_lie(kind: str, value: float | None, model: Params, start: Params,
              rng: np.random.Generator | None = None,
              stale: Params | None = None) -> Params:
    """What a liar sends instead of ``model`` (trained from ``start``), in ``model``'s dtypes;
    ``stale``: the model a ``stale`` liar keeps sending."""
    if kind == "scale":
        assert value is not None
        out = [np.asarray(a, dtype=np.float64) * value for a in model]
    elif kind == "sign":
        out = [2.0 * np.asarray(s, dtype=np.float64) - np.asarray(a, dtype=np.float64)
               for a, s in zip(model, start, strict=True)]
    elif kind == "noise":
        assert value is not None and rng is not None
        out = [np.asarray(a, dtype=np.float64) + rng.normal(0.0, value, np.shape(a))
               for a in model]
    elif kind == "stale":
        out = [np.asarray(a, dtype=np.float64) for a in (stale if stale is not None else start)]
    else:
        raise ValueError(f"unknown attack {kind!r}")
    with np.errstate(over="ignore"):
        return [o.astype(np.asarray(a).dtype) for o, a in zip(out, model, strict=True)]


@dataclass
class Attack:
    """The liars of one run and what they send (emulated runs: :meth:`lie`).

    Attributes
    ----------
    kind, value : str, float or None
        See :func:`parse_attack`.
    liars : frozenset of int
    start_round : int
        The first round they lie.
    seed : int
        Mixed with the learner and the round into the noise's draws.
    """

    kind: str
    value: float | None
    liars: frozenset[int]
    start_round: int = 1
    seed: int = 0
    _stale: dict[int, Params] = field(default_factory=dict, repr=False)

    def lies(self, learner: int, round_: int) -> bool:
        return int(learner) in self.liars and round_ >= self.start_round

    def lie(self, learners: Sequence[int] | np.ndarray, stacked: Params, start: Params,
            round_: int) -> Params:
        """The stacked models ``stacked`` of ``learners`` (trained from ``start`` in round
        ``round_``) with the liars' rows replaced by what they send (a new list; the honest
        rows are the same)."""
        rows = [i for i, k in enumerate(learners) if self.lies(int(k), round_)]
        if not rows:
            return stacked
        out = [a.copy() for a in stacked]
        for i in rows:
            k = int(learners[i])
            if self.kind == "stale" and k not in self._stale:
                self._stale[k] = [np.array(a, copy=True) for a in start]
            rng = np.random.default_rng([self.seed, k, round_, 51])
            sent = apply_lie(self.kind, self.value, [a[i] for a in stacked], start, rng,
                             self._stale.get(k))
            for a, s in zip(out, sent, strict=True):
                a[i] = s
        return out


def make_attack(settings: object, K: int, seed: int) -> Attack | None:
    """The run's :class:`Attack` from its settings (``attack``, ``liars``, ``liar_ids``,
    ``attack_from``), or None where no one lies."""
    text = getattr(settings, "attack", None)
    if text is None:
        return None
    kind, value = parse_attack(text)
    liars = choose_liars(K, float(getattr(settings, "liars", 0.0)),
                         getattr(settings, "liar_ids", None), seed)
    if not liars:
        return None
    return Attack(kind, value, liars, int(getattr(settings, "attack_from", 1)), seed)
