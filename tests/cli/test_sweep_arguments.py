"""Every argument of `melopt sweep` is checked before any work: one line naming the option,
exit code 2, no internal error, nothing solved."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mel_opt.cli import cli


@pytest.mark.parametrize("args, words", [
    (["--learners", "abc"], "--learners: 'abc' is not a whole number"),
    (["--learners", "99999999999999999999"], "--learners: 99999999999999999999 must lie in"),
    (["--learners", "5:100000000"], "has 99,999,996 values; at most 10,000"),
    (["--learners", "0:2"], "--learners: 0 must lie in [1,"),
    (["--learners", "5", "--param", "cycle_time_s=7.5", "--param", "cycle_time_s=15"],
     "--param cycle_time_s is given twice"),
    (["--learners", "5:6", "--facet", "nope"], "--facet 'nope' is neither"),
    (["--learners", "5:6", "--metric", "max_staleness", "--plot", "out.txt"],
     "--plot 'out.txt': the figure's format comes from its suffix"),
    (["--learners", "5", "--param", "cycle_time_s=1:1000000"], "--param cycle_time_s: range"),
])
def test_bad_sweep_arguments_exit_2_before_any_work(tmp_path: Path, args: list[str],
                                                    words: str) -> None:
    out = tmp_path / "sw"
    res = CliRunner().invoke(cli, ["sweep", "mel-async", *args, "-o", str(out)])
    assert res.exit_code == 2, res.output
    assert words in res.output and "internal error" not in res.output
    assert not out.exists() or not any(out.iterdir())
