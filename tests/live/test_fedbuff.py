"""FedBuff's asynchronous loop against a scripted grid (no Flower, no sleeps)."""

from __future__ import annotations

import math

import numpy as np

from mel_opt.live.fedbuff import Model, run


class ScriptedGrid:
    """Each pull returns the next scripted batch of answers; a learner answers
    ``model + its step`` (or the scripted bad value) from the model it was last pushed."""

    def __init__(self, script: list[list[tuple[int, float | None]]]) -> None:
        self.script = script
        self.pushed: dict[int, Model] = {}
        self.pushes: list[tuple[int, int]] = []

    def push(self, node: int, model: Model, version: int) -> None:
        self.pushed[node] = [m.copy() for m in model]
        self.pushes.append((node, version))

    def pull(self) -> list[tuple[int, Model | None]]:
        if not self.script:
            return []
        out: list[tuple[int, Model | None]] = []
        for node, step in self.script.pop(0):
            out.append((node, None if step is None else [self.pushed[node][0] + step]))
        return out


def test_buffer_flushes_after_k_with_staleness_weights() -> None:
    # K = 2, C = 2, nodes 1 and 2. Pull 1: node 1 (+2, s=0); pull 2: node 1 again
    # (+4 from version 0, s=0) fills the buffer: model 0 + (2 + 4)/2 = 3, version 1.
    # Pull 3: node 2, started at version 0, now s = 1, delta +6 -> weight 1/sqrt(2).
    # Pull 4: node 1 (pushed version 1, model 3), +8, s = 0. Step: 3 + (6/sqrt 2 + 8)/2.
    grid = ScriptedGrid([[(1, 2.0)], [(1, 4.0)], [(2, 6.0)], [(1, 8.0)]])
    out = run(grid, [1, 2], [np.zeros(1)], buffer=2, concurrency=2, steps=2)
    assert [s.version for s in out.steps] == [1, 2]
    assert out.steps[0].nodes == [1, 1] and out.steps[0].staleness == [0, 0]
    assert out.steps[1].nodes == [2, 1] and out.steps[1].staleness == [1, 0]
    assert math.isclose(out.model[0][0], 3 + (6 / math.sqrt(2) + 8) / 2)


def test_concurrency_never_exceeded_and_every_node_served() -> None:
    grid = ScriptedGrid([[(1, 1.0)], [(2, 1.0)], [(3, 1.0)], [(4, 1.0)]])
    out = run(grid, [1, 2, 3, 4], [np.zeros(1)], buffer=1, concurrency=2, steps=4)
    assert out.most_busy == 2
    # nodes 3 and 4 waited until a slot freed: pushed at versions 1 and 2
    assert grid.pushes[:4] == [(1, 0), (2, 0), (3, 1), (4, 2)]


def test_nan_and_error_replies_ignored_model_stays_finite() -> None:
    grid = ScriptedGrid([[(1, float("nan"))], [(2, None)], [(1, 2.0)]])
    out = run(grid, [1, 2], [np.zeros(1)], buffer=1, concurrency=2, steps=1)
    assert out.ignored == [(1, "non-finite values"), (2, "error reply")]
    assert out.model[0][0] == 2.0 and np.isfinite(out.model[0]).all()


def test_missing_learner_served_again_when_it_answers() -> None:
    # node 2 is silent for two steps, then answers (stale by 2) and gets new work
    grid = ScriptedGrid([[(1, 1.0)], [(1, 1.0)], [(2, 4.0)], [(2, 0.0)]])
    out = run(grid, [1, 2], [np.zeros(1)], buffer=1, concurrency=2, steps=4)
    assert out.steps[2].nodes == [2] and out.steps[2].staleness == [2]
    assert math.isclose(out.model[0][0], 2 + 4 / math.sqrt(3))
    assert grid.pushes.count((2, 3)) == 1


def test_stops_when_every_learner_is_lost() -> None:
    out = run(ScriptedGrid([]), [1], [np.zeros(1)], buffer=1, concurrency=1, steps=3,
              max_polls=5)
    assert out.steps == [] and out.model[0][0] == 0.0
