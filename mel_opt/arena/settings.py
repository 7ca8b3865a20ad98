"""The declared settings of ``melopt arena`` (:class:`ArenaSettings`).

The data, model and optimiser settings are the emulator's own (:data:`~mel_opt.training.
settings.DATA_SETTINGS`), so an arena trains what ``melopt train`` trains; the rest say which
schemes run and for how long; the schemes' own options (defaults from their papers) are those
the registry's arena schemes declare (:func:`mel_opt.schemes.scheme_options`); ``per_scheme``
gives one scheme values of its own, ``tune`` picks them from each scheme's declared grid
(:mod:`mel_opt.arena.tune`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from mel_opt.arena.availability import parse_availability
from mel_opt.errors import SettingError
from mel_opt.problems.aggregate import DEFAULT_RULE
from mel_opt.schemes import Loop, scheme_options, schemes_for
from mel_opt.schemes.base import SHARED_OPTIONS
from mel_opt.schemes.deadline import DEFAULT_OVERCOMMIT
from mel_opt.schemes.fedprox import DEFAULT_MU
from mel_opt.settings import Declared, Setting
from mel_opt.stats import DEFAULT_TIME_CV
from mel_opt.training.partition import parse_shares
from mel_opt.training.settings import DATA_SETTINGS, DEVICE, DTYPES, ROBUST_SETTINGS

__all__ = ["ALTERNATIVES", "ARENA_SETTINGS", "ArenaSettings"]

#: The field's alternatives in the arena (every arena scheme of the registry but mel_opt's
#: allocation, which the arena names by its methods), each with its one line.
ALTERNATIVES = {s.name: s.summary for s in schemes_for("arena") if s.loop is not Loop.ALLOCATION}

#: Options every scheme may take a value of its own for (``--set SCHEME.lr=...``) beside its
#: own: the client learning rate and minibatch, which every baseline's authors tune per task.
PER_SCHEME_SHARED = SHARED_OPTIONS

ARENA_SETTINGS = (
    Setting("schemes", str, None, "Comma-separated schemes: methods of the instance's problem "
            f"and the alternatives {', '.join(ALTERNATIVES)}.", many=True,
            nullable=True,
            default_doc=f"the problem's default method and the {len(ALTERNATIVES)}"),
    Setting("seeds", int, 10, "Runs per scheme (seeds 0 .. seeds-1); a winner needs 6 at "
            "least (a paired sign interval of 95 %), the Kaplan-Meier median's upper limit "
            "about 10.", minimum=1),
    Setting("first_seed", int, 0, "The first seed: runs use seeds first_seed .. "
            "first_seed+seeds-1.", minimum=0),
    Setting("cycles", int, 20, "Time horizon in budgets: every scheme runs for this many "
            "times the instance's round budget (mel-async T, dab D) of virtual time.",
            minimum=1),
    *DATA_SETTINGS,
    Setting("targets", float, (0.8, 0.9), "Comma-separated target accuracies in (0, 1].",
            minimum=0.0, minimum_open=True, maximum=1.0, many=True, flag="--target"),
    Setting("dtype", str, "float32", "Precision of the data, the model and its training.",
            choices=DTYPES),
    Setting("shares", str, "equal", "Data sizes of the learners of the schemes that do not "
            "allocate data: equal, or lognormal:SIGMA (each learner's share a lognormal draw "
            "of log-spread SIGMA, per seed; its time per pass grows with its data).",
            check=parse_shares),
    Setting("time_cv", float, None, "Run-to-run spread (coefficient of variation) of every "
            "learner's time, for every scheme: each busy time is drawn around the model's with "
            "a lognormal factor of mean 1 (0: the model's times exactly).", minimum=0.0,
            maximum=2.0, nullable=True,
            default_doc=f"the instance's time_cv; where it gives none, {DEFAULT_TIME_CV:g}"),
    Setting("availability", str, None, "A FedScale behaviour trace, fedscale:PATH: each "
            "learner goes offline and comes back as one of its clients (matched by name, else "
            "by FedScale's rule); a learner offline at a round's start is not invited, one that "
            "goes offline before it finishes loses that round's update.", nullable=True,
            check=parse_availability, default_doc="every learner always online"),
    *scheme_options("arena"),
    Setting("per_scheme", str, None, "SCHEME.OPTION=VALUE, comma-separated: an option for one "
            "scheme alone (its own options, or the client learning rate lr and minibatch "
            "batch_size; none: an option's default rule), e.g. "
            "fedprox.mu=0.01,fedbuff.server_lr=2,fedbuff.buffer=none.", many=True,
            nullable=True, flag="--set",
            default_doc="none: every scheme runs the settings above"),
    Setting("validation", int, None, "Training samples held out as a validation split "
            "(its accuracy is reported as val_accuracy; tuning picks by it, the test split "
            "judges).", minimum=1, nullable=True,
            default_doc="none; with --tune, the test split's size, at most a sixth of the "
            "training samples"),
    Setting("tune", bool, False, "Tune every scheme first, with the same number of trials "
            "each: --trials points of its declared grid, each run on --tune-seeds seeds of "
            "their own and scored on the validation split; the best is then run on the "
            "evaluation seeds and judged on the test split (--set values stay fixed)."),
    Setting("trials", int, 8, "Tuning trials per scheme (points drawn from its grid, the same "
            "every run).", minimum=1),
    Setting("tune_seeds", int, 2, "Seeds per tuning trial (seeds of their own, from 1000, "
            "never an evaluation seed).", minimum=1),
    Setting("time_limit", float, 60.0, "Solver time limit per method [s].", minimum=0.0,
            minimum_open=True, nullable=True, default_doc="none"),
    Setting("threads", int, None, "Threads that train the learners of one round.", minimum=1,
            nullable=True, default_doc="1"),
    DEVICE,
    *ROBUST_SETTINGS,
)


@dataclass(frozen=True)
class ArenaSettings(Declared):
    """What ``melopt arena`` runs; every field is checked against :data:`ARENA_SETTINGS`."""

    SETTINGS: ClassVar[tuple[Setting, ...]] = ARENA_SETTINGS

    schemes: tuple[str, ...] | None = None
    seeds: int = 10
    first_seed: int = 0
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
    shares: str = "equal"
    time_cv: float | None = None
    availability: str | None = None
    participation: float = 1.0
    overcommit: float = DEFAULT_OVERCOMMIT
    passes: float | None = None
    local_steps: int | None = None
    mu: float = DEFAULT_MU
    concurrency: float = 1.0
    buffer: int | None = None
    server_lr: float = 1.0
    alpha: float = 2.0
    groups: int | None = None
    period: float | None = None
    phi: float = 5e-5
    rechoose: float | None = None
    per_scheme: tuple[str, ...] | None = None
    validation: int | None = None
    tune: bool = False
    trials: int = 8
    tune_seeds: int = 2
    time_limit: float | None = 60.0
    threads: int | None = None
    device: str = "cpu"
    aggregation: str = DEFAULT_RULE
    attack: str | None = None
    liars: float = 0.0
    liar_ids: tuple[int, ...] | None = None
    attack_from: int = 1

    def check_together(self) -> None:
        if self.schemes is not None and len(set(self.schemes)) != len(self.schemes):
            raise SettingError("schemes", self.setting("schemes").flag, "names a scheme twice")
        self.overrides()

    def overrides(self) -> dict[str, dict[str, Any]]:
        """``per_scheme`` parsed: scheme -> {option: value} (each value checked by its
        declaration, ``none`` the default rule of a nullable option; the option must be one
        the scheme declares, or one of :data:`PER_SCHEME_SHARED`)."""
        flag = self.setting("per_scheme").flag
        out: dict[str, dict[str, Any]] = {}
        for item in self.per_scheme or ():
            head, eq, value = item.partition("=")
            scheme, dot, option = head.strip().partition(".")
            if not (eq and dot and scheme and option):
                raise SettingError("per_scheme", flag, f"{item!r} is not SCHEME.OPTION=VALUE")
            mine = {o.name for spec in schemes_for("arena") if spec.name == scheme
                    for o in spec.options_for("arena")} | set(PER_SCHEME_SHARED)
            if option not in mine:
                raise SettingError("per_scheme", flag,
                                   f"{scheme!r} has no option {option!r} (it has "
                                   f"{', '.join(sorted(mine))})", ": ")
            declaration = self.setting(option)
            try:
                parsed = (None if declaration.nullable and value.strip().lower() == "none"
                          else declaration.parse(value.strip()))
            except SettingError as exc:
                raise SettingError("per_scheme", flag, f"{item!r}: {exc}", ": ") from None
            out.setdefault(scheme, {})[option] = parsed
        return out

    def for_scheme(self, scheme: str) -> ArenaSettings:
        """The settings ``scheme`` runs with: these, with its own ``per_scheme`` values (an
        allocation method's scheme is named by its method)."""
        own = self.overrides().get(scheme, {})
        return dataclasses.replace(self, **own) if own else self
