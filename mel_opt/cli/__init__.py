"""The ``melopt`` command line.

One module per command family (``solve.py``: solve, validate, methods; ``batch.py``; ...); each
attaches its commands to the click group of :mod:`mel_opt.cli.app`. Every module of this package
except ``app`` and names starting with ``_`` is imported (when a command is first looked up), so
a new command family is a new module and touches no shared file.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

from mel_opt.cli.app import cli


def command_modules(path: Iterable[str]) -> list[str]:
    """Names of the command modules in the folders ``path``: all but ``app`` and ``_*``, sorted."""
    names = {m.name for m in pkgutil.iter_modules(list(path))}
    return sorted(n for n in names if n != "app" and not n.startswith("_"))


def load_commands(name: str | None = None) -> None:
    """Import the command module called ``name`` if there is one, or every command module
    when ``name`` is None; each adds its commands to :data:`cli`."""
    for module in command_modules(__path__):
        if name is None or module == name:
            importlib.import_module(f"{__name__}.{module}")


# The modules load when a command is first looked up (see app.Commands), not here: then
# ``melopt --version`` imports neither them nor the library behind them, and ``melopt solve``
# only the module of its own family.
cli.commands.loader = load_commands  # type: ignore[attr-defined]


def main() -> None:
    cli(prog_name="melopt")


__all__ = ["cli", "command_modules", "load_commands", "main"]
