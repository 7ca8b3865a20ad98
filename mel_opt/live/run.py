"""``melopt live``: run an instance's allocation on real learner processes with Flower.

Four engines, one pair of apps (:mod:`mel_opt.live.server`, :mod:`mel_opt.live.client`):

- ``simulation``: Flower's simulation runtime (Ray) in this process; its Ray listens on
  127.0.0.1 only. The learners take turns in a bounded pool of Ray actors, one per core
  (:func:`pool_size`), each learner on a whole core while it works (the run's waits and probe
  know the pool: :class:`~mel_opt.live.settings.LiveSettings`'s ``pool``); ``speeds`` run a
  learner's work in a child process held at its fraction of a core.
- ``local``: a loopback deployment: mel_opt starts a SuperLink and ``nodes`` SuperNodes as
  processes on 127.0.0.1 (:class:`~mel_opt.live.federation.LocalFederation`), optionally each at
  a fraction of a core (``speeds``), runs the app on them with ``flwr run``, and ends every
  process it started, also on error and Ctrl-C. Its SuperLink serves TLS with certificates
  made for the run (:mod:`mel_opt.live.certs`).
- ``netns``: the same deployment on real links (Linux, root): the SuperLink and each SuperNode
  in network namespaces of their own, node ``i`` behind a veth pair shaped to its
  ``link_rate`` both ways (:class:`~mel_opt.live.netns.ShapedLinks`), removed at the end.
- ``remote``: an existing deployment (a SuperLink on a server, SuperNodes on devices), reached
  at ``superlink`` with TLS (its root certificate passed through) unless ``insecure``.

Outputs (:mod:`mel_opt.live.report`) are written after every round into ``out_dir``; with
``emulate`` the emulator trains the same instance, method, seed and rounds into
``out_dir/emulated`` for a side-by-side comparison.

:func:`check` refuses what cannot run and returns a :class:`LiveJob` (the settings, the
options, the instance parsed once, its problem, the nodes and their solved speeds and link
rates); :func:`live` runs it. :func:`load_job` reads an instance file into one.

A run that ends before its rounds (no learner left, or no allocation for the learners left
even after the problem's adaptation) keeps the outputs of the rounds done; its summary says why
(``stopped``), and :func:`ended_early` turns that into the error the command exits with (1).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mel_opt import api
from mel_opt.errors import MelOptError, SettingError, UsageError
from mel_opt.io.json_io import read_json_file
from mel_opt.live.availability import Pauser, Schedule, learner_names, schedule_for
from mel_opt.live.settings import (
    ENGINES,
    INSTANCE_SPEEDS,
    LiveOptions,
    LiveSettings,
    grace_for,
)
from mel_opt.problems.base import Instance, ProblemSpec
from mel_opt.schemes import Loop, get_scheme

__all__ = ["ENGINES", "EndedEarly", "LiveJob", "LiveOptions", "check", "ended_early",
           "instance_speeds", "live", "load_job", "load_settings", "node_link_rates",
           "node_speeds", "pool_size"]


class EndedEarly(MelOptError):
    """A live run ended before its rounds (no learner left, or no allocation for them);
    the outputs of the rounds done are kept. Exit code 1: the request was sound, the fleet
    could not carry it."""

    exit_code = 1


def ended_early(summary: Mapping[str, Any]) -> EndedEarly | None:
    """The error of a run whose ``summary`` says it stopped early (None: it did not)."""
    stopped = summary.get("stopped")
    if not stopped:
        return None
    done = int(stopped["round"]) - 1
    rounds = (summary.get("settings") or {}).get("rounds", "?")
    return EndedEarly(f"the run ended after {done} of {rounds} rounds (their outputs are "
                      f"kept): {stopped['reason']}")


@dataclass(frozen=True)
class LiveJob:
    """A live run checked and ready (:func:`check`), what :func:`live` runs.

    Attributes
    ----------
    settings
        What the server does (the instance document among them: it travels to the server).
    options
        How and where it runs.
    instance
        ``settings.instance`` parsed, once, on this machine.
    spec
        The instance's problem (with a learning cycle).
    nodes
        Learner processes (nodes) of the run.
    speeds
        Each node's fraction of a core (``--speeds``, or the instance's own solved once);
        ``None``: every node on whole cores.
    link_rates
        Each node's link rate [bit/s] (the ``netns`` engine's shaped links); ``None`` for the
        other engines.
    schedule
        When each learner is online (``settings.availability``'s trace, read once,
        :mod:`mel_opt.live.availability`); ``None``: always.
    """

    settings: LiveSettings
    options: LiveOptions
    instance: Instance
    spec: ProblemSpec
    nodes: int
    speeds: tuple[float, ...] | None = None
    link_rates: tuple[float, ...] | None = None
    schedule: Schedule | None = None


def _read(path: str | os.PathLike[str], **kw: Any) -> tuple[LiveSettings, Instance]:
    doc = read_json_file(path)
    inst = api.parse_instance(doc, str(path), Path(path).stem)
    spec_doc = dict(doc)
    spec_doc.setdefault("name", inst.name)
    return LiveSettings(instance=spec_doc, **kw), inst


def load_settings(path: str | os.PathLike[str], **kw: Any) -> LiveSettings:
    """The settings of a live run of the instance file ``path`` (checked: bad input raises
    InstanceError or SettingError before anything starts)."""
    return _read(path, **kw)[0]


def load_job(path: str | os.PathLike[str], opts: LiveOptions, **kw: Any) -> LiveJob:
    """The checked job (:func:`check`) of the instance file ``path`` with the settings ``kw``
    and the options ``opts``; the file is parsed once."""
    settings, inst = _read(path, **kw)
    return check(settings, opts, inst)


def check(settings: LiveSettings, opts: LiveOptions, instance: Instance | None = None
          ) -> LiveJob:
    """The job, after refusing what cannot run: the rules between the settings, the options
    and the instance (each setting's own range was checked when it was made). ``instance``:
    ``settings.instance`` already parsed (parsed here otherwise)."""
    inst = instance if instance is not None else api.parse_instance(dict(settings.instance))
    from mel_opt.problems import get_problem

    spec = get_problem(inst.problem)
    if spec.learning is None:
        raise UsageError(f"live runs need a problem with a learning cycle; {spec.name!r} "
                         "has none")
    spec.method(settings.method)
    K = spec.learning.live_learners(inst, settings.learners or opts.nodes)
    nodes = opts.nodes or K
    if not 1 <= nodes <= K:
        raise SettingError("nodes", opts.setting("nodes").flag,
                           f"must be between 1 and the instance's {K} learners, got {nodes}")
    from mel_opt.problems.attacks import make_attack

    make_attack(settings, nodes, settings.seed)  # a liar's index out of range: one line
    if opts.emulate and not spec.learning.emulated:
        raise SettingError("emulate", opts.setting("emulate").flag,
                           f"the emulator does not train {spec.name} (it runs live only)",
                           ": ")
    speeds = node_speeds(settings, opts, nodes, inst)
    if settings.transfers == "measured":
        if opts.engine == "simulation":  # a pooled learner's round trip holds its queueing
            raise SettingError("transfers", LiveSettings.setting("transfers").flag,
                               "measured needs a deployment (--engine local, netns or "
                               "remote): in the simulation the replies queue through a pool "
                               "and cross no link", " ")
        if not spec.learning.measured_transfers:  # the problem's declaration
            raise SettingError("transfers", LiveSettings.setting("transfers").flag,
                               f"measured is not defined for {spec.name}: its plans take the "
                               "transfers from the file", " ")
    _check_scheme(settings, opts, inst, spec, nodes)
    schedule = _schedule(settings, opts, inst, K)
    rates = None
    if opts.engine == "netns":
        rates = tuple(node_link_rates(settings, opts, nodes, inst))
        from mel_opt.live.netns import require

        require()  # root and iproute2, or one line saying what to use instead
    return LiveJob(settings, opts, inst, spec, nodes,
                   None if speeds is None else tuple(speeds), rates, schedule)


#: The engines whose learners ``--availability`` takes offline (their processes are started
#: here).
AVAILABILITY_ENGINES = ("simulation", "local", "netns")


def _schedule(settings: LiveSettings, opts: LiveOptions, inst: Instance, learners: int
              ) -> Schedule | None:
    """The learners' availability (``settings.availability``'s trace read now: a bad file is
    one line, exit 2), where the engine can pause them."""
    if settings.availability is None:
        return None
    if opts.engine not in AVAILABILITY_ENGINES:
        raise SettingError("availability", LiveSettings.setting("availability").flag,
                           "takes learners started here offline: it needs {engine} "
                           f"{', '.join(AVAILABILITY_ENGINES)}, got {opts.engine}", " ",
                           {"engine": opts.setting("engine").flag})
    if opts.engine == "simulation" and get_scheme(settings.scheme, "live").loop is Loop.BUFFERED:
        # the simulation's offline learner replies with an error, and an asynchronous server
        # sets a failed learner aside for good (schemes/fedbuff.py): it would never come back
        raise SettingError("availability", LiveSettings.setting("availability").flag,
                           "in the simulation an offline learner's replies are errors, which "
                           f"{get_scheme(settings.scheme, 'live').title} takes for a failed "
                           "node, set aside for good: use {engine} local or netns", " ",
                           {"engine": opts.setting("engine").flag})
    return schedule_for(settings.availability, learner_names(inst, learners))


def _check_scheme(settings: LiveSettings, opts: LiveOptions, inst: Any, spec: ProblemSpec,
                  nodes: int) -> None:
    """The scheme's rules (:mod:`mel_opt.schemes`): what it needs of the problem (its
    declaration), at most as many learners at once (and in a buffer) as nodes, and no
    emulator beside a scheme other than the method's allocation (the emulator trains that)."""
    scheme = get_scheme(settings.scheme, "live")
    flag = LiveSettings.setting("scheme").flag
    why = scheme.lacks(spec.learning, inst)
    if why:
        raise SettingError("scheme", flag, f"{scheme.name} does not run {spec.name}: {why}",
                           ": ")
    if settings.concurrency is not None and settings.concurrency > nodes:
        raise SettingError("concurrency", LiveSettings.setting("concurrency").flag,
                           f"must be at most the {nodes} nodes, got {settings.concurrency}")
    if settings.buffer is not None and settings.buffer > min(nodes, settings.concurrency or
                                                             nodes):
        raise SettingError("buffer", LiveSettings.setting("buffer").flag,
                           f"must be at most the learners training at once "
                           f"({min(nodes, settings.concurrency or nodes)}), got "
                           f"{settings.buffer}")
    if opts.emulate and scheme.loop is not Loop.ALLOCATION:
        raise SettingError("emulate", opts.setting("emulate").flag, "trains the method's "
                           f"allocation; {scheme.title}'s emulated twin is `melopt arena`",
                           ": ")


def node_link_rates(settings: LiveSettings, opts: LiveOptions, nodes: int,
                    instance: Instance | None = None) -> list[float]:
    """Each node's link rate [bit/s] on shaped links: ``--link-rate`` as given, else the
    instance's own for the run's model (:meth:`~mel_opt.problems.learning.LearningCycle.
    link_rates`: learner k's on node k), else the default. ``instance``: ``settings.instance``
    already parsed (parsed here otherwise)."""
    own = None
    if opts.link_rate is None:
        from mel_opt.live import learner as L
        from mel_opt.problems import get_problem
        from mel_opt.training.mlp import init_params, layers_for

        inst = instance if instance is not None else api.parse_instance(
            dict(settings.instance))
        cycle = get_problem(inst.problem).learning
        data = L.dataset(settings.dataset, settings.max_train, settings.max_test)
        layers = layers_for(settings.model, data.features, data.classes)
        model_bytes = sum(a.nbytes for a in init_params(layers, 0, np.float32))
        rates = None if cycle is None else cycle.link_rates(inst, float(model_bytes))
        if rates is not None and len(rates) >= nodes:
            own = [float(r) for r in rates[:nodes]]
    return opts.link_rates(nodes, own)


def node_speeds(settings: LiveSettings, opts: LiveOptions, nodes: int,
                instance: Instance | None = None) -> list[float] | None:
    """Each node's fraction of a core (None: all whole cores): ``--speeds`` as given, or the
    instance's own (:func:`instance_speeds`, solved here: :func:`check` asks once and keeps
    them in the job). ``instance``: ``settings.instance`` already parsed."""
    own = None
    if opts.speeds == INSTANCE_SPEEDS:
        own = instance_speeds(settings, nodes, instance)
    return opts.node_speeds(nodes, own)


def instance_speeds(settings: LiveSettings, nodes: int, instance: Instance | None = None
                    ) -> list[float]:
    """The relative speeds of the first ``nodes`` learners in the instance's own time model,
    the fastest of them 1 (a whole core): ``--speeds instance``.

    A learner's seconds per sample-pass on the problem's clock are those the emulator gives
    it: the problem's cycle plan under the file's allocation (``--method``, solved and
    verified as in ``melopt train``), its predicted computation over its sample-passes.
    Speeds are the fastest one's seconds over each one's. ``instance``: ``settings.instance``
    already parsed (parsed here otherwise).

    Raises
    ------
    SettingError
        (``--speeds``) where that is not defined: learners that plan their own work (the
        server has no plan of theirs), a problem whose file has no learners of its own, a
        learner without work in the file's allocation, or no verified allocation.
    """
    from mel_opt.live import learner as L
    from mel_opt.problems import get_problem
    from mel_opt.problems.learning import RunContext, sample_bytes
    from mel_opt.training.partition import proportional_sizes

    inst = instance if instance is not None else api.parse_instance(dict(settings.instance))
    spec = get_problem(inst.problem)
    cycle = spec.learning
    flag = LiveOptions.setting("speeds").flag

    def refuse(why: str) -> SettingError:
        return SettingError("speeds", flag, f"instance is not defined for {spec.name}: {why}")

    if cycle is None:
        raise refuse("it has no learning cycle")
    if cycle.learner_side.plans_own_work:
        raise refuse("its learners plan their own work from their own speed; the server "
                     "has no time of theirs")
    if cycle.live_learners(inst, 1) != cycle.live_learners(inst, 2):
        raise refuse("its file has no learners of its own (--nodes sets them), so no "
                     "learner has a speed of its own")
    method = spec.method(settings.method).name
    result = api.solve(inst, method, time_limit=settings.time_limit, seed=settings.seed)
    if not result.ok or result.solution is None:
        raise refuse(f"its method {method} found no verified allocation of the file")
    ds = L.dataset(settings.dataset, settings.max_train, settings.max_test)
    N = int(ds.y_train.size)
    sizes = proportional_sizes(cycle.data_shares(inst, method, result.solution, N), N)
    plan = cycle.configure_cycle(inst, RunContext(method, result.solution, settings.seed,
                                                  sizes, sample_bytes=sample_bytes(
                                                      ds.features)), 1)
    seconds = np.full(nodes, np.nan)
    for p in plan.learners:
        if p.learner < nodes and p.samples > 0 and p.passes > 0 and p.compute_s > 0:
            seconds[p.learner] = p.compute_s / (p.samples * p.passes)
    lost = [k for k in range(nodes) if not np.isfinite(seconds[k])]
    if lost:
        raise refuse(f"learner(s) {', '.join(map(str, lost[:5]))} have no computation in the "
                     f"file's allocation by {method}, so its clock gives them no speed")
    return [float(v) for v in seconds.min() / seconds]


def pool_size(nodes: int, cpus: int) -> int:
    """Learners the simulation trains at once: one Ray actor per core, never more actors
    than learners (the others queue; each learner works on a whole core)."""
    return max(1, min(int(nodes), int(cpus)))


def live(job: LiveJob, out_dir: str | os.PathLike[str],
         log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the live rounds of ``job`` (:func:`check`); returns the summary (also in
    ``out_dir/summary.json``)."""
    from mel_opt.io.lock import output_lock

    opts = job.options
    if job.settings.grace_s is None:  # the engine's own
        job = dataclasses.replace(job, settings=dataclasses.replace(
            job.settings, grace_s=grace_for(opts.engine)))
    say = log or (lambda text: None)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with output_lock(out, "live"):
        if opts.engine == "simulation":
            speeds = None if job.speeds is None else list(job.speeds)
            _simulation(job.settings, job.nodes, out, say, speeds=speeds,
                        instance=job.instance, schedule=job.schedule)
        else:
            _deployment(job, out, say)
        summary = json.loads((out / "summary.json").read_text()) if (
            out / "summary.json").exists() else {}
        if opts.emulate:
            summary["emulated"] = _emulate(job, out / "emulated")
    return summary


#: How long the simulation's Ray processes may take to end after its shutdown [s].
RAY_REAP_S = 10.0


def _simulation(settings: LiveSettings, nodes: int, out: Path, say: Callable[[str], None],
                speeds: list[float] | None = None, instance: Instance | None = None,
                schedule: Schedule | None = None) -> None:
    """Flower's simulation runtime with the server app in this process (``instance``: the
    settings' instance, parsed: the server does not parse it again; ``schedule``: the
    learners' availability, whose clock starts now)."""
    import ray
    from flwr.simulation import run_simulation

    from mel_opt.live.client import make_client_app
    from mel_opt.live.flower_patches import one_scan_per_sweep
    from mel_opt.live.report import write_outputs
    from mel_opt.live.server import make_server_app
    from mel_opt.ray_local import init_local_ray, ray_descendants, reap

    cpus = os.cpu_count() or 1
    init_local_ray(ray, cpus)
    try:
        def written(r: Any) -> None:
            write_outputs(r, out)

        # a bounded pool: one actor (a Ray worker process) per core, the learners queued
        # through it, each on a whole core while it trains; the server's waits and the probe
        # know the pool (LiveRun.wait_s, probe_seconds); late or ok stays the measured
        # compute time against the problem's clock
        pool = pool_size(nodes, cpus)
        settings = dataclasses.replace(settings, pool=pool)
        server = make_server_app(settings, on_round=written, expected_nodes=nodes, log=say,
                                 instance=instance)
        # a hair under cpus / pool, so that Flower's int(cpus / share) is never pool - 1
        share = cpus / pool * (1 - 1e-9)
        with one_scan_per_sweep():  # Flower's K x K sweep of its messages, made one scan
            if schedule is not None:
                say(f"availability: {schedule.matched}")
            client = make_client_app(speeds, schedule, time.time())
            run_simulation(server_app=server, client_app=client,
                           num_supernodes=nodes,
                           backend_config={"client_resources": {"num_cpus": share,
                                                                "num_gpus": 0.0}})
    finally:
        # Ray's shutdown leaves some of its helper processes to end by themselves, seconds
        # later: they are waited for and, past the wait, ended (as a Ray pool's are)
        left = ray_descendants()
        ray.shutdown()
        reap(left, time.monotonic() + RAY_REAP_S)
    _final_figure(out)


def _final_figure(out: Path) -> None:
    """Redraw the outputs with the figure once the run is over."""
    from mel_opt.live.report import rows_from_csv, write_files

    path = out / "summary.json"
    if path.exists():
        write_files(out, rows_from_csv(out / "rounds.csv"), json.loads(path.read_text()),
                    figure=True)


def _deployment(job: LiveJob, out: Path, say: Callable[[str], None]) -> None:
    from mel_opt.live.appdir import write_app_dir
    from mel_opt.live.federation import LocalFederation, RemoteFederation
    from mel_opt.live.report import RecordCollector
    from mel_opt.live.server import NODES_KEY, OUT_KEY, SETTINGS_KEY, settings_json
    from mel_opt.live.tuning import DEFAULT_TUNING, WarmData

    settings, opts = job.settings, job.options
    collector = RecordCollector(out)

    def stream(line: str) -> None:
        if not collector.feed(line):
            say(line)

    config: dict[str, Any] = {SETTINGS_KEY: settings_json(settings), NODES_KEY: job.nodes}
    with tempfile.TemporaryDirectory(prefix="melopt-app-") as app_dir:
        if opts.engine in ("local", "netns"):
            config[OUT_KEY] = str(out)  # the SuperLink runs here: it writes the files itself
            write_app_dir(app_dir, config)
            # the nodes' warm SuperExecs load the data set once, not every message
            tuning = dataclasses.replace(DEFAULT_TUNING, warm_data=WarmData(
                settings.dataset, settings.max_train, settings.max_test))
            with contextlib.ExitStack() as stack:
                links = None
                if job.link_rates is not None:  # the netns engine
                    from mel_opt.live.netns import ShapedLinks

                    say("links: " + ", ".join(f"node {i} {r / 1e6:.3g} Mbit/s"
                                              for i, r in enumerate(job.link_rates)))
                    links = stack.enter_context(ShapedLinks(
                        [(r, r) for r in job.link_rates], tag="live"))
                fed = stack.enter_context(LocalFederation(
                    nodes=job.nodes, speeds=job.speeds, tuning=tuning, links=links))
                fed.wait_ready()
                pauser = None
                if job.schedule is not None:  # its clock starts now; it ends before the nodes
                    say(f"availability: {job.schedule.matched}")
                    pauser = stack.enter_context(_pauser(job.schedule, fed, say))
                code = fed.run_app(app_dir, stream)
                if pauser is not None and pauser.error is not None:
                    say(f"warning: the learners' availability stopped being followed: "
                        f"{pauser.error}")
                link_died = code != 0 and not fed.link_alive()
            if link_died:
                raise EndedEarly(_link_died(out))
        else:
            write_app_dir(app_dir, config)
            remote = RemoteFederation(str(opts.superlink), opts.root_certificates,
                                      opts.insecure)
            code = remote.run_app(app_dir, stream)
    if code != 0:
        raise UsageError(f"flwr run ended with exit code {code}")
    if opts.engine == "remote":
        collector.finish()
    _final_figure(out)


def _pauser(schedule: Schedule, fed: Any, say: Callable[[str], None]) -> Pauser:
    """The :class:`~mel_opt.live.availability.Pauser` of a local federation's nodes (learner
    k on node k)."""

    def pause(k: int) -> None:
        if k < fed.nodes:
            fed.pause_node(k)
            say(f"learner {k} is offline: its node is paused")

    def resume(k: int) -> None:
        if k < fed.nodes:
            fed.resume_node(k)
            say(f"learner {k} is back online: its node is resumed")

    return Pauser(schedule, pause, resume)


def _link_died(out: Path) -> str:
    """Why a local run ended when its SuperLink exited mid-run (one line)."""
    try:
        done = int(json.loads((out / "summary.json").read_text())["rounds"][-1]["round"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        done = 0
    if done:
        _final_figure(out)
    return (f"the SuperLink exited during the run; the outputs of the {done} round(s) done "
            "are kept")


def _emulate(job: LiveJob, out: Path) -> dict[str, Any]:
    """The emulator on the same instance, method, seed and rounds (``out/emulated``)."""
    from mel_opt.training import TrainSettings, train, write_outputs

    settings = job.settings
    method = job.spec.method(settings.method).name
    ts = TrainSettings(schemes=(method,), cycles=settings.rounds, seeds=1,
                       dataset=settings.dataset, partition=settings.partition,
                       model=settings.model, lr=settings.lr, batch_size=settings.batch_size,
                       max_train=settings.max_train, max_test=settings.max_test,
                       time_limit=settings.time_limit, aggregation=settings.aggregation,
                       attack=settings.attack, liars=settings.liars,
                       liar_ids=settings.liar_ids, attack_from=settings.attack_from)
    run = train(job.instance, ts)
    return write_outputs(run, out)
