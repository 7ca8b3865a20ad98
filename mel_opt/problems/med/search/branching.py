"""How med's branch and bound splits a node (the rules alone; the search runs them).

A node whose restricted master LP mixes, for some task, columns whose levels spread by more
than ``LEVEL_SPREAD`` of their mean is split on that task's level (:func:`level_split`);
otherwise on one learner (:func:`branch_learner` picks it, :func:`learner_split` makes the
children: fixed to a task, then barred from it).
"""

from __future__ import annotations

import math

import numpy as np

from mel_opt.problems.med.latency import Coefficients
from mel_opt.problems.med.search.bundle import Master
from mel_opt.problems.med.search.lagrangian import Node

__all__ = ["LEVEL_SPREAD", "branch_learner", "free_learners", "learner_split", "level_split"]

LEVEL_SPREAD: float | None = 0.005  # branch on a task's level above this spread of its mix


def free_learners(node: Node, coef: Coefficients) -> np.ndarray:
    """The learners a node has not fixed and that some task may still take."""
    return (node.fixed < 0) & (~node.barred & coef.allowed).any(axis=0)


def branch_learner(cover: np.ndarray, score: np.ndarray | None, coef: Coefficients,
                   free: np.ndarray) -> tuple[int, np.ndarray]:
    """The learner to branch on, with the tasks to fix it to (the first open one is taken):
    the free learner whose share of a task in the node's restricted master LP is nearest one
    half; when the master is integral on every free learner (or missing), the learner whose
    subproblem answers disagree most (it appears in no task or in several). (Strong branching
    over the three most fractional learners was tried and bounded no better.)"""
    speed = 1e-3 * (1.0 / coef.C).sum(axis=0)
    if score is not None:
        frac = np.where(free[None, :], np.minimum(score, 1.0 - score), 0.0)
        best_task = np.argmax(frac, axis=0)
        share = frac[best_task, np.arange(frac.shape[1])]
        j = int(np.argmax(share + 1e-9 * speed))
        if share[j] > 1e-6:
            return j, np.array([int(best_task[j])])
    counts = cover.sum(axis=0)
    j = int(np.argmax(np.where(free, np.abs(counts - 1) + speed, -1.0)))
    return j, np.nonzero(cover[:, j])[0]


def level_split(node: Node, got: Master | None, free: np.ndarray) -> list[Node]:
    """Branch on a task's level when the master mixes columns of levels spread by more than
    ``LEVEL_SPREAD`` of their mean (by any amount when the master is integral on every free
    learner; the widest such task): H_i up to the mean in one child, above it in the other.
    [] when no task's mix is that spread."""
    if got is None or LEVEL_SPREAD is None:
        return []
    shares = got.score[:, free]
    integral = not np.any((shares > 1e-6) & (shares < 1 - 1e-6))
    threshold = 0.0 if integral else LEVEL_SPREAD
    best, task, cut = 0.0, -1, 0.0
    for i, (w, h) in enumerate(got.mix):
        if w.size < 2 or w.sum() <= 0:
            continue
        mean = float((w * h).sum() / w.sum())
        spread = float((w * np.abs(h - mean)).sum() / w.sum()) / max(mean, 1e-12)
        if spread > best and h.min() <= mean < h.max():
            best, task, cut = spread, i, mean
    if task < 0 or best <= threshold:
        return []
    m = node.barred.shape[0]
    above = np.full(m, -math.inf) if node.above is None else node.above
    upto = np.full(m, math.inf) if node.upto is None else node.upto
    low_up, high_above = upto.copy(), above.copy()
    low_up[task] = cut
    high_above[task] = cut
    return [Node(node.fixed.copy(), node.barred.copy(), node.mu.copy(), node.lam,
                 node.depth + 1, above.copy(), low_up),
            Node(node.fixed.copy(), node.barred.copy(), node.mu.copy(), node.lam,
                 node.depth + 1, high_above, upto.copy())]


def learner_split(node: Node, j: int, likely: np.ndarray, coef: Coefficients,
                  must_work: bool) -> list[Node]:
    """Learner j fixed to a task (the first of ``likely`` still open, else its fastest open
    task), then barred from it."""
    open_tasks = ~node.barred[:, j] & coef.allowed[:, j]
    likely = likely[open_tasks[likely]]
    options = likely if likely.size else np.nonzero(open_tasks)[0]
    if options.size == 0:
        return []
    i = int(options[np.argmin(coef.C[options, j])])
    fixed = node.fixed.copy()
    fixed[j] = i
    barred = node.barred.copy()
    barred[:, j] = True
    barred[i, j] = False
    fix_child = Node(fixed, barred, node.mu.copy(), node.lam, node.depth + 1, node.above,
                     node.upto)
    barred2 = node.barred.copy()
    barred2[i, j] = True
    kids = [fix_child]
    if not must_work or (~barred2[:, j] & coef.allowed[:, j]).any():
        kids.append(Node(node.fixed.copy(), barred2, node.mu.copy(), node.lam, node.depth + 1,
                         node.above, node.upto))
    return kids
