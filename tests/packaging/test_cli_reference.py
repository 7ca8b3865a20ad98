"""The command-line reference page: generated from the click commands, built by MkDocs, read
as a user reads it (no sentinel defaults, no option without help, no swallowed <tags>)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from mel_opt.cli import cli
from mel_opt.cli.reference import cli_markdown, default_text, type_text

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> dict[str, click.Command]:
    """Every command by its name after ``melopt``, the subcommands of a family too."""
    ctx = click.Context(cli)
    found = {n: c for n in cli.list_commands(ctx) if (c := cli.get_command(ctx, n)) is not None}
    for n, c in list(found.items()):
        if isinstance(c, click.Group):
            sub = click.Context(c, info_name=n, parent=ctx)
            found.update({f"{n} {s}": sc for s in c.list_commands(sub)
                          if (sc := c.get_command(sub, s)) is not None})
    return found


def test_every_option_of_every_command_has_help() -> None:
    missing = [f"{n} {p.opts}" for n, c in _commands().items() for p in c.params
               if isinstance(p, click.Option) and not p.hidden and not p.help]
    assert missing == []


def test_the_reference_reads_as_text() -> None:
    md = cli_markdown()
    for bad in ("Sentinel", "UNSET", "N/A", "<problem>"):
        assert bad not in md, bad
    assert "data fetch" in _commands()  # a family's subcommands are in the reference too
    for name in _commands():
        assert f"## `melopt {name}`" in md
    assert "DIRECTORY/&lt;problem&gt;/&lt;file&gt;.json" in md  # shown, not taken as HTML
    solve = _commands()["solve"]
    opts = {p.name: p for p in solve.params}
    assert default_text(opts["seed"]) == "`0`" and default_text(opts["as_json"]) == "off"
    assert default_text(opts["time_limit"]) == "-"
    # float options refuse NaN and infinities: the reference and --help say so
    assert type_text(opts["time_limit"]) == "finite number > 0"
    assert "--time-limit NUMBER" in solve.get_help(click.Context(solve, info_name="solve"))


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="docs extra missing")
def test_the_site_builds_and_its_cli_page_has_no_sentinel(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d",
                          str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    page = (tmp_path / "site" / "reference" / "cli.html").read_text()
    assert "Sentinel" not in page and "N/A" not in page
    assert "melopt-solve" in page and "DIRECTORY/&lt;problem&gt;/&lt;file&gt;.json" in page
