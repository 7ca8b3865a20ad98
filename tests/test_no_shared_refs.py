"""No file of the repository points at the session's private source folder.

The documentation, docstrings and instance descriptions must stand alone: facts from the papers
are stated in the project's own words and cited by paper and equation number. This scans every
tracked file (``git ls-files`` in a git checkout, otherwise every file under the root except
caches and virtual environments) for the relative path of that folder.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Spelled in two pieces so that this file does not contain what it looks for.
NEEDLE = ".." + "/shared"
SKIP_DIRS = {".git", ".venv", "site", "build", "dist", "results", "__pycache__", ".mypy_cache",
             ".ruff_cache", ".pytest_cache", ".hypothesis"}


def _files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = b""
    if out:
        return [ROOT / p for p in out.decode().split("\0") if p]
    return [p for p in ROOT.rglob("*")
            if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(ROOT).parts)
            and not p.name.endswith(".egg-info")]


def hits(files: list[Path], root: Path) -> list[str]:
    """``path:line`` of every line of ``files`` that contains the needle."""
    found = []
    for path in files:
        try:
            text = path.read_bytes()
        except OSError:  # listed by git but deleted in the work tree
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if NEEDLE.encode() in line:
                found.append(f"{path.relative_to(root)}:{lineno}")
    return found


def test_no_file_refers_to_the_private_source_folder() -> None:
    files = [p for p in _files()
             if p.relative_to(ROOT).parts[0] != ".ci" and p != Path(__file__).resolve()]
    assert len(files) > 50  # the scan really saw the repository
    assert any(p.suffix == ".md" for p in files) and any(p.suffix == ".py" for p in files)
    found = hits(files, ROOT)
    assert not found, f"files refer to {NEEDLE}: " + ", ".join(found)


def test_the_scan_reports_a_reference(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("clean\n")
    (tmp_path / "b.py").write_text(f'"""Details in {NEEDLE}/papers/README.md."""\nx = 1\n')
    assert hits([tmp_path / "a.md", tmp_path / "b.py"], tmp_path) == ["b.py:1"]
