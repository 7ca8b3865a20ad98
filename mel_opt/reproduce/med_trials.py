"""The thesis experiments of Section 4.3.2: fresh learners per trial, three schemes compared.

As in the thesis set-up (4.3.1), every trial draws new learners (peak states and prices: the
``mays2023`` preset with the trial's seed) and runs ``cycles`` global update cycles with the
learners' states drawn per cycle; the three schemes share those draws (paired comparison).
Experiment ``learners``: n = 4..10, 3 tasks, budget 300. Experiment ``tasks``: 10 learners,
m = 1..4, budget 200 and every deadline + 5 s (the generator's ``experiment`` parameter).
"""

from __future__ import annotations

import numpy as np

from mel_opt.problems.med.generate import generate
from mel_opt.problems.med.instance import parse
from mel_opt.problems.med.simulate import METRICS, SCHEMES, simulate


def fresh_trials(learners: int, tasks: int, experiment: str, trials: int, cycles: int = 5,
                 seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    """Per scheme and metric, the value of each trial (one fresh instance per trial).

    Parameters
    ----------
    learners, tasks : int
        n and m of the point.
    experiment : {"learners", "tasks"}
        Which thesis experiment's budget and deadlines to use.
    trials : int
        Trials (the thesis used 40); trial t uses seed ``seed + t`` for the learners and states.
    cycles : int
        Global update cycles per trial.

    Returns
    -------
    dict
        ``{scheme: {metric: array of shape (trials,)}}`` for every scheme of
        :data:`~mel_opt.problems.med.simulate.SCHEMES` and metric of ``METRICS`` (times in s,
        ratios in [0, 1]; NaN where a metric is undefined for a trial).
    """
    out: dict[str, dict[str, list[float]]] = {s: {k: [] for k in METRICS} for s in SCHEMES}
    for t in range(trials):
        doc = generate("mays2023", learners=learners, tasks=tasks, seed=seed + t,
                       params={"experiment": experiment})
        res = simulate(parse(doc), cycles=cycles, trials=1, seed=seed + t)
        for s in res.schemes:
            for k in METRICS:
                out[s.name][k].append(float(s.per_trial[k][0]))
    return {s: {k: np.array(v, dtype=float) for k, v in d.items()} for s, d in out.items()}
