"""The Flower app directory: any run config round-trips through its ``pyproject.toml``, and
values TOML cannot hold are refused."""

from __future__ import annotations

import math
import tomllib

import pytest

from mel_opt.live.appdir import write_app_dir


def test_the_app_dir_round_trips_any_run_config(tmp_path):
    nasty = '{"a": "it\'s \\"quoted\\"\\n", "tab": "\\t", "unicode": "é ∑ 😀", "bell": "\x07"}'
    config = {"melopt-settings": nasty, "nodes": 3, "lr": 0.05, "tiny": 1e-300,
              "big": 2**62, "flag": True, "off": False, "weird key.with dot": "x",
              "multi": "line one\nline two\r\n'single' \"double\" \\ back", "inf": math.inf}
    app = write_app_dir(tmp_path / "app", config)
    doc = tomllib.loads((app / "pyproject.toml").read_text(encoding="utf-8"))
    assert doc["tool"]["flwr"]["app"]["config"] == config
    assert doc["tool"]["flwr"]["app"]["components"] == {
        "serverapp": "mel_opt.live.server:server_app",
        "clientapp": "mel_opt.live.client:client_app"}
    assert doc["project"]["name"] and doc["project"]["version"]
    assert doc["tool"]["flwr"]["app"]["publisher"]


@pytest.mark.parametrize("value", [2**63, None, [1, 2], "\ud800"],
                         ids=["int64", "none", "list", "surrogate"])
def test_values_toml_cannot_hold_are_refused(tmp_path, value):
    with pytest.raises((ValueError, TypeError)):
        write_app_dir(tmp_path, {"key": value})

