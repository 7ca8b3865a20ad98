"""Flower's connection file and the error of a federation or a run."""

from __future__ import annotations

import tomllib

from mel_opt.errors import MelOptError
from mel_opt.live.federation import LOCAL_FEDERATION
from mel_opt.live.flwr_cli import FederationError, write_flower_config


def test_the_local_connection_file(tmp_path):
    doc = tomllib.loads(write_flower_config(tmp_path, LOCAL_FEDERATION, "127.0.0.1:1234",
                                            insecure=True).read_text())
    assert doc["superlink"] == {"default": LOCAL_FEDERATION, LOCAL_FEDERATION: {
        "address": "127.0.0.1:1234", "insecure": True}}


def test_federation_errors_are_mel_opt_errors_with_exit_code_1():
    assert issubclass(FederationError, MelOptError) and FederationError.exit_code == 1
