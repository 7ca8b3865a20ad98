"""mel_opt's own scheme: the problem's method sizes every learner's work, every round.

The arena trains it as the emulator does (the method's allocation, cycle after cycle, on the
problem's clock: :func:`mel_opt.training.emulate.run_cycles`), named there by the method it
runs (``exact``, ``dab``, ...); a live run plans each round from the learners' measured speeds
(or, where they plan their own work, from their own benchmarks) and sends each its plan.
"""

from __future__ import annotations

from mel_opt.schemes.base import GRID_BATCH, GRID_LR, Loop, SchemeSpec

__all__ = ["SPEC"]

SPEC = SchemeSpec(
    "allocation", "the problem's method allocates each learner's work every round (mel_opt)",
    Loop.ALLOCATION, engines=("arena", "live"),
    # It has no options of its own: the client lr and the minibatch (3 x 3 = 9 points, as
    # many trials as every other scheme gets: at least the default 8).
    grid={"lr": GRID_LR, "batch_size": GRID_BATCH})
