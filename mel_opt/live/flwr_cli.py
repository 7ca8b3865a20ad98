"""Flower's command line as mel_opt drives it: ``FLWR_HOME``, the environment, ``flwr run``.

Every Flower process a live run starts gets :func:`flower_env`: a ``FLWR_HOME`` of its own (so
the user's Flower configuration is never read nor written), no telemetry or update check, the
console scripts of this virtual environment first on ``PATH`` (Flower starts
``flower-superexec``, ``flwr-serverapp`` and ``flwr-clientapp`` by name), and neither of the
variables that would start Flower's legacy gRPC servers on 0.0.0.0
(``FLWR_INTERNAL_GRPC_FLEET_API``, ``FLWR_INTERNAL_GRPC_CONTROL_API``).
:func:`write_flower_config` writes the one SuperLink connection ``flwr run`` reads from
``$FLWR_HOME/config.toml``; :func:`run_flwr_app` runs an app directory
(:mod:`mel_opt.live.appdir`) with ``flwr run <app> <federation> --stream``, each output line to
a callback, and judges the run by its status (:func:`run_status`), not by ``flwr``'s exit code.
:func:`register_supernodes` registers SuperNodes' public keys with a SuperLink that runs
``--enable-supernode-auth`` (``flwr supernode register``, through its Control API) and
:func:`supernode_ids` lists the nodes it knows (``flwr supernode ls``).
"""
from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from mel_opt.errors import MelOptError, UsageError, needs_extra
from mel_opt.io import atomic_write
from mel_opt.live.appdir import toml_key, toml_string
from mel_opt.processes import end_process_group

__all__ = ["FederationError", "Stream", "executable", "flower_env", "register_command",
           "register_supernodes", "run_flwr_app", "run_status", "supernode_ids",
           "write_flower_config"]

_LEGACY_GRPC_ENV = ("FLWR_INTERNAL_GRPC_CONTROL_API", "FLWR_INTERNAL_GRPC_FLEET_API")
_RUN_ID = re.compile(r"Successfully started run (\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: a callback that receives one line of output
Stream = Callable[[str], None]


class FederationError(MelOptError):
    """A Flower federation could not be started, or a run did not end in time.

    Defined here, below :mod:`mel_opt.live.federation`, because ``flwr run`` raises it too.
    """

    exit_code = 1


def executable(name: str) -> str:
    """The console script ``name`` of this virtual environment (beside ``sys.executable``)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise FederationError(f"{name} not found beside {sys.executable}: "
                              + needs_extra("live runs on Flower", "flower"))
    return str(path)


# -- FLWR_HOME and the environment -------------------------------------------------------------
def write_flower_config(home: str | os.PathLike[str], federation: str, address: str, *,
                        insecure: bool = False, root_certificates: str | None = None) -> Path:
    """Write ``$FLWR_HOME/config.toml`` with one SuperLink connection, the default one.

    Since Flower 1.26 the connections (``flwr run``'s second argument) live there, not in the
    app's ``pyproject.toml``. ``root_certificates`` must be an absolute path (Flower's rule).
    """
    lines = ["[superlink]", f"default = {toml_string(federation)}", "",
             f"[superlink.{toml_key(federation)}]", f"address = {toml_string(address)}"]
    if insecure:
        lines.append("insecure = true")
    if root_certificates is not None:
        lines.append(f"root-certificates = {toml_string(root_certificates)}")
    target = Path(home) / "config.toml"
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, "\n".join(lines) + "\n", durable=False)
    return target


def flower_env(home: str | os.PathLike[str], extra: Mapping[str, str] | None = None
               ) -> dict[str, str]:
    """The environment of every Flower process we start."""
    env = dict(os.environ)
    for key in _LEGACY_GRPC_ENV:  # these would add gRPC servers bound to 0.0.0.0
        env.pop(key, None)
    env.update(FLWR_HOME=str(home), FLWR_TELEMETRY_ENABLED="0", FLWR_DISABLE_UPDATE_CHECK="1",
               PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
    # Flower starts flower-superexec, flwr-serverapp and flwr-clientapp by name: ours first
    env["PATH"] = os.pathsep.join(p for p in (str(Path(sys.executable).parent),
                                              env.get("PATH", "")) if p)
    env.update(extra or {})
    return env


# -- SuperNode authentication ------------------------------------------------------------------
def register_command(public_key: str | os.PathLike[str], federation: str | None = None,
                     ) -> list[str]:
    """``flwr supernode register PUBLIC_KEY [FEDERATION] --format json`` (no executable path:
    what a server's operator types)."""
    return ["flwr", "supernode", "register", str(public_key),
            *([federation] if federation else []), "--format", "json"]


def register_supernodes(env: Mapping[str, str], federation: str,
                        public_keys: Sequence[str | os.PathLike[str]], *,
                        timeout: float = 60.0, prefix: Sequence[str] = (),
                        track: Callable[[int], None] | None = None) -> list[int]:
    """Register each public key (OpenSSH line in a file) with the SuperLink; their node ids.

    One ``flwr supernode register`` per key, all at once (each is a Python start-up of about a
    second). ``prefix`` runs ``flwr`` under another command (``ip netns exec NS``).

    Raises
    ------
    FederationError
        A registration failed or did not end within ``timeout`` seconds (the message is
        ``flwr``'s last lines).
    """
    procs = []
    try:
        for key in public_keys:
            cmd = register_command(Path(key).resolve(), federation)
            proc = subprocess.Popen([*prefix, executable("flwr"), *cmd[1:]], env=dict(env),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)
            procs.append(proc)
            if track is not None:
                track(proc.pid)
        deadline = time.monotonic() + timeout
        ids = []
        for key, proc in zip(public_keys, procs, strict=True):
            try:
                out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise FederationError(f"flwr supernode register {key} did not end within "
                                      f"{timeout:g} s") from None
            node_id = None
            try:
                doc = json.loads(out[out.index("{"):out.rindex("}") + 1])
                node_id = int(doc["node-id"]) if doc.get("success") else None
            except (ValueError, KeyError, TypeError):
                pass
            if proc.returncode != 0 or node_id is None:
                tail = "\n".join(_ANSI.sub("", out).strip().splitlines()[-5:])
                raise FederationError(f"flwr supernode register {key} failed "
                                      f"({proc.returncode}):\n{tail}")
            ids.append(node_id)
        return ids
    finally:
        for proc in procs:
            end_process_group(proc)


def supernode_ids(env: Mapping[str, str], federation: str, *, online: bool = False,
                  prefix: Sequence[str] = ()) -> list[int] | None:
    """The node ids the SuperLink knows (``flwr supernode ls``), only those ``online`` if
    asked; ``None`` when ``flwr`` fails."""
    doc = _flwr_json(env, ["supernode", "ls", federation], prefix=prefix)
    nodes = doc.get("nodes") if doc else None
    if not isinstance(nodes, list):
        return None
    return sorted(int(n["node-id"]) for n in nodes
                  if isinstance(n, dict) and (not online or n.get("status") == "online"))


# -- flwr run ----------------------------------------------------------------------------------
def _flwr_json(env: Mapping[str, str], args: Sequence[str], timeout: float = 60.0,
               prefix: Sequence[str] = ()) -> dict[str, object] | None:
    """``flwr ARGS --format json`` parsed, or ``None`` when it fails or prints no JSON."""
    try:
        out = subprocess.run([*prefix, executable("flwr"), *args, "--format", "json"],
                             env=dict(env),
                             capture_output=True, text=True, timeout=timeout, check=False,
                             stdin=subprocess.DEVNULL).stdout
        doc = json.loads(out[out.index("{"):out.rindex("}") + 1])
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return doc if isinstance(doc, dict) else None


def run_status(env: Mapping[str, str], federation: str, run_id: int, tries: int = 10,
               prefix: Sequence[str] = ()) -> str | None:
    """A run's status, e.g. ``finished:completed`` or ``finished:failed``.

    Asked up to ``tries`` times 0.5 s apart until finished; ``None`` if ``flwr ls`` fails.
    ``prefix`` runs ``flwr`` under another command (``ip netns exec NS``)."""
    status = None
    for _ in range(tries):  # the log stream ends with the run; its status may trail it
        doc = _flwr_json(env, ["ls", federation, "--run-id", str(run_id)], prefix=prefix)
        runs = doc.get("runs") if doc else None
        if not (isinstance(runs, list) and runs and isinstance(runs[0], dict)):
            return None
        status = str(runs[0].get("status"))
        if status.startswith("finished"):
            break
        time.sleep(0.5)
    return status


def run_flwr_app(env: Mapping[str, str], federation: str, app_dir: str | os.PathLike[str],
                 stream: Stream | None = None, timeout: float | None = None,
                 track: Callable[[int], None] | None = None, prefix: Sequence[str] = ()) -> int:
    """``flwr run APP FEDERATION --stream``, each output line to ``stream``; the exit code.

    ``prefix`` runs ``flwr`` under another command (``ip netns exec NS``: a SuperLink inside a
    network namespace is reached from inside it).

    ``flwr run --stream`` exits 0 when the log stream ends, whether the ServerApp succeeded or
    not, so after a 0 the run's status is asked for: a run that did not end
    ``finished:completed`` returns 1 (after one line saying so). Lines are passed without
    their end of line and without terminal colour codes.

    Raises
    ------
    FederationError
        The run did not end within ``timeout`` seconds (it is then stopped).
    """
    app = Path(app_dir).expanduser().resolve()
    if not (app / "pyproject.toml").is_file():
        raise UsageError(f"{app} is not a Flower app directory (no pyproject.toml)")
    proc = subprocess.Popen([*prefix, executable("flwr"), "run", str(app), federation,
                             "--stream"],
                            env=dict(env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    if track is not None:
        track(proc.pid)
    lines: queue.Queue[bytes | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.put(raw)
        lines.put(None)

    reader = threading.Thread(target=read, name="melopt-flwr-run", daemon=True)
    reader.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    run_id: int | None = None
    try:
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            try:
                if wait is not None and wait <= 0:
                    raise queue.Empty
                raw = lines.get(timeout=wait)
            except queue.Empty:
                raise FederationError(f"flwr run did not end within {timeout:g} s"
                                      + (f" (run {run_id} stopped)" if run_id else "")) from None
            if raw is None:
                break
            line = _ANSI.sub("", raw.decode("utf-8", "replace")).rstrip("\r\n")
            if run_id is None and (m := _RUN_ID.search(line)):
                run_id = int(m.group(1))
            if stream is not None:
                stream(line)
        code = proc.wait()
    except BaseException:
        end_process_group(proc)
        if run_id is not None:  # a run left behind would keep a remote SuperLink busy
            subprocess.run([*prefix, executable("flwr"), "stop", str(run_id), federation],
                           env=dict(env),
                           capture_output=True, timeout=30, check=False)
        raise
    finally:
        end_process_group(proc)
        reader.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    if code == 0 and run_id is not None:
        status = run_status(env, federation, run_id, prefix=prefix)
        if status is not None and status != "finished:completed":
            if stream is not None:
                stream(f"melopt: run {run_id} ended {status}")
            code = 1
    return code
