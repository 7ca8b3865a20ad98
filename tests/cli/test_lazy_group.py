"""The ``melopt`` group is lazy (click's get_command / list_commands): a command module is
imported only when one of its commands is used, and the group still looks whole from outside.

The import checks run in a fresh interpreter: the test process has long imported every module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from mel_opt.cli import cli, command_modules

ROOT = Path(__file__).resolve().parents[2]
CLI_DIR = ROOT / "mel_opt" / "cli"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
WIDTH = 80  # a fresh ``melopt --help`` and the one in this process wrap alike

# Runs ``melopt ARGS`` in a fresh interpreter, then prints its exit code, the command modules it
# imported and the commands the group holds (as JSON, on the last line of stdout).
PROBE = """
import json, sys
from mel_opt.cli import cli
code = 0
try:
    cli.main(sys.argv[1:], prog_name="melopt", terminal_width=WIDTH)
except SystemExit as exc:
    code = exc.code
loaded = sorted(m for m in sys.modules if m.startswith("mel_opt.cli."))
print(json.dumps({"code": code, "loaded": loaded, "held": sorted(cli.commands)}))
"""


def _probe(*args: str) -> tuple[dict, subprocess.CompletedProcess[str]]:
    """The probe's JSON, and its run with stdout cut to what ``melopt`` printed."""
    code = f"WIDTH = {WIDTH}\n{PROBE}"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=ENV, cwd=ROOT, timeout=120)
    printed, _, last = done.stdout.rstrip("\n").rpartition("\n")
    done.stdout = printed + "\n" if printed else ""
    return json.loads(last), done


def _all_commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    found = {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}
    assert all(found.values())
    return {name: c for name, c in found.items() if c is not None}


def test_version_imports_no_command_module() -> None:
    doc, done = _probe("--version")
    assert doc["code"] == 0 and done.stdout.startswith("melopt, version ")
    assert doc["loaded"] == ["mel_opt.cli.app"] and doc["held"] == []


def test_a_command_imports_its_namesake_module_first() -> None:
    doc, _ = _probe("solve", "--help")
    assert doc["code"] == 0
    assert doc["loaded"] == ["mel_opt.cli.app", "mel_opt.cli.solve"]
    assert doc["held"] == ["methods", "solve", "validate"]  # the family of solve.py


def test_a_command_outside_a_namesake_module_is_found_by_loading_them_all() -> None:
    doc, done = _probe("tau-scan", "--help")  # lives in tau.py
    assert doc["code"] == 0 and "Usage: melopt tau-scan" in done.stdout
    modules = command_modules([str(CLI_DIR)])
    assert doc["loaded"] == sorted(["mel_opt.cli.app", *(f"mel_opt.cli.{m}" for m in modules)])


def test_help_lists_every_command_with_its_short_help() -> None:
    doc, done = _probe("--help")
    assert doc["code"] == 0
    commands = _all_commands()
    assert doc["held"] == sorted(commands)
    # the fresh (lazy) help is the help of the group with every module loaded
    loaded = CliRunner().invoke(cli, ["--help"], prog_name="melopt", terminal_width=WIDTH)
    assert done.stdout == loaded.output
    listed: dict[str, str] = {}
    section = done.stdout.split("\nCommands:\n", 1)[1]
    for line in section.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, text = line.strip().partition(" ")
            listed[name] = text.strip()
    assert sorted(listed) == sorted(commands)
    for name, command in commands.items():
        short = command.get_short_help_str(limit=200).removesuffix("...")
        assert short, f"{name} has no short help"
        assert short.startswith(listed[name].removesuffix("...")), name


def test_every_command_name_resolves_to_its_command() -> None:
    ctx = click.Context(cli)
    commands = _all_commands()
    assert len(commands) >= len(command_modules([str(CLI_DIR)]))
    for name, command in commands.items():
        assert isinstance(command, click.Command) and command.name == name
        assert cli.get_command(ctx, name) is command  # looked up again: the same one
    assert cli.get_command(ctx, "no-such-command") is None
    assert cli.get_command(ctx, "app") is None  # the group's own module holds no command


def test_an_unknown_command_exits_2_with_clicks_error() -> None:
    doc, done = _probe("no-such-command")
    assert doc["code"] == 2 and done.returncode == 0  # the probe itself ends normally
    # click's message, as the one line every error is
    assert done.stderr == "error: No such command 'no-such-command'. (melopt --help)\n"
    doc, done = _probe("solv")  # a near miss is offered the commands of every module
    assert doc["code"] == 2 and "Did you mean 'solve'?" in done.stderr
    result = CliRunner().invoke(cli, ["no-such-command"], prog_name="melopt")
    assert result.exit_code == 2 and "No such command" in result.output
