"""Validation of med instance files: every issue with its JSON path, one clear message each."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.api import parse_instance
from mel_opt.cli import cli
from mel_opt.errors import InstanceError
from mel_opt.problems.med.generate import generate


@pytest.fixture
def good():
    return generate("mays2023", learners=4, tasks=2, seed=3)


def _bad(doc, match):
    with pytest.raises(InstanceError, match=match) as info:
        parse_instance(doc, "x.json")
    return info.value


def test_generated_instance_parses_with_thesis_numbers(good):
    inst = parse_instance(good)
    assert inst.n_tasks == 2 and inst.n_learners == 4 and inst.n_states == 3
    # softmax(one_hot / 0.5): e^2 / (e^2 + 2) = 0.78699..., 1 / (e^2 + 2) = 0.10650...
    peak = np.exp(2) / (np.exp(2) + 2)
    assert np.allclose(np.sort(inst.probs, axis=1)[:, -1], peak)
    assert np.allclose(inst.shard_bytes, 500 * 784 * 4)
    assert inst.iterations.tolist() == [2, 1]
    assert inst.deadline.tolist() == [55.0, 40.0]  # thesis Table 4.1
    assert np.all((inst.price >= 0.1) & (inst.price <= 1.5))
    assert not inst.probs.flags.writeable and not inst.train_rate.flags.writeable


def test_unknown_fields_are_errors_meta_is_free(good):
    doc = copy.deepcopy(good)
    doc["meta"] = {"by": "a tool"}
    assert parse_instance(doc).n_learners == 4
    doc["learners"][0]["colour"] = "red"
    _bad(doc, r"learners\[0\]\.colour: unknown field 'colour'")


def test_probabilities_must_sum_to_one(good):
    doc = copy.deepcopy(good)
    doc["learners"][2]["state_probs"] = [0.5, 0.3, 0.1]
    err = _bad(doc, r"learners\[2\]\.state_probs: probabilities must sum to 1, got 0\.9")
    assert len(err.issues) == 1


def test_negative_rate_is_rejected(good):
    doc = copy.deepcopy(good)
    doc["learners"][1]["train_rate"][1][0] = -3.0
    err = _bad(doc, r"learners\[1\]\.train_rate\[1\]\[0\]: must be positive, got -3")
    assert len(err.issues) == 1


def test_fewer_learners_than_tasks(good):
    doc = copy.deepcopy(good)
    doc["learners"] = doc["learners"][:1]
    err = _bad(doc, r"learners: 1 learners for 2 tasks: .* n >= m is required")
    assert len(err.issues) == 1


def test_rates_must_match_the_task_count(good):
    doc = copy.deepcopy(good)
    doc["learners"][3]["train_rate"] = doc["learners"][3]["train_rate"][:1]
    err = _bad(doc, r"learners\[3\]\.train_rate: must have one row per task \(2\), got 1")
    assert len(err.issues) == 1


def test_every_issue_is_reported_at_once(good):
    doc = copy.deepcopy(good)
    doc["budget"] = float("nan")
    doc["tasks"][0]["shards"] = 2.5
    doc["learners"][0]["bandwidth_Bps"] = [1.0, 2.0]
    doc["learners"][1]["price"] = -1
    err = _bad(doc, "4 problems")
    paths = [i.path for i in err.issues]
    assert paths == ["budget", "tasks[0].shards", "learners[0].bandwidth_Bps", "learners[1].price"]


def test_too_many_minimum_shards(good):
    doc = copy.deepcopy(good)
    doc["min_shards_per_learner"] = 30  # 4 * 30 = 120 > 60 + 60 = 120? no: equal is fine
    parse_instance(doc)
    doc["min_shards_per_learner"] = 31
    _bad(doc, r"min_shards_per_learner: n \* D_l = 4 \* 31 = 124 exceeds the 120 shards")


def test_duplicate_names_and_bad_states(good):
    doc = copy.deepcopy(good)
    doc["states"] = ["idle", "idle", "x"]
    doc["tasks"][1]["name"] = doc["tasks"][0]["name"]
    err = _bad(doc, "duplicate")
    assert [i.path for i in err.issues] == ["states[1]", "tasks[1].name"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["learners"][0].update(state_probs=[0.2, 0.2, 0.2]),
     r"learners\[0\]\.state_probs: probabilities must sum to 1"),
    (lambda d: d["learners"][0]["train_rate"][0].__setitem__(1, -1),
     r"learners\[0\]\.train_rate\[0\]\[1\]: must be positive"),
    (lambda d: d.update(learners=d["learners"][:1]), r"1 learners for 2 tasks"),
    (lambda d: d["learners"][0].update(train_rate=[[1, 1, 1]]),
     r"learners\[0\]\.train_rate: must have one row per task \(2\), got 1"),
])
def test_cli_rejects_bad_input_with_exit_code_2(tmp_path, good, edit, message):
    doc = copy.deepcopy(good)
    edit(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    for args in (["solve", str(path)], ["simulate", str(path), "--trials", "2"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 2, res.output
        assert "Traceback" not in res.output
        assert len([ln for ln in res.stderr.splitlines() if ln.startswith("error:")]) == 1
        assert pytest.importorskip("re").search(message, res.stderr)


def test_testbed_preset_is_mays2023_slowed_by_the_documented_calibration() -> None:
    from mel_opt.problems.med.generate import BANDWIDTH, generate

    plain = generate("mays2023", learners=5, tasks=2, seed=4, params={"experiment": "tasks"})
    slow = generate("mays2023-testbed", learners=5, tasks=2, seed=4)
    assert [t["deadline_s"] for t in slow["tasks"]] == [60.0, 45.0]  # the tasks experiment
    for a, b in zip(plain["learners"], slow["learners"], strict=True):
        assert a["state_probs"] == b["state_probs"] and a["price"] == b["price"]
        # idle / downloading rates x 0.201; the training state's 1.90 shards/s x 0.201
        np.testing.assert_allclose(b["train_rate"], [[5.6 * 0.201, 1.90 * 0.201, 5.6 * 0.201],
                                                     [4.1 * 0.201, 1.90 * 0.201, 4.1 * 0.201]])
        assert b["bandwidth_Bps"] == pytest.approx(
            [0.201 * BANDWIDTH, 0.201 * BANDWIDTH, 0.201 * BANDWIDTH / 2], rel=1e-6)
    assert slow["description"].startswith("Preset mays2023-testbed: rates and bandwidths")
    learners = generate("mays2023-testbed", learners=5, tasks=2, seed=4,
                        params={"experiment": "learners"})
    assert [t["deadline_s"] for t in learners["tasks"]] == [55.0, 40.0]
