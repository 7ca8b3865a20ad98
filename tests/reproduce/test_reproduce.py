"""melopt reproduce: registry, CLI, one quick end-to-end entry, verdict rules on hand-made rows."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest
from click.testing import CliRunner

from mel_opt.cli import cli
from mel_opt.reproduce import paper000, thesis001_ch3, thesis001_ch4
from mel_opt.reproduce.catalogue import (
    REPRODUCED,
    Claim,
    Entry,
    all_entries,
    missing_needs,
    verdict_of,
)
from mel_opt.reproduce.figures import have_matplotlib

EXPECTED = {"000-fig2", "001-fig3.2", "001-fig3.3", "001-fig3.6", "001-fig4.1", "001-fig4.6",
            "004-fig4-5"}
VERDICT = re.compile(r"^(reproduced(; not evaluable: .+)?|differs: .+|not evaluable: .+)$")


def test_registry_lists_every_entry_with_unique_ids() -> None:
    entries = all_entries()
    assert EXPECTED <= set(entries)
    assert len({e.id for e in entries.values()}) == len(entries)
    for key, e in entries.items():
        assert key == e.id and re.fullmatch(r"\d{3}-[\w.-]+", e.id)
        assert e.columns and e.title and e.shows and e.paper


def test_list_shows_the_catalogue() -> None:
    res = CliRunner().invoke(cli, ["reproduce", "--list"])
    assert res.exit_code == 0, res.output
    for i in EXPECTED:
        assert i in res.output


def test_unknown_id_exits_2_naming_the_known_ones() -> None:
    res = CliRunner().invoke(cli, ["reproduce", "no-such-fig", "--list"])
    assert res.exit_code == 2
    assert "no-such-fig" in res.output and "000-fig2" in res.output


def test_one_entry_end_to_end_quick(tmp_path) -> None:
    out = tmp_path / "rep"
    res = CliRunner().invoke(cli, ["reproduce", "001-fig3.6", "--quick", "-o", str(out)])
    assert res.exit_code == 0, res.output
    d = out / "001-fig3.6"
    doc = json.loads((d / "outcome.json").read_text())
    assert doc["id"] == "001-fig3.6" and VERDICT.match(doc["verdict"])
    assert doc["verdict"] == verdict_of([Claim(c["text"], c["paper"], c["ours"], c["ok"],
                                               c["rule"], c["unevaluable"])
                                         for c in doc["claims"]])
    with open(d / "table.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    # quick: the thesis's lowest and highest deadline (105 and 150 of CSA's 172 s), and 1.5 x
    assert [float(r["deadline_ratio"]) for r in rows] == [round(105 / 172, 4),
                                                         round(150 / 172, 4), 1.5]
    assert [r["thesis_deadline_s"] for r in rows] == ["105.0", "150.0", ""]
    assert rows[0]["paper_csa_truancy_pct"] == "63.0" and rows[1]["paper_csa_truancy_pct"] == ""
    assert (d / "claims.csv").exists()
    assert (d / "figure.png").exists() == have_matplotlib()
    report = (out / "report.md").read_text()
    assert "## 001-fig3.6" in report and doc["verdict"] in report


def test_unevaluable_claims_neither_hold_nor_fail() -> None:
    ok = Claim("a", "1", "1", True)
    bad = Claim("b", "2", "3", False)
    never = Claim("c", "95%", "-", False, unevaluable="no scheme reaches 95%")
    assert never.holds == "not evaluable" and not never.to_dict()["ok"]
    assert verdict_of([ok, never]) == "reproduced; not evaluable: c (no scheme reaches 95%)"
    assert verdict_of([ok, bad, never]).startswith("differs: b (paper 2, ours 3)")
    assert verdict_of([never]) == "not evaluable: c (no scheme reaches 95%)"


def test_verdict_text() -> None:
    ok = Claim("a", "1", "1", True)
    bad = Claim("trend", "falls", "rises 3 -> 5", False)
    assert verdict_of([ok]) == REPRODUCED
    assert verdict_of([ok, bad]) == "differs: trend (paper falls, ours rises 3 -> 5)"
    assert verdict_of([]).startswith("differs: ")


def _deadline_rows(dab: list[float], csa: list[float], dab_time: list[float],
                   csa_time: list[float]) -> list[dict]:
    ratios = (105 / 172, 120 / 172, 150 / 172)
    return [{"deadline_ratio": f, "deadline_s": 20.0 * f, "thesis_range": True,
             "dab_truancy_pct": a, "csa_truancy_pct": c, "dab_time_s": dt, "csa_time_s": ct}
            for f, a, c, dt, ct in zip(ratios, dab, csa, dab_time, csa_time, strict=True)]


def test_deadline_verdict_on_hand_made_rows() -> None:
    # DAB 3-4 % late under noise, its time x1.43 like the deadlines; CSA's time fixed at 100 s
    good = thesis001_ch3.judge_deadline(_deadline_rows(
        [3.0, 4.0, 4.0], [64.0, 43.0, 15.0], [63.0, 73.0, 90.0], [100.0, 100.0, 100.0]))
    assert verdict_of(good) == REPRODUCED
    # DAB 8 % late; its time flat (does not follow); CSA's time grows 30 % (it adapted)
    bad = thesis001_ch3.judge_deadline(_deadline_rows(
        [8.0, 4.0, 4.0], [20.0, 10.0, 5.0], [70.0, 70.0, 70.0], [70.0, 80.0, 91.0]))
    assert [c.ok for c in bad] == [False, False, False, False, False]
    text = verdict_of(bad)
    assert text.startswith("differs: ") and "8%" in text and "CSA 20% vs DAB 8%" in text


def _staleness_rows(opt_max: float, opt_avg: float, t15: float = 1.0,
                    zero_at: int | None = 10, eta_dip: float = 0.0) -> list[dict]:
    """Rows of 000-fig2: the paper's route and SAI at ``opt_max`` / ``opt_avg`` (plus ``t15``
    at T = 15 s), ETA growing with K (less ``eta_dip`` at K = 20), zero staleness at
    ``zero_at``; exact beside at zero (never judged)."""
    rows = []
    for T in (7.5, 15.0):
        extra = 0.0 if T == 7.5 else t15
        for K in (5, 10, 20):
            eta = {5: (1.0, 0.6), 10: (3.0, 1.0), 20: (4.0 - eta_dip, 1.5)}[K]
            zero = 1 if K == zero_at else 0
            for m, (mx, av) in ((paper000.ROUTE, (opt_max + extra, opt_avg)),
                                ("kkt-sai", (opt_max + extra, opt_avg)), ("eta", eta),
                                ("exact", (0.0, 0.0))):
                rows.append({"reading": "main", "T_s": T, "K": K, "method": m,
                             "max_staleness": mx, "avg_staleness": av,
                             "zero_staleness": zero if m == paper000.ROUTE else 0})
    return rows


def test_staleness_verdict_on_hand_made_rows() -> None:
    assert verdict_of(paper000.judge(_staleness_rows(1.0, 0.5))) == REPRODUCED
    claims = paper000.judge(_staleness_rows(0.0, 0.0))
    failed = [c.text for c in claims if not c.ok]
    assert failed == ["optimised average staleness at T = 7.5 s is 0.4-0.6 as K grows",
                      "optimiser at K = 20, T = 7.5 s"]


@pytest.mark.parametrize("kw, failing", [
    ({"opt_max": 1.8}, ["optimised max staleness at T = 7.5 s stays around 1",
                        "optimiser at K = 20, T = 7.5 s"]),
    ({"t15": -0.5}, ["more updates per cycle (T = 15 s) give more staleness"]),
    ({"zero_at": None}, ["for some K the optimiser finds zero staleness at both cycle times"]),
    # the endpoints still rise (1 -> 2), the curve does not: 3 at K = 10, then 2
    ({"eta_dip": 2.0}, ["ETA at K = 20, T = 7.5 s", "ETA's staleness grows with K at T = 7.5 s",
                        "ETA's staleness grows with K at T = 15 s"]),
])
def test_every_staleness_claim_can_fail(kw: dict, failing: list[str]) -> None:
    args = {"opt_max": 1.0, "opt_avg": 0.5, **kw}
    claims = paper000.judge(_staleness_rows(**args))
    assert [c.text for c in claims if not c.ok] == failing


def test_staleness_judges_the_papers_route_not_exact() -> None:
    rows = _staleness_rows(1.0, 0.5)
    for r in rows:  # exact far off everything the paper says: no claim moves
        if r["method"] == "exact":
            r.update(max_staleness=9.0, avg_staleness=9.0)
    assert verdict_of(paper000.judge(rows)) == REPRODUCED
    for r in rows:  # SAI away from the paper's route on the average only
        if r["method"] == "kkt-sai":
            r["avg_staleness"] = 1.0
    assert [c.text for c in paper000.judge(rows) if not c.ok] == [
        "SAI gives average staleness similar to the optimiser"]


def test_staleness_band_says_where_the_claim_holds() -> None:
    rows = _staleness_rows(1.8, 0.5)
    for r in rows:
        r.update(max_samples_factor=1.25, bits_per_pixel=8)
    rows += [{"reading": "band", "max_samples_factor": 1.3, "bits_per_pixel": b, "T_s": 7.5,
              "K": K, "method": paper000.ROUTE, "max_staleness": 1.0, "avg_staleness": 0.5}
             for b in (8, 32) for K in (5, 10, 20)]
    first = paper000.judge(rows)[0]
    assert not first.ok  # judged on the main reading
    assert "holds for 1.3 d/K 8-bit, 1.3 d/K 32-bit; not for 1.25 d/K 8-bit (1.8)" in first.ours


def test_med_gaps_worked_by_hand() -> None:
    rows = [{"learners": n, "scheme": s, "time_s": t, "satisfaction_pct": sat}
            for n, s, t, sat in ((4, "med", 18.0, 80.0), (4, "mmtt-uncertain", 20.0, 75.0),
                                 (10, "med", 9.0, 90.0), (10, "mmtt-uncertain", 10.0, 88.0))]
    t = thesis001_ch4.Table(rows, "learners")
    # time: relative to the worse scheme, (20 - 18) / 20 = 10%; satisfaction: points
    assert t.advantage("time_s", "med", "mmtt-uncertain") == [(4, pytest.approx(10.0)),
                                                              (10, pytest.approx(10.0))]
    assert t.advantage("satisfaction_pct", "med", "mmtt-uncertain") == [(4, 5.0), (10, 2.0)]
    claim = thesis001_ch4.up_to(t, "time_s", "med", "mmtt-uncertain", 11, "test")
    assert claim.ok  # 10% is within 11 +- a third
    assert not thesis001_ch4.up_to(t, "satisfaction_pct", "med", "mmtt-uncertain", 20,
                                   "test").ok  # 5 points < 20 x 2 / 3


def test_missing_needs_are_reported() -> None:
    e = Entry("999-x", "p", "t", "s", ("a",), lambda ctx: ([], []), lambda rows: [],
              needs=("no_such_module_for_mel_opt",))
    assert missing_needs(e) == ["no_such_module_for_mel_opt"]


def test_trend_rule_allows_a_saturated_scheme_only() -> None:
    def rows(ideal: tuple[float, float]) -> list[dict]:
        vals = {"mmtt-ideal": ideal, "med": (85.0, 93.0), "mmtt-uncertain": (70.0, 80.0)}
        return [{"learners": n, "scheme": s, "satisfaction_pct": v[i]}
                for s, v in vals.items() for i, n in enumerate((4, 10))]

    t = thesis001_ch4.trend
    assert t(thesis001_ch4.Table(rows((100.0, 100.0)), "learners"), "satisfaction_pct",
             True, "p").ok
    assert not t(thesis001_ch4.Table(rows((97.0, 97.0)), "learners"), "satisfaction_pct",
                 True, "p").ok


def _curve_rows(med: list[float], se: float) -> list[dict]:
    """Three schemes over learners 4, 7, 10; med's curve as given, the others rising."""
    vals = {"mmtt-ideal": [96.0, 98.0, 99.0], "med": med, "mmtt-uncertain": [70.0, 75.0, 80.0]}
    return [{"learners": n, "scheme": sc, "satisfaction_pct": v[i], "satisfaction_pct_se": se}
            for sc, v in vals.items() for i, n in enumerate((4, 7, 10))]


def test_trend_is_judged_over_the_whole_curve_within_its_noise() -> None:
    t = thesis001_ch4.trend
    Table = thesis001_ch4.Table
    # endpoints rise (80 -> 90) but the middle drops to 60: 20 points against the trend
    dip = t(Table(_curve_rows([80.0, 60.0, 90.0], se=1.0), "learners"), "satisfaction_pct",
            True, "p")
    assert not dip.ok and "against at 4->7" in dip.ours
    # the same dip inside the trials' noise (2 x hypot(8, 8) = 22.6 points) is no contradiction
    assert t(Table(_curve_rows([80.0, 60.0, 90.0], se=8.0), "learners"), "satisfaction_pct",
             True, "p").ok
    assert t(Table(_curve_rows([80.0, 85.0, 90.0], se=1.0), "learners"), "satisfaction_pct",
             True, "p").ok


def test_up_to_allows_a_third_either_way() -> None:
    rows = [{"learners": 4, "scheme": s, "time_s": t}
            for s, t in (("med", 55.5), ("mmtt-uncertain", 100.0), ("mmtt-ideal", 50.0))]
    t = thesis001_ch4.Table(rows, "learners")
    # med is 44.5 % faster than mmtt-uncertain: "up to 32 %" no longer passes (> 42.7)
    assert not thesis001_ch4.up_to(t, "time_s", "med", "mmtt-uncertain", 32, "s").ok
    assert thesis001_ch4.up_to(t, "time_s", "med", "mmtt-uncertain", 40, "s").ok
    assert not thesis001_ch4.up_to(t, "time_s", "med", "mmtt-uncertain", 70, "s").ok  # < 46.7


def test_satisfaction_claims_read_the_per_learner_column() -> None:
    claims = thesis001_ch4.judge_learners([
        {"learners": n, "scheme": s, "satisfaction_pct": 0.0,
         "learner_satisfaction_pct": {"mmtt-ideal": 99.0, "med": 90.0 + n,
                                      "mmtt-uncertain": 85.0 + n}[s]}
        for n in (4, 10) for s in thesis001_ch4.SCHEMES])
    by_text = {c.text: c for c in claims}
    assert by_text["learner_satisfaction_pct rises with learners"].ok is False  # ideal flat
    assert by_text["mmtt-ideal learner_satisfaction_pct at every point in [95, 100]"].ok
    assert "satisfaction_pct rises with learners" not in by_text


def _task_rows(reading: str, ideal_sat: float, with_time: bool = True) -> list[dict]:
    rows = []
    for m in (1, 3, 4):
        for s, t in (("mmtt-ideal", 25.0 + 5 * m), ("med", 37.0 + 2 * m),
                     ("mmtt-uncertain", 42.0 + 2 * m)):
            rows.append({"reading": reading, "tasks": m, "scheme": s,
                         "time_s": t if with_time else None,
                         "learner_satisfaction_pct": ideal_sat if s == "mmtt-ideal" else 80.0})
    return rows


def test_testbed_reading_is_judged_apart_and_only_where_it_has_answers() -> None:
    literal = _task_rows("literal", 100.0)
    judged = thesis001_ch4.judge_tasks(literal + _task_rows("testbed", 97.0))
    tagged = [c for c in judged if c.text.startswith("[testbed]")]
    assert tagged and len(tagged) == len(thesis001_ch4.judge_tasks(literal)) + 1
    imperfect = tagged[-1]
    assert imperfect.text.startswith("[testbed] MMTT-Ideal is imperfect") and imperfect.ok
    perfect = thesis001_ch4.judge_tasks(literal + _task_rows("testbed", 100.0))[-1]
    assert perfect.text.startswith("[testbed] MMTT-Ideal is imperfect") and not perfect.ok
    # a testbed reading without answers (infeasible deadlines) is not judged
    none = thesis001_ch4.judge_tasks(literal + _task_rows("testbed", 97.0, with_time=False))
    assert not [c for c in none if c.text.startswith("[testbed]")]


@pytest.mark.skipif(not have_matplotlib(), reason="matplotlib not installed")
def test_a_panel_without_finite_values_draws_without_a_legend_warning(tmp_path, recwarn):
    from mel_opt.reproduce.figures import Line, Panel, draw

    empty = Panel("never reached", "K", "cycles", [Line("ours", [1, 2], [None, math.nan])])
    full = Panel("reached", "K", "cycles", [Line("ours", [1, 2], [3.0, 4.0])])
    draw([empty, full], tmp_path / "fig.png")
    assert (tmp_path / "fig.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [w for w in recwarn if "legend" in str(w.message)]


def _sb_rows(medians: list[float], means: list[float]) -> list[dict]:
    return [{"shards": n, "sb_median": md, "sb_error_pct": mn, "flops_error_pct": 50.0,
             "flops_median": 50.0, "sb_lower_by_pct": (1 - md / 50.0) * 100}
            for n, md, mn in zip((2, 6, 10), medians, means, strict=True)]


def test_sb_claims_read_medians_not_means_pulled_by_outliers() -> None:
    # one trial at 10 shards took a loaded machine's hit: the mean rises, the median falls
    claims = thesis001_ch3.judge_sb(_sb_rows([5.0, 3.0, 2.0], [5.0, 3.0, 12.0]))
    assert verdict_of(claims) == REPRODUCED
    falls = thesis001_ch3.judge_sb(_sb_rows([2.0, 3.0, 5.0], [5.0, 3.0, 2.0]))
    assert [c.ok for c in falls] == [True, True, False, True]
    # the download entry judges the trend only; the links' levels are a note
    assert [c.text for c in thesis001_ch3.judge_download(_sb_rows([7.0, 5.0, 4.0],
                                                                  [7.0, 5.0, 4.0]))] == [
        "the error falls as the benchmark grows"]


def test_skipped_entries_name_the_extra_and_the_command(tmp_path, monkeypatch) -> None:
    import mel_opt.cli.reproduce as cli_reproduce

    def fake_missing(entry: Entry) -> list[str]:
        return ["train"] if "train" in entry.needs else []

    monkeypatch.setattr(cli_reproduce, "missing_needs", fake_missing)
    out = tmp_path / "rep"
    res = CliRunner().invoke(cli, ["reproduce", "004-fig4-5", "000-fig3", "-o", str(out)],
                             terminal_width=250)
    assert res.exit_code == 0, res.output
    assert "skipped: needs the train extra (pip install -e '.[train]' in a clone" in res.output
    report = (out / "report.md").read_text()
    assert "| 000-fig3 |" in report and "pip install 'mel_opt[train]'" in report
    assert "## 004-fig4-5" in report  # the entry that ran is in full


def test_list_names_the_extras_by_their_pip_names() -> None:
    res = CliRunner().invoke(cli, ["reproduce", "--list"], terminal_width=250)
    assert "train, plot" in res.output
    assert "needs" in res.output and "training, plot" not in res.output


def test_every_entry_has_an_expected_time_shown_by_list() -> None:
    entries = all_entries()
    for dataset in ("digits", "fashion-mnist"):
        assert all((e.expected(dataset) or 0) > 0 for e in entries.values())
    # an entry that trains nothing takes the same on both; a training entry has two times
    assert entries["000-fig2"].expected("fashion-mnist") == entries["000-fig2"].expected_s
    assert entries["000-fig3"].expected("fashion-mnist") != entries["000-fig3"].expected_s
    res = CliRunner().invoke(cli, ["reproduce", "--list"], terminal_width=300)
    for dataset in ("digits", "fashion-mnist"):  # the measured times, as --list shows them
        assert f"~{entries['000-fig3'].expected(dataset):g} s" in res.output
        total = sum(e.expected(dataset) or 0 for e in entries.values())
        assert f"about {total:.0f} s" in res.output
    assert "time (full), digits" in res.output and "--quick" in res.output


@pytest.mark.skipif(not have_matplotlib(), reason="matplotlib not installed")
def test_count_axes_get_whole_number_ticks_and_readable_labels() -> None:
    import matplotlib.pyplot as plt

    from mel_opt.reproduce.figures import Line, Panel, figure

    counts = Panel("cycles to target", "K (learners)", "cycle_time_s",
                   [Line("ours", [10, 15, 20], [3.2, 4.1, 5.0])])
    rates = Panel("by learning rate", "learning rate", "accuracy",
                  [Line("ours", [0.05, 0.1, 0.2], [0.9, 0.95, 0.96])])
    fig = figure([counts, rates])
    ax_counts, ax_rates = fig.axes[:2]
    assert all(float(t).is_integer() for t in ax_counts.get_xticks())
    assert ax_counts.get_ylabel() == "time of a global cycle [s]"
    assert not all(float(t).is_integer() for t in ax_rates.get_xticks())
    plt.close(fig)


def test_a_scheme_keeps_its_colour_when_another_has_no_value_and_log_axes_skip_zero() -> None:
    import matplotlib.pyplot as plt

    from mel_opt.reproduce.figures import Line, Panel, figure

    # "online" never reaches the target: "full-batch" must keep the third colour, not take
    # the second (the paper line between them takes none)
    secs = Panel("seconds to target", "partition", "seconds_to_target", [
        Line("closed-form", [0, 1], [50.0, 55.0]), Line("paper", [0, 1], [1.0, 1.0], paper=True),
        Line("online", [0, 1], [None, None]), Line("full-batch", [0, 1], [52.0, 54.0])],
        cases=["iid", "non-iid"])
    curve = Panel("accuracy over time", "virtual time [s]", "accuracy",
                  [Line("ours", [0.0, 10.0, 100.0], [0.1, 0.5, 0.9])], xlog=True)
    fig = figure([secs, curve])
    ax_secs, ax_curve = fig.axes[:2]
    colours = {ln.get_label(): ln.get_color() for ln in ax_secs.get_lines()}
    assert colours["closed-form"] == "C0" and colours["full-batch"] == "C2"
    assert "online" not in colours
    assert [t.get_text() for t in ax_secs.get_xticklabels()] == ["iid", "non-iid"]
    assert ax_curve.get_xscale() == "log"
    assert list(ax_curve.get_lines()[0].get_xdata()) == [10.0, 100.0]  # t = 0 left out
    plt.close(fig)
