"""How a live run's orders reach its learners and their answers come back: the exchange.

The round loop (:mod:`mel_opt.live.loop`) and FedBuff's server (:mod:`mel_opt.live.fedbuff`)
are written once, against the small :class:`Exchange` protocol, as Flower writes its round loop
against its ``Grid``. Two implementations carry a live run:

- :class:`mel_opt.live.flower_exchange.FlowerExchange`: Flower's grid (the simulation runtime
  and every deployment), messages pushed and their replies pulled with a short poll, each
  reply's round trip measured on the wall clock;
- :class:`mel_opt.live.inprocess.ClockExchange`: learners in this process on a virtual clock
  (the same learner functions as Flower's client app, a test's or the catalogue's clock).

A third carrier, the arena's :class:`mel_opt.arena.virtual.VirtualWorkers`, serves FedBuff's
server loop directly on the emulator's clock. Everything an exchange carries is encoded
(:class:`~mel_opt.problems.messages.Records`), so the learners answer the same bytes whatever
carries them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from mel_opt.problems.messages import Records

__all__ = ["PROBE", "TRAIN", "Arrival", "Asked", "Exchange"]

#: The kinds of message: a probe (subset benchmarking, or "are you there?"), and a training
#: order (a claim included).
PROBE = "probe"
TRAIN = "train"


@dataclass(frozen=True)
class Arrival:
    """One node's answer.

    Attributes
    ----------
    node : int
    records : Records or None
        Its content; None when it has none to read (``why`` says why).
    failed : bool
        The node answered with an error (it failed, or the SuperLink reports it gone).
    why : str
        Why there is no content: the error's reason, or why the content cannot be read.
    elapsed_s : float or None
        Wall time from sending the order to receiving this answer [s] (None: not measured,
        the in-process learners).
    """

    node: int
    records: Records | None
    failed: bool = False
    why: str = ""
    elapsed_s: float | None = None


@dataclass(frozen=True)
class Asked:
    """What one synchronous exchange brought back.

    Attributes
    ----------
    arrivals : list of Arrival
        The answers that came within the wait.
    heard : frozenset of int
        Nodes that answered an earlier exchange's message meanwhile, without an error: they
        are alive (a missing learner is back).
    """

    arrivals: list[Arrival] = field(default_factory=list)
    heard: frozenset[int] = frozenset()


class Exchange(Protocol):
    """What the round loop and FedBuff's server need of a carrier."""

    #: Whether messages cross a link, so that claimed samples are shipped with the model
    #: (:mod:`mel_opt.live.claims`) and replies' round trips are measured.
    carries_data: bool
    #: The least wait of the first exchange [s] (a deployment's learner processes start then).
    first_wait_s: float

    def nodes(self) -> list[int]:
        """The nodes of the run (waiting for them where they connect)."""

    def lap(self) -> float:
        """Seconds on the exchange's clock (the wall clock, or a virtual one) since its
        previous lap (a stopwatch: the loop times a round, FedBuff a server step)."""

    def ask(self, messages: Mapping[int, Records], kind: str, group: str, wait_s: float,
            round_: int) -> Asked:
        """Send each node its message (``kind``: :data:`PROBE` or :data:`TRAIN`; ``group``
        names the exchange, ``round_`` is the round it belongs to) and gather the answers
        until all came or ``wait_s`` seconds passed."""

    def push(self, node: int, content: Records, group: str, wait_s: float,
             round_: int) -> None:
        """Send ``node`` a training order whose answer is due within ``wait_s`` [s]."""

    def pull(self) -> list[Arrival]:
        """Answers to pushed orders ready now."""

    def overdue(self) -> list[int]:
        """Nodes whose pushed order has passed its due time unanswered (each once)."""

    def polls_for(self, seconds: float) -> int:
        """Empty-handed pulls that take about ``seconds``."""
