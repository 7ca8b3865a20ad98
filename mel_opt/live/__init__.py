"""Live runs: an instance's allocation executed by real learner processes on Flower.

The allocation logic (:mod:`~mel_opt.live.rounds`, :mod:`~mel_opt.live.estimates`) and the
learner's work (:mod:`~mel_opt.live.learner`) are plain Python. Flower (the ``flower`` extra)
is imported only by the apps (:mod:`~mel_opt.live.server`, :mod:`~mel_opt.live.client`), the
strategy (:mod:`~mel_opt.live.strategy`) and the runner of the engines
(:mod:`~mel_opt.live.run`, :mod:`~mel_opt.live.launcher`).
"""
