"""Live runs: an instance's allocation executed by real learner processes on Flower.

The allocation logic (:mod:`~mel_opt.live.rounds`, :mod:`~mel_opt.live.planners`,
:mod:`~mel_opt.live.estimates`), the settings (:mod:`~mel_opt.live.settings`) and the
learner's work (:mod:`~mel_opt.live.learner`) are plain Python, as are the deployments' process
side (:mod:`~mel_opt.live.federation`, :mod:`~mel_opt.live.throttle`). Flower (the ``flower``
extra) is imported only by the apps (:mod:`~mel_opt.live.server`,
:mod:`~mel_opt.live.client`), the strategy (:mod:`~mel_opt.live.strategy`), the record mapping
(:mod:`~mel_opt.live.wire`), the SuperNode wrapper (:mod:`~mel_opt.live.supernode`) and the
runner of the engines (:mod:`~mel_opt.live.run`).
"""
