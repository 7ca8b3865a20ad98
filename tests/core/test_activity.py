"""Progress from inside long work: the activity hook, a training run's cycles, the
catalogue's entries (what `melopt reproduce` shows beside its bar)."""

from __future__ import annotations

from pathlib import Path

from mel_opt import activity, api
from mel_opt.reproduce.catalogue import Claim, Context, Entry
from mel_opt.reproduce.report import run_entries
from mel_opt.training import TrainSettings, load_dataset, train


def test_reports_reach_the_innermost_hook_and_stop_after_it() -> None:
    outer: list[str] = []
    inner: list[str] = []
    activity.report("nobody listens")  # no hook: nothing happens, nothing raised
    assert not activity.listening()
    with activity.reporting(outer.append):
        activity.report("a")
        with activity.reporting(inner.append):
            assert activity.listening()
            activity.report("b")
        activity.report("c")
    activity.report("d")
    assert outer == ["a", "c"] and inner == ["b"]


def test_training_reports_every_cycle_of_every_scheme_and_seed() -> None:
    learners = [{"name": f"n{k}", "c2": 1e-3 * (1 + k), "c1": 1e-3, "c0": 0.5}
                for k in range(3)]
    inst = api.parse_instance({"problem": "mel-async", "schema_version": 1, "name": "tiny",
                               "cycle_time_s": 10.0, "total_samples": 300, "min_samples": 10,
                               "max_samples": 300, "learners": learners})
    seen: list[str] = []
    with activity.reporting(seen.append):
        train(inst, TrainSettings(schemes=("exact", "eta"), cycles=3, seeds=2,
                                  model="softmax"),
              data=load_dataset("digits", max_train=300, max_test=100))
    assert len(seen) == 2 * 2 * 3  # schemes x seeds x cycles
    assert seen[0] == "tiny: exact, seed 1/2, cycle 1/3"
    assert seen[-1] == "tiny: eta, seed 2/2, cycle 3/3"


def test_run_entries_announces_each_entry_before_its_own_reports(tmp_path: Path) -> None:
    events: list[str] = []

    def compute(ctx: Context) -> tuple[list[dict[str, int]], list[str]]:
        activity.report("point 1/1")
        return [{"x": 1}], []

    entry = Entry(id="t-1", paper="p", title="t", shows="s", columns=("x",), compute=compute,
                  judge=lambda rows: [Claim("c", "p", "o", True, "r")])
    with activity.reporting(lambda w: events.append(f"step {w}")):
        run_entries([entry, entry], tmp_path, Context(quick=True),
                    on_start=lambda e: events.append(f"start {e.id}"),
                    on_done=lambda e, o: events.append(f"done {e.id} {o.verdict}"))
    assert events == ["start t-1", "step point 1/1", "done t-1 reproduced"] * 2
