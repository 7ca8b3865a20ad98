"""Run settings declared once: the declarations check the settings objects, name the setting
in the library and its flag on the command line, and the CLI options are the declarations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mel_opt.cli import cli
from mel_opt.errors import SettingError
from mel_opt.live.settings import LIVE_OPTIONS, LIVE_SETTINGS, LiveOptions, LiveSettings
from mel_opt.settings import Declared, Setting, declared
from mel_opt.training.settings import TRAIN_SETTINGS, TrainSettings

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("cls", [TrainSettings, LiveSettings, LiveOptions])
def test_every_field_is_declared_with_its_own_default(cls: type[Declared]) -> None:
    assert declared(cls) == []


def test_the_consistency_check_sees_a_stray_field_and_a_wrong_default() -> None:
    @dataclasses.dataclass(frozen=True)
    class Odd(Declared):
        SETTINGS = (Setting("rounds", int, 5, "Rounds.", minimum=1),)
        rounds: int = 6
        extra: int = 0

    assert declared(Odd) == ["rounds: field default 6 != declared 5",
                             "extra: a field without a declaration"]


@pytest.mark.parametrize("kw, setting, words", [
    ({"lr": -0.1}, "lr", "lr must be a number > 0, got -0.1"),
    ({"lr": float("nan")}, "lr", "lr must be a number > 0, got nan"),
    ({"cycles": 0}, "cycles", "cycles must be a whole number >= 1, got 0"),
    ({"cycles": 2.5}, "cycles", "cycles must be a whole number >= 1, got 2.5"),
    ({"max_train": 0}, "max_train", "max_train must be a whole number >= 1, got 0"),
    ({"targets": (0.5, 0.0)}, "targets", "each a number in (0, 1], got 0.0"),
    ({"targets": ""}, "targets", "targets needs at least one value"),
    ({"dtype": "float16"}, "dtype", "one of float32, float64, got 'float16'"),
    ({"model": "resnet"}, "model", "model: unknown model 'resnet'"),
    ({"partition": "dirichlet:-2"}, "partition", "partition: dirichlet:ALPHA needs a positive"),
    ({"dataset": "cifar"}, "dataset", "dataset: unknown dataset 'cifar'"),
    ({"schemes": ("a", "a")}, "schemes", "schemes names a scheme twice"),
    ({"reference": "b"}, "reference", "reference 'b' is not one of schemes"),
])
def test_bad_train_settings_name_the_setting(kw: dict, setting: str, words: str) -> None:
    with pytest.raises(SettingError) as info:
        TrainSettings(**{"schemes": ("a",), **kw})
    assert info.value.setting == setting and words in str(info.value)
    assert str(info.value).startswith(setting)  # the library names the setting, no flag
    assert "--" not in str(info.value)


def test_text_is_read_as_the_declared_type() -> None:
    s = TrainSettings(schemes="exact, eta", targets="0.5,0.8", cycles=3.0)  # type: ignore[arg-type]
    assert s.schemes == ("exact", "eta") and s.targets == (0.5, 0.8) and s.cycles == 3
    assert isinstance(s.cycles, int)


def test_all_the_data_has_one_spelling() -> None:
    for cls in (TrainSettings, LiveSettings):
        for name in ("max_train", "max_test"):
            decl = cls.setting(name)
            assert decl.default is None and decl.nullable and decl.minimum == 1


def test_the_flag_form_names_other_settings_by_their_flags() -> None:
    with pytest.raises(SettingError) as info:
        LiveOptions(engine="remote")
    assert str(info.value) == "engine remote needs superlink HOST:PORT"
    assert info.value.as_flag() == "--engine remote needs --superlink HOST:PORT"
    with pytest.raises(SettingError) as info:
        LiveOptions(engine="remote", superlink="h:1", speeds=(0.5,))
    assert info.value.as_flag() == ("--speeds throttles learners on this machine: it needs "
                                    "--engine local or simulation (remote devices run at "
                                    "their own speeds)")
    assert LiveOptions(engine="local", speeds="1,0.5").node_speeds(2) == [1.0, 0.5]
    assert LiveOptions(engine="local", speeds=(0.5,)).node_speeds(3) == [0.5] * 3


def test_live_settings_survive_the_json_a_superlink_reads() -> None:
    pytest.importorskip("flwr")
    from mel_opt.live.server import settings_from_json, settings_json

    s = LiveSettings(instance={"problem": "x"}, rounds=3, alpha=0.25, max_train=500,
                     grace_s=1.5)
    assert settings_from_json(settings_json(s)) == s


def _options(command: str) -> dict[str, click.Option]:
    cmd = cli.get_command(click.Context(cli), command)
    assert cmd is not None
    return {p.name: p for p in cmd.params if isinstance(p, click.Option) and p.name}


@pytest.mark.parametrize("command, declarations", [
    ("train", TRAIN_SETTINGS), ("live", LIVE_SETTINGS + LIVE_OPTIONS)])
def test_the_cli_options_are_the_declarations(command: str,
                                              declarations: tuple[Setting, ...]) -> None:
    options = _options(command)
    shown = [s for s in declarations if s.name in options]
    assert len(shown) >= 13
    for s in shown:
        opt = options[s.name]
        assert s.flag in opt.opts
        default = s.default_text if s.many and s.default is not None else s.default
        assert opt.default == default, s.name
        assert opt.help is not None and opt.help.startswith(s.doc)
        if s.kind is int and not s.many:  # a list (--liar-ids) is text the declaration parses
            assert isinstance(opt.type, click.IntRange) and opt.type.min == s.minimum
        if s.kind is float and not s.many:
            assert opt.type.min == s.minimum and opt.type.min_open == s.minimum_open
        if s.choices:
            assert isinstance(opt.type, click.Choice) and tuple(opt.type.choices) == s.choices


def test_a_library_message_reaches_the_command_line_with_the_flag(tmp_path: Path) -> None:
    inst = str(ROOT / "instances/mel-async/k10_T15.json")
    res = CliRunner().invoke(cli, ["train", inst, "--schemes", "exact", "--target", "0.5,2",
                                   "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert res.output.startswith("error: --target must be comma-separated values, each a "
                                 "number in (0, 1], got '2'")
    res = CliRunner().invoke(cli, ["train", inst, "--schemes", "exact", "--reference", "eta",
                                   "-o", str(tmp_path / "o")])
    assert res.exit_code == 2
    assert "--reference 'eta' is not one of --schemes" in res.output
