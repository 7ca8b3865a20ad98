"""How the server combines the learners' models: one function for every run, with robust rules.

Every aggregation of mel_opt (the emulator's cycles, the arena's rounds, FedBuff's server step
and a live run's rounds) goes through :func:`combine`. It works in float64 over each
learner's model flattened to one vector, leaves out an update that is not finite, applies the
run's rule (:data:`RULES`, the run setting ``aggregation``) and checks the result: a new model
that is not finite is never returned (``Combined.model`` is None, with the reason, and the
caller keeps the model it had).

The rules (``NAME`` or ``NAME:VALUE`` on the command line):

``mean``
    The weighted mean ``sum_k w_k P_k / sum_k w_k``: federated averaging as the papers
    aggregate (McMahan et al. 2017, FedAvg; the weights are the papers' d_k, a_k, B_k).
``norm[:C]``
    Norm-bounded updates, then the weighted mean: an update whose distance from the round's
    starting model is above ``C`` times the median distance of the round's updates is scaled
    back onto that bound (the norm-difference clipping of Sun et al. 2019, "Can you really
    backdoor federated learning?", with the bound taken from the round itself: honest
    updates of one round are of one size). ``C`` defaults to :data:`NORM_BOUND`.
``median``
    The coordinate-wise median of the models (Yin et al. 2018, "Byzantine-robust distributed
    learning: towards optimal statistical rates", ICML, Definition 1). Unweighted.
``trimmed[:BETA]``
    The coordinate-wise beta-trimmed mean: in every coordinate the ``floor(beta n)`` largest
    and smallest values are dropped and the rest averaged (Yin et al. 2018, Definition 2).
    Unweighted; ``BETA`` in [0, 0.5), default :data:`TRIM_BETA`.
``krum[:F]``
    Krum (Blanchard et al. 2017, "Machine learning with adversaries: Byzantine tolerant
    gradient descent", NeurIPS, Section 4): each model scores the sum of its squared
    distances to its ``n - f - 2`` nearest others and the model of least score is the new
    global model. ``F`` is the number of liars it tolerates; the paper needs ``n > 2f + 2``,
    and by default (or where ``F`` is larger) ``f`` is the largest that holds,
    ``(n - 3) // 2`` (at least 0).

The default is ``norm`` (:data:`DEFAULT_RULE`): it is the papers' weighted mean whenever no
update is far larger than the round's others, so the allocation's results stand, and one
update scaled by a large factor (a liar, or a flipped exponent bit) moves the model no more
than a few honest updates do. docs/howto/robust.md gives the measurements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mel_opt.errors import UsageError

__all__ = ["DEFAULT_RULE", "NORM_BOUND", "RULES", "TRIM_BETA", "Combined",
           "Rule", "combine", "krum_choice", "parse_rule"]

Params = list[np.ndarray]

#: ``norm``'s default bound: three times the round's median distance.
NORM_BOUND = 3.0
#: ``trimmed``'s default beta: a tenth of the values dropped at each end.
TRIM_BETA = 0.1

#: rule -> its one line (the ``aggregation`` setting's choices).
RULES = {
    "mean": "the weighted mean (FedAvg, the papers')",
    "norm": f"updates farther from the round's start than C x their median distance clipped "
            f"onto that bound, then the weighted mean (Sun et al. 2019; C = {NORM_BOUND:g})",
    "median": "the coordinate-wise median (Yin et al. 2018)",
    "trimmed": f"the coordinate-wise mean without the beta n largest and smallest values "
               f"(Yin et al. 2018; beta = {TRIM_BETA:g})",
    "krum": "the model closest to its n - f - 2 nearest others (Blanchard et al. 2017; f: "
            "the most the learners allow)",
}
DEFAULT_RULE = "norm"


@dataclass(frozen=True)
class Rule:
    """A parsed aggregation rule: its name and its number (None: the rule's default)."""

    name: str = DEFAULT_RULE
    value: float | None = None

    @property
    def text(self) -> str:
        return self.name if self.value is None else f"{self.name}:{self.value:g}"


def parse_rule(text: str | Rule | None) -> Rule:
    """``NAME`` or ``NAME:VALUE`` as a :class:`Rule` (None: the default).

    Raises
    ------
    UsageError
        An unknown name, or a value that is not a number of the rule's range.
    """
    if isinstance(text, Rule):
        return text
    if text is None:
        return Rule()
    name, colon, value = str(text).strip().lower().partition(":")
    if name not in RULES:
        raise UsageError(f"{text!r} is not an aggregation rule (one of {', '.join(RULES)}, "
                         "some with :VALUE)")
    if not colon:
        return Rule(name)
    if name in ("mean", "median"):
        raise UsageError(f"{name} takes no value, got {text!r}")
    try:
        v = float(value)
    except ValueError:
        raise UsageError(f"{text!r}: {value!r} is not a number") from None
    if name == "norm" and not (math.isfinite(v) and v >= 1.0):
        raise UsageError(f"{text!r}: the bound must be a finite number >= 1 (times the "
                         "median distance)")
    if name == "trimmed" and not 0.0 <= v < 0.5:
        raise UsageError(f"{text!r}: beta must be in [0, 0.5)")
    if name == "krum" and not (v >= 0 and v == int(v)):
        raise UsageError(f"{text!r}: f must be a whole number >= 0")
    return Rule(name, v)


@dataclass(frozen=True)
class Combined:
    """What :func:`combine` made of a round's models.

    Attributes
    ----------
    model : list of ndarray or None
        The new global model, in the models' dtypes; None when it is not finite (or nothing
        could be combined): the caller keeps the model it had.
    notes : dict of int to str
        Why an update did not enter as sent, by its position in the stack (clipped, left
        out as non-finite, not chosen by Krum).
    kept : str or None
        Why the previous model is kept (when ``model`` is None).
    """

    model: Params | None
    notes: dict[int, str] = field(default_factory=dict)
    kept: str | None = None


def _flat(models: Params) -> np.ndarray:
    """The stacked models as one float64 row per learner."""
    n = models[0].shape[0]
    return np.concatenate([np.asarray(a, dtype=np.float64).reshape(n, -1) for a in models],
                          axis=1)


def _unflat(vector: np.ndarray, like: Params) -> Params:
    out, at = [], 0
    for a in like:
        shape = a.shape[1:]
        size = int(np.prod(shape, dtype=np.int64))
        out.append(vector[at:at + size].reshape(shape))
        at += size
    return out


def krum_choice(vectors: np.ndarray, f: int | None = None) -> tuple[int, int]:
    """Krum's choice among the rows of ``vectors`` and the f it used (Blanchard et al. 2017).

    Each row scores the sum of its squared distances to its ``n - f - 2`` nearest other rows
    (at least one); the row of least score wins (the first, on a tie). ``f`` is capped at the
    largest with ``n > 2f + 2``."""
    n = vectors.shape[0]
    most = max(0, (n - 3) // 2)
    f = most if f is None else min(int(f), most)
    if n == 1:
        return 0, f
    sq = np.sum(vectors * vectors, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * vectors @ vectors.T, 0.0)
    np.fill_diagonal(d2, np.inf)
    near = max(1, n - f - 2)
    scores = np.sort(d2, axis=1)[:, :near].sum(axis=1)
    return int(np.argmin(scores)), f


def combine(models: Params, weights: Sequence[float] | np.ndarray, start: Params | None,
            rule: Rule | str | None = None) -> Combined:
    """The new global model from the models stacked over their leading (learner) axis.

    Parameters
    ----------
    models : list of ndarray
        Each layer, stacked over the learners.
    weights : array of float
        Each learner's weight (the ``mean`` and ``norm`` rules; the others are unweighted).
    start : list of ndarray or None
        The model the round started from (no learner axis): ``norm`` measures the updates'
        distances from it. None: from the coordinate-wise median of the models.
    rule : Rule, str or None
        See :data:`RULES` (None: :data:`DEFAULT_RULE`).
    """
    rule = parse_rule(rule)
    v = _flat(models)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.size != v.shape[0]:
        raise ValueError(f"{w.size} weights for {v.shape[0]} models")
    notes: dict[int, str] = {}
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.isfinite(v).all(axis=1)
    for i in np.flatnonzero(~finite):
        notes[int(i)] = "left out: its model has non-finite values"
    idx = np.flatnonzero(finite & (w > 0)) if rule.name in ("mean", "norm") \
        else np.flatnonzero(finite)
    if idx.size == 0:
        return Combined(None, notes, "no finite update to aggregate; the previous model is kept")
    x, wx = v[idx], w[idx]
    with np.errstate(over="ignore", invalid="ignore"):
        if rule.name in ("mean", "norm"):
            if rule.name == "norm":
                ref = (_flat([a[None] for a in start])[0] if start is not None
                       else np.median(x, axis=0))
                dist = np.linalg.norm(x - ref, axis=1)
                c = NORM_BOUND if rule.value is None else rule.value
                med = float(np.median(dist))
                for j in np.flatnonzero(dist > c * med):
                    x[j] = ref + (x[j] - ref) * (c * med / dist[j])
                    notes[int(idx[j])] = (f"clipped: its distance {dist[j]:.3g} from the round's "
                                          f"start is above {c:g} x the median {med:.3g}")
            new = (wx / wx.sum()) @ x
        elif rule.name == "median":
            new = np.median(x, axis=0)
        elif rule.name == "trimmed":
            beta = TRIM_BETA if rule.value is None else rule.value
            cut = int(math.floor(beta * x.shape[0]))
            s = np.sort(x, axis=0)
            new = s[cut:x.shape[0] - cut].mean(axis=0)
        else:  # krum
            pick, f = krum_choice(x, None if rule.value is None else int(rule.value))
            new = x[pick]
            for i in idx:
                if i != idx[pick]:
                    notes.setdefault(int(i), f"not chosen by Krum (f = {f})")
        out = [a.astype(m.dtype) for a, m in zip(_unflat(new, models), models, strict=True)]
        ok = all(np.isfinite(a).all() for a in out)
    if not ok:
        return Combined(None, notes, f"the {rule.text} aggregate is not finite; the previous "
                                     "model is kept")
    return Combined(out, notes)

