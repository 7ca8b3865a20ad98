"""The global models a live run's server keeps: one per task (med's tasks; one elsewhere).

:class:`GlobalModels` owns them: each task's model starts from its own seed, is replaced only
through :meth:`GlobalModels.replace` (kept in float32, as the learners train and the wire
carries it), and is evaluated on the server's validation set.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from mel_opt.training.data import Dataset
from mel_opt.training.local import evaluate
from mel_opt.training.mlp import Params, init_params, layers_for

__all__ = ["TASK_SEED_STRIDE", "GlobalModels"]

#: Task t's model starts from ``init_params(layers, seed + TASK_SEED_STRIDE * t)``.
TASK_SEED_STRIDE = 1009


class GlobalModels:
    """One global model per task, of the run's model kind for ``data``.

    Parameters
    ----------
    model : str
        The model's name (:func:`mel_opt.training.mlp.layers_for`).
    data : Dataset
        The data set (its features and classes; its validation part evaluates the models).
    seed : int
    tasks : int
    """

    def __init__(self, model: str, data: Dataset, seed: int, tasks: int) -> None:
        self.data = data
        layers = layers_for(model, data.features, data.classes)
        self._models: list[Params] = [
            init_params(layers, seed + TASK_SEED_STRIDE * t, np.float32) for t in range(tasks)]

    def __len__(self) -> int:
        return len(self._models)

    def __getitem__(self, task: int) -> Params:
        return self._models[task]

    def __iter__(self) -> Iterator[Params]:
        return iter(list(self._models))

    def of(self, task: int) -> Params:
        """Task ``task``'s global model."""
        return self._models[task]

    @property
    def all(self) -> list[Params]:
        """Every task's model (a new list of the same arrays)."""
        return list(self._models)

    def replace(self, task: int, model: Params) -> bool:
        """Task ``task``'s new global model (kept in float32); a model that is not finite in
        float32 is not taken (False: the task keeps the one it had)."""
        with np.errstate(over="ignore", invalid="ignore"):
            new = [np.asarray(a, dtype=np.float32) for a in model]
        if not all(np.isfinite(a).all() for a in new):
            return False
        self._models[task] = new
        return True

    def evaluation(self) -> dict[str, Any]:
        """Validation loss and accuracy of the global model; with several tasks, their means
        and each task's own (``tasks``)."""
        scores = [evaluate(m, self.data.x_test, self.data.y_test) for m in self._models]
        out: dict[str, Any] = {"loss": float(np.mean([s[0] for s in scores])),
                               "accuracy": float(np.mean([s[1] for s in scores]))}
        if len(scores) > 1:
            out["tasks"] = [{"task": t, "loss": s[0], "accuracy": s[1]}
                            for t, s in enumerate(scores)]
        return out
