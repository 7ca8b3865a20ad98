"""The command-line reference as Markdown, generated from the click commands themselves.

The documentation site renders it (``docs/reference/cli.md``), so every command and option it
shows is the one ``melopt`` accepts; unlike a generic renderer it shows defaults as a user
reads them (a flag is "off", an option without a default "-", a required one "required")
and keeps angle brackets of the help text as text.
"""

from __future__ import annotations

import html
import inspect

import click

__all__ = ["cli_markdown", "default_text", "type_text"]


def default_text(p: click.Parameter) -> str:
    """The default of an option as a reader sees it."""
    if p.required:
        return "required"
    if isinstance(p, click.Option) and p.is_flag and not p.count:
        return "on" if p.default is True else "off"
    value = p.default
    if value is None or value is click.core.UNSET or (  # type: ignore[attr-defined]
            p.multiple and not value) or callable(value):
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(f"`{v}`" for v in value) or "-"
    return f"`{value}`"


def type_text(p: click.Parameter) -> str:
    """The values an option takes, in words."""
    t = p.type
    if isinstance(p, click.Option) and p.is_flag:
        return "flag"
    if isinstance(t, click.Choice):
        return "one of " + ", ".join(f"`{c}`" for c in t.choices)
    if isinstance(t, (click.IntRange, click.FloatRange)):
        kind = "integer" if isinstance(t, click.IntRange) else "finite number"
        lo = "" if t.min is None else f"{'>' if t.min_open else '>='} {t.min}"
        hi = "" if t.max is None else f"{'<' if t.max_open else '<='} {t.max}"
        return f"{kind} {lo}{', ' if lo and hi else ''}{hi}".strip()
    if isinstance(t, click.Path):
        return "directory" if not t.file_okay else ("file" if not t.dir_okay else "path")
    name = {"integer": "integer", "float": "number", "text": "text",
            "boolean": "yes/no"}.get(t.name, t.name)
    if p.multiple:
        name += " (repeatable)"
    return name


def _text(s: str) -> str:
    """Help text as Markdown text: no raw HTML (``<problem>`` stays visible), no click
    paragraph marks."""
    return html.escape(inspect.cleandoc(s).replace("\b\n", "").replace("\b", ""), quote=False)


def _first_paragraph(cmd: click.Command) -> str:
    text = inspect.cleandoc(cmd.help or cmd.short_help or "")
    return text.split("\n\n")[0].replace("\n", " ")


def _cell(s: str) -> str:
    return _text(s).replace("|", "\\|").replace("\n", " ")


def _command(name: str, cmd: click.Command, ctx: click.Context) -> list[str]:
    sub = click.Context(cmd, info_name=name, parent=ctx)
    usage = " ".join(cmd.collect_usage_pieces(sub))
    lines = [f"## `melopt {name}`", "", _text(cmd.help or cmd.short_help or ""), "",
             f"Usage: `melopt {name} {usage}`", ""]
    args = [p for p in cmd.params if isinstance(p, click.Argument)]
    if args:
        lines += ["| argument | takes |", "|---|---|"]
        lines += [f"| `{p.human_readable_name}` | {type_text(p)}"
                  + (" (repeatable)" if p.nargs == -1 else "") + " |" for p in args]
        lines.append("")
    opts = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
    if opts:
        lines += ["| option | takes | default | what it does |", "|---|---|---|---|"]
        for p in opts:
            names = ", ".join(f"`{o}`" for o in (*p.opts, *p.secondary_opts))
            lines.append(f"| {names} | {type_text(p)} | {default_text(p)} | "
                         f"{_cell(p.help or '')} |")
        lines.append("")
    if isinstance(cmd, click.Group):  # a command family (melopt data): each subcommand too
        for sub_name in cmd.list_commands(sub):
            sub_cmd = cmd.get_command(sub, sub_name)
            if sub_cmd is not None:
                lines += _command(f"{name} {sub_name}", sub_cmd, sub)
    return lines


def cli_markdown(group: click.Group | None = None) -> str:
    """Every command of ``melopt`` (or ``group``) with its usage, help, arguments and options."""
    if group is None:
        from mel_opt.cli import cli

        group = cli
    ctx = click.Context(group, info_name="melopt")
    lines = [_text(group.help or ""), "",
             "| command | what it does |", "|---|---|"]
    names = group.list_commands(ctx)
    cmds = {n: group.get_command(ctx, n) for n in names}
    lines += [f"| [`{n}`](#melopt-{n}) | {_cell(_first_paragraph(c))} |"
              for n, c in cmds.items() if c is not None]
    lines.append("")
    opts = [p for p in group.params if isinstance(p, click.Option)]
    if opts:
        lines += ["Options of `melopt` itself (before the command):", "",
                  "| option | what it does |", "|---|---|"]
        lines += [f"| {', '.join(f'`{o}`' for o in p.opts)} | {_cell(p.help or '')} |"
                  for p in opts]
        lines.append("")
    for n, c in cmds.items():
        if c is not None:
            lines += _command(n, c, ctx)
    return "\n".join(lines)
