"""Every numeric option of every command is range-checked where click parses it: NaN, the
infinities and values below its minimum are a usage error naming the option (exit code 2),
before any work."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mel_opt.cli import cli
from mel_opt.cli.app import FiniteFloatRange


def _commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(cli)
    return [(name, cli.get_command(ctx, name)) for name in cli.list_commands(ctx)]


def _numeric_options() -> list[tuple[str, click.Option]]:
    found = []
    for name, cmd in _commands():
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.is_flag and isinstance(
                    p.type, (click.types.FloatParamType, click.types.IntParamType)):
                found.append((name, p))
    return found


def test_every_numeric_option_has_a_checked_type() -> None:
    options = _numeric_options()
    assert len(options) > 30  # every command is seen
    bare = [f"{name} {p.opts[0]}" for name, p in options
            if not isinstance(p.type, (click.IntRange, FiniteFloatRange))]
    assert bare == []
    unbounded = [f"{name} {p.opts[0]}" for name, p in options if p.type.min is None]
    assert unbounded == []


def _bad_values(p: click.Option) -> list[str]:
    t = p.type
    assert isinstance(t, (click.IntRange, click.FloatRange))
    below = t.min - 1 if isinstance(t, click.IntRange) else (t.min if t.min_open else t.min - 1)
    values = [str(below)]
    if isinstance(t, click.FloatRange):
        values += ["nan", "inf", "-inf", "NaN"]
    return values


@pytest.mark.parametrize("command, option", [(c, p) for c, p in _numeric_options()],
                         ids=[f"{c}{p.opts[0]}" for c, p in _numeric_options()])
def test_bad_numeric_values_are_usage_errors(tmp_path: Path, command: str,
                                             option: click.Option) -> None:
    for value in _bad_values(option):
        res = CliRunner().invoke(cli, [command, option.opts[0], value], catch_exceptions=False)
        assert res.exit_code == 2, (value, res.output)
        assert "Invalid value for" in res.output and option.opts[0] in res.output, res.output
        assert "Traceback" not in res.output and "internal error" not in res.output
        assert res.output.startswith("error: ") and len(res.output.splitlines()) == 1


@pytest.mark.parametrize("args", [
    ["batch", "DIR", "-o", "OUT", "--time-limit", "nan"],
    ["dab-learner", "--deadline", "nan", "--iterations", "1"],
    ["train", "x.json", "--schemes", "a", "-o", "OUT", "--time-limit", "-1"],
    ["benchmark", "--predict", "nan"],
    ["live", "x.json", "-o", "OUT", "--lr", "nan"],
    ["solve", "x.json", "--seed", "-1"],
    ["generate", "mel-async", "--learners", "99999999999", "-o", "OUT"],  # was a MemoryError
])
def test_the_reported_cases(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "DIR").mkdir()
    args = [str(tmp_path / a) if a in ("DIR", "OUT") else a for a in args]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2, res.output
    assert "Invalid value for" in res.output
    assert not (tmp_path / "OUT").exists()


def test_good_values_still_pass() -> None:
    t = FiniteFloatRange(min=0, min_open=True)
    assert t.convert("1e-3", None, None) == pytest.approx(1e-3)
    assert t.convert(2.5, None, None) == 2.5
    with pytest.raises(click.BadParameter, match="not a finite number"):
        t.convert("inf", None, None)
