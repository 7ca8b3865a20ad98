"""The CLI's layout: one module per command family, discovered; click and rich stay in the CLI;
every file is written through the one atomic writer."""

from __future__ import annotations

import re
from pathlib import Path

import click

import mel_opt
from mel_opt.cli import cli, command_modules

PACKAGE = Path(mel_opt.__file__).parent

# command -> the module (of mel_opt.cli) that holds it
FAMILIES = {
    "solve": "solve", "validate": "solve", "methods": "solve",
    "generate": "generate",
    "batch": "batch",
    "compare": "compare",
    "export": "export",
    "sweep": "sweep", "plot": "sweep",
    "benchmark": "benchmark", "dab-learner": "benchmark",
    "tau-scan": "tau",
    "simulate": "simulate",
}


def test_every_command_lives_in_its_family_module():
    # other command families may be added by new modules: check the known ones only
    ctx = click.Context(cli)
    for name, module in FAMILIES.items():
        command = cli.get_command(ctx, name)
        assert command is not None and command.callback is not None, name
        assert command.callback.__module__ == f"mel_opt.cli.{module}", name
    commands = [cli.get_command(ctx, name) for name in cli.list_commands(ctx)]
    holders = {c.callback.__module__ for c in commands if c is not None and c.callback}
    assert "mel_opt.cli.app" not in holders


def test_discovery_takes_every_module_but_app_and_private(tmp_path):
    for name in ("app.py", "__init__.py", "__main__.py", "_render.py", "train.py",
                 "reproduce.py", "notes.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("")
    assert command_modules([str(tmp_path)]) == ["reproduce", "sub", "train"]
    assert set(FAMILIES.values()) <= set(command_modules([str(PACKAGE / "cli")]))


def _library_sources() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "cli" not in p.relative_to(PACKAGE).parts]


def test_only_the_cli_imports_click_and_rich():
    pattern = re.compile(r"^\s*(import|from)\s+(click|rich)\b", re.M)
    offenders = [str(p.relative_to(PACKAGE)) for p in _library_sources()
                 if pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_files_are_renamed_into_place_only_by_the_atomic_writer():
    # a temporary file renamed onto the target: os.replace / os.rename / Path.replace, mkstemp
    # (also a temporary path's own .replace/.rename onto the target)
    pattern = re.compile(r"os\.(replace|rename)\(|\.replace\(\s*(out|target|tmp)\b|mkstemp"
                         r"|\btmp\w*\.(replace|rename)\(")
    offenders = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                 if pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == ["io/atomic.py"]
