"""Who is in a live run's fleet, and what the server believes about each learner's timing.

:class:`Fleet` owns, for the K learners of a run: which node holds which learner (made by the
probe), who is missing (has not answered; left out of the plans until it answers again), each
learner's speed estimate (:class:`~mel_opt.live.estimates.Estimates`), its measured messaging
overhead per round trip, and its measured transfers (:class:`~mel_opt.live.estimates.
Transfers`). Everything a round waits for is computed here, once: a learner's reply is
awaited for its predicted computation and a quarter more, plus its messaging
(:meth:`Fleet.reply_wait_s`), through the pool of a simulation (:meth:`Fleet.queue_s`).

Others read the fleet through its read-only views and change it only through its methods.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

import numpy as np

from mel_opt.live.estimates import Estimates, Measurement, Transfers

__all__ = ["MIN_PROBE_S", "PROBE_WAVES", "SLOWER", "Fleet"]

#: Learners a pool works through in a probe before their probe is shortened: a pool of P
#: probes at most ``PROBE_WAVES * P`` learners for the whole ``probe_s`` each.
PROBE_WAVES = 8
#: The shortest probe of a learner in a pool [s] (2.5 duty periods of a throttled learner's
#: child, :data:`mel_opt.live.throttle.CHILD_PERIOD_S`, so a slow learner's probe sees it
#: stopped).
MIN_PROBE_S = 0.05
#: A reply is awaited for this many times its predicted computation (for learners slower than
#: predicted), plus the learner's measured messaging.
SLOWER = 1.25


def _readonly(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


class Fleet:
    """The K learners of a live run (module docstring).

    Parameters
    ----------
    K : int
        Learners of the instance.
    alpha : float
        Weight of a new measurement in every exponentially weighted average.
    pool : int or None
        Learners trained at once (the simulation's pool of Ray actors); None: each learner on
        its own node (a deployment).
    """

    def __init__(self, K: int, alpha: float, pool: int | None = None) -> None:
        self.K = int(K)
        self.alpha = float(alpha)
        self.pool = pool
        self.estimates = Estimates.unknown(self.K, alpha)
        self.transfers = Transfers.unknown(self.K, alpha)
        # wall seconds of a message's round trip beyond the learner's computation (process
        # start, data loading, decoding): measured per learner, averaged like the speeds
        self._overhead = np.full(self.K, np.nan)
        # each learner's probe split into a start's fixed cost [s] and the seconds per
        # sample-pass beyond it (0 and NaN: not split)
        self._start = np.zeros(self.K)
        self._rate = np.full(self.K, np.nan)
        # round trips of a pooled exchange not folded into the overheads yet
        self._timed: list[tuple[int, float, float]] = []
        self._nodes: dict[int, int] = {}  # node id -> learner
        self._missing: set[int] = set()

    # -- who is in ---------------------------------------------------------------------------
    @property
    def nodes(self) -> Mapping[int, int]:
        """Node id -> learner, of every node mapped so far (read-only)."""
        return MappingProxyType(self._nodes)

    @property
    def missing(self) -> frozenset[int]:
        """Learners that have not answered (left out of the plans until they answer)."""
        return frozenset(self._missing)

    @property
    def seconds(self) -> np.ndarray:
        """Each learner's estimated seconds per sample-pass (NaN: not measured; read-only)."""
        return _readonly(self.estimates.seconds)

    @property
    def overhead(self) -> np.ndarray:
        """Each learner's measured messaging per round trip [s] (NaN: none yet; read-only)."""
        return _readonly(self._overhead)

    @property
    def start_s(self) -> np.ndarray:
        """Each learner's fixed cost of a start from its probe [s] (0: not measured;
        read-only)."""
        return _readonly(self._start)

    @property
    def rate_s(self) -> np.ndarray:
        """Each learner's seconds per sample-pass beyond a start's fixed cost, from its probe
        (NaN: not measured; read-only)."""
        return _readonly(self._rate)

    def split_start(self, learner: int, start_s: float | None, rate_s: float | None,
                    compute_s: float | None, work: float | None) -> str:
        """Keep ``learner``'s probe split into a start's fixed cost and a rate
        (:func:`~mel_opt.live.estimates.start_cost`); why not ('' when kept or there is none):
        a split that claims more time than the probe's ``compute_s`` over ``work`` took."""
        if start_s is None or rate_s is None:
            return ""
        if compute_s is None or work is None or not (
                0.0 <= start_s <= compute_s and 0.0 < rate_s <= compute_s / work * (1 + 1e-9)):
            return (f"learner {learner}'s start cost ignored: {start_s:.3g} s a start and "
                    f"{rate_s:.3g} s per sample-pass do not fit its probe ({compute_s!r} s "
                    f"for {work!r} sample-passes)")
        self._start[learner], self._rate[learner] = float(start_s), float(rate_s)
        return ""

    def join(self, node: int, learner: int) -> str:
        """Map ``node`` to ``learner``; why not ('' when mapped): a learner outside the
        instance, or one another node holds."""
        if not 0 <= learner < self.K:
            return (f"node {node} reported partition id {learner}, not a learner of the "
                    f"instance (0..{self.K - 1}); ignored")
        if learner in self._nodes.values() and self._nodes.get(node) != learner:
            return f"node {node} claims learner {learner}, which another node holds; ignored"
        self._nodes[node] = learner
        return ""

    def learner_at(self, node: int) -> int | None:
        return self._nodes.get(node)

    def node_of(self, learner: int) -> int:
        return next(n for n, k in self._nodes.items() if k == learner)

    def has_node(self, learner: int) -> bool:
        return learner in self._nodes.values()

    @property
    def learners(self) -> list[int]:
        """The learners with a node, in learner order."""
        return sorted(self._nodes.values())

    def lose(self, learners: Iterable[int]) -> None:
        """``learners`` did not answer: missing from now on."""
        self._missing.update(int(k) for k in learners)

    def back(self, learners: Iterable[int]) -> None:
        """``learners`` answered again."""
        self._missing.difference_update(int(k) for k in learners)

    def active(self, known: Iterable[int]) -> np.ndarray:
        """Learners with a node, among ``known``, not missing, in learner order."""
        known = set(known)
        return np.array(sorted(k for k in self._nodes.values()
                               if k in known and k not in self._missing), dtype=np.int64)

    # -- measurements ------------------------------------------------------------------------
    def measure(self, m: Measurement | str, r: int) -> str:
        """Fold one speed measurement into its learner's estimate; why it was refused ('' when
        taken; a text ``m`` is already a refusal)."""
        return m if isinstance(m, str) else self.estimates.update(m, r)

    def transferred(self, learner: int, comm_s: float | None, shipped_bytes: int | None,
                    model_bytes: int) -> None:
        """Fold one reply's measured messaging (and, where samples were shipped, its rate)
        into the learner's transfers."""
        self.transfers.update(learner, comm_s, shipped_bytes, model_bytes)

    def note_overhead(self, learner: int, compute_s: float | None,
                      elapsed_s: float | None) -> None:
        """Fold one round trip of ``learner`` into its messaging overhead; in a pool, keep it
        for :meth:`fold_pooled` (its round trip also holds its time queued behind others)."""
        if elapsed_s is None or not math.isfinite(elapsed_s):
            return
        compute = compute_s if compute_s is not None and math.isfinite(compute_s) else 0.0
        if self.pool is not None:
            self._timed.append((learner, compute, float(elapsed_s)))
            return
        self._fold(learner, max(0.0, elapsed_s - compute))

    def fold_pooled(self) -> None:
        """Fold the round trips kept since the last call into the messaging overhead of a
        pooled exchange: the pool of P (or the n learners, if fewer) was busy until the last
        reply, so each message cost ``(P * last - sum of compute) / n`` beyond its learner's
        computation (the queueing is the pool's, not the learner's); every learner of the
        exchange gets that. Without a pool, nothing is kept and this does nothing."""
        timed, self._timed = self._timed, []
        if not timed:
            return
        pool = min(int(self.pool or 1), len(timed))
        last = max(e for _, _, e in timed)
        busy = sum(c for _, c, _ in timed)
        each = max(0.0, (pool * last - busy) / len(timed))
        for k, _, _ in timed:
            self._fold(k, each)

    def _fold(self, learner: int, value: float) -> None:
        now = float(self._overhead[learner])
        a = self.alpha
        self._overhead[learner] = value if not math.isfinite(now) else (1 - a) * now + a * value

    # -- waits -------------------------------------------------------------------------------
    def overhead_s(self, k: int) -> float:
        """Learner ``k``'s messaging per round trip [s] (0 before it was measured)."""
        value = float(self._overhead[k])
        return value if math.isfinite(value) else 0.0

    def overhead_known(self, k: int) -> float | None:
        """Learner ``k``'s messaging per round trip, None before it was measured."""
        value = float(self._overhead[k])
        return value if math.isfinite(value) else None

    def reply_wait_s(self, k: int, compute_s: float) -> float:
        """How long one reply of learner ``k`` is awaited for a computation of ``compute_s``
        (its prediction): :data:`SLOWER` times it, plus its measured messaging [s]."""
        return SLOWER * compute_s + self.overhead_s(k)

    def queue_s(self, costs: Sequence[float]) -> float:
        """Wall time of jobs of ``costs`` seconds: the longest where every learner trains at
        once; through a pool of P, at most ``sum / P + (1 - 1/P) * longest`` (any order of a
        queue that keeps the P busy: Graham's bound of list scheduling)."""
        if not costs:
            return 0.0
        longest = max(costs)
        if self.pool is None or len(costs) <= self.pool:
            return longest
        P = self.pool
        return sum(costs) / P + (1 - 1 / P) * longest

    def probe_seconds(self, num_nodes: int, probe_s: float) -> float:
        """Seconds of training each of ``num_nodes`` learners times in the probe: ``probe_s``,
        or, when a pool of P works through more than ``PROBE_WAVES * P`` of them, that many
        learners' worth of probing shared among them (``probe_s * PROBE_WAVES * P /
        num_nodes``, at least :data:`MIN_PROBE_S`): the probe then lasts about as long as
        ``PROBE_WAVES`` full ones instead of growing with the learners. The estimate it
        starts is refined by every round's measurement."""
        if self.pool is None or num_nodes <= PROBE_WAVES * self.pool:
            return probe_s
        return min(probe_s, max(MIN_PROBE_S, probe_s * PROBE_WAVES * self.pool / num_nodes))
