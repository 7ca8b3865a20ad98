"""``melopt node``: the key pair a device makes, and the options it refuses before anything
starts (one line, exit code 2). The node joining a SuperLink is tested with a real deployment
in tests/live/test_auth.py."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from mel_opt.cli import cli


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["node", *args])
    return res.exit_code, res.output


def test_keygen_makes_a_pair_flower_reads_and_says_how_to_register_it(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    code, output = _run("keygen", str(folder))
    assert code == 0, output
    private, public = folder / "supernode.key", folder / "supernode.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    line = public.read_text().strip()
    assert line.startswith("ecdsa-sha2-nistp384 ") and line in output
    assert "flwr supernode register supernode.pub" in output
    assert f"--auth-key {private.resolve()}" in output
    assert not list(folder.glob(".*"))  # no temporary file left beside them

    # what Flower itself does with them: the node loads the private key, the CLI the public
    pytest.importorskip("flwr")
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_ssh_private_key
    from flwr.cli.supernode.register import try_load_public_key

    key = load_ssh_private_key(private.read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert b"PUBLIC KEY" in try_load_public_key(public)


def test_keygen_never_replaces_a_key_unless_forced(tmp_path: Path) -> None:
    assert _run("keygen", str(tmp_path), "--name", "pi")[0] == 0
    before = (tmp_path / "pi.key").read_bytes()
    code, output = _run("keygen", str(tmp_path), "--name", "pi")
    assert code == 2 and "pi.key exists (--force replaces it)" in output
    assert (tmp_path / "pi.key").read_bytes() == before
    assert _run("keygen", str(tmp_path), "--name", "pi", "--force")[0] == 0
    assert (tmp_path / "pi.key").read_bytes() != before


@pytest.mark.parametrize(("args", "message"), [
    ([], "melopt node needs --superlink and --partition-id and --num-partitions"),
    (["--superlink", "h:1", "--num-partitions", "2"], "needs --partition-id"),
    (["--superlink", "nohost", "--partition-id", "0", "--num-partitions", "2"],
     "the SuperLink address must be HOST:PORT, got 'nohost'"),
    (["--superlink", "h:1", "--partition-id", "2", "--num-partitions", "2"],
     r"the partition id must be in \[0, 1\] for 2 partitions, got 2"),
    (["--superlink", "h:1", "--partition-id", "0", "--num-partitions", "0"],
     "Invalid value for '--num-partitions'"),
    (["--superlink", "h:1", "--partition-id", "0", "--num-partitions", "2", "--speed", "1.5"],
     "Invalid value for '--speed'"),
    (["--superlink", "h:1", "--partition-id", "0", "--num-partitions", "2",
      "--root-certificates", "missing-ca.pem"], "root certificate .*missing-ca.pem not found"),
    (["--superlink", "h:1", "--partition-id", "0", "--num-partitions", "2", "--insecure",
      "--auth-key", "KEY"], "--insecure is plain HTTP"),
    (["--superlink", "h:1", "--partition-id", "0", "--num-partitions", "2",
      "--auth-key", "PUB"], "is not an OpenSSH private key"),
    (["--superlink", "h:1", "keygen", "DIR"], "--superlink is for running a node"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             args: list[str], message: str) -> None:
    import re

    pytest.importorskip("flwr")
    monkeypatch.chdir(tmp_path)
    _run("keygen", str(tmp_path))
    subst = {"KEY": str(tmp_path / "supernode.key"), "PUB": str(tmp_path / "supernode.pub"),
             "DIR": str(tmp_path / "other")}
    code, output = _run(*[subst.get(a, a) for a in args])
    assert code == 2, output
    assert len(output.strip().splitlines()) == 1 and "Traceback" not in output, output
    assert re.search(message, output), output
    assert not (tmp_path / "other").exists()


def test_help_shows_how_to_join_and_the_keygen_command() -> None:
    code, output = _run("--help")
    assert code == 0
    for text in ("--superlink", "--root-certificates", "--partition-id", "--num-partitions",
                 "--auth-key", "--speed", "keygen"):
        assert text in output, text
    code, output = _run("keygen", "--help")
    assert code == 0 and "flwr supernode register" in output and "--force" in output


def test_the_cli_reference_has_node_and_keygen() -> None:
    from mel_opt.cli.reference import cli_markdown

    text = cli_markdown()
    assert "## `melopt node`" in text and "## `melopt node keygen`" in text
