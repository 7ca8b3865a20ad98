"""The ``melopt`` command line.

One module per command family (``solve.py``: solve, validate, methods; ``batch.py``; ...); each
attaches its commands to the click group of :mod:`mel_opt.cli.app`. Every module of this package
except ``app`` and names starting with ``_`` is imported here, so a new command family is a new
module and touches no shared file.
"""

from __future__ import annotations

import importlib
import pkgutil

from mel_opt.cli.app import cli

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name != "app" and not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")


def main() -> None:
    cli(prog_name="melopt")


__all__ = ["cli", "main"]
