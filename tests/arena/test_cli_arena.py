"""``melopt arena`` end to end: the table, the CSV and the JSON agree; bad options exit 2."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt.cli.app import cli
from mel_opt.stats import mean_interval

INSTANCE = "instances/mel-async/k5_T15.json"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp("arena")
    res = CliRunner().invoke(cli, ["arena", INSTANCE, "-o", str(out), "--seeds", "2",
                                   "--cycles", "4", "--model", "softmax",
                                   "--target", "0.5,0.85,0.999"])
    assert res.exit_code == 0, res.output
    return res.output, out


def test_table_csv_and_json_agree(outputs: tuple[str, Path]) -> None:
    text, out = outputs
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["schemes"]) == ["exact", "deadline", "oort", "fedbuff", "fedprox",
                                        "staggered", "fill", "equal-data"]
    with (out / "arena.csv").open() as f:
        rows = list(csv.DictReader(f))
    runs: dict[str, dict[str, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        runs[r["scheme"]][r["seed"]].append(r)
    assert set(runs) == set(summary["schemes"])
    for scheme, seeds in runs.items():
        entry = summary["schemes"][scheme]
        for target, t in entry["targets"].items():
            # the first time each seed's accuracy reaches the target, read from the CSV
            hits = [next((float(r["time_s"]) for r in rs
                          if int(r["step"]) > 0 and float(r["accuracy"]) >= float(target)),
                         None) for rs in seeds.values()]
            reached = [h for h in hits if h is not None]
            assert t["reached"] == f"{len(reached)}/2"
            iv = mean_interval(reached)
            if reached:
                assert t["seconds"]["mean"] == pytest.approx(iv.mean, rel=1e-6)
                # the CSV's times are rounded: two close seeds' interval (t quantile 12.7
                # at one degree of freedom) carries that to about 1e-4 s
                assert t["seconds"]["hi"] - t["seconds"]["lo"] == pytest.approx(
                    2 * (iv.half_width or 0.0), rel=1e-6, abs=1e-3)
            else:
                assert t["seconds"]["mean"] is None
        finals = [float(rs[-1]["accuracy"]) for rs in seeds.values()]
        assert entry["final_accuracy"]["mean"] == pytest.approx(np.mean(finals), rel=1e-6)
        assert all(float(rs[-1]["time_s"]) <= summary["horizon_s"] + 1e-9
                   for rs in seeds.values())
        # the cumulative columns never fall
        for rs in seeds.values():
            assert np.all(np.diff([float(r["bytes"]) for r in rs]) >= 0)
            assert np.all(np.diff([float(r["idle_s"]) for r in rs]) >= -1e-9)
    # 2 paired seeds never bound a 95 % sign interval: no winner is declared, and the
    # verdict says why
    for target, who in summary["winners"].items():
        assert who is None
        assert f"target {target}: {summary['verdicts'][target]}" in text
    assert summary["verdicts"]["0.999"].startswith("no scheme reaches it")
    for rs in next(iter(runs.values())).values():
        assert np.all(np.diff([float(r["busy_s"]) for r in rs]) >= 0)
        assert np.all(np.diff([float(r["updates"]) for r in rs]) >= 0)
    assert "fedbuff" in text and (out / "arena.png").exists() == (summary["figure"] is not None)


@pytest.mark.parametrize(("args", "flag"), [
    (["--participation", "0"], "--participation"),
    (["--schemes", "exact,nope"], "--schemes"),
    (["--seeds", "0"], "--seeds"),
])
def test_bad_option_one_line_exit_2(tmp_path: Path, args: list[str], flag: str) -> None:
    res = CliRunner().invoke(cli, ["arena", INSTANCE, "-o", str(tmp_path), *args])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in res.output
