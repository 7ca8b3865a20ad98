"""The aggregation rules and the attacks, worked by hand on tiny vectors.

Every model here is one layer of a few numbers, stacked over the learners; the expected
values are computed in the comments.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mel_opt.errors import UsageError
from mel_opt.problems.aggregate import Rule, combine, krum_choice, parse_rule
from mel_opt.problems.attacks import Attack, apply_lie, choose_liars, parse_attack


def stack(*rows: list[float], dtype: type = np.float64) -> list[np.ndarray]:
    return [np.array(rows, dtype=dtype)]


START = [np.zeros(2)]


def test_the_mean_is_the_weighted_mean() -> None:
    # (1 x [0, 0] + 3 x [4, 8]) / 4 = [3, 6]
    got = combine(stack([0, 0], [4, 8]), [1, 3], START, "mean")
    assert got.model is not None and got.model[0].tolist() == [3.0, 6.0] and not got.notes


def test_the_mean_accumulates_in_float64() -> None:
    # float32 max is 3.40e38: 3e38 + 3e38 overflows a float32 sum, their mean does not
    got = combine(stack([3e38], [3e38], dtype=np.float32), [1, 1], [np.zeros(1, np.float32)],
                  "mean")
    assert got.model is not None and got.model[0].dtype == np.float32
    assert got.model[0][0] == pytest.approx(3e38, rel=1e-6)


def test_a_non_finite_update_is_left_out_and_a_non_finite_aggregate_not_taken() -> None:
    got = combine(stack([1, 1], [math.nan, 0], [3, 3]), [1, 1, 1], START, "mean")
    assert got.model is not None and got.model[0].tolist() == [2.0, 2.0]
    assert got.notes == {1: "left out: its model has non-finite values"}
    # nothing finite: no model, the reason given
    none = combine(stack([math.inf, 0]), [1], START, "mean")
    assert none.model is None and "previous model is kept" in (none.kept or "")
    # a float32 reply of 1e39 is inf: left out, the others make the mean
    with np.errstate(over="ignore"):
        big = np.array([[1e39], [2.0]]).astype(np.float32)
    cast = combine([big], [1, 1],
                   [np.zeros(1, np.float32)], "mean")
    assert cast.model is not None and cast.model[0].tolist() == [2.0] and list(cast.notes) == [0]


def test_a_fedbuff_step_that_is_not_finite_keeps_the_model() -> None:
    from mel_opt.schemes.fedbuff import FedBuffBuffer

    # float32: 3e38 + 1 x 3e38 / 1 = 6e38 is past float32's 3.4e38
    buf = FedBuffBuffer(1)
    buf.add([np.array([3e38], np.float32)], staleness=0)
    model = [np.array([3e38], np.float32)]
    assert buf.flush(model)[0].tolist() == [np.float32(3e38)] and "not finite" in (buf.kept or "")
    # a robust rule on the buffered deltas: the median of 2 x [1], [2], [100] (staleness 0)
    med = FedBuffBuffer(3, rule="median")
    for d in (1.0, 2.0, 100.0):
        med.add([np.array([d])], staleness=0)
    # model + lr x n x centre / K = 10 + 3 x 2 / 3
    assert med.flush([np.array([10.0])])[0].tolist() == [12.0] and med.kept is None


def test_norm_clips_an_update_far_from_the_start() -> None:
    # distances from [0, 0]: 1, 1, 2, 50 -> median 1.5, bound 3 x 1.5 = 4.5; the liar's
    # [0, 50] becomes [0, 4.5]; the mean is ([1,0] + [0,1] + [2,0] + [0,4.5]) / 4
    got = combine(stack([1, 0], [0, 1], [2, 0], [0, 50]), [1, 1, 1, 1], START, "norm")
    assert got.model is not None
    assert got.model[0] == pytest.approx([0.75, 5.5 / 4])
    assert list(got.notes) == [3] and "clipped" in got.notes[3] and "3 x the median 1.5" in \
        got.notes[3]
    # no one far out: the papers' mean exactly
    honest = combine(stack([1, 0], [0, 1], [2, 0]), [1, 2, 1], START, "norm")
    assert honest.model is not None and not honest.notes
    assert honest.model[0] == pytest.approx([3 / 4, 2 / 4])
    # a bound of its own: C = 1.2 -> 1.8 < 2 clips [2, 0] to [1.8, 0] as well
    own = combine(stack([1, 0], [0, 1], [2, 0], [0, 50]), [1, 1, 1, 1], START, "norm:1.2")
    assert own.model is not None and sorted(own.notes) == [2, 3]
    assert own.model[0] == pytest.approx([(1 + 1.8) / 4, (1 + 1.8) / 4])


def test_median_and_trimmed_mean_are_coordinate_wise() -> None:
    models = stack([1, 10], [2, 30], [3, 20], [100, -100], [4, 40])
    # per coordinate: sorted [1,2,3,4,100] -> 3; [-100,10,20,30,40] -> 20
    med = combine(models, [9, 1, 1, 1, 1], START, "median")  # unweighted
    assert med.model is not None and med.model[0].tolist() == [3.0, 20.0]
    # beta 0.2 of 5: one dropped at each end -> mean of [2,3,4] = 3, of [10,20,30] = 20
    tr = combine(models, [1] * 5, START, "trimmed:0.2")
    assert tr.model is not None and tr.model[0] == pytest.approx([3.0, 20.0])
    # beta 0.1 of 5 drops none: the plain mean [22, 0]
    plain = combine(models, [1] * 5, START, "trimmed")
    assert plain.model is not None and plain.model[0] == pytest.approx([22.0, 0.0])


def test_krum_picks_the_model_closest_to_its_neighbours() -> None:
    # n = 5, f = 1: n - f - 2 = 2 nearest. Points on a line: 0, 1, 2, 3, 100.
    # squared distances to the 2 nearest: 0 -> 1+4=5; 1 -> 1+1=2; 2 -> 1+1=2; 3 -> 1+4=5;
    # 100 -> 97^2+98^2. Least: 1 (first of the tie with 2)
    x = np.array([[0.0], [1.0], [2.0], [3.0], [100.0]])
    assert krum_choice(x, 1) == (1, 1)
    got = combine([x], [1] * 5, [np.zeros(1)], "krum:1")
    assert got.model is not None and got.model[0].tolist() == [1.0]
    assert sorted(got.notes) == [0, 2, 3, 4]
    # f too large for n = 5 (needs n > 2f + 2): capped at (5 - 3) // 2 = 1
    assert krum_choice(x, 7) == (1, 1) and krum_choice(x) == (1, 1)
    assert krum_choice(x[:1]) == (0, 0)


@pytest.mark.parametrize("text,words", [
    ("mode", "not an aggregation rule"), ("norm:0.5", "finite number >= 1"),
    ("norm:inf", "finite number >= 1"), ("trimmed:0.5", "[0, 0.5)"), ("krum:1.5", "whole"),
    ("median:2", "takes no value"), ("trimmed:x", "not a number")])
def test_bad_rules_are_refused(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=None) as e:
        parse_rule(text)
    assert words in str(e.value)


def test_rules_parse() -> None:
    assert parse_rule("NORM:2") == Rule("norm", 2.0) and parse_rule(None) == Rule("norm")
    assert parse_rule("krum").text == "krum" and Rule("trimmed", 0.25).text == "trimmed:0.25"


# -- attacks ----------------------------------------------------------------------------------
def test_the_lies() -> None:
    w, s = [np.array([3.0, -1.0])], [np.array([1.0, 1.0])]
    assert apply_lie("scale", 10.0, w, s)[0].tolist() == [30.0, -10.0]
    # s - (w - s) = [1 - 2, 1 + 2]
    assert apply_lie("sign", None, w, s)[0].tolist() == [-1.0, 3.0]
    assert apply_lie("stale", None, w, s, stale=[np.array([7.0, 7.0])])[0].tolist() == [7, 7]
    n = apply_lie("noise", 2.0, [np.zeros(20000)], [np.zeros(20000)],
                  np.random.default_rng(0))[0]
    assert abs(n.std() - 2.0) < 0.05 and abs(n.mean()) < 0.05
    # the model's dtype is kept (a float32 reply stays float32)
    assert apply_lie("scale", 2.0, [np.ones(2, np.float32)], s)[0].dtype == np.float32


def test_an_attack_replaces_only_the_liars_rows_from_its_round() -> None:
    att = Attack("stale", None, frozenset({1}), start_round=2)
    start = [np.array([0.5])]
    trained = [np.array([[1.0], [2.0], [3.0]])]
    assert att.lie([0, 1, 2], trained, start, 1) is trained  # before its round: honest
    got = att.lie([0, 1, 2], trained, start, 2)
    assert got[0].ravel().tolist() == [1.0, 0.5, 3.0]
    # stale: the model of its first lying round, not the later start
    later = att.lie([2, 1], [np.array([[3.0], [9.0]])], [np.array([4.0])], 3)
    assert later[0].ravel().tolist() == [3.0, 0.5]


def test_liars_are_chosen_and_bad_values_refused() -> None:
    assert choose_liars(4, 0.0, None, 0) == frozenset()
    assert choose_liars(4, 0.0, (1, 3), 0) == frozenset({1, 3})
    picked = choose_liars(100, 0.1, None, 3)
    assert len(picked) == 10 and picked == choose_liars(100, 0.1, None, 3)
    assert len(choose_liars(100, 0.001, None, 0)) == 1  # a fraction > 0: one at least
    with pytest.raises(UsageError, match="learner 4 is out of range"):
        choose_liars(4, 0.0, (0, 4), 0)
    for bad in ("scale:inf", "scale:nan", "scale", "noise:-1", "flip", "sign:2"):
        with pytest.raises(UsageError):
            parse_attack(bad)
    assert parse_attack("scale:1e3") == ("scale", 1000.0) and parse_attack("sign") == (
        "sign", None)


def test_a_cycle_whose_aggregate_is_not_finite_keeps_its_start_and_says_so() -> None:
    from mel_opt.problems.learning import CyclePlan, LearnerPlan, Reply
    from mel_opt.problems.mel_async.learning import MelAsyncCycle

    plan = CyclePlan((LearnerPlan(0, 5, 1, 1.0, 8.0), LearnerPlan(1, 5, 1, 3.0, 9.0)))
    cycle = MelAsyncCycle()
    start = [np.array([0.5, 0.5])]
    agg = cycle.aggregate(plan, [Reply(0, 8.0), Reply(1, 9.0)],
                          [np.array([[math.nan, 0.0], [math.inf, 1.0]])], start, "mean")
    assert agg.model[0].tolist() == [0.5, 0.5] and agg.model[0] is not start[0]
    assert "previous model is kept" in (agg.kept or "") and sorted(agg.notes) == [0, 1]
    # one finite: it alone is the mean, the other's note by its learner
    one = cycle.aggregate(plan, [Reply(0, 8.0), Reply(1, 9.0)],
                          [np.array([[math.nan, 0.0], [2.0, 1.0]])], start, "mean")
    assert one.model[0].tolist() == [2.0, 1.0] and one.kept is None and list(one.notes) == [0]


def test_fedbuffs_norm_bound_reads_the_latest_updates_lengths() -> None:
    from mel_opt.schemes.fedbuff import FedBuffBuffer

    # a buffer of 2: the step's own median would be the mean of the two lengths. The latest
    # lengths are 1, 1, 1 (first step: [1, 0], [0, 1]; second: [1, 0], then [0, 100]):
    # median of [1, 1, 1, 100] = 1, bound 3 -> [0, 100] enters as [0, 3]
    buf = FedBuffBuffer(2, rule="norm")
    buf.add([np.array([1.0, 0.0])], staleness=0)
    buf.add([np.array([0.0, 1.0])], staleness=0)
    assert buf.flush([np.zeros(2)])[0].tolist() == [0.5, 0.5] and not buf.notes
    buf.add([np.array([1.0, 0.0])], staleness=0)
    buf.add([np.array([0.0, 100.0])], staleness=0)
    # 0 + (1 / 2) ([1, 0] + [0, 3])
    assert buf.flush([np.zeros(2)])[0] == pytest.approx([0.5, 1.5])
    assert list(buf.notes) == [1] and "above 3 x the median 1 of the latest 4" in buf.notes[1]
