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
        if len(cells) == 3 and re.fullmatch(r"`[\w-]+`", cells[0]) and \
                cells[0].strip("`") in all_problems():
            listed = cells[2].split("(+")[0]
            rows[cells[0].strip("`")] = re.findall(r"`([\w-]+)`", listed)
    return rows


def test_readme_lists_every_method_of_every_problem() -> None:
    rows = readme_methods()
    assert set(rows) == set(all_problems())
    for name, spec in all_problems().items():
        assert rows[name][0] == spec.default_method, name
        assert sorted(rows[name]) == sorted(spec.methods), name


def _tour(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    start = text.index("```bash", text.index("tour"))
    return text[start:text.index("```", start + 7)]


def test_the_readme_and_the_home_page_show_the_same_tour() -> None:
    home = README.parent / "docs" / "index.md"
    assert _tour(README) == _tour(home)
    # everything the tour writes goes below tour/, which git ignores
    outputs = re.findall(r"-o (\S+)", _tour(README))
    assert outputs and all(o.startswith("tour/") for o in outputs)
    assert "tour/" in (README.parent / ".gitignore").read_text().split()


def test_the_readme_names_every_extra_with_its_install_command() -> None:
    import tomllib

    extras = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Extras"):text.index("## Documentation")]
    for name in extras:
        assert f"`{name}`" in section, name
    assert "pip install -e '.[flower]'" in section and "pip install 'mel_opt[flower]'" in section
    makefile = (README.parent / "Makefile").read_text()
    assert "install -e '.[train,plot]'" in makefile  # make run: what the tour needs
