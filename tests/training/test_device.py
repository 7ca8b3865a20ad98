"""``--device cuda``: the emulator's GPU path, run on the CPU through the strict device.

The strict device (``conftest.py``) behaves as CuPy does where it matters: its arrays refuse
implicit conversion to numpy, host arrays mixed into device work, and any function CuPy does
not have. The GPU path of ``melopt train``, ``melopt arena`` (a synchronous scheme, FedBuff,
FedProx, the allocation) and the FEEL step runs on it here and must give the CPU path's rows
on the same seeds within the stated float32 tolerance (:func:`mel_opt.training.device.
rows_differ`: losses within ``LOSS_RTOL`` relative, accuracies within ``ACCURACY_SAMPLES``
test samples, everything else equal). The refusals (no CuPy, CuPy without a GPU) are one line
and exit code 2. ``benchmarks/bench_gpu.py`` runs the same comparison on a real GPU.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from mel_opt import api
from mel_opt.arena.run import arena
from mel_opt.arena.settings import ArenaSettings
from mel_opt.cli import cli
from mel_opt.errors import SettingError
from mel_opt.training import TrainSettings, load_dataset, train
from mel_opt.training import device as dev
from mel_opt.training.local import broadcast, evaluate, local_sgd, make_schedule
from mel_opt.training.mlp import init_params, layers_for

pytestmark = pytest.mark.timeout(600)
ROOT = Path(__file__).resolve().parents[2]
MEL_ASYNC = ROOT / "instances/mel-async/k10_T15.json"
FEEL = ROOT / "instances/feel/ren2021_cpu_densenet121_k6.json"
REFUSED = ("error: --device cuda needs the gpu extra: pip install -e '.[gpu]' in a clone, or "
           "pip install 'mel_opt[gpu]'; with CUDA 13 drivers pip install cupy-cuda13x instead")


@pytest.fixture(scope="module")
def digits() -> Any:
    return load_dataset("digits", max_train=500, max_test=200).astype(np.dtype("float32"))


def _agree(cpu: list[dict[str, Any]], gpu: list[dict[str, Any]], samples: int) -> None:
    assert len(cpu) > 2
    assert dev.rows_differ(cpu, gpu, samples) == []


# ---- the strict device has CuPy's teeth ------------------------------------------------------

def test_the_strict_device_refuses_what_cupy_refuses(strict_cuda: Any) -> None:
    a = strict_cuda.asarray(np.arange(6.0).reshape(2, 3))
    host = np.ones((2, 3))
    for bad in (lambda: np.asarray(a), lambda: np.exp(a), lambda: np.sum(a),
                lambda: a + host, lambda: host * a, lambda: a[np.array([0])],
                lambda: strict_cuda.matmul(a, host.T), lambda: strict_cuda.take(
                    a, strict_cuda.asarray(np.array([0])), axis=0, mode="clip")):
        with pytest.raises(TypeError):
            bad()
    with pytest.raises(AttributeError):  # not a function the trainer may use on CuPy
        strict_cuda.nonzero(a)
    assert float((a * 2.0).sum()) == 30.0  # scalars and explicit transfers are fine
    assert strict_cuda.asnumpy(a[:, 1]).tolist() == [1.0, 4.0]


def test_a_silent_fallback_to_numpy_fails_on_the_strict_device(
        strict_cuda: Any, digits: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The teeth on the trainer itself: were the MLP to compute with numpy whatever its arrays
    (a path that never reached the device), training on the strict device fails."""
    import mel_opt.mlp as model

    cuda = dev.get_device("cuda")
    p = init_params(layers_for("twonn", digits.features, digits.classes), 0, np.float32)
    sched = make_schedule([np.arange(40), np.arange(40, 90)], np.array([1, 2]), 16,
                          np.random.default_rng(0), np.float32)
    local_sgd(broadcast(p, 2, cuda), digits.x_train, digits.y_train, sched, 0.1, device=cuda)
    monkeypatch.setattr(model, "array_module", lambda *a: np)
    with pytest.raises(TypeError):
        local_sgd(broadcast(p, 2, cuda), digits.x_train, digits.y_train, sched, 0.1,
                  device=cuda)


# ---- the same numbers ------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["softmax", "twonn", "mlp000", "svm"])
def test_local_sgd_and_evaluate_on_the_device_match_the_host(
        strict_cuda: Any, digits: Any, model: str) -> None:
    cuda = dev.get_device("cuda")
    p = init_params(layers_for(model, digits.features, digits.classes), 3, np.float32)
    samples = [np.arange(k * 60, k * 60 + 20 + 10 * k) for k in range(5)]
    sched = make_schedule(samples, np.array([2, 1, 0, 3, 1]), 16, np.random.default_rng(1),
                          np.float32)
    x, y = digits.x_train, digits.y_train
    host = local_sgd(broadcast(p, 5), x, y, sched, 0.2)
    gpu = local_sgd(broadcast(p, 5, cuda), x, y, sched, 0.2, device=cuda)
    assert all(type(a) is np.ndarray for a in gpu)  # back on the host, for the aggregation
    for a, b in zip(host, gpu, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert not np.array_equal(host[0], broadcast(p, 5)[0])  # it did train
    for k in (0, 3):
        one = [a[k] for a in host]
        loss, acc = evaluate(one, digits.x_test, digits.y_test)
        g_loss, g_acc = evaluate(one, digits.x_test, digits.y_test, device=cuda)
        assert g_loss == pytest.approx(loss, rel=dev.LOSS_RTOL) and g_acc == acc
    assert strict_cuda.calls["matmul"] > 0


def test_melopt_train_rows_on_the_device_match_the_cpu(strict_cuda: Any,
                                                      digits: Any) -> None:
    inst = api.load_instance(MEL_ASYNC)
    base = dict(schemes=("exact", "sync"), cycles=3, seeds=2, model="twonn")
    cpu = train(inst, TrainSettings(**base, processes=1), data=digits)
    gpu = train(inst, TrainSettings(**base, device="cuda"), data=digits)
    _agree(cpu.rows, gpu.rows, digits.y_test.size)
    # the training set crossed the bus once for the whole call (2 schemes x 2 seeds x 3
    # cycles), the test set once too; every round's trained models came back
    shapes = [s for s, _ in strict_cuda.uploads]
    assert shapes.count(digits.x_train.shape) == 1 and shapes.count(digits.x_test.shape) == 1
    assert strict_cuda.downloads >= 2 * 2 * 3


def test_feel_rows_on_the_device_match_the_cpu(strict_cuda: Any, digits: Any) -> None:
    """FEEL's averaged full-batch step (the allocation), one local epoch (model-based) and
    learners that keep their own models (individual) on the device."""
    inst = api.load_instance(FEEL)
    base = dict(schemes=("closed-form", "model-based", "individual"), cycles=3, seeds=1,
                model="softmax", aggregation="mean")
    cpu = train(inst, TrainSettings(**base, processes=1), data=digits)
    gpu = train(inst, TrainSettings(**base, device="cuda"), data=digits)
    _agree(cpu.rows, gpu.rows, digits.y_test.size)


def test_arena_rows_on_the_device_match_the_cpu(strict_cuda: Any) -> None:
    """The allocation, a synchronous scheme (deadline), FedBuff and FedProx (its proximal
    solver) on the device, as on the CPU."""
    inst = api.load_instance(MEL_ASYNC)
    base = dict(schemes=("exact", "deadline", "fedbuff", "fedprox"), seeds=2, cycles=2,
                model="twonn", max_train=500, max_test=200)
    cpu = arena(inst, ArenaSettings(**base))
    gpu = arena(inst, ArenaSettings(**base, device="cuda"))
    assert {r["scheme"] for r in gpu.rows} == set(base["schemes"])  # type: ignore[arg-type]
    _agree(cpu.rows, gpu.rows, 200)
    assert strict_cuda.calls["matmul"] > 0


def test_the_cli_trains_on_the_device(strict_cuda: Any, tmp_path: Path) -> None:
    args = ["train", str(MEL_ASYNC), "--schemes", "exact", "--cycles", "2", "--seeds", "1",
            "--max-train", "500"]
    rows = {}
    for device in ("cpu", "cuda"):
        res = CliRunner().invoke(cli, [*args, "--device", device, "-o", str(tmp_path / device)])
        assert res.exit_code == 0, res.output
        with open(tmp_path / device / "train.csv", newline="") as f:
            rows[device] = [{k: (float(v) if k in ("time_s", "loss", "accuracy") else v)
                             for k, v in r.items()} for r in csv.DictReader(f)]
    _agree(rows["cpu"], rows["cuda"], load_dataset("digits").y_test.size)
    assert strict_cuda.calls["matmul"] > 0


# ---- refusals --------------------------------------------------------------------------------

def _cli_lines(args: list[str]) -> tuple[int, list[str]]:
    res = CliRunner().invoke(cli, args)
    return res.exit_code, [line for line in res.output.splitlines() if line.strip()]


def _fake_cupy(monkeypatch: pytest.MonkeyPatch, count: Any) -> None:
    """A cupy that imports but finds no GPU: getDeviceCount returns ``count`` or raises it."""
    def device_count() -> int:
        if isinstance(count, Exception):
            raise count
        return int(count)

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        runtime=types.SimpleNamespace(getDeviceCount=device_count))
    monkeypatch.setitem(sys.modules, "cupy", cupy)


@pytest.mark.usefixtures("fresh_devices")
def test_without_cupy_cuda_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` fails: not installed
    inst = str(MEL_ASYNC)
    for args in (["train", inst, "--schemes", "exact", "--device", "cuda"],
                 ["arena", inst, "--schemes", "exact,fedbuff", "--device", "cuda"],
                 ["arena", inst, "--tune", "--device", "cuda"]):
        code, lines = _cli_lines([*args, "-o", str(tmp_path / "o")])
        assert (code, lines) == (2, [REFUSED]), args
        assert not (tmp_path / "o").exists()
    code, lines = _cli_lines(["reproduce", "000-fig3", "--quick", "--device", "cuda",
                              "-o", str(tmp_path / "r")])
    assert (code, lines) == (2, [REFUSED])
    with pytest.raises(SettingError, match="^device cuda needs the gpu extra"):
        train(api.load_instance(MEL_ASYNC), TrainSettings(schemes=("exact",), device="cuda"))


@pytest.mark.usefixtures("fresh_devices")
@pytest.mark.parametrize("found, says", [
    (RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected"),
     "no CUDA device is usable (RuntimeError: cudaErrorNoDevice: no CUDA-capable device is "
     "detected)"),
    (0, "no CUDA device is visible")])
def test_cupy_without_a_gpu_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path, found: Any,
                                                   says: str) -> None:
    _fake_cupy(monkeypatch, found)
    code, lines = _cli_lines(["train", str(MEL_ASYNC), "--schemes", "exact", "--device", "cuda",
                              "-o", str(tmp_path / "o")])
    assert code == 2
    assert lines == [f"error: --device cuda: {says}; run on a machine with an NVIDIA GPU, or "
                     "--device cpu"]
    assert "cuda" not in dev._LOADED  # nothing half-loaded is kept


@pytest.mark.usefixtures("fresh_devices")
def test_a_cupy_that_cannot_load_is_refused_with_its_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def broken(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "cupy":
            raise ImportError("libcudart.so.12: cannot open shared object file")
        return real(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(builtins, "__import__", broken)
    with pytest.raises(SettingError) as exc:
        dev.get_device("cuda")
    assert exc.value.as_flag() == (
        "--device cuda needs the gpu extra (importing cupy failed: ImportError: libcudart.so.12: "
        "cannot open shared object file): pip install -e '.[gpu]' in a clone, or pip install "
        "'mel_opt[gpu]'; with CUDA 13 drivers pip install cupy-cuda13x instead")


def test_several_processes_on_one_gpu_are_refused(tmp_path: Path) -> None:
    code, lines = _cli_lines(["train", str(MEL_ASYNC), "--schemes", "exact", "--device", "cuda",
                              "--processes", "4", "-o", str(tmp_path / "o")])
    assert (code, lines) == (2, ["error: --processes must be 1 with --device cuda (one process "
                                 "drives the GPU), got 4"])
    assert TrainSettings(schemes=("exact",), device="cuda", processes=1).processes == 1


def test_the_refusal_in_a_fresh_interpreter_is_one_line_without_a_traceback(
        tmp_path: Path) -> None:
    try:
        import cupy  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("cupy is installed here: the refusal without it is checked in-process "
                    "(test_without_cupy_cuda_is_refused_in_one_line)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "mel_opt.cli", "train", str(MEL_ASYNC),
                          "--schemes", "exact", "--device", "cuda", "-o", str(tmp_path / "o")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2
    assert res.stdout == "" and res.stderr.strip() == REFUSED


def test_the_gpu_benchmark_runs_here_in_its_smoke_form(tmp_path: Path) -> None:
    """benchmarks/bench_gpu.py, the script a GPU session runs once, works (every part tiny,
    on the CPU): each part finishes and the check's rows agree."""
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_gpu.py"), "--device",
                          "cpu", "--smoke", "--budget-s", "300", "--cpus", "1", "--out",
                          str(tmp_path)], capture_output=True, text=True, timeout=400,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    parts = {p["part"]: p for p in doc["parts"]}
    assert list(parts) == ["check", "fig3", "arena", "fig3-cpu", "arena-cpu"]
    assert all(p["finished"] for p in parts.values())
    checks = [e for e in parts["check"]["events"] if e["event"] == "result"]
    assert len(checks) == 2 and all(e["ok"] and e["rows"] > 2 for e in checks)
    assert all(any(e["event"] == "done" for e in parts[p]["events"])
               for p in ("fig3", "arena", "fig3-cpu", "arena-cpu"))
    assert "agree" in res.stdout
