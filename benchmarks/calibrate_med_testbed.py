"""The calibration behind med preset ``mays2023-testbed``, repeated and checked.

The thesis's testbed logged (number-of-tasks experiment, 10 learners, 40 trials) MMTT-Ideal
25.2 s and MED 37.0 s at one task. With one task no deadline binds, so every time scales as
1 / speed: the training state's rate is fitted first, by bisection, to the ratio MED /
MMTT-Ideal = 37.0 / 25.2, then ``speed`` to MMTT-Ideal's 25.2 s. The script prints the fit, then
the preset's times and per-learner satisfaction at 1-4 tasks beside the testbed's log (the
values not fitted are the check).

    python benchmarks/calibrate_med_testbed.py [--trials 40]
"""

from __future__ import annotations

import argparse

import numpy as np
from rich.console import Console
from rich.table import Table

from mel_opt.problems.med.generate import TESTBED, generate
from mel_opt.problems.med.instance import parse
from mel_opt.problems.med.simulate import simulate

# the testbed's log: tasks -> scheme -> (time s, satisfaction %)
LOG = {1: {"mmtt-ideal": (25.2, 100.0), "med": (37.0, 99.3), "mmtt-uncertain": (42.9, 97.5)},
       3: {"mmtt-ideal": (38.1, 95.4), "med": (40.4, 89.1), "mmtt-uncertain": (41.6, 88.5)},
       4: {"mmtt-ideal": (42.0, 83.7), "med": (42.5, 77.5), "mmtt-uncertain": (44.0, 76.1)}}
SCHEMES = ("mmtt-ideal", "med", "mmtt-uncertain")


def times(tasks: int, speed: float, training_rate: float, trials: int,
          preset: str = "mays2023") -> dict[str, tuple[float, float]]:
    params = {"experiment": "tasks", "speed": str(speed), "training_rate": str(training_rate)}
    inst = parse(generate(preset, learners=10, tasks=tasks, seed=0, params=params))
    res = simulate(inst, cycles=5, trials=trials, seed=0, redraw=True)
    return {s.name: (float(np.nanmean(s.per_trial["training_time_s"])),
                     100 * float(np.nanmean(s.per_trial["learner_satisfaction"])))
            for s in res.schemes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=40)
    args = ap.parse_args()
    console = Console()
    target = LOG[1]["med"][0] / LOG[1]["mmtt-ideal"][0]
    lo, hi = 1.0, 3.0
    for _ in range(12):
        mid = (lo * hi) ** 0.5
        r = times(1, 1.0, mid, args.trials)
        if r["med"][0] / r["mmtt-ideal"][0] > target:
            lo = mid
        else:
            hi = mid
    rate = (lo * hi) ** 0.5
    speed = times(1, 1.0, rate, args.trials)["mmtt-ideal"][0] / LOG[1]["mmtt-ideal"][0]
    console.print(f"fit: training_rate = {rate:.4g} shards/s, speed = {speed:.4g} "
                  f"(the preset uses {TESTBED['training_rate']} and {TESTBED['speed']})")
    t = Table(title="mays2023-testbed against the testbed's log (10 learners, tasks experiment)")
    for col in ("tasks", "scheme", "time (s)", "log time (s)", "satisfaction (%)",
                "log satisfaction (%)"):
        t.add_column(col, justify="right")
    for m in (1, 2, 3, 4):
        got = times(m, float(TESTBED["speed"]), float(TESTBED["training_rate"]), args.trials)
        for s in SCHEMES:
            log = LOG.get(m, {}).get(s)
            t.add_row(str(m), s, f"{got[s][0]:.1f}", "-" if log is None else f"{log[0]:g}",
                      f"{got[s][1]:.1f}", "-" if log is None else f"{log[1]:g}")
    console.print(t)


if __name__ == "__main__":
    main()
