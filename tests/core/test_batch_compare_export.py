"""Batch runs (mixed good/bad files, kill and resume, Ray), compare, export, sweep and plot."""

from __future__ import annotations

import contextlib
import csv
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import mel_opt
from mel_opt.batch import run_batch
from mel_opt.cli import cli
from mel_opt.problems import all_problems

MELOPT = [sys.executable, "-c", "from mel_opt.cli import main; main()"]

K3 = {"problem": "mel-async", "schema_version": 1, "cycle_time_s": 12.0, "total_samples": 17,
      "min_samples": 1, "max_samples": 17,
      "learners": [{"name": "a", "c2": 0.1, "c1": 0, "c0": 2.0},
                   {"name": "b", "c2": 0.2, "c1": 0, "c0": 2.0},
                   {"name": "c", "c2": 0.5, "c1": 0, "c0": 2.0}]}


def _write(path: Path, doc) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))


def _good_docs():
    """One generated instance of every problem that has a generator (picks up new problems)."""
    docs = {}
    for name, spec in all_problems().items():
        if spec.generate is not None:
            preset = spec.presets[0] if spec.presets else None
            docs[name] = spec.generate(preset, learners=4, tasks=2 if name == "med" else None,
                                       seed=1, params={})
    return docs


def _read_summary(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_batch_mixed_directory(tmp_path):
    root = tmp_path / "in"
    good = _good_docs()
    for name, doc in good.items():
        _write(root / name / "good.json", doc)
    _write(root / "bad" / "malformed.json", "{oops")
    _write(root / "bad" / "invalid.json", {**K3, "min_samples": -1})
    infeasible = {**K3, "cycle_time_s": 2.5, "total_samples": 40, "max_samples": 40}
    _write(root / "bad" / "infeasible.json", infeasible)
    res = CliRunner().invoke(cli, ["batch", str(root), "-o", str(tmp_path / "out"), "-j", "2"])
    assert res.exit_code == 1, res.output  # something failed
    rows = _read_summary(tmp_path / "out" / "summary.csv")
    assert len(rows) == len(good) + 3
    by_file = {Path(r["file"]).relative_to(root).as_posix(): r for r in rows}
    for name in good:
        r = by_file[f"{name}/good.json"]
        assert r["status"] in ("optimal", "locally_optimal", "feasible"), r
        assert r["feasible"] == "True"
    assert by_file["bad/malformed.json"]["status"] == "invalid"
    assert "malformed JSON" in by_file["bad/malformed.json"]["error"]
    assert by_file["bad/invalid.json"]["status"] == "invalid"
    assert "min_samples" in by_file["bad/invalid.json"]["error"]
    assert by_file["bad/infeasible.json"]["status"] == "infeasible"
    for r in rows:
        json.loads(Path(r["result_file"]).read_text())  # every result file is valid JSON


def test_batch_methods_and_resume_skips_done(tmp_path):
    root = tmp_path / "in"
    for i in range(3):
        _write(root / f"k3_{i}.json", {**K3, "total_samples": 15 + i})
    rep = run_batch(root, tmp_path / "out", methods=["exact", "eta"])
    assert len(rep.rows) == 6 and rep.skipped == 0 and not rep.failures
    rep2 = run_batch(root, tmp_path / "out", methods=["exact", "eta"], resume=True)
    assert rep2.skipped == 6 and len(rep2.rows) == 6
    # an edited instance is solved again
    _write(root / "k3_0.json", {**K3, "total_samples": 14})
    rep3 = run_batch(root, tmp_path / "out", methods=["exact", "eta"], resume=True)
    assert rep3.skipped == 4


def test_batch_unknown_method_is_usage_error(tmp_path):
    _write(tmp_path / "in" / "a.json", K3)
    res = CliRunner().invoke(cli, ["batch", str(tmp_path / "in"), "-o", str(tmp_path / "o"),
                                   "--methods", "nonsense"])
    assert res.exit_code == 2 and "nonsense" in res.output


def test_batch_killed_then_resumed(tmp_path):
    root = tmp_path / "in"
    for i in range(60):
        spec_doc = all_problems()["mel-async"].generate("random", learners=200, seed=i,
                                                        params={})
        _write(root / f"r{i:02d}.json", spec_doc)
    out = tmp_path / "out"
    args = [*MELOPT, "batch", str(root), "-o", str(out), "-j", "2", "--methods",
            "exact,kkt-sai,eta"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    results = out / "results"
    deadline = time.time() + 60
    while time.time() < deadline:
        if results.exists() and len(list(results.glob("*.json"))) >= 10:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list(results.glob("*.json")))
    assert 0 < done_before < 180, "the kill must land mid-run"
    for p in results.glob("*.json"):
        json.loads(p.read_text())  # nothing half-written
    res = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    rows = _read_summary(out / "summary.csv")
    assert len(rows) == 180
    assert all(r["feasible"] == "True" for r in rows)
    for p in results.glob("*.json"):
        json.loads(p.read_text())
    assert f"resuming: {done_before}" in res.stderr or "resuming:" in res.stderr


def test_ray_executor_matches_local(tmp_path):
    pytest.importorskip("ray")
    root = tmp_path / "in"
    for i in range(6):
        _write(root / f"k3_{i}.json", {**K3, "total_samples": 12 + i})
    local = run_batch(root, tmp_path / "local", methods=["exact", "sync"], jobs=2)
    remote = run_batch(root, tmp_path / "ray", methods=["exact", "sync"], jobs=2,
                       executor="ray")
    import ray

    try:
        listening = _listening_sockets()
    finally:
        ray.shutdown()
    # the Ray that melopt started serves this machine only
    assert any(name.startswith(("raylet", "gcs_server")) for name, _, _ in listening), listening
    exposed = [s for s in listening if not _is_loopback(s[1])]
    assert exposed == [], exposed

    def key(rows):
        return sorted((r["instance"], r["method"], r["status"], r["objective"], r["key_metrics"])
                      for r in rows)

    assert key(local.rows) == key(remote.rows)


def _is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def _listening_sockets() -> list[tuple[str, str, int]]:
    """(process name, address, port) of every listening socket of this process and its
    descendants (the processes of a local Ray)."""
    import psutil  # a dependency of Ray

    me = psutil.Process()
    pids = {me.pid} | {c.pid for c in me.children(recursive=True)}
    found = set()
    for conn in psutil.net_connections("inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            with contextlib.suppress(psutil.Error):
                found.add((psutil.Process(conn.pid).name(), conn.laddr.ip, conn.laddr.port))
    return sorted(found)


def test_compare_exact_best_with_gaps(tmp_path):
    _write(tmp_path / "k3.json", K3)
    res = CliRunner().invoke(cli, ["compare", str(tmp_path / "k3.json"), "--json"])
    assert res.exit_code == 0, res.output
    body = json.loads(res.output)
    assert body["reference"] == "exact" and body["reference_is_proven"]
    gaps = {r["method"]: r["gap_abs"] for r in body["results"]}
    # hand-worked in test_mel_async_known: exact 0, ETA max staleness 12
    assert gaps["exact"] == 0 and gaps["eta"] == 12
    table = CliRunner().invoke(cli, ["compare", str(tmp_path / "k3.json"),
                                     "--methods", "exact,eta"])
    assert "exact (best)" in table.output and "12" in table.output


@pytest.mark.parametrize("fmt", ["lp", "mps", "nl", "gms"])
def test_export_formats(tmp_path, fmt):
    _write(tmp_path / "k3.json", K3)
    target = tmp_path / f"m.{fmt}"
    res = CliRunner().invoke(cli, ["export", str(tmp_path / "k3.json"), "--format", fmt,
                                   "-m", "ipopt", "-o", str(target)])
    assert res.exit_code == 0, res.output
    text = target.read_text()
    assert "tau" in text or fmt == "nl"
    names = sorted(p.name for p in tmp_path.iterdir())
    labels = ["m.col", "m.row"] if fmt == "nl" else []  # NL's symbolic label files
    assert names == sorted(["k3.json", target.name, *labels])


def test_exported_integer_model_solved_by_scip(tmp_path):
    scip = pytest.importorskip("pyscipopt")
    _write(tmp_path / "k3.json", K3)
    res = CliRunner().invoke(cli, ["export", str(tmp_path / "k3.json"), "--format", "lp",
                                   "-m", "exact", "-o", str(tmp_path / "k3.lp")])
    assert res.exit_code == 0, res.output
    m = scip.Model()
    m.hideOutput()
    m.readProblem(str(tmp_path / "k3.lp"))
    m.optimize()
    assert m.getStatus() == "optimal"
    exact = mel_opt.solve(mel_opt.parse_instance(K3), "exact")
    assert m.getObjVal() == pytest.approx(exact.objective, abs=1e-6)


def test_sweep_and_plot(tmp_path):
    out = tmp_path / "sw"
    res = CliRunner().invoke(cli, [
        "sweep", "mel-async", "--preset", "mohammad2020", "--learners", "5:7",
        "--param", "cycle_time_s=7.5,15", "--seeds", "2", "--methods", "exact,eta",
        "--metric", "max_staleness", "-o", str(out)])
    assert res.exit_code == 0, res.output
    with open(out / "sweep.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * 2 * 2 * 2
    assert {r["cycle_time_s"] for r in rows} == {"7.5", "15"}
    png = out / "max_staleness.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = CliRunner().invoke(cli, ["plot", str(out / "sweep.csv"), "--x", "learners", "--y",
                                   "avg_staleness", "--facet", "cycle_time_s", "-o",
                                   str(tmp_path / "a.svg")])
    assert res.exit_code == 0, res.output
    assert "<svg" in (tmp_path / "a.svg").read_text()[:500]


def test_sweep_evaluate_med_simulation(tmp_path):
    out = tmp_path / "ev"
    res = CliRunner().invoke(cli, [
        "sweep", "med", "--preset", "mays2023", "--learners", "4:5", "--tasks", "2",
        "--seeds", "1", "--evaluate", "--trials", "3", "--cycles", "2",
        "--metric", "drop_rate", "-o", str(out)])
    assert res.exit_code == 0, res.output
    with open(out / "evaluation.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    # 2 instances x 3 schemes x 3 trials, each with the thesis metrics
    assert len(rows) == 2 * 3 * 3
    assert {r["method"] for r in rows} == {"med", "mmtt-uncertain", "mmtt-ideal"}
    assert all(r["learners"] in ("4", "5") for r in rows)
    ideal = [float(r["drop_rate"]) for r in rows if r["method"] == "mmtt-ideal"]
    assert ideal and max(ideal) <= 1e-9  # re-solved with the true states: nothing dropped
    assert (out / "drop_rate.png").read_bytes()[:4] == b"\x89PNG"
    bad = CliRunner().invoke(cli, ["sweep", "mel-async", "--learners", "3:4", "--evaluate",
                                   "-o", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "no evaluation" in bad.output
