"""The declared settings of ``melopt arena`` (:class:`ArenaSettings`).

The data, model and optimiser settings are the emulator's own (:data:`~mel_opt.training.
settings.DATA_SETTINGS`), so an arena trains what ``melopt train`` trains; the rest say which
schemes run, for how long, and the alternatives' parameters (defaults from their papers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mel_opt.arena.deadline import DEFAULT_OVERCOMMIT
from mel_opt.arena.fedprox import DEFAULT_MU
from mel_opt.errors import SettingError
from mel_opt.settings import Declared, Setting
from mel_opt.training.settings import DATA_SETTINGS, DTYPES

__all__ = ["ALTERNATIVES", "ARENA_SETTINGS", "ArenaSettings"]

#: The field's alternatives, each with one line on what it does.
ALTERNATIVES = {
    "deadline": "FedAvg, fixed local work, round deadline, the late dropped (over-commitment)",
    "oort": "Oort: learners picked by statistical utility x system penalty, with a pacer",
    "fedbuff": "FedBuff: asynchronous, a server step every K updates, stale ones down-weighted",
    "fedprox": "FedProx: each learner does what fits the budget, proximal term mu",
}

ARENA_SETTINGS = (
    Setting("schemes", str, None, "Comma-separated schemes: methods of the instance's problem "
            "and the alternatives deadline, oort, fedbuff, fedprox.", many=True,
            nullable=True, default_doc="the problem's default method and the four"),
    Setting("seeds", int, 5, "Runs per scheme (seeds 0 .. seeds-1).", minimum=1),
    Setting("cycles", int, 20, "Time horizon in budgets: every scheme runs for this many "
            "times the instance's round budget (mel-async T, dab D) of virtual time.",
            minimum=1),
    *DATA_SETTINGS,
    Setting("targets", float, (0.8, 0.9), "Comma-separated target accuracies in (0, 1].",
            minimum=0.0, minimum_open=True, maximum=1.0, many=True, flag="--target"),
    Setting("dtype", str, "float32", "Precision of the data, the model and its training.",
            choices=DTYPES),
    Setting("participation", float, 0.5, "Share of the K learners a round of deadline, oort "
            "and fedprox aggregates, and fedbuff's concurrency.", minimum=0.0,
            minimum_open=True, maximum=1.0),
    Setting("overcommit", float, DEFAULT_OVERCOMMIT, "deadline and oort invite this many "
            "times the learners they aggregate and keep the first (FedScale's 1.3).",
            minimum=1.0),
    Setting("passes", float, None, "Local passes of deadline, oort and fedbuff, and the "
            "most fedprox aims at.", minimum=0.0, minimum_open=True, nullable=True,
            default_doc="dab's mu; mel-async: what the median learner fits in T"),
    Setting("mu", float, DEFAULT_MU, "fedprox's proximal weight (the paper's MNIST value).",
            minimum=0.0),
    Setting("buffer", int, 10, "fedbuff's buffer: updates per server step (the paper's 10; "
            "at most the concurrency).", minimum=1),
    Setting("server_lr", float, 1.0, "fedbuff's server learning rate.", minimum=0.0,
            minimum_open=True),
    Setting("alpha", float, 2.0, "oort's system penalty exponent (round_penalty).",
            minimum=0.0),
    Setting("time_limit", float, 60.0, "Solver time limit per method [s].", minimum=0.0,
            minimum_open=True, nullable=True, default_doc="none"),
    Setting("threads", int, None, "Threads that train the learners of one round.", minimum=1,
            nullable=True, default_doc="1"),
)


@dataclass(frozen=True)
class ArenaSettings(Declared):
    """What ``melopt arena`` runs; every field is checked against :data:`ARENA_SETTINGS`."""

    SETTINGS: ClassVar[tuple[Setting, ...]] = ARENA_SETTINGS

    schemes: tuple[str, ...] | None = None
    seeds: int = 5
    cycles: int = 20
    dataset: str = "digits"
    partition: str = "iid"
    model: str = "twonn"
    lr: float = 0.1
    batch_size: int = 32
    max_train: int | None = None
    max_test: int | None = None
    targets: tuple[float, ...] = (0.8, 0.9)
    dtype: str = "float32"
    participation: float = 0.5
    overcommit: float = DEFAULT_OVERCOMMIT
    passes: float | None = None
    mu: float = DEFAULT_MU
    buffer: int = 10
    server_lr: float = 1.0
    alpha: float = 2.0
    time_limit: float | None = 60.0
    threads: int | None = None

    def check_together(self) -> None:
        if self.schemes is not None and len(set(self.schemes)) != len(self.schemes):
            raise SettingError("schemes", self.setting("schemes").flag, "names a scheme twice")
