"""The built distribution installs and runs outside the source tree.

A module fixture copies the source tree to a temporary folder and runs ``python -m build
--no-isolation`` there: the sdist first, then the wheel built *from the sdist*, so a file the
sdist forgets breaks the wheel too. The wheel is installed with ``--no-deps --no-index`` into a
fresh virtual environment; its dependencies are those of the running environment, made visible
by a ``.pth`` file (a plain path line: the running environment's own ``.pth`` files, such as an
editable install of mel_opt, are not executed), so nothing is downloaded. Every command runs in
a temporary working folder without ``PYTHONPATH``, and the tests check that ``mel_opt`` is
imported from the new environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".git", ".venv", "build", "dist", "results", "*.egg-info",
                              "__pycache__", ".*_cache", ".hypothesis", "tests", "benchmarks")


def clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH (which may point at the source tree)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


def checked(cmd: list[str], cwd: Path, timeout: float = 300) -> str:
    res = run(cmd, cwd, timeout)
    assert res.returncode == 0, f"{cmd} -> {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def source_set(folder: str, pattern: str) -> set[str]:
    return {p.relative_to(REPO / folder).as_posix() for p in (REPO / folder).glob(pattern)
            if "__pycache__" not in p.parts}


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path
    venv: Path
    work: Path

    @property
    def bin(self) -> Path:
        return self.venv / ("Scripts" if os.name == "nt" else "bin")

    def python(self, code: str) -> str:
        return checked([str(self.bin / "python"), "-c", code], self.work).strip()

    def melopt(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run([str(self.bin / "melopt"), *args], self.work)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    base = tmp_path_factory.mktemp("dist")
    src, out, venv, work = base / "src", base / "out", base / "venv", base / "work"
    shutil.copytree(REPO, src, ignore=SKIP)
    checked([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
            base, timeout=600)
    (sdist,) = out.glob("mel_opt-*.tar.gz")
    (wheel,) = out.glob("mel_opt-*.whl")

    checked([sys.executable, "-m", "venv", "--without-pip", str(venv)], base)
    env_py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(checked([str(env_py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                         "['purelib'])"], base).strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_mel_opt_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    checked([sys.executable, "-m", "pip", "--python", str(env_py), "install", "--no-deps",
             "--no-index", "--disable-pip-version-check", "-q", str(wheel)], base)
    work.mkdir()
    return Built(sdist, wheel, venv, work)


def test_sdist_holds_sources_instances_and_metadata_files(built):
    with tarfile.open(built.sdist) as tar:
        top = built.sdist.name.removesuffix(".tar.gz")
        names = {n.removeprefix(f"{top}/") for n in tar.getnames()}
    for name in ("LICENSE", "README.md", "CITATION.cff", "pyproject.toml", "setup.py"):
        assert name in names, name
    assert {f"instances/{n}" for n in source_set("instances", "*/*.json")} <= names
    assert {f"mel_opt/{n}" for n in source_set("mel_opt", "**/*.py")} <= names


def test_wheel_holds_every_module_and_every_example(built):
    with zipfile.ZipFile(built.wheel) as whl:
        names = set(whl.namelist())
    modules = {n.removeprefix("mel_opt/") for n in names
               if n.startswith("mel_opt/") and n.endswith(".py")}
    assert modules == source_set("mel_opt", "**/*.py")
    examples = {n.removeprefix("mel_opt/example_instances/") for n in names
                if n.startswith("mel_opt/example_instances/")}
    assert examples == source_set("instances", "*/*.json")
    assert any(re.fullmatch(r"mel_opt-[^/]+\.dist-info/licenses/LICENSE", n) for n in names)


def test_the_installed_package_is_imported_not_the_source_tree(built):
    where = Path(built.python("import mel_opt; print(mel_opt.__file__)"))
    assert built.venv.resolve() in where.resolve().parents
    assert REPO not in where.resolve().parents
    root = Path(built.python("from mel_opt.examples import examples_root; "
                             "print(examples_root())"))
    assert built.venv.resolve() in root.resolve().parents  # the package data, not a checkout


def test_version_matches_the_metadata(built):
    meta = built.python("import importlib.metadata as m; print(m.version('mel_opt'))")
    res = built.melopt("--version")
    assert res.returncode == 0
    assert res.stdout.strip() == f"melopt, version {meta}"
    assert meta == built.python("import mel_opt; print(mel_opt.__version__)")
    assert built.wheel.name.startswith(f"mel_opt-{meta}-")


def solved(built: Built, path: Path, *options: str) -> dict:
    res = built.melopt("solve", str(path), "--json", *options)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["verification"]["feasible"] is True
    return doc


def test_examples_are_copied_and_solve(built):
    dest = built.work / "examples"
    res = built.melopt("examples", str(dest))
    assert res.returncode == 0, res.stderr
    copied = {p.relative_to(dest).as_posix() for p in dest.glob("*/*.json")}
    assert copied == source_set("instances", "*/*.json")
    assert built.melopt("examples", str(dest)).returncode == 2  # no overwrite without --force

    exact = solved(built, dest / "mel-async" / "k5_T15.json")
    assert (exact["problem"], exact["method"], exact["status"]) == ("mel-async", "exact",
                                                                     "optimal")
    # the compiled back-ends load in the new environment: IPOPT (cyipopt) and HiGHS (highspy)
    relaxed = solved(built, dest / "mel-async" / "k5_T15.json", "--method", "ipopt")
    assert relaxed["objective"] >= exact["objective"] - 1e-9  # exact is the proven minimum
    milp = solved(built, dest / "med" / "mays2023_n4_m1.json", "--method", "highs")
    assert milp["status"] == "optimal"


def test_generate_then_solve(built):
    target = built.work / "k5.json"
    res = built.melopt("generate", "mel-async", "--preset", "mohammad2020", "--learners", "5",
                       "-o", str(target))
    assert res.returncode == 0, res.stderr
    doc = json.loads(target.read_text())
    assert doc["problem"] == "mel-async" and len(doc["learners"]) == 5
    assert solved(built, target)["status"] == "optimal"
