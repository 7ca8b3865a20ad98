"""The declared settings of learning runs: the emulator's (``melopt train``) and the ones a live
run shares with it (data set, partition, model, optimiser).

Every setting is declared once here (:class:`~mel_opt.settings.Setting`: type, range, default,
flag, doc); :class:`TrainSettings` checks its fields against these declarations when it is made,
``melopt train`` builds its options from them, and :mod:`mel_opt.live.settings` reuses the
shared ones. "All the data" has one spelling: ``max_train`` / ``max_test`` of None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mel_opt.errors import SettingError
from mel_opt.mlp import check_model
from mel_opt.problems.aggregate import DEFAULT_RULE, NORM_BOUND, TRIM_BETA, parse_rule
from mel_opt.problems.attacks import check_fraction, parse_attack
from mel_opt.settings import Declared, Setting
from mel_opt.training.data import check_dataset_name
from mel_opt.training.device import DEVICES
from mel_opt.training.partition import parse_partition

__all__ = ["DATA_SETTINGS", "DEVICE", "DTYPES", "ROBUST_SETTINGS", "TRAIN_SETTINGS",
           "TrainSettings", "check_device_processes"]

DTYPES = ("float32", "float64")

#: Where the emulator trains (``melopt train`` and ``arena``; :mod:`mel_opt.training.device`).
DEVICE = Setting("device", str, "cpu", "Where the learners train and the model is evaluated: "
                 "cpu (numpy) or cuda (a GPU through CuPy, the gpu extra; one process drives "
                 "it, and the numbers agree with the CPU's within float32 rounding).",
                 choices=DEVICES)


DATASET = Setting("dataset", str, "digits", "digits, fashion-mnist, mnist, or idx:DIR "
                  "(MNIST-format files).", check=check_dataset_name)
PARTITION = Setting("partition", str, "iid", "iid, non-iid (2K single-label shards, two per "
                    "learner) or dirichlet:ALPHA.", check=parse_partition)
MODEL = Setting("model", str, "twonn", "softmax [F,C], svm [F,C] (hinge loss), twonn "
                "[F,50,20,C] or mlp000 [F,300,124,60,C].", check=check_model)
LR = Setting("lr", float, 0.1, "SGD learning rate.", minimum=0.0, minimum_open=True)
BATCH_SIZE = Setting("batch_size", int, 32, "Local minibatch (problems whose plan does not set "
                     "its own).", minimum=1)
MAX_TRAIN = Setting("max_train", int, None, "Use at most this many training samples.",
                    minimum=1, nullable=True, default_doc="all")
MAX_TEST = Setting("max_test", int, None, "Use at most this many validation samples.",
                   minimum=1, nullable=True, default_doc="all")

#: What every learning run (emulated or live) says about its data and model.
DATA_SETTINGS = (DATASET, PARTITION, MODEL, LR, BATCH_SIZE, MAX_TRAIN, MAX_TEST)

#: How the server combines the learners' models (:mod:`mel_opt.problems.aggregate`) and
#: which learners lie to measure it (:mod:`mel_opt.problems.attacks`): ``melopt train``,
#: ``arena`` and ``live`` declare these alike.
ROBUST_SETTINGS = (
    Setting("aggregation", str, DEFAULT_RULE, "How the server combines the learners' models: "
            "mean (the papers' weighted mean), norm[:C] (an update farther from the round's "
            "start than C times the round's median distance is clipped onto that bound, then "
            f"the mean; C = {NORM_BOUND:g}), median, trimmed[:BETA] (coordinate-wise, beta = "
            f"{TRIM_BETA:g}) or krum[:F].", check=parse_rule,
            default_doc=f"{DEFAULT_RULE}: the papers' mean whenever no update is far out of "
            "line"),
    Setting("attack", str, None, "Make chosen learners lie (to measure the aggregation): "
            "scale:F (their model times F), sign (their update's sign flipped), noise:SIGMA "
            "(Gaussian noise added), stale (the model of their first lying round, every "
            "round).", nullable=True, check=parse_attack, default_doc="none: all honest"),
    Setting("liars", float, 0.0, "With --attack: the fraction of the learners that lie, "
            "drawn once per seed, in [0, 1).", minimum=0.0, check=check_fraction),
    Setting("liar_ids", int, None, "With --attack: the learners that lie, by index "
            "(comma-separated; instead of --liars).", minimum=0, many=True, nullable=True,
            default_doc="none: --liars says"),
    Setting("attack_from", int, 1, "With --attack: the first round (server step) the liars "
            "lie.", minimum=1),
)

TRAIN_SETTINGS = (
    Setting("schemes", str, None, "Comma-separated methods of the instance's problem and "
            "training baselines (feel: individual, model-based, gradient-based).", many=True,
            default_doc="required"),
    Setting("cycles", int, 20, "Global cycles (communication rounds) per run.", minimum=1),
    Setting("seeds", int, 3, "Runs per scheme (seeds 0 .. seeds-1).", minimum=1),
    *DATA_SETTINGS,
    Setting("targets", float, (0.9,), "Comma-separated target accuracies in (0, 1].",
            minimum=0.0, minimum_open=True, maximum=1.0, many=True, flag="--target"),
    Setting("dtype", str, "float32", "Precision of the data, the model and its training "
            "(float32: about twice as fast, the same accuracy within the spread over seeds).",
            choices=DTYPES),
    Setting("threads", int, None, "Threads that train the learners of one run.", minimum=1,
            nullable=True, default_doc="the CPUs each worker process gets"),
    Setting("processes", int, None, "Worker processes that train the (scheme, seed) runs "
            "at once (1: all in this process).", minimum=1, nullable=True,
            default_doc="the CPUs this process may use, at most one per run; 1 with "
            "--device cuda"),
    DEVICE,
    Setting("param_bits", float, None, "feel: bits of the model parameters sent by "
            "model-based FEEL and individual learning.", minimum=0.0, minimum_open=True,
            nullable=True, default_doc="the instance's gradient size"),
    Setting("reference", str, None, "Scheme the speedups are measured against.",
            nullable=True, default_doc="the first scheme"),
    Setting("time_limit", float, 60.0, "Solver time limit per scheme [s].", minimum=0.0,
            minimum_open=True, nullable=True, default_doc="none"),
    Setting("patience", int, None, "Stop a run once its validation accuracy has not risen "
            "above its best by more than the tolerance for this many cycles (converged).",
            minimum=1, nullable=True, default_doc="every cycle runs"),
    Setting("tolerance", float, 0.001, "Rise in validation accuracy (a fraction) that counts "
            "as progress for the patience.", minimum=0.0),
    Setting("until_targets", bool, False, "Stop a run once it has reached every target "
            "accuracy (all that cycles and seconds to target need)."),
    *ROBUST_SETTINGS,
)


@dataclass(frozen=True)
class TrainSettings(Declared):
    """What to train and how (the options of ``melopt train``); every field is checked against
    its declaration in :data:`TRAIN_SETTINGS` when the object is made.

    Attributes
    ----------
    schemes : tuple of str
        Methods of the instance's problem and training-only baselines.
    cycles : int
        Global cycles (communication rounds) per run.
    seeds : int
        Runs per scheme, seeds 0 .. seeds-1 (model initialisation, partition, shuffling).
    dataset, partition, model : str
        See :func:`~mel_opt.training.data.load_dataset`,
        :func:`~mel_opt.training.partition.parse_partition`,
        :func:`~mel_opt.training.mlp.layers_for`.
    targets : tuple of float
        Validation accuracies in (0, 1] to report cycles and seconds to.
    lr : float
        SGD learning rate (feel: at a global batch of B^max, scaled as sqrt(B)).
    batch_size : int
        Local minibatch of mel-async and dab passes (feel uses B^max for local epochs).
    dtype : str
        ``float32`` (default) or ``float64``: the precision of the data, the model and its
        training. float32 trains about twice as fast and ends at the same accuracies within
        the spread over seeds (docs: Train, What it costs).
    device : str
        ``cpu`` (numpy, default) or ``cuda``: train and evaluate on a GPU through CuPy (the
        ``gpu`` extra; docs: On a GPU). The rows agree with the CPU's on the same seeds within
        float32 rounding (:data:`~mel_opt.training.device.LOSS_RTOL`); one process drives the
        GPU, so ``processes`` is 1 and ``threads`` is not read.
    threads : int or None
        Threads that train the learners of a cycle of one run, each a share of them (the
        numbers do not depend on it); None: the CPUs each worker process gets (all of this
        process's where one process trains). BLAS runs one thread each while training (its
        own threads cost more than they give on these small products).
    processes : int or None
        Worker processes (forked) that train the (scheme, seed) runs at once, each run whole
        in one of them; the rows are the same as in one process. None: one per CPU this
        process may use, at most one per run; 1: every run in this process.
    param_bits : float or None
        feel: bits of the model parameters sent by model-based FEEL and individual learning
        (default: the instance's gradient size, i.e. parameters sent at the gradient's b bits).
    reference : str or None
        Scheme the speedups are measured against (default: the first scheme).
    max_train, max_test : int or None
        Subset sizes of the data set (None: all of it).
    time_limit : float or None
        Per-scheme solver time limit [s].
    patience : int or None
        Stop a run once its validation accuracy has not risen above its best by more than
        ``tolerance`` for this many cycles: it has converged (paper 004 trains "until the
        global model converges"); its rows end there. None: every cycle runs.
    tolerance : float
        The rise in accuracy that counts as progress (0.001: a tenth of a point).
    until_targets : bool
        Stop a run at the cycle it has reached every target (its rows end there, its final
        accuracy is the one at that cycle): the cycles and seconds to target are the same as
        with every cycle run, at a fraction of the work where the targets come early.
    """

    SETTINGS: ClassVar[tuple[Setting, ...]] = TRAIN_SETTINGS

    schemes: tuple[str, ...]
    cycles: int = 20
    seeds: int = 3
    dataset: str = "digits"
    partition: str = "iid"
    model: str = "twonn"
    targets: tuple[float, ...] = (0.9,)
    lr: float = 0.1
    batch_size: int = 32
    dtype: str = "float32"
    threads: int | None = None
    processes: int | None = None
    param_bits: float | None = None
    reference: str | None = None
    max_train: int | None = None
    max_test: int | None = None
    time_limit: float | None = 60.0
    patience: int | None = None
    tolerance: float = 0.001
    until_targets: bool = False
    aggregation: str = DEFAULT_RULE
    attack: str | None = None
    liars: float = 0.0
    liar_ids: tuple[int, ...] | None = None
    attack_from: int = 1
    device: str = "cpu"

    def check_together(self) -> None:
        check_device_processes(self.device, self.processes, self.setting("processes").flag)
        if len(set(self.schemes)) != len(self.schemes):
            raise SettingError("schemes", self.setting("schemes").flag, "names a scheme twice")
        if self.reference is not None and self.reference not in self.schemes:
            raise SettingError("reference", self.setting("reference").flag,
                               f"{self.reference!r} is not one of {{schemes}}", " ",
                               {"schemes": self.setting("schemes").flag})


def check_device_processes(device: str, processes: int | None, flag: str) -> None:
    """Refuse more than one worker process with ``--device cuda``: CUDA cannot be used in a
    forked child of a process that has started it, and one process keeps the GPU busy."""
    if device != "cpu" and processes is not None and processes > 1:
        raise SettingError("processes", flag, f"must be 1 with --device {device} (one process "
                           f"drives the GPU), got {processes}")
