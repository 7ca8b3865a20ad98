"""The ``melopt`` command line.

Commands live in the modules of this package and attach themselves to the group in
:mod:`mel_opt.cli.app`; every module except ``app``, ``__init__`` and ``_*`` is imported here,
so adding a command touches no shared file.
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
