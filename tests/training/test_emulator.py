"""The training emulator end to end: virtual clocks, FedAvg, determinism, files, the CLI."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt import api
from mel_opt.cli import cli
from mel_opt.errors import UsageError
from mel_opt.training import TrainSettings, load_dataset, read_idx, train, write_outputs
from mel_opt.training.data import load_idx_dir
from mel_opt.training.local import make_schedule
from mel_opt.training.mlp import MLP, layers_for
from mel_opt.training.partition import make_pools, parse_partition
from mel_opt.training.report import interval, summarise

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=400, max_test=200)


def _mel_async(K: int = 4, T: float = 10.0, same: bool = False) -> Any:
    learners = [{"name": f"n{k}", "c2": 1e-3 if same else 1e-3 * (1 + k), "c1": 1e-3,
                 "c0": 0.5} for k in range(K)]
    return api.parse_instance({"problem": "mel-async", "schema_version": 1, "name": "t",
                               "cycle_time_s": T, "total_samples": 400 * K // 4,
                               "min_samples": 10, "max_samples": 400, "learners": learners})


def _noisy(inst: Any, cv: float) -> Any:
    """The dab instance with every learner's run-to-run time_cv set to ``cv``."""
    return dataclasses.replace(inst, time_cv=np.full(inst.K, cv))


def test_digits_is_the_sklearn_set() -> None:
    ds = load_dataset("digits")
    assert ds.x_train.shape[0] + ds.x_test.shape[0] == 1797 and ds.features == 64
    assert ds.classes == 10 and 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    assert abs(ds.x_test.shape[0] - 0.2 * 1797) <= 10


def test_mel_async_cycles_last_T_and_learning_happens(digits: Any) -> None:
    inst = _mel_async()
    run = train(inst, TrainSettings(schemes=("exact", "eta"), cycles=3, seeds=2,
                                    model="softmax", lr=0.5), data=digits)
    assert not run.infeasible
    for r in run.rows:
        assert r["time_s"] == pytest.approx(r["cycle"] * 10.0)
        assert r["truancy"] is None
    last = [r for r in run.rows if r["cycle"] == 3]
    assert all(r["accuracy"] > 0.6 for r in last)  # ten classes: chance is 0.1


def test_sync_with_equal_data_is_plain_federated_averaging(digits: Any) -> None:
    inst = _mel_async(same=True)
    sol = api.solve(inst, "sync").solution
    assert len(set(sol["d"])) == 1 and len(set(sol["tau"])) == 1
    run = train(inst, TrainSettings(schemes=("sync",), cycles=2, seeds=1, model="twonn",
                                    dtype="float64", lr=0.2, batch_size=16), data=digits)
    # the same federated averaging written plainly: MLP objects, sgd_pass, a uniform mean
    rng = np.random.default_rng([0, 7])
    x, y = digits.x_train, digits.y_train
    n = x.shape[0] // 4
    pools = make_pools(y, np.full(4, n), parse_partition("iid"), 10, rng)
    layers = layers_for("twonn", 64, 10)
    glob = MLP(layers, seed=0, dtype=np.float64)
    for cycle in (1, 2):
        sched = make_schedule(pools, np.array(sol["tau"]), 16, rng)
        nets = []
        for k in range(4):
            net = MLP(layers, seed=0, dtype=np.float64)
            net.weights = [w.copy() for w in glob.weights]
            net.biases = [b.copy() for b in glob.biases]
            order = sched.index[k][sched.weight[k] > 0].reshape(sol["tau"][k], n)
            for perm in order:
                net.sgd_pass(x[perm], y[perm], lr=0.2, batch_size=16)
            nets.append(net)
        glob.weights = [np.mean([m.weights[i] for m in nets], axis=0) for i in range(3)]
        glob.biases = [np.mean([m.biases[i] for m in nets], axis=0) for i in range(3)]
        row = next(r for r in run.rows if r["cycle"] == cycle)
        assert row["loss"] == pytest.approx(glob.loss(digits.x_test, digits.y_test), abs=1e-10)


def test_same_seed_same_numbers(digits: Any) -> None:
    inst = _noisy(api.load_instance(ROOT / "instances/dab/mnist_ffn_testbed.json"), 0.1)
    s = TrainSettings(schemes=("dab", "csa"), cycles=2, seeds=2, model="softmax")
    a, b = train(inst, s, data=digits), train(inst, s, data=digits)
    assert a.rows == b.rows
    by_seed = [[(r["loss"], r["time_s"]) for r in a.rows if r["seed"] == k and r["cycle"] > 0]
               for k in (0, 1)]
    assert by_seed[0] != by_seed[1]  # another seed: other shuffles and other time noise


def test_dab_cycle_ends_with_the_last_update(digits: Any) -> None:
    inst = api.load_instance(ROOT / "instances/dab/mnist_ffn_testbed.json")
    run = train(inst, TrainSettings(schemes=("dab", "csa"), cycles=2, seeds=1,
                                    model="softmax"), data=digits)
    for scheme in ("dab", "csa"):
        sol = api.solve(inst, scheme).solution
        a = np.asarray(sol["shards"])
        passes = np.asarray(sol.get("tau") or [inst.iterations] * inst.K)
        # thesis Eq. (3.4) by hand: (Om + Od a)/b + mu a / c + Om / b, over learners used
        eta = ((inst.model_bytes + inst.shard_bytes * a) / inst.bandwidth
               + passes * a / inst.train_rate + inst.model_bytes / inst.bandwidth)
        t = float(eta[a > 0].max())
        rows = [r for r in run.rows if r["scheme"] == scheme and r["cycle"] > 0]
        assert [r["time_s"] for r in rows] == pytest.approx([t, 2 * t])
        assert all(r["truancy"] == 0.0 for r in rows)  # no noise: the deadline holds
    noisy = train(_noisy(inst, 0.3), TrainSettings(schemes=("dab",), cycles=6, seeds=2,
                                                   model="softmax"), data=digits)
    tru = [r["truancy"] for r in noisy.rows if r["cycle"] > 0]
    assert min(tru) >= 0.0 and max(tru) > 0.0  # noise pushes some cycles past D


def test_feel_rounds_last_the_model_latency(digits: Any) -> None:
    inst = api.load_instance(ROOT / "instances/feel/ren2021_cpu_densenet121_k6.json")
    schemes = ("closed-form", "online", "full-batch", "random-batch", "individual",
               "model-based", "gradient-based")
    run = train(inst, TrainSettings(schemes=schemes, cycles=3, seeds=1, model="softmax"),
                data=digits)
    for scheme in ("closed-form", "online", "full-batch"):
        res = api.solve(inst, scheme)
        lat = res.metrics["round_latency_s"]  # the feel verifier's own number
        times = [r["time_s"] for r in run.rows if r["scheme"] == scheme]
        assert times == pytest.approx([0.0, lat, 2 * lat, 3 * lat], rel=1e-9)
    rb = [r["time_s"] for r in run.rows if r["scheme"] == "random-batch"]
    steps = np.diff(rb)
    assert len(set(np.round(steps, 6))) == 3  # redrawn every round: three different latencies
    for s in schemes:
        assert any(r["scheme"] == s and r["cycle"] == 3 for r in run.rows)
    # model-based FEEL: a local epoch of 6 CPU devices then the parameters up and down;
    # its rounds are all equally long, and longer than a one-sample gradient round
    mb = np.diff([r["time_s"] for r in run.rows if r["scheme"] == "model-based"])
    on = np.diff([r["time_s"] for r in run.rows if r["scheme"] == "online"])
    assert np.allclose(mb, mb[0]) and mb[0] > on[0]


def test_an_infeasible_scheme_is_reported_and_the_others_run(tmp_path: Path,
                                                              digits: Any) -> None:
    doc = json.loads((ROOT / "instances/dab/worked_example.json").read_text())
    doc["total_shards"] = 10_000  # far more than one learner can train before the deadline
    f = tmp_path / "dab.json"
    f.write_text(json.dumps(doc))
    run = train(api.load_instance(f), TrainSettings(schemes=("csa", "dab"), cycles=1, seeds=1,
                                                    model="softmax"), data=digits)
    assert "csa" in run.infeasible and run.schemes == ["dab"]
    summary = write_outputs(run, tmp_path / "out")
    assert summary["infeasible"]["csa"] and list(summary["schemes"]) == ["dab"]
    res = CliRunner().invoke(cli, ["train", str(f), "--schemes", "csa,dab", "--cycles", "1",
                                   "--seeds", "1", "--model", "softmax", "-o",
                                   str(tmp_path / "cli")])
    assert res.exit_code == 0 and "scheme csa has no allocation" in res.output
    res = CliRunner().invoke(cli, ["train", str(f), "--schemes", "csa", "--cycles", "1",
                                   "-o", str(tmp_path / "none")])
    assert res.exit_code == 1 and "nothing was trained" in res.output


def test_summary_cycles_seconds_intervals_and_speedup(digits: Any) -> None:
    run = train(_mel_async(), TrainSettings(schemes=("exact",), cycles=1, seeds=1,
                                            model="softmax"), data=digits)
    run.rows = []
    for scheme, hits in (("a", (2, 4)), ("b", (1, 1))):  # cycle of first hit per seed
        for seed, hit in enumerate(hits):
            for c in range(6):
                run.rows.append({"scheme": scheme, "seed": seed, "cycle": c, "time_s": 10.0 * c,
                                 "loss": 1.0, "accuracy": 0.99 if c >= hit else 0.5,
                                 "truancy": None})
    run.settings = TrainSettings(schemes=("a", "b"), seeds=2, targets=(0.9,))
    s = summarise(run)
    a = s["schemes"]["a"]["targets"]["0.9"]
    assert a["reached"] == "2/2" and a["cycles"]["mean"] == 3.0
    # t(0.975, 1) = 12.706; sd of (2, 4) = sqrt(2); half width 12.706 * sqrt(2) / sqrt(2)
    assert a["cycles"]["hi"] - 3.0 == pytest.approx(12.7062047, rel=1e-6)
    assert s["schemes"]["b"]["targets"]["0.9"]["speedup"] == pytest.approx(3.0)
    assert interval([]) == {"mean": None, "lo": None, "hi": None, "n": 0}


def _write_idx(path: Path, arr: np.ndarray, code: int, compress: bool) -> None:
    head = bytes([0, 0, code, arr.ndim]) + b"".join(int(n).to_bytes(4, "big")
                                                  for n in arr.shape)
    blob = head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()
    if compress:
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(blob))
    else:
        path.write_bytes(blob)


def test_idx_reader_on_written_files(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (30, 4, 3)).astype(np.uint8)
    labels = rng.integers(0, 10, 30).astype(np.uint8)
    _write_idx(tmp_path / "train-images-idx3-ubyte", imgs[:20], 0x08, True)
    _write_idx(tmp_path / "train-labels-idx1-ubyte", labels[:20], 0x08, False)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte", imgs[20:], 0x08, False)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte", labels[20:], 0x08, True)
    floats = np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32)
    _write_idx(tmp_path / "f.idx", floats, 0x0D, False)
    assert np.array_equal(read_idx(tmp_path / "f.idx"), floats)
    assert np.array_equal(read_idx(tmp_path / "train-images-idx3-ubyte.gz"), imgs[:20])
    ds = load_idx_dir(tmp_path)
    assert ds.x_train.shape == (20, 12) and ds.x_test.shape == (10, 12)
    assert np.allclose(ds.x_train * 255, imgs[:20].reshape(20, 12))
    assert np.array_equal(ds.y_test, labels[20:])
    assert load_dataset(f"idx:{tmp_path}").x_train.shape == (20, 12)
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(UsageError, match="magic"):
        read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(bytes([0, 0, 8, 1, 0, 0, 0, 9, 1, 2]))
    with pytest.raises(UsageError, match="needs 9"):
        read_idx(tmp_path / "short")
    with pytest.raises(UsageError, match="does not exist"):
        load_dataset(f"idx:{tmp_path / 'none'}")


def test_a_training_run_records_the_blas_kernels_that_ran(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from threadpoolctl import threadpool_info

    inst = str(ROOT / "instances/mel-async/k10_T15.json")
    blas = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    assert blas  # numpy is loaded by now
    for env, forced in ((None, None), ("Haswell", "OPENBLAS_CORETYPE=Haswell")):
        if env is None:
            monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
        else:
            monkeypatch.setenv("OPENBLAS_CORETYPE", env)
        out = tmp_path / str(env)
        res = CliRunner().invoke(cli, ["train", inst, "--schemes", "exact", "--cycles", "1",
                                       "--seeds", "1", "--model", "softmax", "-o", str(out)])
        assert res.exit_code == 0, res.output
        got = json.loads((out / "summary.json").read_text())["blas"]
        # numpy's own BLAS first (the one it was built against), whatever else is loaded
        built = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["version"]
        mine = [lib for lib in blas if lib["version"] == built]
        assert len(mine) == 1
        others = [{"library": lib["internal_api"], "version": lib["version"],
                   "architecture": lib["architecture"]}
                  for lib in threadpool_info() if lib.get("user_api") == "blas"
                  and lib["filepath"] != mine[0]["filepath"]]
        assert got == {"library": mine[0]["internal_api"], "version": built,
                       "architecture": mine[0]["architecture"], "forced_by": forced,
                       "also_loaded": others}
        assert f"{mine[0]['architecture']} kernels" in res.output
        assert ("in the environment" in res.output) == (forced is not None)


def test_cli_writes_files_and_rejects_bad_input(tmp_path: Path) -> None:
    inst = str(ROOT / "instances/mel-async/k10_T15.json")
    out = tmp_path / "o"
    res = CliRunner().invoke(cli, ["train", inst, "--schemes", "exact,eta", "--cycles", "2",
                                   "--seeds", "2", "--model", "softmax", "--lr", "0.5",
                                   "--target", "0.5,0.8", "-o", str(out)])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader((out / "train.csv").open()))
    assert len(rows) == 2 * 2 * 3 and rows[0]["scheme"] == "exact"
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["schemes"]) == {"exact", "eta"}
    assert set(summary["schemes"]["eta"]["targets"]) == {"0.5", "0.8"}
    assert (out / "train.png").stat().st_size > 0 and "exact" in res.output
    bad = {
        ("--schemes", "exact,nope"): "unknown scheme 'nope'",
        ("--schemes", "exact", "--target", "0"): "(0, 1]",
        ("--schemes", "exact", "--cycles", "0"): "--cycles",
        ("--schemes", "exact", "--model", "resnet"): "unknown model",
        ("--schemes", "exact", "--dataset", "cifar"): "unknown dataset",
        ("--schemes", "exact", "--dataset", "idx:/no/such/dir"): "does not exist",
        ("--schemes", "exact", "--partition", "dirichlet:-2"): "dirichlet",
    }
    for args, text in bad.items():
        r = CliRunner().invoke(cli, ["train", inst, *args, "-o", str(tmp_path / "x")])
        assert r.exit_code == 2, (args, r.output)
        assert text in r.output and "Traceback" not in r.output
        assert len(r.output.strip().splitlines()) == 1
