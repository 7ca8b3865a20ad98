"""Options several schemes share, declared once (each scheme lists the ones it reads).

The arena's alternatives all run on a share of the population and a fixed local work; these
two declarations are theirs together. A scheme's own options sit beside its rules (FedProx's
``mu`` in :mod:`mel_opt.schemes.fedprox`, ...).
"""

from __future__ import annotations

from mel_opt.settings import Setting

__all__ = ["LOCAL_STEPS", "PARTICIPATION", "PASSES"]

PARTICIPATION = Setting(
    "participation", float, 1.0, "Share of the K learners a round of deadline, oort and "
    "fedprox aggregates.", minimum=0.0, minimum_open=True, maximum=1.0,
    default_doc="1: every learner may take part, as in the allocation")
PASSES = Setting(
    "passes", float, None, "Local passes of deadline, oort and fedbuff, and the most fedprox "
    "aims at.", minimum=0.0, minimum_open=True, nullable=True,
    default_doc="dab's mu; mel-async: what the median learner fits in T")
LOCAL_STEPS = Setting(
    "local_steps", int, None, "Local minibatch steps of deadline, oort and fedbuff, and the "
    "most fedprox aims at, in place of passes (FedScale's default local work is 20 steps).",
    minimum=1, nullable=True, default_doc="none: the passes")
