"""``melopt node``: a device (a Raspberry Pi, a laptop) joins a SuperLink as one learner.

``melopt node --superlink HOST:PORT --root-certificates CA --partition-id K --num-partitions N``
starts the SuperNode that ``melopt live --engine local`` starts for each of its nodes
(:class:`mel_opt.live.device.DeviceNode`: Flower's SuperNode with mel_opt's shorter polls
and its warm SuperExec), in the foreground, and ends it with its whole process tree on Ctrl-C
or SIGTERM. ``melopt node keygen DIR`` makes the key pair of a SuperLink that runs
``--enable-supernode-auth`` and prints the command that registers it on the server's side.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import click

from mel_opt.cli.app import cli, err, guarded, number, out
from mel_opt.errors import UsageError, needs_extra

KEY_NAME = "supernode"


def _need_flower() -> None:
    import importlib.util

    if importlib.util.find_spec("flwr") is None:
        raise UsageError(needs_extra("a SuperNode (Flower)", "flower"))


@cli.group("node", invoke_without_command=True)
@click.option("--superlink", metavar="HOST:PORT",
              help="Address of the SuperLink (Flower 1.42 serves its Fleet API on the "
                   "SuperLink's --port, 8000 unless set).")
@click.option("--root-certificates", type=click.Path(dir_okay=False), metavar="CA",
              help="CA certificate (PEM) that signed the SuperLink's certificate; without it "
                   "the system's certificate store is trusted.")
@click.option("--insecure", is_flag=True,
              help="Plain HTTP, for a SuperLink started --insecure (no TLS, no --auth-key).")
@click.option("--partition-id", type=click.IntRange(min=0),
              help="This node's partition of the data set, 0 to --num-partitions - 1.")
@click.option("--num-partitions", type=click.IntRange(min=1),
              help="How many partitions the data set is split in (the number of learners).")
@click.option("--auth-key", type=click.Path(dir_okay=False), metavar="PRIVATE_KEY",
              help="The node's private key (melopt node keygen), for a SuperLink with "
                   "SuperNode authentication; its public key must be registered there.")
@click.option("--speed", type=number(0, 1, min_open=True), default=None,
              help="Run the node at this fraction of a core (default: all of it).")
@click.option("--clientapp-port", type=click.IntRange(1, 65535), default=None,
              help="Port of the node's ClientApp API on 127.0.0.1 (default: a free one).")
@click.pass_context
def node_cmd(ctx: click.Context, superlink: str | None, root_certificates: str | None,
             insecure: bool, partition_id: int | None, num_partitions: int | None,
             auth_key: str | None, speed: float | None, clientapp_port: int | None) -> None:
    """Join a SuperLink as one learner: a SuperNode in the foreground until Ctrl-C.

    The node is one learner of the runs `melopt live --engine remote` starts on that
    SuperLink: it trains on partition --partition-id of --num-partitions. It is the SuperNode
    the local engine starts (shorter polls, a warm process for its learners). Ctrl-C or SIGTERM
    ends it and every process it started. Exit code 1: the SuperNode exited by itself (for
    example refused: its key not registered, or the wrong CA).
    """
    if ctx.invoked_subcommand is not None:
        given = [flag for flag, value in (("--superlink", superlink),
                                          ("--root-certificates", root_certificates),
                                          ("--partition-id", partition_id),
                                          ("--num-partitions", num_partitions),
                                          ("--auth-key", auth_key), ("--speed", speed),
                                          ("--clientapp-port", clientapp_port))
                 if value is not None] + (["--insecure"] if insecure else [])
        if given:
            raise click.UsageError(f"{given[0]} is for running a node, not for "
                                   f"'melopt node {ctx.invoked_subcommand}'", ctx)
        return
    missing = [flag for flag, value in (("--superlink", superlink),
                                        ("--partition-id", partition_id),
                                        ("--num-partitions", num_partitions)) if value is None]
    if missing:
        raise click.UsageError(f"melopt node needs {' and '.join(missing)} (or: melopt node "
                               "keygen DIR)", ctx)
    assert superlink is not None and partition_id is not None and num_partitions is not None
    with guarded():
        _need_flower()
        from mel_opt.live.device import DeviceNode
        from mel_opt.live.flwr_cli import FederationError

        node = DeviceNode(superlink, partition_id, num_partitions,
                          root_certificates=root_certificates, insecure=insecure,
                          auth_key=auth_key, speed=speed, port=clientapp_port)
        stop = threading.Event()

        def on_term(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = signal.signal(signal.SIGTERM, on_term)
        try:
            err.print(f"melopt node: partition {partition_id} of {num_partitions}, SuperLink "
                      f"{superlink}" + (", authenticated" if auth_key else "")
                      + (f", {speed:g} of a core" if speed is not None else "")
                      + " (Ctrl-C ends it)", style="dim", markup=False)
            with node:
                code = node.wait(stop)
        finally:
            signal.signal(signal.SIGTERM, previous)
        if code is not None:
            raise FederationError(f"the SuperNode exited with code {code} (its messages are "
                                  "above)")
        err.print("melopt node: stopped", style="dim", markup=False)


@node_cmd.command("keygen")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--name", default=KEY_NAME, show_default=True,
              help="File stem of the pair: NAME.key (private, 0600) and NAME.pub.")
@click.option("--force", is_flag=True, help="Replace a pair of that name.")
def keygen_cmd(directory: str, name: str, force: bool) -> None:
    """Make a node's key pair in DIRECTORY and print how to register it on the server.

    The pair is ECDSA on P-384 in the OpenSSH formats Flower reads: NAME.key for this node
    (melopt node --auth-key DIRECTORY/NAME.key), NAME.pub for the SuperLink's operator, who
    registers it with `flwr supernode register` (the SuperLink must run
    --enable-supernode-auth). The private key never leaves this device.
    """
    with guarded():
        from mel_opt.live.certs import PRIVATE_SUFFIX, PUBLIC_SUFFIX, make_node_key
        from mel_opt.live.flwr_cli import register_command

        folder = Path(directory).expanduser()
        for suffix in (PRIVATE_SUFFIX, PUBLIC_SUFFIX):
            if (folder / f"{name}{suffix}").exists() and not force:
                raise UsageError(f"{folder / (name + suffix)} exists (--force replaces it)")
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = make_node_key(folder, name)
        line = key.public.read_text(encoding="utf-8").strip()
        command = " ".join(register_command(key.public.name)[:-2])  # the default view
        out.print(f"private key: {key.private.resolve()} (keep it on this device)",
                  markup=False)
        out.print(f"public key:  {key.public.resolve()}", markup=False)
        out.print(line, markup=False)
        out.print("on the server, with the public key copied there:", markup=False)
        out.print(f"  {command}", markup=False)
        out.print(f"then here: melopt node --auth-key {key.private.resolve()} --superlink "
                  "HOST:PORT --root-certificates CA --partition-id K --num-partitions N",
                  markup=False)
