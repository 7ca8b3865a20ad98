"""Imports are paid when used: commands that build no Pyomo model do not import Pyomo.

Each case runs the command line in a fresh interpreter (the test process has long imported
everything) and reads back which heavy modules ended up in ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mel_opt

ROOT = Path(mel_opt.__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"
HEAVY = ("pyomo", "scipy", "highspy", "cyipopt", "matplotlib", "ray", "mel_opt.nlp")

# Runs ``melopt ARGS`` (or a snippet), then writes its exit code and sys.modules as JSON.
PROBE = """
import json, sys
out, mode, args = sys.argv[1], sys.argv[2], sys.argv[3:]
code = 0
if mode == "cli":
    from mel_opt.cli import main
    sys.argv = ["melopt", *args]
    try:
        main()
    except SystemExit as exc:
        code = exc.code
else:
    exec(args[0])
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _loaded(tmp_path: Path, mode: str, *args: str) -> tuple[int, set[str]]:
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    subprocess.run([sys.executable, "-c", PROBE, str(out), mode, *args], cwd=tmp_path, env=env,
                   check=True, stdout=subprocess.DEVNULL, timeout=120)
    doc = json.loads(out.read_text())
    return doc["code"], set(doc["modules"])


def _heavy(modules: set[str]) -> list[str]:
    return sorted(h for h in HEAVY if h in modules)


def test_version_imports_neither_pyomo_nor_the_commands(tmp_path):
    code, modules = _loaded(tmp_path, "cli", "--version")
    assert code == 0
    assert _heavy(modules) == []
    # the command modules (and numpy behind the library) load only when a command is looked up
    assert "mel_opt.cli.solve" not in modules and "mel_opt.api" not in modules


@pytest.mark.parametrize("args", [
    ("methods",),
    ("validate", str(INSTANCES / "feel"), str(INSTANCES / "med" / "hetero_n10_m3.json")),
    ("solve", str(INSTANCES / "mel-async" / "k10_T15.json"), "-m", "exact"),
    ("solve", str(INSTANCES / "feel" / "ren2021_cpu_densenet121_k6.json"), "-m", "closed-form"),
    ("solve", str(INSTANCES / "dab" / "worked_example.json"), "-m", "dab"),
    ("solve", str(INSTANCES / "adaptive-tau" / "svm_defaults.json"), "-m", "scan", "--json"),
], ids=["methods", "validate", "mel-async-exact", "feel-closed-form", "dab-dab",
        "adaptive-tau-scan"])
def test_commands_without_a_model_import_no_pyomo(tmp_path, args):
    code, modules = _loaded(tmp_path, "cli", *args)
    assert code == 0
    # mel-async exact's second stage (least average staleness among the optima) is an exact
    # MILP that HiGHS solves from arrays: highspy loads for it, Pyomo does not
    allowed = ["highspy"] if args[-1] == "exact" else []
    assert [h for h in _heavy(modules) if h not in allowed] == []
    assert "mel_opt.cli.solve" in modules  # the command did run
    if args[0] == "solve":  # found in the module of its name: no other command module loads
        assert {m for m in modules if m.startswith("mel_opt.cli.")} == {
            "mel_opt.cli.app", "mel_opt.cli.solve"}


def test_commands_outside_their_namesake_module_are_still_found(tmp_path):
    # tau-scan lives in cli/tau.py: looked up by name, then found by loading every module
    code, modules = _loaded(tmp_path, "cli", "tau-scan",
                            str(INSTANCES / "adaptive-tau" / "svm_defaults.json"))
    assert code == 0 and "mel_opt.cli.tau" in modules
    code, _ = _loaded(tmp_path, "cli", "no-such-command")
    assert code == 2


def test_building_a_model_still_imports_pyomo(tmp_path):
    # the control: the probe sees Pyomo once a formulation is actually built
    snippet = ("from mel_opt.api import load_instance\n"
               "from mel_opt.problems.mel_async.formulation import build_model\n"
               f"m = build_model(load_instance({str(INSTANCES / 'mel-async' / 'k5_T15.json')!r}),"
               " 'ipopt')\n"
               "assert type(m).__name__ == 'ConcreteModel'\n")
    _, modules = _loaded(tmp_path, "code", snippet)
    assert "pyomo" in modules and "pyomo.environ" in modules


def test_lazy_module_imports_on_first_attribute(tmp_path):
    snippet = ("import sys\n"
               "from mel_opt.lazy import lazy_module\n"
               "mod = lazy_module('json.tool')\n"
               "assert 'json.tool' not in sys.modules\n"
               "assert callable(mod.main) and 'json.tool' in sys.modules\n"
               "assert mod.main is sys.modules['json.tool'].main\n")
    _loaded(tmp_path, "code", snippet)  # check=True: an assertion error fails the run


def test_public_names_resolve_lazily():
    assert mel_opt.solve is mel_opt.api.solve
    assert mel_opt.Result.__module__ == "mel_opt.result"
    assert {"solve", "load_instance", "Status"} <= set(dir(mel_opt))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = mel_opt.nope  # type: ignore[attr-defined]
