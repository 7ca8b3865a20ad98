"""Learning under the allocation: a vectorised training emulator (papers 000, 004, thesis Ch. 3).

``train(instance, TrainSettings(...))`` solves the instance with each scheme and trains a real
numpy model on real data under every allocation, K learners at once, on a virtual clock taken
from the instance's own latency model; ``write_outputs`` writes the CSV, summary and figure.
"""

from mel_opt.training.data import Dataset, load_dataset, read_idx
from mel_opt.training.mlp import MLP, layers_for
from mel_opt.training.partition import make_pools, parse_partition
from mel_opt.training.report import summarise, write_outputs
from mel_opt.training.run import (
    TrainRun,
    TrainSettings,
    train,
    trainable_problems,
    training_only,
)

__all__ = [
    "MLP",
    "Dataset",
    "TrainRun",
    "TrainSettings",
    "layers_for",
    "load_dataset",
    "make_pools",
    "parse_partition",
    "read_idx",
    "summarise",
    "train",
    "trainable_problems",
    "training_only",
    "write_outputs",
]
