"""What an adaptive-tau learner measures beside its training: its gradient statistics.

Paper 003's control needs, every round, estimates of the loss's Lipschitz constant rho, its
smoothness beta and the gradient divergence delta, "taken at all edge nodes" (Sec. I). Each node
i computes, at the round's global model w and with its local model w_i of the previous round
(Wang et al.'s estimates, which the control uses):

- F_i(w) and grad F_i(w): its mean local loss and gradient at w (the server forms delta from
  the gradients, :func:`~mel_opt.problems.adaptive_tau.learning.gradient_divergence`);
- rho_i = |F_i(w_i) - F_i(w)| / ||w_i - w|| and beta_i = ||grad F_i(w_i) - grad F_i(w)|| /
  ||w_i - w|| (none in the first round, nor when w_i = w).

The loss is the model's own (the cross-entropy, or the hinge of ``svm``), its mean over (at
most :data:`STATISTICS_SAMPLES` of) its data, the same rows every round; the learner process
computes it with its own model code (:class:`~mel_opt.problems.learning.LocalLearner`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mel_opt.problems.learning import Extras, LearnerMemory, LearnerSide, LocalLearner
from mel_opt.problems.messages import TrainOrder

__all__ = ["GradientStatistics", "STATISTICS_SAMPLES", "Statistics", "gradient_statistics"]

Params = list[np.ndarray]

#: Samples of the learner's own data its gradient statistics are computed on (at most).
STATISTICS_SAMPLES = 2048
#: The learner's memory key of its last local model (w_i of the next round).
LOCAL_MODEL = "local-model"


@dataclass(frozen=True)
class Statistics:
    """A learner's gradient statistics at the round's global model w.

    Attributes
    ----------
    loss : float
        F_i(w), its mean local loss at w.
    gradient : list of ndarray
        grad F_i(w).
    rho, beta : float or None
        |F_i(w_i) - F_i(w)| / ||w_i - w|| and ||grad F_i(w_i) - grad F_i(w)|| / ||w_i - w||
        with w_i its local model of the previous round (None without one, or when w_i = w).
    seconds : float
        Wall time of computing them [s].
    """

    loss: float
    gradient: Params
    rho: float | None
    beta: float | None
    seconds: float


def _norm(arrays: Params) -> float:
    return float(np.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays)))


def gradient_statistics(model: Params, previous: Params | None, local: LocalLearner,
                        max_samples: int = STATISTICS_SAMPLES) -> Statistics:
    """The learner's loss and gradient at ``model`` (the global model) and, with its previous
    local model ``previous``, its rho and beta estimates between the two (module docstring)."""
    start = time.perf_counter()
    loss, grad = local.loss_and_gradient(model, max_samples)
    rho = beta = None
    if previous is not None and len(previous) == len(model) and all(
            np.shape(a) == np.shape(b) for a, b in zip(previous, model, strict=True)):
        dist = _norm([np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
                      for a, b in zip(previous, model, strict=True)])
        if dist > 0:
            loss_p, grad_p = local.loss_and_gradient(previous, max_samples)
            rho = abs(loss_p - loss) / dist
            beta = _norm([np.asarray(a, dtype=np.float64) - b
                          for a, b in zip(grad_p, grad, strict=True)]) / dist
    return Statistics(loss, grad, rho, beta, time.perf_counter() - start)


class GradientStatistics(LearnerSide):
    """An adaptive-tau learner: its statistics at the global model before it trains, its
    trained model kept as the next round's w_i."""

    def before_training(self, order: TrainOrder, local: LocalLearner,
                        memory: LearnerMemory) -> Extras:
        stats = gradient_statistics(order.model, memory.arrays(LOCAL_MODEL), local)
        metrics = {"local_loss": stats.loss, "statistics_s": stats.seconds}
        metrics.update({k: v for k, v in (("rho", stats.rho), ("beta", stats.beta))
                        if v is not None})
        return Extras(metrics, {"gradient": stats.gradient})

    def after_training(self, order: TrainOrder, model: Params, memory: LearnerMemory) -> None:
        memory.keep_arrays(LOCAL_MODEL, model)
