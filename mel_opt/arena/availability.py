"""Learners that go offline and come back: the arena's availability hook.

A run without ``--availability`` has every learner online all the time (no :class:`
Availability` at all, and nothing changes). With ``--availability fedscale:PATH`` each
learner follows one client of a FedScale behaviour trace (``client_behave_trace``, read by
:func:`mel_opt.io.traces.read_fedscale_behaviour`): online at virtual time t when
``active[i] <= t mod finish_time <= inactive[i]`` for some interval i, as FedScale's
``ClientMetadata.is_active`` decides (Lai et al., "FedScale", ICML 2022; its availability data
are FLASH's traces of 136k phones, a device counted available while charging).

The loops ask the object three things, and only these (:class:`Availability`):

- :meth:`~Availability.online`: who is online at a round's start; a learner offline then is
  not invited (no model sent, no work, no bytes);
- :meth:`~Availability.left`: how long each learner put to work at t stays online; one that
  goes offline before it finishes loses its update for that round (its busy time until it left
  and its download are counted, its upload and update are not; :meth:`~Availability.lost`);
- :meth:`~Availability.next_online`: when each learner is next online (an asynchronous
  server with nobody online waits for the first to come back).

Learners are matched to the trace's clients by name when every learner's name is one of the
trace's client ids (the learners of ``melopt generate --preset fleet --param trace=...`` are
named by their trace's client ids); otherwise by FedScale's own rule, learner k (or the integer
id k of its name) to the trace's (k mod n)-th client in file order (``fedscale/cloud/
client_manager.py``); :attr:`Availability.matched` says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.io.traces import FedScaleBehaviour, read_fedscale_behaviour

__all__ = ["Availability", "availability_for", "parse_availability"]


@dataclass(frozen=True)
class Availability:
    """Each learner's online intervals, repeating with its period.

    Attributes
    ----------
    starts, ends : tuple of numpy.ndarray
        Per learner, its intervals [s] within one period (sorted, disjoint, inclusive).
    period : numpy.ndarray
        Per learner, the span after which its intervals repeat [s].
    matched : str
        How learners were matched to the trace's clients (for the run's report).
    """

    starts: tuple[np.ndarray, ...]
    ends: tuple[np.ndarray, ...]
    period: np.ndarray
    matched: str = ""

    def _state(self, k: int, t: float) -> tuple[int, float, float]:
        """(index of the interval holding t or -1, the period's start, t within it)."""
        P = float(self.period[k])
        base = math.floor(t / P) * P
        x = t - base
        a, b = self.starts[k], self.ends[k]
        i = int(np.searchsorted(a, x, side="right")) - 1
        return (i if i >= 0 and x <= b[i] else -1), base, x

    def online(self, learners: Sequence[int] | np.ndarray, t: float) -> np.ndarray:
        """Whether each of ``learners`` is online at time ``t``."""
        return np.array([self._state(int(k), t)[0] >= 0 for k in learners], dtype=bool)

    def offline_at(self, k: int, t: float) -> float:
        """When learner ``k``, online at ``t``, next goes offline (``inf``: never); ``t`` when
        it is offline at ``t``. Only times within a period count (FedScale takes t mod the
        period), so an interval ends at the period's end at the latest; there it continues
        into the next period's first interval when that starts at 0."""
        i, base, _ = self._state(k, t)
        if i < 0:
            return t
        a, b, P = self.starts[k], self.ends[k], float(self.period[k])
        if a[0] <= 0.0 and b[0] >= P:
            return math.inf  # online the whole period
        if b[i] >= P and a[0] <= 0.0:
            return base + P + float(b[0])
        return base + min(float(b[i]), P)

    def next_online(self, learners: Sequence[int] | np.ndarray, t: float) -> np.ndarray:
        """The earliest time >= ``t`` at which each of ``learners`` is online (``inf``: never,
        a learner whose intervals all lie past its period)."""
        out = []
        for k in learners:
            i, base, x = self._state(int(k), t)
            if i >= 0:
                out.append(t)
                continue
            a, P = self.starts[int(k)], float(self.period[int(k)])
            j = int(np.searchsorted(a, x, side="right"))
            if j < a.size and a[j] < P:
                out.append(base + float(a[j]))
            elif a.size and a[0] < P:
                out.append(base + P + float(a[0]))
            else:
                out.append(math.inf)
        return np.array(out, dtype=float)

    def left(self, learners: Sequence[int] | np.ndarray, t: float) -> np.ndarray:
        """Seconds each of ``learners`` stays online from ``t`` (0: offline at ``t``; ``inf``:
        never leaves)."""
        return np.array([self.offline_at(int(k), t) - t for k in learners], dtype=float)

    def lost(self, learners: Sequence[int] | np.ndarray, t: float,
             seconds: np.ndarray) -> np.ndarray:
        """Whether each of ``learners``, put to work at ``t`` for ``seconds``, is offline at
        ``t`` or goes offline before ``t + seconds``."""
        return self.left(learners, t) < np.asarray(seconds, dtype=float)


def parse_availability(text: str) -> str:
    """Check the ``--availability`` value's form: ``fedscale:PATH``."""
    kind, sep, path = text.partition(":")
    if not sep or not path or kind != "fedscale":
        raise UsageError(f"--availability expects fedscale:PATH (a FedScale behaviour trace), "
                         f"got {text!r}")
    return text


def availability_for(spec: str, names: Sequence[str]) -> Availability:
    """The :class:`Availability` of learners ``names`` from ``spec`` (``fedscale:PATH``),
    matched to the trace's clients as the module doc says."""
    trace = read_fedscale_behaviour(parse_availability(spec).partition(":")[2])
    return match(trace, names)


def match(trace: FedScaleBehaviour, names: Sequence[str]) -> Availability:
    """Learners ``names`` matched to ``trace``'s clients (module doc)."""
    index = {cid: i for i, cid in enumerate(trace.ids)}
    n = len(trace.ids)
    if all(name in index for name in names):
        rows = [index[name] for name in names]
        how = "by name"
    elif all(name.lstrip("-").isdigit() and len(name) < 20 for name in names):
        rows = [int(name) % n for name in names]
        how = f"by FedScale's rule (client id mod {n})"
    else:
        rows = [k % n for k in range(len(names))]
        how = f"by FedScale's rule (learner index mod {n})"
    return Availability(tuple(trace.active[i] for i in rows),
                        tuple(trace.inactive[i] for i in rows),
                        np.array([trace.finish_s[i] for i in rows], dtype=float),
                        f"learners matched to the {n} clients of the behaviour trace {how}")
