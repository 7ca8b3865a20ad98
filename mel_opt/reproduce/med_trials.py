"""The thesis experiments of Section 4.3.2: fresh learners per trial, three schemes compared.

As in the thesis set-up (4.3.1), every trial starts with new learners: their state distributions
and prices are drawn again (``simulate(..., redraw=True)``) on the ``mays2023`` instance of the
point, and the trial runs ``cycles`` global update cycles with the learners' states drawn per
cycle and their run-to-run noise (the instance's ``time_cv``); the three schemes share those
draws (paired comparison). Experiment ``learners``: n = 4..10, 3 tasks, budget 300, thesis
Table 4.1's deadlines. Experiment ``tasks``: 10 learners, m = 1..4, budget 200 and every deadline
5 s longer (Section 4.3.1.2; the generator's ``experiment`` parameter).
"""

from __future__ import annotations

import numpy as np

from mel_opt import activity
from mel_opt.problems.med.generate import generate
from mel_opt.problems.med.instance import parse
from mel_opt.problems.med.simulate import METRICS, SCHEMES, simulate


def fresh_trials(learners: int, tasks: int, experiment: str, trials: int, cycles: int = 5,
                 seed: int = 0, time_cv: float | None = None, preset: str = "mays2023"
                 ) -> dict[str, dict[str, np.ndarray]]:
    """Per scheme and metric, the value of each trial (fresh learners per trial).

    Parameters
    ----------
    learners, tasks : int
        n and m of the point.
    experiment : {"learners", "tasks"}
        Which thesis experiment's budget and deadlines to use.
    trials : int
        Trials (the thesis used 40).
    cycles : int
        Global update cycles per trial.
    seed : int
        Seeds the simulation (distributions, prices, states and noise of every trial).
    time_cv : float, optional
        Run-to-run CV of every learner's time (default: the generator's calibrated value).
    preset : str
        ``mays2023`` (the thesis's benchmark numbers) or ``mays2023-testbed`` (calibrated to
        its testbed's logged times).

    Returns
    -------
    dict
        ``{scheme: {metric: array of shape (trials,)}}`` for every scheme of
        :data:`~mel_opt.problems.med.simulate.SCHEMES` and metric of ``METRICS`` (times in s,
        ratios in [0, 1]; NaN where a metric is undefined for a trial).
    """
    activity.report(f"{learners} learners x {tasks} tasks, {trials} trials")
    params = {"experiment": experiment}
    if time_cv is not None:
        params["time_cv"] = str(time_cv)
    inst = parse(generate(preset, learners=learners, tasks=tasks, seed=seed, params=params))
    res = simulate(inst, cycles=cycles, trials=trials, seed=seed, redraw=True)
    out = {s.name: {k: np.asarray(s.per_trial[k], dtype=float) for k in METRICS}
           for s in res.schemes}
    assert set(out) == set(SCHEMES)
    return out
