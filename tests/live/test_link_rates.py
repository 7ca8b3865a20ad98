"""Each node's link rate on shaped links, from the instance: worked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mel_opt import api
from mel_opt.errors import SettingError
from mel_opt.io.json_io import parse_json_text
from mel_opt.live.run import load_settings, node_link_rates
from mel_opt.live.settings import LiveOptions
from mel_opt.problems import get_problem
from mel_opt.training.mlp import init_params, layers_for

ROOT = Path(__file__).resolve().parents[2]


def mel_async(tmp_path: Path, c0: list[float]) -> Path:
    learners = [{"name": f"n{k}", "c2": 1e-3, "c1": 1e-4, "c0": v} for k, v in enumerate(c0)]
    doc = {"problem": "mel-async", "schema_version": 1, "name": "links", "cycle_time_s": 5.0,
           "total_samples": 100 * len(c0), "min_samples": 10, "max_samples": 100 * len(c0),
           "learners": learners}
    path = tmp_path / "links.json"
    path.write_text(json.dumps(doc))
    return path


def test_mel_async_rate_moves_the_model_both_ways_in_c0(tmp_path: Path) -> None:
    inst = api.parse_instance(json.loads(mel_async(tmp_path, [0.5, 0.25]).read_text()))
    cycle = get_problem("mel-async").learning
    assert cycle is not None
    # C0_k = 2 x 8 x model_bytes / R_k: 1000 bytes in 0.5 s both ways -> 32,000 bit/s
    assert np.allclose(cycle.link_rates(inst, 1000.0), [32_000.0, 64_000.0])


def test_dab_rate_is_eight_times_its_bandwidth() -> None:
    doc = parse_json_text((ROOT / "instances/dab/worked_example.json").read_text())
    inst = api.parse_instance(doc)
    cycle = get_problem("dab").learning
    assert cycle is not None
    assert np.allclose(cycle.link_rates(inst, 1.0), 8 * np.asarray(inst.bandwidth))


def test_the_instances_rates_are_the_default_and_kept_in_range() -> None:
    opts = LiveOptions(engine="netns")
    assert opts.link_rates(2, [2e6, 5e12]) == [2e6, 1e9]  # at most 1,000 Mbit/s
    assert opts.link_rates(2, None) == [16e6, 16e6]       # no rate in the file
    given = LiveOptions(engine="netns", link_rate=(4.0,))
    assert given.link_rates(2, [2e6, 3e6]) == [4e6, 4e6]  # --link-rate wins
    with pytest.raises(SettingError, match="one value or one per node"):
        LiveOptions(engine="netns", link_rate=(1.0, 2.0, 3.0)).link_rates(2)


def test_a_runs_nodes_get_their_learners_rates_for_the_runs_model(tmp_path: Path) -> None:
    settings = load_settings(mel_async(tmp_path, [0.5, 0.25, 0.1]), model="softmax")
    rates = node_link_rates(settings, LiveOptions(engine="netns", nodes=2), 2)
    # the softmax on the 8 x 8 digits: 64 x 10 weights and 10 biases in float32
    layers = layers_for("softmax", 64, 10)
    model_bytes = sum(a.nbytes for a in init_params(layers, 0, np.float32))
    assert model_bytes == 4 * (64 * 10 + 10)
    assert rates == pytest.approx([16 * model_bytes / 0.5, 16 * model_bytes / 0.25])
