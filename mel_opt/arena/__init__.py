"""The field's alternatives to per-learner allocation, on the training emulator's virtual clock.

Each module holds one alternative's rules as pure functions and small classes that can be
checked by hand: :mod:`mel_opt.arena.deadline` (FedAvg with a round deadline, late learners
dropped), :mod:`mel_opt.arena.oort` (Oort's participant selection, Lai et al., OSDI 2021),
:mod:`mel_opt.arena.fedbuff` (buffered asynchronous aggregation, Nguyen et al., AISTATS 2022)
and :mod:`mel_opt.arena.fedprox` (partial work with a proximal term, Li et al., MLSys 2020).
"""
