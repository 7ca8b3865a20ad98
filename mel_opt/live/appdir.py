"""The Flower app directory of a live run: its ``pyproject.toml``, written as TOML by hand.

``flwr run`` runs an app directory; ``flwr new`` fetches templates, so it fails offline. A
``pyproject.toml`` naming the ServerApp and the ClientApp (imported from this environment on
both sides) and holding the run config is all it needs: :func:`write_app_dir` writes one.
The run config's strings may hold any text (the live settings as JSON): :func:`toml_string`
escapes them so that they round-trip through any TOML reader. The standard library reads TOML
but does not write it.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from mel_opt.io import atomic_write

__all__ = ["RunConfigValue", "app_pyproject", "toml_key", "toml_string", "toml_value",
           "write_app_dir"]

_APP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

#: the types of a run-config value (Flower's ``context.run_config``)
RunConfigValue = str | int | float | bool


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (any text, JSON included, round-trips)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError("a lone surrogate cannot be written to a UTF-8 TOML file")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def toml_value(value: RunConfigValue) -> str:
    """One run-config value as TOML (bool, 64-bit int, float, string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise ValueError(f"TOML integers are 64-bit, got {value}")
        return str(value)
    if isinstance(value, float):  # repr round-trips and is TOML: 0.1, 1e-05, 1e+16, nan, -inf
        return repr(float(value))
    if isinstance(value, str):
        return toml_string(value)
    raise TypeError(f"a run-config value is a str, int, float or bool, got {type(value).__name__}")



def toml_key(key: str) -> str:
    """``key`` as a TOML key: bare when it may be, else a quoted basic string."""
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def app_pyproject(run_config: Mapping[str, RunConfigValue], serverapp: str, clientapp: str,
                  name: str = "melopt-live", publisher: str = "melopt") -> str:
    """The text of the ``pyproject.toml`` of a Flower app (see :func:`write_app_dir`)."""
    if not _APP_NAME.fullmatch(name):
        raise ValueError(f"a Flower app name is letters, digits and hyphens, got {name!r}")
    lines = ["# Written by mel_opt: the Flower app of a live run.", "[project]",
             f"name = {toml_string(name)}", 'version = "1.0.0"',
             'description = "mel_opt live run: an allocation executed by Flower learners"',
             'license = "MIT"', "", "[tool.flwr.app]", f"publisher = {toml_string(publisher)}",
             "", "[tool.flwr.app.components]", f"serverapp = {toml_string(serverapp)}",
             f"clientapp = {toml_string(clientapp)}", "", "[tool.flwr.app.config]"]
    lines += [f"{toml_key(str(k))} = {toml_value(v)}" for k, v in run_config.items()]
    return "\n".join(lines) + "\n"


def write_app_dir(path: str | os.PathLike[str], run_config: Mapping[str, RunConfigValue],
                  serverapp: str = "mel_opt.live.server:server_app",
                  clientapp: str = "mel_opt.live.client:client_app") -> Path:
    """Write the minimal Flower app directory ``flwr run`` needs.

    (``flwr new`` fetches templates, so it fails offline.) A ``pyproject.toml`` naming the
    components is enough: they are imported from the environment on both sides.

    Parameters
    ----------
    path
        The directory (created if missing).
    run_config
        ``[tool.flwr.app.config]``, the apps' ``context.run_config``; strings may hold any
        text (JSON too): they are written as escaped TOML basic strings.
    serverapp, clientapp
        ``module:attribute`` of the ServerApp and the ClientApp.

    Returns
    -------
    Path
        The directory.
    """
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / "pyproject.toml", app_pyproject(run_config, serverapp, clientapp),
                 durable=False)
    return folder
