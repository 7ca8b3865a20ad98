"""The shape rules of ARCHITECTURE.md, checked on the package's source.

- no module over 700 lines;
- no function body over 80 lines (docstring excluded) unless its docstring says why it must be
  one piece;
- no import cycle between the package's modules (module-level imports; imports inside a
  function are how optional and heavy dependencies are deferred, and run after loading);
- imports point down the layers: problems, solvers, nlp and io never import the api, the CLI or
  the library modules above them.
"""

from __future__ import annotations

import ast
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


def _imports(name: str) -> set[str]:
    """Package modules imported at module level by ``name`` (not inside functions)."""
    tree = ast.parse(MODULES[name].read_text())
    is_pkg = MODULES[name].name == "__init__.py"
    found: set[str] = set()
    for node in tree.body:
        stmts = [node]
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks do not run
            continue
        for stmt in stmts:
            if isinstance(stmt, ast.Import):
                found.update(a.name for a in stmt.names)
            elif isinstance(stmt, ast.ImportFrom):
                base = stmt.module or ""
                if stmt.level:
                    anchor = name.split(".")
                    anchor = anchor if is_pkg else anchor[:-1]
                    anchor = anchor[: len(anchor) - stmt.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                found.add(base)
                found.update(f"{base}.{a.name}" for a in stmt.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name) for name in MODULES}


def _parents(name: str) -> list[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def test_no_import_cycles() -> None:
    edges = {m: {d for d in deps if d not in _parents(m)} for m, deps in GRAPH.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges[node]):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    assert cycles == []


LOWER = ("mel_opt.problems", "mel_opt.solvers", "mel_opt.nlp", "mel_opt.io")
UPPER = ("mel_opt.api", "mel_opt.cli", "mel_opt.batch", "mel_opt.sweep", "mel_opt.compare",
         "mel_opt.reproduce", "mel_opt.training", "mel_opt.live")


def test_imports_point_down() -> None:
    wrong = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() if m.startswith(LOWER)
                   for d in deps if d.startswith(UPPER))
    assert wrong == []


# Who may import an optional heavy library (anywhere in the module, deferred imports too).
OWNERS = {"flwr": ("mel_opt.live.",), "highspy": ("mel_opt.solvers.",),
          "cyipopt": ("mel_opt.solvers.",)}
FLOWER_FREE = ("mel_opt.live.rounds", "mel_opt.live.estimates", "mel_opt.live.learner",
               "mel_opt.live.report", "mel_opt.live.throttle")


@pytest.mark.parametrize("library", sorted(OWNERS))
def test_optional_libraries_stay_in_their_package(library: str) -> None:
    wrong = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(m == library or m.startswith(library + ".") for m in mods) and not (
                    name.startswith(OWNERS[library]) and name not in FLOWER_FREE):
                wrong.append(name)
    assert wrong == []
