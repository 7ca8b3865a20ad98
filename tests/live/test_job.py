"""A live run's job (mel_opt.live.run.check, LiveJob, live): the instance parsed once on this
machine, the node speeds solved once, the link rates where they apply, all kept in the job the
engines run. No engine starts here: the engines are stood in for."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from mel_opt import api
from mel_opt.errors import SettingError
from mel_opt.live import run as R
from mel_opt.live.settings import LiveOptions
from mel_opt.problems.base import Instance


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Every parse of an instance document from now on (its source)."""
    seen: list[str | None] = []
    real = api.parse_instance

    def counted(doc: Any, source: str | None = None, name: str | None = None) -> Instance:
        seen.append(source)
        return real(doc, source, name)

    monkeypatch.setattr(api, "parse_instance", counted)
    return seen


@pytest.fixture
def engines(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The engines stood in for: what each was handed."""
    ran: dict[str, Any] = {}
    monkeypatch.setattr(R, "_simulation",
                        lambda settings, nodes, out, say, speeds=None, instance=None,
                        schedule=None:
                        ran.update(engine="simulation", settings=settings, nodes=nodes,
                                   speeds=speeds, instance=instance, schedule=schedule))
    monkeypatch.setattr(R, "_deployment", lambda job, out, say:
                        ran.update(engine=job.options.engine, job=job))
    return ran


def test_the_job_holds_the_instance_parsed_once(tmp_path: Path, mel_async_file: Any,
                                                parses: list[str | None],
                                                engines: dict[str, Any]) -> None:
    path = mel_async_file(3, 0.5)
    job = R.load_job(path, LiveOptions(engine="simulation"), rounds=1, model="softmax")
    assert parses == [str(path)]  # once, naming the file in its errors
    assert isinstance(job, R.LiveJob)
    assert job.instance.name == "live3" and job.spec.name == "mel-async"
    assert job.nodes == 3 and job.speeds is None and job.link_rates is None
    assert job.settings.instance["name"] == "live3"  # the document the server will parse
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.nodes = 2  # type: ignore[misc]
    R.live(job, tmp_path / "out")
    assert parses == [str(path)]  # the run parses nothing again
    assert engines["engine"] == "simulation" and engines["nodes"] == 3
    assert engines["instance"] is job.instance  # the server app gets it parsed
    assert engines["settings"].grace_s is not None  # the engine's own grace filled in


def test_the_job_reads_the_availability_once_and_the_engine_gets_it(
        tmp_path: Path, mel_async_file: Any, engines: dict[str, Any]) -> None:
    import pickle

    trace = tmp_path / "behave"  # n1 offline from 5 to 10 s of every 10 s; n0, n2 never
    trace.write_bytes(pickle.dumps({f"n{k}": {"active": [0.0], "inactive": [5.0 if k == 1
                                                                          else 10.0],
                                              "finish_time": 10.0} for k in range(3)}))
    job = R.load_job(mel_async_file(3, 0.5), LiveOptions(engine="simulation"), rounds=1,
                     model="softmax", availability=f"fedscale:{trace}")
    assert job.schedule is not None and "by name" in job.schedule.matched
    assert job.schedule.offline(7.0) == {1} and job.schedule.offline(12.0) == set()
    R.live(job, tmp_path / "out")
    assert engines["schedule"] is job.schedule


def test_the_instances_speeds_are_solved_once_and_run_as_solved(
        tmp_path: Path, mel_async_file: Any, monkeypatch: pytest.MonkeyPatch,
        engines: dict[str, Any]) -> None:
    solved: list[int] = []
    real = R.instance_speeds

    def counted(settings: Any, nodes: int, instance: Any = None) -> list[float]:
        solved.append(nodes)
        assert instance is not None  # the job's, not parsed again
        return real(settings, nodes, instance)

    monkeypatch.setattr(R, "instance_speeds", counted)
    settings = R.load_settings(mel_async_file(2, 0.8), rounds=1, model="softmax",
                               max_train=400, max_test=100)
    job = R.check(settings, LiveOptions(engine="simulation", speeds=("instance",)))
    assert solved == [2] and job.speeds is not None and max(job.speeds) == 1.0
    R.live(job, tmp_path / "out")
    assert solved == [2]  # not solved again by the run
    assert engines["speeds"] == list(job.speeds)


def test_given_speeds_and_the_local_engine(tmp_path: Path, mel_async_file: Any,
                                           engines: dict[str, Any]) -> None:
    settings = R.load_settings(mel_async_file(3, 0.5), rounds=1, model="softmax")
    job = R.check(settings, LiveOptions(engine="local", nodes=2, speeds="1,0.5"))
    assert job.nodes == 2 and job.speeds == (1.0, 0.5) and job.link_rates is None
    R.live(job, tmp_path / "out")
    assert engines["engine"] == "local" and engines["job"].speeds == (1.0, 0.5)
    assert engines["job"].settings.grace_s is not None


def test_the_netns_job_holds_each_nodes_link_rate(mel_async_file: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import mel_opt.live.netns as netns

    monkeypatch.setattr(netns, "require", lambda: None)  # root and iproute2 not needed here
    settings = R.load_settings(mel_async_file(3, 0.5), rounds=1, model="softmax")
    job = R.check(settings, LiveOptions(engine="netns", nodes=2, link_rate=(4.0,)))
    assert job.link_rates == (4e6, 4e6)


def test_what_cannot_run_is_refused_before_a_job_is_made(mel_async_file: Any) -> None:
    settings = R.load_settings(mel_async_file(3, 0.5), rounds=1, model="softmax")
    with pytest.raises(SettingError, match="between 1 and the instance's 3 learners"):
        R.check(settings, LiveOptions(engine="simulation", nodes=4))
    with pytest.raises(SettingError, match="one value or one per node"):
        R.check(settings, LiveOptions(engine="local", speeds="1,0.5"))
