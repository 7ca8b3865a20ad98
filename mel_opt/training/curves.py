"""Learning curves read off training runs, and the centralised ceiling their targets start from.

Generic helpers of experiments that train under allocations (the catalogue's learning entries,
:mod:`mel_opt.reproduce.learning`); nothing here knows a problem or a paper:

- :func:`centralised_ceiling`: the best validation accuracy of one model trained on the whole
  training set, the level the experiments set their targets below;
- :func:`learning_curve`, :func:`time_curve`: each scheme's mean accuracy per cycle, or against
  virtual time (thinned to :data:`CURVE_POINTS`), as table rows;
- :func:`accuracy_at`: each scheme's mean accuracy at a common time horizon;
- :func:`flat`: an interval of a run's summary as three flat columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mel_opt.training.data import Dataset
from mel_opt.training.run import TrainRun

#: Samples x passes the centralised reference trains at most (it stops after 3 passes on a large
#: data set, 30 on the digits).
CEILING_WORK = 600_000


def centralised_ceiling(ds: Dataset, model: str, lr: float = 0.1, batch_size: int = 32,
                        seed: int = 0, max_epochs: int = 30, device: str = "cpu") -> float:
    """The data set's centralised ceiling for ``model``: the best validation accuracy of one
    model trained on the whole training set by the emulator's minibatch SGD (the learning rate
    and minibatch of the experiments), over at most ``max_epochs`` passes (fewer on a large
    set: :data:`CEILING_WORK` samples in all, at least 3 passes).

    The papers state their targets on their own data (95 % / 97 % on MNIST, 90 % on CIFAR-10);
    the catalogue sets ours relative to this ceiling instead. ``device``: where it trains
    (:mod:`mel_opt.training.device`). It is a unit of work (:mod:`mel_opt.units`): kept in the
    command's output folder, so the catalogue's entries that read the same ceiling, and a
    rerun, train it once.
    """
    import dataclasses

    from mel_opt import units

    key = {"kind": "ceiling", "code": units.code_version(), "data": units.data_fingerprint(ds),
           "model": model, "lr": lr, "batch_size": batch_size, "seed": seed,
           "max_epochs": max_epochs, "device": device}
    unit = units.Unit(key, f"{ds.name}: centralised ceiling of {model}", _ceiling,
                      (model, lr, batch_size, seed, max_epochs, device))
    here = dataclasses.replace(units.current(), jobs=1, cluster=None)
    return float(units.run_units([unit], ds, here)[0])


def _ceiling(ds: Dataset, model: str, lr: float, batch_size: int, seed: int,
             max_epochs: int, device: str) -> float:
    """:func:`centralised_ceiling` trained."""
    from mel_opt.blas import blas_threads
    from mel_opt.training.device import get_device
    from mel_opt.training.local import evaluate, local_sgd, make_schedule
    from mel_opt.training.mlp import init_params, layers_for

    x, y = ds.x_train, ds.y_train
    rng = np.random.default_rng([seed, 17])
    params = [a[None] for a in init_params(layers_for(model, ds.features, ds.classes), seed,
                                           x.dtype)]
    epochs = max(3, min(max_epochs, CEILING_WORK // max(y.size, 1)))
    rows = [np.arange(y.size)]
    best = 0.0
    on = get_device(device)
    with blas_threads(1):  # as train() does: small products, one BLAS thread is fastest
        for _ in range(epochs):
            sched = make_schedule(rows, np.array([1]), batch_size, rng, x.dtype)
            params = local_sgd(params, x, y, sched, lr, device=on)
            best = max(best, evaluate([a[0] for a in params], ds.x_test, ds.y_test,
                                      device=on)[1])
    return best


def learning_curve(run: TrainRun, extra: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows ``part = "curve"``: mean validation accuracy and loss of each scheme after every
    cycle, over the seeds (the figures draw our curves whether or not a target is reached),
    up to the last cycle every seed of the scheme ran (a run its targets or its patience
    stopped would otherwise leave only the slower seeds in the later means)."""
    rows = []
    for s in run.schemes:
        last: dict[int, int] = {}
        for r in run.rows:
            if r["scheme"] == s:
                last[r["seed"]] = max(last.get(r["seed"], 0), int(r["cycle"]))
        common = min(last.values(), default=0)
        kept = {r["cycle"] for r in run.rows if r["scheme"] == s and r["cycle"] <= common}
        for c in sorted(kept):
            mine = [r for r in run.rows if r["scheme"] == s and r["cycle"] == c]
            rows.append({"part": "curve", **extra, "scheme": s, "cycle": c,
                         "final_accuracy": float(np.mean([r["accuracy"] for r in mine])),
                         "loss": float(np.mean([r["loss"] for r in mine]))})
    return rows


#: Points kept per scheme by :func:`time_curve` (runs of 600-1,500 rounds are thinned).
CURVE_POINTS = 40


def time_curve(run: TrainRun, extra: dict[str, Any],
               points: int = CURVE_POINTS) -> list[dict[str, Any]]:
    """Rows ``part = "curve"``: mean validation accuracy and virtual time of each scheme
    after a cycle, over the seeds, for at most ``points`` cycles per scheme spread evenly
    over its run (always its first and last); the figures draw accuracy against time, as the
    papers' learning-curve figures do, whether or not a target is reached."""
    rows = []
    for s in run.schemes:
        cycles = sorted({r["cycle"] for r in run.rows if r["scheme"] == s})
        if not cycles:
            continue
        n = min(points, len(cycles))
        keep = sorted({cycles[round(i * (len(cycles) - 1) / max(n - 1, 1))] for i in range(n)})
        for c in keep:
            mine = [r for r in run.rows if r["scheme"] == s and r["cycle"] == c]
            rows.append({"part": "curve", **extra, "scheme": s, "cycle": c,
                         "time_s": float(np.mean([r["time_s"] for r in mine])),
                         "curve_accuracy": float(np.mean([r["accuracy"] for r in mine]))})
    return rows


def flat(prefix: str, iv: dict[str, Any]) -> dict[str, Any]:
    """An interval of the summary as three flat columns: mean, lower and upper bound."""
    return {prefix: iv["mean"], f"{prefix}_lo": iv["lo"], f"{prefix}_hi": iv["hi"]}


def accuracy_at(run: TrainRun, horizon: float) -> dict[str, float]:
    """Mean over seeds of the accuracy of the last record at or before ``horizon`` [s]."""
    out: dict[str, list[float]] = {}
    for s in run.schemes:
        for seed in range(run.settings.seeds):
            rows = [r for r in run.rows if r["scheme"] == s and r["seed"] == seed
                    and r["time_s"] <= horizon * (1 + 1e-12)]
            out.setdefault(s, []).append(rows[-1]["accuracy"])
    return {s: float(np.mean(v)) for s, v in out.items()}
