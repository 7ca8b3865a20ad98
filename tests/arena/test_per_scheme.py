"""Options for one scheme alone (``--set SCHEME.OPTION=VALUE``) and the validation split."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.api import load_instance
from mel_opt.arena.run import arena
from mel_opt.arena.settings import ArenaSettings
from mel_opt.cli import cli
from mel_opt.errors import SettingError
from mel_opt.training import load_dataset
from mel_opt.training.data import hold_out

INSTANCE = "instances/mel-async/k5_T15.json"


def test_a_schemes_own_values() -> None:
    s = ArenaSettings(per_scheme=("fedprox.mu=0.01", "fedbuff.server_lr=2", "exact.lr=0.05"))
    assert s.overrides() == {"fedprox": {"mu": 0.01}, "fedbuff": {"server_lr": 2.0},
                             "exact": {"lr": 0.05}}
    assert s.for_scheme("fedprox").mu == 0.01 and s.for_scheme("fedprox").lr == s.lr
    assert s.for_scheme("exact").lr == 0.05 and s.for_scheme("deadline") is s
    # text from the command line: comma-separated
    assert ArenaSettings(per_scheme="oort.alpha=1,oort.participation=0.3").overrides() == {
        "oort": {"alpha": 1.0, "participation": 0.3}}


@pytest.mark.parametrize(("value", "message"), [
    ("deadline.mu=0.1", "'deadline' has no option 'mu' (it has batch_size, local_steps, lr, "
                        "overcommit, participation, passes)"),
    ("fedprox.mu", "is not SCHEME.OPTION=VALUE"),
    ("mu=0.1", "is not SCHEME.OPTION=VALUE"),
    ("fedprox.mu=-1", "'fedprox.mu=-1': mu must be a number >= 0"),
    ("fedbuff.concurrency=1.5", "concurrency must be"),
])
def test_bad_values_are_refused(value: str, message: str) -> None:
    with pytest.raises(SettingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ArenaSettings(per_scheme=(value,))


def test_a_scheme_that_does_not_run_is_refused() -> None:
    with pytest.raises(SettingError, match="sets an option of 'fedprox', which does not run"):
        arena(load_instance(INSTANCE), ArenaSettings(schemes=("exact",), seeds=1, cycles=1,
                                                     per_scheme=("fedprox.mu=0.1",)))


def test_the_command_line_refuses_in_one_line() -> None:
    res = CliRunner().invoke(cli, ["arena", INSTANCE, "-o", "/tmp/never-written", "--set",
                                   "deadline.mu=0.1"])
    assert res.exit_code == 2
    assert res.output.count("\n") == 1 and "--set" in res.output and "'mu'" in res.output


def test_the_schemes_value_is_what_it_runs() -> None:
    """fedprox with mu = 0 is plain FedAvg with partial work: the same curve as with --mu 0."""
    inst = load_instance(INSTANCE)
    base = dict(schemes=("fedprox",), seeds=1, cycles=2, model="softmax", max_train=300,
                max_test=100)
    a = arena(inst, ArenaSettings(**base, per_scheme=("fedprox.mu=0",)))
    b = arena(inst, ArenaSettings(**base, mu=0.0))
    c = arena(inst, ArenaSettings(**base))
    assert a.rows == b.rows and a.rows != c.rows


def test_validation_is_held_out_of_training() -> None:
    ds = load_dataset("digits")
    rest, (xv, yv) = hold_out(ds, 200)
    assert rest.y_train.size == ds.y_train.size - 200 and yv.size == 200
    # a split, not a copy: the rest and the held-out rows together are the training rows,
    # each as often as it was there (with its label)
    def rows(x: np.ndarray, y: np.ndarray) -> Counter[bytes]:
        return Counter(a.tobytes() + bytes([int(b)]) for a, b in zip(x, y, strict=True))

    assert rows(rest.x_train, rest.y_train) + rows(xv, yv) == rows(ds.x_train, ds.y_train)
    assert np.array_equal(rest.x_test, ds.x_test)
    with pytest.raises(Exception, match="validation split needs 1 to"):
        hold_out(ds, ds.y_train.size)


def test_rows_carry_validation_accuracy() -> None:
    inst = load_instance(INSTANCE)
    run = arena(inst, ArenaSettings(schemes=("exact", "deadline"), seeds=1, cycles=2,
                                    model="softmax", validation=300))
    assert all(0.0 <= r["val_accuracy"] <= 1.0 for r in run.rows)
    assert {r["scheme"] for r in run.rows} == {"exact", "deadline"}
    none = arena(inst, ArenaSettings(schemes=("deadline",), seeds=1, cycles=1,
                                     model="softmax"))
    assert all("val_accuracy" not in r for r in none.rows)
