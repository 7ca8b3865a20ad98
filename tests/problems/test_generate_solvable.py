"""``melopt generate`` refuses an instance its default method cannot solve (one short line:
the count and the worst learners), or raises the one parameter that fixes it with --adapt;
the capacity test against the exact method on either side of the threshold."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mel_opt.api import parse_instance
from mel_opt.cli.app import cli
from mel_opt.errors import InstanceError
from mel_opt.problems.base import round_up
from mel_opt.problems.mel_async.instance import solvable


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def _doc(T: float, c0: list[float] | None = None) -> dict[str, Any]:
    # C2 = 1/64 s per sample and update, C1 = 0: within T a learner takes at most
    # floor((T - C0) x 64) samples at one update; d = 300 over 3 learners, d_l = 10, d_u = 150
    c0 = c0 or [1.0, 1.0, 1.0]
    return {"problem": "mel-async", "schema_version": 1, "cycle_time_s": T,
            "total_samples": 300, "min_samples": 10, "max_samples": 150,
            "learners": [{"name": f"n{k}", "c2": 1 / 64, "c1": 0.0, "c0": c} for k, c in
                         enumerate(c0)]}


def test_capacity_by_hand() -> None:
    assert round_up(147.1723) == 147.2 and round_up(2.5625) == 2.563 and round_up(2.0) == 2.0
    assert solvable(_doc(2.5625)) is None  # 3 x floor(1.5625 x 64) = 3 x 100 = 300 samples
    short = solvable(_doc(1.5))  # 3 x floor(0.5 x 64) = 96 of 300
    assert short is not None and short.param == "cycle_time_s" and short.value == 2.563
    assert "the 3 learners can take 96 of the 300 samples at most within T = 1.5 s" in \
        short.message
    # one learner whose C0 leaves no time for d_l = 10 samples (10/64 + 2 > 1.5): named
    short = solvable(_doc(1.5, [1.0, 1.0, 2.0]))
    assert short is not None
    assert "1 of 3 learners cannot finish one update on d_l = 10 samples within T = 1.5 s " \
           "(slowest: 'n2' 2.156 s)" in short.message
    # with x = 64 T the capacity is 2 floor(x - 64) + floor(x - 128): 2 x 121 + 57 = 299 just
    # below x = 186, 2 x 122 + 58 = 302 at it: T = 186 / 64 = 2.90625, rounded up 2.907
    assert short.value == 2.907


def test_the_threshold_agrees_with_the_exact_method(tmp_path: Path) -> None:
    # just below the threshold (one step of the 4th digit) the exact method finds no
    # solution; at it, an optimum
    for T, status in ((2.562, "infeasible"), (2.563, "optimal")):
        path = tmp_path / f"t{T}.json"
        path.write_text(json.dumps(_doc(T)))
        code, text = _run("solve", str(path), "--json")
        assert json.loads(text)["status"] == status, text


def test_generate_refuses_in_one_short_line_and_adapts_when_asked(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    # 12 clients of 20 ms, unscaled (the reference declared as costly as the DNN): 0.06 s per
    # sample and update, 60,000 samples need far more than T = 15 s
    cap.write_bytes(pickle.dumps({f"c{i}": {"computation": 20.0 + i, "communication": 8000.0}
                                  for i in range(12)}))
    args = ["generate", "mel-async", "--preset", "fleet", "--learners", "12", "--param",
            f"trace=fedscale:{cap}", "--param", "reference_flops_per_sample=560880"]
    code, text = _run(*args)
    assert code == 2 and "Traceback" not in text and text.count("\n") == 1, text
    assert "12 of 12 learners cannot finish one update on d_l = 500 samples within T = 15 s " \
           "(slowest: 'c11'" in text and ", ...)" in text
    assert len(text) < 500 and "c5" not in text  # the worst three, not all twelve
    out = tmp_path / "adapted.json"
    code, text = _run(*args, "--adapt", "-o", str(out))
    assert code == 0, text
    assert "adapted: cycle_time_s = " in text
    T = json.loads(out.read_text())["cycle_time_s"]
    code, text = _run("solve", str(out), "--json")
    assert json.loads(text)["status"] == "optimal", text
    assert solvable(json.loads(out.read_text())) is None and T > 15


def test_dab_refuses_and_adapts_the_deadline(tmp_path: Path) -> None:
    # one client of 20 ms unscaled (reference = the TwoNN's 80,800 FLOPs): 30 s a shard and
    # pass, 8,000 kbit/s = 1,024,000 B/s; one shard: (161,920 + 1,568,000) / 1,024,000
    # + 5 x 30 + 161,920 / 1,024,000 = 151.8475 s > D = 15 s; 151.9 s lets it in
    cap = tmp_path / "cap"
    cap.write_bytes(pickle.dumps({"x": {"computation": 20.0, "communication": 8000.0}}))
    args = ["generate", "dab", "--preset", "fleet", "--learners", "1", "--param",
            f"trace=fedscale:{cap}", "--param", "reference_flops_per_sample=80800"]
    code, text = _run(*args)
    assert code == 2 and text.count("\n") == 1, text
    assert "none of the 1 learners can download, train (5 passes) and upload one shard before " \
           "D = 15 s (fastest: 'x' 151.8 s); it can from deadline_s = 151.9" in text
    out = tmp_path / "d.json"
    code, text = _run(*args, "--adapt", "-o", str(out))
    assert code == 0, text
    code, text = _run("solve", str(out), "--json")
    assert json.loads(text)["solution"]["shards"] == [1], text


def test_many_failing_learners_make_one_short_validation_issue() -> None:
    doc = {**_doc(1.05), "total_samples": 400,
           "learners": [{"name": f"n{k}", "c2": 1 / 64, "c1": 0.0, "c0": 1.0 + k / 100}
                        for k in range(40)]}
    with pytest.raises(InstanceError) as err:
        parse_instance(doc, "<many>")
    text = str(err.value)
    assert "40 of 40 learners cannot finish one update on min_samples = 10 within " \
           "cycle_time_s = 1.05 (infeasible cycle time); the slowest need: learners[39] " \
           "'n39' 1.546 s, learners[38] 'n38' 1.536 s, learners[37] 'n37' 1.526 s, ..." in text
    assert len(text) < 400, text
