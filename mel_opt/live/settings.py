"""The declared settings of a live run: what the server does (:class:`LiveSettings`) and how the
run is deployed (:class:`LiveOptions`).

Every setting is declared once (:class:`~mel_opt.settings.Setting`); the data set, partition,
model and optimiser settings are the emulator's own declarations
(:data:`~mel_opt.training.settings.DATA_SETTINGS`), so ``melopt train`` and ``melopt live``
accept and document them alike. Both dataclasses check their fields when they are made, on the
user's machine and again on a SuperLink that reads them from JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from mel_opt.arena.availability import parse_availability
from mel_opt.errors import SettingError, UsageError
from mel_opt.problems.aggregate import DEFAULT_RULE
from mel_opt.problems.learning import ADAPT_POLICIES
from mel_opt.problems.messages import DataSpec
from mel_opt.schemes import ALLOCATION, declaring, get_scheme, scheme_options, schemes_for
from mel_opt.schemes.period import DEFAULT_PHI
from mel_opt.settings import Declared, Setting
from mel_opt.training.settings import DATA_SETTINGS, ROBUST_SETTINGS

__all__ = ["DEFAULT_LINK_MBIT", "ENGINES", "INSTANCE_SPEEDS", "LIVE_OPTIONS", "LIVE_SETTINGS",
           "SCHEMES", "LiveOptions", "LiveSettings", "SpeedsSetting", "grace_for"]

ENGINES = ("simulation", "local", "netns", "remote")
#: What the server of a live run runs: the registry's schemes that run live
#: (:mod:`mel_opt.schemes`).
SCHEMES = tuple(s.name for s in schemes_for("live"))
#: Where a dab learner's shards come from: the server, across the link, or its own part.
SHARDS = ("shipped", "held")
#: What a live round's plans take the transfers' times from.
TRANSFERS = ("file", "measured")
#: Seconds a round waits beyond the predictions when ``grace_s`` is not set: Flower's
#: simulation answers at once; a deployment's messages take their own round trips.
GRACE_S = {"simulation": 2.0, "local": 5.0, "netns": 5.0, "remote": 5.0}
#: Link rate of every node of ``--engine netns`` unless ``--link-rate`` says otherwise [Mbit/s].
DEFAULT_LINK_MBIT = 16.0
#: The range of a link rate [Mbit/s] (what a token bucket here shapes sensibly).
LINK_MBIT_RANGE = (0.008, 1000.0)
MAX_SEED = 2**63 - 1

LIVE_SETTINGS = (
    Setting("method", str, None, "Method that allocates every round.", nullable=True,
            default_doc="the problem's", flag="--method"),
    Setting("scheme", str, ALLOCATION.name, "What the server runs: "
            + "; ".join(f"{spec.name}, {spec.summary}" for spec in schemes_for("live")) + ".",
            choices=SCHEMES),
    Setting("rounds", int, 5, "Global rounds after the probe (adaptive-tau may end earlier: "
            "budget); with an asynchronous scheme (fedbuff, staggered), server steps.",
            minimum=1),
    *scheme_options("live"),
    Setting("seed", int, 0, "Model initialisation, data split and shuffles.", minimum=0,
            maximum=MAX_SEED),
    *DATA_SETTINGS,
    Setting("time_limit", float, 30.0, "Solver time limit per round [s].", minimum=0.0,
            minimum_open=True, nullable=True, default_doc="none"),
    Setting("alpha", float, 0.5, "Weight of a new measurement in each learner's speed "
            "estimate (the server's and the learner's own).", minimum=0.0, minimum_open=True,
            maximum=1.0),
    Setting("grace_s", float, None, "Seconds a round waits for replies beyond each learner's "
            "predicted computation and measured messaging overhead.", minimum=0.0,
            nullable=True, flag="--grace",
            default_doc="2 in the simulation, 5 in a deployment"),
    Setting("probe_s", float, 0.5, "Seconds of training each learner times in the probe "
            "(subset benchmarking), at least.", minimum=0.0, minimum_open=True,
            flag="--probe"),
    Setting("learners", int, None, "Learners of a problem whose file does not fix them "
            "(adaptive-tau).", minimum=1, nullable=True, flag="--nodes",
            default_doc="the problem's"),
    Setting("adapt", str, "data", "When the file's job no longer fits the learners left (one "
            "was lost): the work they can do on the problem's clock (data), the file's work on "
            "the least clock that fits (clock), where the problem has the rule; none: the run "
            "stops.", choices=(*ADAPT_POLICIES, "none")),
    Setting("shards", str, "shipped", "dab: the server sends each learner the shards it "
            "claimed, with the model and across its link (shipped, the thesis's Algorithm "
            "10), or each learner draws them from the part of the data set it holds (held).",
            choices=SHARDS),
    Setting("transfers", str, "file", "What the plans take the transfers' times from: the "
            "file's model (file), or what each learner's replies measured, learned as its "
            "speed is (measured: mel-async's C0_k from its messaging per round, dab's b_k from "
            "the rate its shipped shards crossed at).", choices=TRANSFERS),
    Setting("availability", str, None, "A FedScale behaviour trace, fedscale:PATH: each "
            "learner goes offline and comes back as one of its clients (matched by name, else "
            "by FedScale's rule), in seconds since the run started; an offline learner does "
            "not answer (a local or netns node is paused, a simulated learner's replies are "
            "errors), so the server handles it as a missing learner (not --engine remote).",
            nullable=True, check=parse_availability,
            default_doc="every learner always online"),
    *ROBUST_SETTINGS,
)

#: ``--speeds instance``: each learner at its relative speed in the instance's time model.
INSTANCE_SPEEDS = "instance"


@dataclass(frozen=True)
class SpeedsSetting(Setting):
    """``speeds``: fractions of a core (comma-separated), or the word ``instance``."""

    @property
    def allowed(self) -> str:
        return f"{super().allowed}, or {INSTANCE_SPEEDS}"

    def parse(self, value: Any) -> Any:
        word = value[0] if isinstance(value, (tuple, list)) and len(value) == 1 else value
        if isinstance(word, str) and word.strip().lower() == INSTANCE_SPEEDS:
            return INSTANCE_SPEEDS
        return super().parse(value)


def _readable_file(path: str) -> None:
    if not Path(path).is_file():
        raise UsageError(f"{path} is not a file")


LIVE_OPTIONS = (
    Setting("engine", str, "simulation", "Flower's simulation runtime, a loopback deployment "
            "started here, or an existing deployment (--superlink).", choices=ENGINES),
    Setting("nodes", int, None, "Learner processes; learner k runs on the node whose "
            "partition id is k.", minimum=1, nullable=True,
            default_doc="the instance's learners; adaptive-tau, whose file has none: 5, as "
                        "paper 003's demo"),
    SpeedsSetting("speeds", float, None, "Each node's fraction of a core, e.g. 1,0.5,0.25 "
                  "(one value, or one per node), or 'instance': the instance's own relative "
                  "speeds, its fastest learner a whole core (--engine local or simulation).",
                  minimum=0.0, minimum_open=True, maximum=1.0, many=True, nullable=True,
                  default_doc="every node a whole core"),
    Setting("link_rate", float, None, "Each node's link rate in Mbit/s, both ways (one value, "
            "or one per node): --engine netns shapes each node's link to it.",
            minimum=LINK_MBIT_RANGE[0], maximum=LINK_MBIT_RANGE[1], many=True, nullable=True,
            default_doc=f"the instance's (dab: b_k; mel-async: the rate that moves the "
                        f"model both ways in C0_k), else {DEFAULT_LINK_MBIT:g} Mbit/s each"),
    Setting("superlink", str, None, "HOST:PORT of a remote SuperLink (remote).",
            nullable=True, default_doc="none"),
    Setting("root_certificates", str, None, "CA certificate (PEM) of the remote SuperLink.",
            nullable=True, default_doc="none", check=_readable_file),
    Setting("insecure", bool, False, "Remote SuperLink without TLS (only when asked)."),
    Setting("emulate", bool, False, "Also run the emulator on the same instance, seed and "
            "rounds (written to DIR/emulated)."),
)


def grace_for(engine: str) -> float:
    """The grace of a round on ``engine`` when the settings leave it unset [s]."""
    return GRACE_S.get(engine, GRACE_S["local"])


@dataclass(frozen=True)
class LiveSettings(Declared):
    """What a live run's server does (every field but ``instance`` declared in
    :data:`LIVE_SETTINGS` and checked when the object is made).

    Attributes
    ----------
    instance : Mapping
        The instance document (the JSON of the file), so a server on another machine can
        rebuild it.
    method : str or None
        The method that allocates every round (None: the problem's default).
    scheme : str
        ``allocation`` (the method's, in synchronous rounds) or ``fedbuff``
        (:mod:`mel_opt.live.fedbuff`: asynchronous, ``rounds`` server steps).
    buffer, concurrency : int or None
        FedBuff's K and C (None: :func:`~mel_opt.live.fedbuff.default_buffer`, every
        learner).
    server_lr : float
        FedBuff's server learning rate.
    groups, period, period_rule, horizon, phi
        staggered's options (:mod:`mel_opt.schemes.staggered`): its groups, its period in
        budgets, ``fixed`` (that period) or ``bound`` (chosen by Wang et al.'s bound from the
        constants the learners measure in the probe), the run time the bound plans for in
        budgets (None: ``rounds`` budgets), and the bound's control constant.
    rounds, seed : int
    dataset, partition, model, lr, batch_size, max_train, max_test
        As ``melopt train`` (:data:`~mel_opt.training.settings.DATA_SETTINGS`).
    time_limit : float or None
        Solver time limit per round [s].
    alpha : float
        Weight of a new measurement in each learner's speed estimate, the server's and the
        learner's own.
    grace_s : float or None
        Wall-clock seconds a round waits for replies beyond each learner's predicted
        computation and measured messaging overhead (None: :func:`grace_for` the engine).
    probe_s : float
        Seconds of training each learner times in the probe, at least.
    learners : int or None
        Learners of a problem whose instance does not fix their number (adaptive-tau: the
        nodes; None: the problem's default).
    adapt : str
        What the learners left do when the file's job no longer fits them
        (:meth:`~mel_opt.problems.learning.LearningCycle.live_adapt`): ``data``, ``clock``, or
        ``none`` (the run stops).
    shards : str
        dab: ``shipped`` (each learner claims its shards and the server sends them with the
        model, :mod:`mel_opt.live.claims`) or ``held`` (each draws them from its own part).
    transfers : str
        ``file`` (the plans take the transfers' times from the file) or ``measured`` (from
        :class:`~mel_opt.live.estimates.Transfers`, through the problem's
        ``LearningCycle.live_transfers``).
    availability : str or None
        ``fedscale:PATH``: learners offline and back as the behaviour trace's clients
        (:mod:`mel_opt.live.availability`); None: every learner always online.
    pool : int or None
        Not a user setting: set by the simulation engine to the learners it trains at once
        (its pool of Ray actors, one per core), so that the server waits for a queue of
        learners and shortens their probe (:meth:`~mel_opt.live.rounds.LiveRun.wait_s`,
        :meth:`~mel_opt.live.rounds.LiveRun.probe_seconds`). None: every learner trains at
        once, each on its own node (a deployment).
    """

    SETTINGS: ClassVar[tuple[Setting, ...]] = LIVE_SETTINGS
    UNDECLARED: ClassVar[tuple[str, ...]] = ("instance", "pool")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.pool is not None and (isinstance(self.pool, bool) or
                                      not isinstance(self.pool, int) or self.pool < 1):
            raise ValueError(f"pool must be a positive number of learners, got {self.pool!r}")

    instance: Mapping[str, Any]
    method: str | None = None
    scheme: str = "allocation"
    rounds: int = 5
    buffer: int | None = None
    concurrency: int | None = None
    server_lr: float = 1.0
    groups: int | None = None
    period: float = 0.25
    period_rule: str = "fixed"
    horizon: float | None = None
    phi: float = DEFAULT_PHI
    seed: int = 0
    dataset: str = "digits"
    partition: str = "iid"
    model: str = "twonn"
    lr: float = 0.1
    batch_size: int = 32
    max_train: int | None = None
    max_test: int | None = None
    time_limit: float | None = 30.0
    alpha: float = 0.5
    grace_s: float | None = None
    probe_s: float = 0.5
    learners: int | None = None
    adapt: str = "data"
    shards: str = "shipped"
    transfers: str = "file"
    availability: str | None = None
    aggregation: str = DEFAULT_RULE
    attack: str | None = None
    liars: float = 0.0
    liar_ids: tuple[int, ...] | None = None
    attack_from: int = 1
    pool: int | None = None

    def check_together(self) -> None:
        flags = {s.name: s.flag for s in LIVE_SETTINGS}
        chosen = get_scheme(self.scheme, "live")
        for option in scheme_options("live"):
            if option in chosen.options_for("live") or \
                    getattr(self, option.name) == option.default:
                continue
            owners = declaring("live", option.name)
            raise SettingError(option.name, option.flag,
                               f"is {' or '.join(o.title for o in owners)}'s: it needs "
                               f"{{scheme}} {' or '.join(o.name for o in owners)}", " ",
                               {"scheme": flags["scheme"]})
        if self.period_rule != "bound":  # the bound's own options mean nothing without it
            for name, unset in (("horizon", None), ("phi", DEFAULT_PHI)):
                if getattr(self, name) != unset:
                    raise SettingError(name, flags[name], "is read only with {period_rule} "
                                       "bound", " ", {"period_rule": flags["period_rule"]})
        if self.buffer is not None and self.concurrency is not None and \
                self.buffer > self.concurrency:
            raise SettingError("buffer", flags["buffer"], f"must be at most the concurrency "
                               f"({self.concurrency}), got {self.buffer}")

    def data_spec(self, num_partitions: int) -> DataSpec:
        """Where every learner finds its part of the data set."""
        return DataSpec(self.dataset, self.partition, num_partitions, self.seed,
                        self.max_train, self.max_test)

    @property
    def grace(self) -> float:
        """``grace_s``, or a deployment's default when it is unset [s]."""
        return self.grace_s if self.grace_s is not None else grace_for("local")


@dataclass(frozen=True)
class LiveOptions(Declared):
    """How a live run is deployed (the engine side of ``melopt live``; every field declared
    in :data:`LIVE_OPTIONS`).

    Attributes
    ----------
    engine : str
        ``simulation``, ``local``, ``netns`` (the loopback deployment with each node in its
        own network namespace behind a link shaped to ``link_rate``; root) or ``remote``.
    link_rate : tuple of float or None
        Each node's link rate [Mbit/s], both ways: one value for all, or one per node
        (``netns`` only; default: the instance's own rates where its problem has them,
        :meth:`~mel_opt.problems.learning.LearningCycle.link_rates`, else
        :data:`DEFAULT_LINK_MBIT`).
    nodes : int or None
        Learner processes (default: the instance's learners); learner k runs on the node
        whose partition id is k.
    speeds : tuple of float, "instance" or None
        Fraction of a core of each node, in (0, 1]: one value for all, or one per node;
        ``"instance"``: the instance's own relative speeds (:func:`mel_opt.live.run.
        instance_speeds`). A local node's whole process tree is throttled; in the simulation
        each learner's work runs in a child process throttled alike
        (:func:`mel_opt.live.throttle.run_at_speed`). Not for ``remote``: real devices have
        their own speeds.
    superlink : str or None
        ``HOST:PORT`` of a remote SuperLink's Control API (``remote`` only).
    root_certificates : str or None
        PEM file of the CA that signed the remote SuperLink's certificate.
    insecure : bool
        Talk to the remote SuperLink without TLS (only when asked).
    emulate : bool
        Also run the emulator on the same instance, method, seed and rounds.
    """

    SETTINGS: ClassVar[tuple[Setting, ...]] = LIVE_OPTIONS

    engine: str = "simulation"
    nodes: int | None = None
    speeds: tuple[float, ...] | Literal["instance"] | None = None
    link_rate: tuple[float, ...] | None = None
    superlink: str | None = None
    root_certificates: str | None = None
    insecure: bool = False
    emulate: bool = False

    def check_together(self) -> None:
        flag = {s.name: s.flag for s in LIVE_OPTIONS}
        if self.speeds is not None and self.engine == "remote":
            raise SettingError("speeds", flag["speeds"], "throttles learners on this machine: "
                               "it needs {engine} local or simulation (remote devices run at "
                               "their own speeds)", " ", {"engine": flag["engine"]})
        if self.link_rate is not None and self.engine != "netns":
            raise SettingError("link_rate", flag["link_rate"], "shapes the links of {engine} "
                               "netns only", " ", {"engine": flag["engine"]})
        if self.engine == "remote" and not self.superlink:
            raise SettingError("engine", flag["engine"], "remote needs {superlink} HOST:PORT",
                               " ", {"superlink": flag["superlink"]})

    def node_speeds(self, nodes: int, instance: list[float] | None = None
                    ) -> list[float] | None:
        """One fraction of a core per node (None: none throttled); ``instance``: the
        instance's own speeds, used when ``speeds`` is ``"instance"``.

        Raises
        ------
        SettingError
            ``speeds`` has neither one value nor one per node (or is ``instance`` and no
            speeds of the instance were given).
        """
        if self.speeds is None:
            return None
        if isinstance(self.speeds, str):  # INSTANCE_SPEEDS, the one string allowed
            if instance is None or len(instance) != nodes:
                raise SettingError("speeds", self.setting("speeds").flag,
                                   "instance needs the instance's speeds of the nodes")
            return list(instance)
        if len(self.speeds) not in (1, nodes):
            raise SettingError("speeds", self.setting("speeds").flag,
                               f"needs one value or one per node ({nodes}), got "
                               f"{len(self.speeds)}")
        return list(self.speeds) * (nodes if len(self.speeds) == 1 else 1)

    def link_rates(self, nodes: int, instance: list[float] | None = None) -> list[float]:
        """Each node's link rate [bit/s] (``netns``): ``link_rate`` as given, one per node;
        unset, ``instance`` (the instance's own rates of the nodes, bit/s), else
        :data:`DEFAULT_LINK_MBIT`. Rates are kept within the setting's range.

        Raises
        ------
        SettingError
            ``link_rate`` has neither one value nor one per node.
        """
        if self.link_rate is None and instance is not None and len(instance) == nodes:
            low, high = (1e6 * v for v in LINK_MBIT_RANGE)
            return [min(high, max(low, float(r))) for r in instance]
        rates = self.link_rate or (DEFAULT_LINK_MBIT,)
        if len(rates) not in (1, nodes):
            raise SettingError("link_rate", self.setting("link_rate").flag,
                               f"needs one value or one per node ({nodes}), got {len(rates)}")
        return [1e6 * r for r in rates] * (nodes if len(rates) == 1 else 1)
