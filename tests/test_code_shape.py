"""The shape rules of ARCHITECTURE.md, checked on the package's source.

- no module over 700 lines;
- no function body over 80 lines (docstring excluded) unless its docstring says why it must be
  one piece;
- no import cycle between the package's modules at load (module-level imports; imports inside
  a function are how optional and heavy dependencies are deferred, and run after loading);
- every import, inside functions too, points down the layers of :data:`LAYERS` (problems,
  solvers, nlp and io never import the api, the CLI or the library modules above them), keeps
  the pairs of :data:`APART` apart and the modules of :data:`ONLY_FROM` to their users, and no
  problem package imports another; the few :data:`EXCEPTIONS` say why;
- no cycle between the top-level packages and modules, counting every import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mel_opt"
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 80
ONE_PIECE = "must be one piece"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def test_the_package_is_found() -> None:
    assert "mel_opt.api" in MODULES and "mel_opt.problems.base" in MODULES


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_length(name: str) -> None:
    lines = MODULES[name].read_text().count("\n")
    assert lines <= MAX_MODULE_LINES, f"{name}: {lines} lines"


def _long_functions(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        doc = ast.get_docstring(node) or ""
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        if not body:
            continue
        length = (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1
        if length > MAX_FUNCTION_LINES and ONE_PIECE not in " ".join(doc.split()):
            found.append(f"{node.name} ({length} lines)")
    return found


@pytest.mark.parametrize("name", sorted(MODULES))
def test_function_length(name: str) -> None:
    tree = ast.parse(MODULES[name].read_text())
    assert _long_functions(tree) == []


def test_the_length_rule_sees_a_long_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    long_one = f"def f():\n    '''Doc.'''\n{body}\n"
    assert _long_functions(ast.parse(long_one)) == [f"f ({MAX_FUNCTION_LINES + 1} lines)"]
    excused = f"def f():\n    '''Doc: it must be one\n    piece.'''\n{body}\n"
    assert _long_functions(ast.parse(excused)) == []


@dataclass(frozen=True)
class Import:
    """Where a module first imports another: its line, and whether inside a function
    (``deferred``: it runs when the function is called, not when the module loads)."""

    line: int
    deferred: bool


#: Calls that import a module named by a string literal (``mel_opt.lazy``'s stand-in).
LOADERS = ("lazy_module",)


def _type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` (bare or as ``typing.TYPE_CHECKING``): a block that never runs."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _absolute(node: ast.ImportFrom, name: str, is_pkg: bool) -> str:
    """The module a ``from ... import`` reads, relative imports resolved against ``name``."""
    base = node.module or ""
    if not node.level:
        return base
    anchor = name.split(".")
    anchor = anchor if is_pkg else anchor[:-1]
    anchor = anchor[: len(anchor) - node.level + 1]
    return ".".join([*anchor, base] if base else anchor)


def imports_in(source: str, name: str, is_pkg: bool = False,
               known: Iterable[str] | None = None, typing: bool = False) -> dict[str, Import]:
    """The modules the source of module ``name`` imports anywhere: at module level, in class
    bodies, inside functions (deferred) and through :data:`LOADERS`; ``if TYPE_CHECKING:``
    blocks are left out (they never run), or, with ``typing``, counted as imports at load (a
    type that names a module is a dependency on it, and a circle it closes is still a
    circle). ``from a import b`` counts ``a`` and ``a.b`` (``b`` may be a module). A module
    imported both at load and in a function counts as at load. ``known``: keep only these
    modules (default: every name found), never ``name`` itself.
    """
    found: dict[str, Import] = {}

    def add(module: str, line: int, deferred: bool) -> None:
        was = found.get(module)
        if was is None or (was.deferred and not deferred):
            found[module] = Import(line, deferred)

    def walk(node: ast.AST, deferred: bool) -> None:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for stmt in (*node.body, *node.orelse) if typing else node.orelse:
                walk(stmt, deferred)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, deferred)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, name, is_pkg)
            add(base, node.lineno, deferred)
            for alias in node.names:
                add(f"{base}.{alias.name}", node.lineno, deferred)
        elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))
              and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
              in LOADERS and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            add(node.args[0].value, node.lineno, deferred)
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            walk(child, inner)

    walk(ast.parse(source), False)
    keep = set(found) if known is None else set(known)
    return {m: i for m, i in found.items() if m in keep and m != name}


GRAPH = {name: imports_in(path.read_text(encoding="utf-8"), name, path.name == "__init__.py",
                          MODULES) for name, path in MODULES.items()}


def _parents(name: str) -> list[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The cycles a depth-first search meets in ``edges`` (each as its path, first node last
    again); empty when there are none."""
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    return cycles


#: Every module's imports, ``if TYPE_CHECKING:`` blocks counted (as at load).
TYPED_GRAPH = {name: imports_in(path.read_text(encoding="utf-8"), name,
                                path.name == "__init__.py", MODULES, typing=True)
               for name, path in MODULES.items()}


def load_cycles(graph: Mapping[str, Mapping[str, Import]]) -> list[list[str]]:
    """The cycles among the imports of ``graph`` that run when a module loads (module level;
    a package's own parents left out: importing a.b.c runs them first)."""
    edges = {m: {d for d, i in deps.items() if not i.deferred and d not in _parents(m)}
             for m, deps in graph.items()}
    return _cycles(edges)


def test_no_import_cycles() -> None:
    """No cycle among the imports that run when a module loads (module level), counting the
    imports a type checker reads (``if TYPE_CHECKING:``): a planner that names the run's type
    there while the run imports the planner is a circle the checker sees and the reader
    follows, though Python never runs it."""
    assert load_cycles(TYPED_GRAPH) == []


def test_a_type_checking_import_closes_a_cycle() -> None:
    planner = ("from typing import TYPE_CHECKING\n"
               "if TYPE_CHECKING:\n"
               "    from mel_opt.live.rounds import LiveRun\n")
    rounds = "from mel_opt.live.planners import planner_for\n"
    known = ("mel_opt.live.rounds", "mel_opt.live.planners")
    graph = {"mel_opt.live.planners": imports_in(planner, "mel_opt.live.planners", known=known,
                                                 typing=True),
             "mel_opt.live.rounds": imports_in(rounds, "mel_opt.live.rounds", known=known,
                                               typing=True)}
    assert load_cycles(graph) == [["mel_opt.live.planners", "mel_opt.live.rounds",
                                   "mel_opt.live.planners"]]
    assert imports_in(planner, "mel_opt.live.planners", known=known) == {}  # as Python runs it


# ---- the layers ------------------------------------------------------------------------------
#: The layer picture of ARCHITECTURE.md, bottom up. A module imports modules of its own layer
#: and of the layers below, never of one above: not at module level and not inside a function.
LAYERS: tuple[tuple[str, ...], ...] = (
    # what everything stands on (the picture's bottom row) and the small leaf modules beside
    # it: the deadline, the statistics and the noise law, the BLAS, lazy imports, the activity
    # line, the numpy MLP and the array module it computes with, the process table, Wang et
    # al.'s divergence h(tau)
    ("mel_opt.io", "mel_opt.result", "mel_opt.status", "mel_opt.errors", "mel_opt.limits",
     "mel_opt.deadline", "mel_opt.stats", "mel_opt.blas", "mel_opt.lazy", "mel_opt.activity",
     "mel_opt.mlp", "mel_opt.arrays", "mel_opt.processes", "mel_opt.convergence"),
    ("mel_opt.solvers", "mel_opt.nlp"),  # the backends and the Pyomo-to-numpy compiler
    ("mel_opt.problems",),  # the registry and one package per problem
    # the library: what the CLI does, callable from Python
    ("mel_opt.api", "mel_opt.batch", "mel_opt.sweep", "mel_opt.compare", "mel_opt.export",
     "mel_opt.plot", "mel_opt.examples", "mel_opt.schemas", "mel_opt.settings",
     "mel_opt.ray_local", "mel_opt.reproduce", "mel_opt.training", "mel_opt.live",
     "mel_opt.subset_benchmarking", "mel_opt.arena", "mel_opt.schemes", "mel_opt.units"),
    ("mel_opt.cli",),
)
#: mel_opt.problems.<pkg>: the problem packages (the registry's other modules are shared).
PROBLEM_PACKAGES = tuple(sorted(
    name for name, path in MODULES.items()
    if name.startswith("mel_opt.problems.") and name.count(".") == 2
    and path.name == "__init__.py"))
#: Within a layer: (importer, what it must not import, why).
APART: tuple[tuple[tuple[str, ...], tuple[str, ...], str], ...] = (
    (("mel_opt.training",), PROBLEM_PACKAGES,
     "nothing in training/ knows a problem (its learning.py holds its clock and cycle)"),
    (("mel_opt.training",), ("mel_opt.reproduce",),
     "the papers' experiments run the emulator, not the other way round"),
    # the arena trains the field's alternatives with the emulator's pieces (local SGD, data,
    # partition): it stands on training/, which never knows the alternatives
    (("mel_opt.training",), ("mel_opt.arena",),
     "the arena's alternatives run on the emulator's pieces, not the other way round"),
    # the schemes' registry and rules stand below both the arena and live runs, which carry
    # them (a virtual clock, learner processes); neither wing, nor the registry, knows a
    # problem: a problem declares its work clock and its live capabilities in its cycle
    (("mel_opt.schemes",), ("mel_opt.arena", "mel_opt.live"),
     "the schemes are declared below the wings that run them"),
    (("mel_opt.schemes", "mel_opt.arena", "mel_opt.live"), PROBLEM_PACKAGES,
     "the schemes, the arena and live runs read what a problem's learning cycle declares"),
)
#: Modules only some may import: (module, who may, why).
ONLY_FROM: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("mel_opt.batch", ("mel_opt.cli", "mel_opt.sweep"),
     "batch runs solves in worker processes for the CLI and for a sweep's grid only"),
)
_CSA = ("dab's csa builds a mel-async instance and solves it through api.solve, inside the "
        "functions, so that answer is also checked by mel-async's own verifier")
#: The only imports allowed to break a rule above (each inside a function), with the reason;
#: keep it short.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("mel_opt.problems.dab.methods", "mel_opt.api"): _CSA,
    ("mel_opt.problems.dab.methods", "mel_opt.problems.mel_async.instance"): _CSA,
}


def _under(name: str, prefixes: Iterable[str]) -> str | None:
    """The longest of ``prefixes`` that is ``name`` or a package holding it, else None."""
    hits = [p for p in prefixes if name == p or name.startswith(p + ".")]
    return max(hits, key=len) if hits else None


def _layer(name: str) -> int | None:
    for rank, layer in enumerate(LAYERS):
        if _under(name, layer):
            return rank
    return None


def _problem_package(name: str) -> str | None:
    return _under(name, PROBLEM_PACKAGES)


def rule_breaks(graph: Mapping[str, Mapping[str, Import]],
                exceptions: Mapping[tuple[str, str], str] = EXCEPTIONS) -> list[str]:
    """Every import in ``graph`` that breaks a rule: up a layer, a pair kept :data:`APART`,
    a module :data:`ONLY_FROM` some, or one problem package importing another; the
    ``exceptions`` left out."""
    found = []
    for m, deps in graph.items():
        for d, imp in deps.items():
            why = None
            low, high = _layer(m), _layer(d)
            if low is not None and high is not None and high > low:
                why = "imports a higher layer"
            for who, what, reason in APART:
                if _under(m, who) and _under(d, what):
                    why = reason
            for module, who, reason in ONLY_FROM:
                if _under(d, (module,)) and not _under(m, (module, *who)):
                    why = reason
            mine, theirs = _problem_package(m), _problem_package(d)
            if mine and theirs and mine != theirs:
                why = "problem packages meet through the registry and api.solve only"
            if why and (m, d) not in exceptions:
                where = "in a function" if imp.deferred else "at module level"
                found.append(f"{m} -> {d} (line {imp.line}, {where}): {why}")
    return sorted(found)


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if m != "mel_opt" and _layer(m) is None] == []


def test_imports_point_down() -> None:
    assert rule_breaks(GRAPH) == []


def test_the_exceptions_are_needed_and_deferred() -> None:
    """Each exception is an import that exists, inside a function, and breaks a rule."""
    for (m, d), reason in EXCEPTIONS.items():
        imp = GRAPH.get(m, {}).get(d)
        assert imp is not None, f"{m} no longer imports {d}: drop the exception"
        assert imp.deferred, f"{m} imports {d} at module level"
        assert rule_breaks({m: {d: imp}}, exceptions={}) != [], f"{m} -> {d} breaks no rule"
        assert reason


def _package(name: str) -> str:
    """The top-level package or module of mel_opt that ``name`` belongs to."""
    return ".".join(name.split(".")[:2])


def package_cycles(graph: Mapping[str, Mapping[str, Import]]) -> list[str]:
    """Cycles between mel_opt's top-level packages and modules, counting every import
    (inside functions too; :data:`EXCEPTIONS` left out), each with the imports behind it."""
    edges: dict[str, set[str]] = {}
    why: dict[tuple[str, str], str] = {}
    for m, deps in graph.items():
        for d, imp in deps.items():
            a, b = _package(m), _package(d)
            if a == b or b == "mel_opt" or (m, d) in EXCEPTIONS:
                continue
            edges.setdefault(a, set()).add(b)
            why.setdefault((a, b), f"{m} -> {d} line {imp.line}")
    return [" -> ".join(c) + " (" + "; ".join(why[pair] for pair in pairwise(c)) + ")"
            for c in _cycles(edges)]


def test_no_package_cycles() -> None:
    assert package_cycles(GRAPH) == []


def test_the_import_rules_see_a_function_level_import() -> None:
    source = ("from mel_opt.errors import UsageError\n"
              "from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n"
              "    from mel_opt.cli import cli\n"
              "\n"
              "def solve_it():\n"
              "    from mel_opt.api import solve\n"
              "    return solve\n")
    known = ("mel_opt.errors", "mel_opt.api", "mel_opt.cli")
    found = imports_in(source, "mel_opt.io.example", known=known)
    assert found == {"mel_opt.errors": Import(1, False), "mel_opt.api": Import(7, True)}
    assert rule_breaks({"mel_opt.io.example": found}) == [
        "mel_opt.io.example -> mel_opt.api (line 7, in a function): imports a higher layer"]
    # a package cycle closed by a function-level import only
    twonn = imports_in("def model():\n    from ..training.mlp import MLP\n",
                       "mel_opt.subset_benchmarking.twonn", known=("mel_opt.training.mlp",))
    assert twonn == {"mel_opt.training.mlp": Import(2, True)}
    graph = {"mel_opt.training.run": {"mel_opt.subset_benchmarking.threads": Import(25, False)},
             "mel_opt.subset_benchmarking.twonn": twonn}
    assert package_cycles(graph) == [
        "mel_opt.subset_benchmarking -> mel_opt.training -> mel_opt.subset_benchmarking "
        "(mel_opt.subset_benchmarking.twonn -> mel_opt.training.mlp line 2; "
        "mel_opt.training.run -> mel_opt.subset_benchmarking.threads line 25)"]
    # a lazy stand-in is an import too
    lazy = imports_in("from mel_opt.lazy import lazy_module\napi = lazy_module('mel_opt.api')\n",
                      "mel_opt.nlp.example", known=known)
    assert lazy == {"mel_opt.api": Import(2, False)}
    # the rules within the library layer, on imports inside functions
    inside = Import(9, True)
    assert rule_breaks({"mel_opt.live.run": {"mel_opt.batch": inside},
                        "mel_opt.sweep": {"mel_opt.batch": inside},
                        "mel_opt.training.x": {"mel_opt.problems.med.instance": inside,
                                               "mel_opt.problems.learning": inside,
                                               "mel_opt.reproduce.learning": inside},
                        "mel_opt.problems.dab.generate": {"mel_opt.problems.med": inside}}) == [
        "mel_opt.live.run -> mel_opt.batch (line 9, in a function): batch runs solves in "
        "worker processes for the CLI and for a sweep's grid only",
        "mel_opt.problems.dab.generate -> mel_opt.problems.med (line 9, in a function): "
        "problem packages meet through the registry and api.solve only",
        "mel_opt.training.x -> mel_opt.problems.med.instance (line 9, in a function): nothing "
        "in training/ knows a problem (its learning.py holds its clock and cycle)",
        "mel_opt.training.x -> mel_opt.reproduce.learning (line 9, in a function): the papers' "
        "experiments run the emulator, not the other way round"]


# Who may import an optional heavy library (anywhere in the module, deferred imports too): a
# package prefix (ending in a dot) or a module. Flower: the apps, the grid's exchange, the
# engines' runner, the SuperNode and SuperExec wrappers, the patches of Flower's internals and
# the record mapping; the rest of live/ (rounds, the loop, planners, learner, estimates,
# settings, report, the process side, the tuning) stays plain Python.
OWNERS = {"flwr": ("mel_opt.live.client", "mel_opt.live.flower_exchange",
                   "mel_opt.live.flower_patches", "mel_opt.live.run", "mel_opt.live.server",
                   "mel_opt.live.superexec", "mel_opt.live.supernode", "mel_opt.live.wire"),
          "highspy": ("mel_opt.solvers.",), "cyipopt": ("mel_opt.solvers.",)}


def _owner(name: str, owners: tuple[str, ...]) -> bool:
    return any(name == o or (o.endswith(".") and name.startswith(o)) for o in owners)


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_optional_libraries_stay_in_their_package(library: str) -> None:
    wrong = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(m == library or m.startswith(library + ".") for m in mods) and not \
                    _owner(name, OWNERS[library]):
                wrong.append(name)
    assert wrong == []


# ---- names compared ---------------------------------------------------------------------------
#: Where no problem's name may be compared (or key a table): the generic wings read what a
#: problem's learning cycle declares (its work clock, its columns, its live capabilities).
PROBLEM_BLIND = ("mel_opt.live", "mel_opt.arena", "mel_opt.training", "mel_opt.schemes")
#: Where a scheme's name may be compared: its registry alone.
SCHEME_REGISTRY = "mel_opt.schemes"


def _strings(node: ast.AST) -> list[ast.Constant]:
    """The string constants of ``node``, itself or the elements of a literal container."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [c for e in node.elts for c in _strings(e)]
    return []


def names_compared(source: str, names: Iterable[str]) -> list[str]:
    """Where ``source`` compares a value with one of ``names`` (``==``, ``!=``, ``in``, ``is``,
    also against a literal tuple, list or set of them) or keys a literal dict by one:
    ``"line: name"`` each."""
    wanted = set(names)
    found = []
    for node in ast.walk(ast.parse(source)):
        operands: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Dict):
            operands = [k for k in node.keys if k is not None]
        for op in operands:
            found.extend(f"{c.lineno}: {c.value}" for c in _strings(op) if c.value in wanted)
    return found


def _problem_names() -> set[str]:
    from mel_opt.problems import all_problems

    return set(all_problems())


def test_no_problem_is_named_in_the_generic_wings() -> None:
    names = _problem_names()
    assert {"mel-async", "dab"} <= names
    found = {m: hits for m, path in MODULES.items() if _under(m, PROBLEM_BLIND)
             and (hits := names_compared(path.read_text(encoding="utf-8"), names))}
    assert found == {}


def test_no_scheme_is_named_outside_its_registry() -> None:
    from mel_opt.schemes import SCHEMES

    found = {m: hits for m, path in MODULES.items() if not _under(m, (SCHEME_REGISTRY,))
             and (hits := names_compared(path.read_text(encoding="utf-8"), SCHEMES))}
    assert found == {}


def test_the_name_rule_sees_comparisons_and_tables() -> None:
    source = ('if inst.problem == "dab":\n    pass\n'
              'ok = kind in ("oort", "fedbuff")\n'
              'CLOCKS = {"mel-async": 1}\n'
              'text = "dab"  # a name that is not compared\n')
    assert names_compared(source, {"dab", "mel-async", "fedbuff"}) == [
        "1: dab", "3: fedbuff", "4: mel-async"]
