"""TwoNN, the network of the thesis' DAB experiments (Section 3.4.1), for subset benchmarking.

A feed-forward classifier with layer widths [784, 50, 20, 10], ReLU on the hidden layers,
softmax output and categorical cross-entropy (Eq. 3.6), trained by plain SGD (learning rate
0.1 in the thesis). The network itself is mel_opt's one MLP, :class:`mel_opt.mlp.MLP`
(numpy only, no torch, so subset benchmarking runs anywhere mel_opt does; the training
emulator, which times its learners with this package's BLAS limit, takes it from the same
module); this module keeps the subset_benchmarking package's names for it.
"""

from __future__ import annotations

from mel_opt.mlp import MLP, MODELS, TWONN_LAYERS, twonn

__all__ = ["MLP", "MODELS", "TWONN_LAYERS", "twonn"]
