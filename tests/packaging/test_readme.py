"""The README's table of problems and methods is the registry's: every method, default first."""

from __future__ import annotations

import re
from pathlib import Path

from mel_opt.problems import all_problems

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_methods() -> dict[str, list[str]]:
    """problem -> the methods its README row names (before any "(+ ...)" note)."""
    rows: dict[str, list[str]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`[\w-]+`", cells[0]):
            listed = cells[2].split("(+")[0]
            rows[cells[0].strip("`")] = re.findall(r"`([\w-]+)`", listed)
    return rows


def test_readme_lists_every_method_of_every_problem() -> None:
    rows = readme_methods()
    assert set(rows) == set(all_problems())
    for name, spec in all_problems().items():
        assert rows[name][0] == spec.default_method, name
        assert sorted(rows[name]) == sorted(spec.methods), name
