"""What a scheme is: its declaration in the registry and the hooks its loop calls.

A *scheme* is what the server does with a population of learners: mel_opt's allocation (the
problem's method sizes every learner's work), or one of the field's alternatives (deadline
dropping, Oort, FedProx: synchronous rounds of fixed work; FedBuff: asynchronous buffered
aggregation). Each is declared once, by a :class:`SchemeSpec` in the registry
(:mod:`mel_opt.schemes`), as a method is by its ``MethodSpec``: its name, a one-line summary,
the loop it runs in, its options (declared settings), what it needs of a problem and where it
runs. ``melopt arena`` and ``melopt live`` list and check schemes from the registry, and nothing
outside it compares a scheme's name.

The loops are written once each:

- :attr:`Loop.ALLOCATION`: the problem's method allocates every learner's work; the arena
  trains it with the emulator's cycle loop, live runs plan each round from measured speeds;
- :attr:`Loop.ROUNDS`: synchronous rounds of fixed work; the scheme is a small
  :class:`RoundPolicy` (who is invited, what each does, who is kept, what it learns), as a
  Flower strategy overrides ``configure_train`` and ``aggregate_train``;
- :attr:`Loop.BUFFERED`: asynchronous; the scheme serves a :class:`~mel_opt.schemes.fedbuff.
  Workers` (:attr:`SchemeSpec.serve`), whatever carries the work (the arena's virtual clock,
  Flower's grid, in-process learners).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from mel_opt.errors import UsageError
from mel_opt.problems.learning import LearningCycle
from mel_opt.problems.work import WorkClock
from mel_opt.settings import Setting
from mel_opt.training.settings import BATCH_SIZE, LR

__all__ = ["ENGINES", "GRID_BATCH", "GRID_LR", "SHARED_OPTIONS", "SPEED_MOVE", "Loop",
           "RoundClose", "RoundContext", "RoundPolicy", "SchemeSpec", "WorkPlan"]

#: Where a scheme may run: the arena's virtual clock, live learner processes.
ENGINES = ("arena", "live")
#: The arena's training settings every scheme may take a value of its own for (``--set
#: SCHEME.lr=...``) and tune beside its own options (:attr:`SchemeSpec.grid`): the client
#: learning rate and minibatch, which every baseline's authors tune per task.
SHARED_OPTIONS = (LR.name, BATCH_SIZE.name)
#: The client learning rates every scheme's grid tries: the arena's default 0.1, a half-decade
#: below and a decade above in half-decade steps (FedProx's and FedBuff's authors tune the
#: client rate on such a log grid per task; with 0.3 as the top, every scheme picked the top
#: on the digits, so the grid reaches 1).
GRID_LR = (0.03, 0.1, 0.3, 1.0)
#: The minibatches of the grids of the schemes without options of their own (the allocation
#: and its ablations): the default 32 and a factor 2 each way (FedAvg's authors tune the
#: minibatch, B in {10, 50, all}, McMahan et al., AISTATS 2017, Section 3).
GRID_BATCH = (16, 32, 64)
#: Live, a plan decides again (staggered: its data placed again by the allocation, its
#: bound's period chosen again) once a learner's seconds per sample-pass, measured over a
#: budget's worth of its compute (all its replies' compute over all their sample-passes), is
#: more than this fraction above or below the one it was placed at, in two windows in a row
#: (one is not enough where learners share cores: :meth:`mel_opt.live.fedbuff.PlannedWork.
#: replace`). One short start's
#: measurement is far noisier than that on a throttled learner (its duty cycle's tenth of a
#: second is a large part of a fifth of a second's work); a budget's worth averages it out,
#: while a device that slowed down or sped up still moves it.
SPEED_MOVE = 0.25


class Loop(enum.Enum):
    """The loop a scheme runs in (module docstring)."""

    ALLOCATION = "allocation"
    ROUNDS = "rounds"
    BUFFERED = "buffered"


@dataclass(frozen=True)
class RoundClose:
    """How a synchronous round ended: who is kept and how long it lasted.

    Attributes
    ----------
    kept : ndarray of bool
        Per invited learner (the order of its times): its update is aggregated.
    duration_s : float
        The round's length on the clock [s].
    work : ndarray or None
        Per invited learner, the passes it completed when that is less than it was given (a
        learner that stops at the round's end, FedProx's partial work); None: all it was
        given.
    """

    kept: np.ndarray
    duration_s: float
    work: np.ndarray | None = None


class RoundContext(Protocol):
    """What a round policy reads of the run it serves (the arena's :class:`~mel_opt.arena.
    runner.Run`)."""

    rng: np.random.Generator
    clock: WorkClock

    @property
    def m(self) -> int:
        """Learners a round aggregates."""

    @property
    def passes(self) -> float:
        """The round's fixed local work [passes]."""

    def fixed_work(self, learners: np.ndarray) -> np.ndarray:
        """The passes each of ``learners`` does for the round's fixed local work: the
        ``passes``, or the passes the ``local_steps`` option's minibatch steps make over the
        learner's data."""

    @property
    def options(self) -> Any:
        """The run's settings (each scheme reads its own declared options there)."""

    @property
    def sizes(self) -> np.ndarray:
        """Samples each learner holds (its local data set's size)."""

    @property
    def allocated(self) -> np.ndarray | None:
        """Each learner's sample-updates a cycle under the problem's allocation (for a scheme
        that needs ``allocation``; None otherwise)."""

    def utilities(self, model: Any, learners: np.ndarray) -> np.ndarray:
        """Oort's statistical utility of each of ``learners`` at ``model``."""

    @property
    def horizon_s(self) -> float:
        """How long the run lasts on the virtual clock [s]."""

    def estimates(self, eta: float, model: Any = None) -> Any:
        """The convergence bound's constants measured on the learners' data at ``model``
        (None: the run's starting model; :func:`mel_opt.schemes.period.estimate`, client
        learning rate ``eta``)."""


class RoundPolicy(Protocol):
    """One synchronous scheme: the hooks of :attr:`Loop.ROUNDS`, called in this order each
    round (the random draws of :meth:`invite` come before the times' noise, which comes
    before the training's)."""

    #: Weight of the proximal term in local training (0: plain SGD).
    mu: float

    def invite(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Round ``r``'s invited learners (sorted) and, among them, those exploited for their
        utility (empty where the scheme keeps no utilities)."""

    def work(self, invited: np.ndarray) -> np.ndarray:
        """Passes each invited learner does."""

    def close(self, invited: np.ndarray, times: np.ndarray, passes: np.ndarray) -> RoundClose:
        """Who is kept and how long the round lasts, from each invited learner's busy time
        (``invited`` as :meth:`invite` gave them, ``passes`` as :meth:`work` gave them)."""

    def learned(self, model: Any, invited: np.ndarray, times: np.ndarray, close: RoundClose,
                r: int, exploited: np.ndarray) -> None:
        """What the scheme keeps of round ``r`` (Oort: the kept learners' utilities at the
        round's starting ``model`` and every invited learner's observed duration):
        ``invited`` as :meth:`invite` gave them, ``times`` each one's busy time on the clock
        (noise included: what the server observes), ``close`` as :meth:`close` gave it."""


class WorkPlan(Protocol):
    """What an asynchronous scheme's learners do on the arena's clock: the work of each start
    and the weight of each update in its server step (the hooks of :attr:`Loop.BUFFERED`
    beside its server loop)."""

    @property
    def nodes(self) -> list[int]:
        """The learners that take part, in the order they are first idle."""

    @property
    def concurrency(self) -> int:
        """Learners training at once."""

    @property
    def buffer(self) -> int:
        """Updates per server step."""

    def passes(self, node: int, now: float) -> float:
        """Passes over its data ``node`` does when it starts at virtual time ``now``."""

    def weight(self, node: int, staleness: int) -> float:
        """The weight of ``node``'s update, ``staleness`` server steps old, in its step."""

    def measured(self, node: int, per_pass_s: float, start_s: float = 0.0) -> None:
        """``node``'s time per pass over its data as measured (a live run's), beyond the
        fixed cost ``start_s`` of each of its starts [s]: the plan of its next starts follows
        them (a plan that does not size work by speed ignores them)."""

    def stepped(self, model: Any, now: float) -> None:
        """After the arena's server step at virtual time ``now`` to ``model`` (a plan that
        decides again as the model trains does so here; the others ignore it)."""

    def placed(self, sizes: np.ndarray, seconds: np.ndarray, now: float) -> dict[str, list[int]]:
        """The data of every learner was placed again at ``now`` (``sizes``, samples each: a
        live run's allocation at the speeds it measured, ``seconds`` per sample-pass): the
        plan's work and weights follow it (a plan that does not weigh by data ignores it).
        Returns what else the plan decided again per learner, for the run's record
        (staggered's groups; nothing for the others)."""

    def row(self) -> dict[str, float]:
        """What the plan adds to the arena's row of each step (staggered's period in force;
        nothing for the others)."""


@dataclass(frozen=True)
class SchemeSpec:
    """One scheme of the registry.

    Attributes
    ----------
    name : str
        What users type (``melopt arena --schemes``, ``melopt live --scheme``). In the arena
        a scheme of :attr:`Loop.ALLOCATION` is named by the method it runs.
    summary : str
        One line: what it does.
    loop : Loop
    options : Mapping of str to tuple of Setting
        Its declared options in each engine it runs in (engine -> declarations); the engine's
        run settings take them (several schemes may share one declaration, as deadline and
        Oort share ``overcommit``).
    needs : tuple of str
        What a problem's learning cycle must give: ``work_clock`` (a time for any fixed work,
        :meth:`~mel_opt.problems.learning.LearningCycle.work_clock`), ``emulated`` (the
        emulator trains it), ``allocation`` (the work of the problem's allocation: the arena
        solves its method first).
    engines : tuple of str
        Where it runs (:data:`ENGINES`).
    policy : callable, optional
        :attr:`Loop.ROUNDS`: ``policy(ctx) -> RoundPolicy`` for one run.
    serve : callable, optional
        :attr:`Loop.BUFFERED`: the server's loop over a ``Workers``
        (:func:`mel_opt.schemes.fedbuff.run`'s signature).
    plan : callable, optional
        :attr:`Loop.BUFFERED` in the arena: ``plan(ctx) -> WorkPlan`` for one run (the work
        of each start, the weight of each update, the buffer and concurrency).
    live_plan : callable, optional
        :attr:`Loop.BUFFERED` live, for a scheme that plans each start (None: FedBuff's fixed
        work for every learner): ``live_plan(options, budget_s, per_pass_s, fixed_s, sizes,
        batch, estimates=None, horizon_s=None, overhead_s=None) -> WorkPlan`` over the
        learners, from the run's settings, the problem's budget and each learner's time per
        pass over its data, transfers and data; with the bound's constants measured by the
        learners (:class:`mel_opt.schemes.period.Estimates`), the run's horizon [s] and each
        learner's measured messaging per round trip [s] where its settings ask for the
        bound's period.
    columns : tuple of str
        Columns its rows add to a live run's ``rounds.csv`` (FedBuff: ``staleness``).
    label : str
        How a run's summary names its method ("" : the allocating method's own name).
    title : str
        Its name in prose ("" : its name), as messages write it.
    grid : Mapping of str to tuple
        What ``melopt arena --tune`` tries (:mod:`mel_opt.arena.tune`): arena option ->
        values, each option one the scheme declares for the arena or one of
        :data:`SHARED_OPTIONS`, each value one its declaration accepts (None where it is
        nullable: its default rule); the points are the grid's product.
    equal_shares : bool
        Its learners hold equal shares of the data whatever ``--shares`` says (the
        ablations of the allocation, defined on equal data).
    """

    name: str
    summary: str
    loop: Loop
    options: Mapping[str, tuple[Setting, ...]] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    engines: tuple[str, ...] = ("arena",)
    policy: Callable[[RoundContext], RoundPolicy] | None = None
    serve: Callable[..., Any] | None = None
    plan: Callable[[RoundContext], WorkPlan] | None = None
    live_plan: Callable[..., WorkPlan] | None = None
    columns: tuple[str, ...] = ()
    label: str = ""
    title: str = ""
    equal_shares: bool = False
    grid: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.policy is None) == (self.loop is Loop.ROUNDS):
            raise ValueError(f"{self.name}: a policy is what a {Loop.ROUNDS.value} scheme "
                             "declares, and only it")
        if (self.serve is None) == (self.loop is Loop.BUFFERED):
            raise ValueError(f"{self.name}: serve is what a {Loop.BUFFERED.value} scheme "
                             "declares, and only it")
        if (self.loop is Loop.BUFFERED and "arena" in self.engines) != (self.plan is not None):
            raise ValueError(f"{self.name}: a work plan is what a {Loop.BUFFERED.value} scheme "
                             "of the arena declares, and only it")
        if not self.title:
            object.__setattr__(self, "title", self.name)
        unknown = (set(self.engines) | set(self.options)) - set(ENGINES)
        if unknown:
            raise ValueError(f"{self.name}: unknown engines {sorted(unknown)}")
        self._check_grid()

    def _check_grid(self) -> None:
        """Every option of :attr:`grid` is one the scheme takes in the arena, with distinct
        values its declaration accepts (ValueError)."""
        if self.grid and "arena" not in self.engines:
            raise ValueError(f"{self.name}: a grid is for the arena, where it does not run")
        own = {o.name: o for o in self.options_for("arena")}
        shared = {o.name: o for o in (LR, BATCH_SIZE)}
        for name, values in self.grid.items():
            if name not in own and name not in shared:
                raise ValueError(f"{self.name}: its grid names {name!r}, not an arena option "
                                 f"it declares ({', '.join(sorted(own)) or 'none'}) nor "
                                 f"{' or '.join(SHARED_OPTIONS)}")
            if not isinstance(values, tuple) or not values or len(set(values)) != len(values):
                raise ValueError(f"{self.name}: its grid's {name!r} must be a tuple of "
                                 f"distinct values, got {values!r}")
            declaration = own[name] if name in own else shared[name]
            for v in values:
                try:
                    declaration.parse(v)
                except UsageError as exc:
                    raise ValueError(f"{self.name}: its grid's {name!r}: {exc}") from None

    @property
    def reads_allocation(self) -> bool:
        """True when it reads the work of the problem's allocation (``needs`` it)."""
        return "allocation" in self.needs

    def options_for(self, engine: str) -> tuple[Setting, ...]:
        """Its declared options in ``engine`` (none where it does not run there)."""
        return tuple(self.options.get(engine, ()))

    def method_label(self, method: str) -> str:
        """The method a run's summary names: the allocating method, or the scheme's label."""
        return self.label or method

    def lacks(self, cycle: LearningCycle | None, inst: Any) -> str:
        """Why ``inst``'s problem (its learning ``cycle``) cannot run this scheme ('' when it
        can)."""
        if cycle is None:
            return "it has no learning cycle"
        if "emulated" in self.needs and not cycle.emulated:
            return "the emulator does not train it (it runs live only)"
        if "work_clock" in self.needs and cycle.work_clock(inst) is None:
            return ("its model gives no time for a fixed local work (its learning cycle "
                    "declares no work clock)")
        return ""
