"""Live runs: an instance's allocation (or another scheme of :mod:`mel_opt.schemes`) executed
by real learner processes on Flower.

A run's state has one owner per part (:mod:`~mel_opt.live.rounds`' ``LiveRun`` over the
:mod:`~mel_opt.live.fleet`, the :mod:`~mel_opt.live.models` and the :mod:`~mel_opt.live.log`);
the round loop (:mod:`~mel_opt.live.loop`) runs over an exchange
(:mod:`~mel_opt.live.exchange`); the planners (:mod:`~mel_opt.live.planners`), the claims
(:mod:`~mel_opt.live.claims`), FedBuff's server side (:mod:`~mel_opt.live.fedbuff`), the
estimates (:mod:`~mel_opt.live.estimates`), the settings (:mod:`~mel_opt.live.settings`) and
the learner's work (:mod:`~mel_opt.live.learner`) are plain Python, as are the in-process
exchange (:mod:`~mel_opt.live.inprocess`) and the deployments' process side
(:mod:`~mel_opt.live.federation`, :mod:`~mel_opt.live.process_trees`,
:mod:`~mel_opt.live.throttle`). Flower (the ``flower`` extra) is imported only by the apps
(:mod:`~mel_opt.live.server`, :mod:`~mel_opt.live.client`), the grid's exchange
(:mod:`~mel_opt.live.flower_exchange`), the record mapping (:mod:`~mel_opt.live.wire`), the
SuperNode and SuperExec wrappers, the patches of Flower's internals
(:mod:`~mel_opt.live.flower_patches`) and the runner of the engines (:mod:`~mel_opt.live.run`).
"""
