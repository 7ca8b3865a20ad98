"""The example instances shipped with mel_opt: list them and copy them into a folder.

The source tree keeps them in its top-level ``instances/`` folder, one sub-folder per problem
(``make run`` solves them there). An installed mel_opt carries the same files as the data
package ``mel_opt.example_instances`` (setup.py maps the folder there). :func:`examples_root`
finds either, so the examples are reachable from a wheel, an sdist install, an editable install
and a plain checkout on ``PYTHONPATH`` alike.
"""

from __future__ import annotations

import importlib.resources
import os
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from mel_opt.errors import UsageError
from mel_opt.io.atomic import atomic_write

#: Folder of the examples inside the installed package (the wheel's package data).
INSTALLED_FOLDER = "example_instances"
#: Folder of the examples at the top of a source checkout.
CHECKOUT_FOLDER = "instances"


@dataclass(frozen=True)
class Example:
    """One shipped instance file.

    Attributes
    ----------
    problem : str
        The problem it belongs to (the name of its folder, e.g. ``mel-async``).
    name : str
        Its file name, e.g. ``k5_T15.json``.
    resource : Traversable
        Where to read it (a file of the installed package or of the checkout).
    """

    problem: str
    name: str
    resource: Traversable

    @property
    def relpath(self) -> str:
        """``problem/name``: where a copy goes below the destination folder."""
        return f"{self.problem}/{self.name}"


def examples_root() -> Traversable:
    """The folder holding the example instances, one sub-folder per problem.

    The installed package data comes first; a source checkout (the package folder beside a
    ``pyproject.toml`` and an ``instances/`` folder, as in an editable install, whose package
    folder has no ``example_instances``) is the fallback.

    Raises
    ------
    UsageError
        Neither is present (a broken installation).
    """
    installed = importlib.resources.files("mel_opt").joinpath(INSTALLED_FOLDER)
    if installed.is_dir():
        return installed
    top = Path(__file__).resolve().parent.parent
    if (top / "pyproject.toml").is_file() and (top / CHECKOUT_FOLDER).is_dir():
        return top / CHECKOUT_FOLDER
    raise UsageError("the example instances are missing from this installation of mel_opt "
                     "(reinstall the package)")


def list_examples(problem: str | None = None) -> list[Example]:
    """The shipped instance files, sorted by problem and file name.

    Parameters
    ----------
    problem
        Only this problem's files (a folder name such as ``mel-async``); None for all.

    Raises
    ------
    UsageError
        ``problem`` has no examples; the message lists the problems that have.
    """
    root = examples_root()
    # skip e.g. __pycache__ or a .ipynb_checkpoints folder left beside the instances
    folders = {d.name: d for d in root.iterdir()
               if d.is_dir() and not d.name.startswith(("_", "."))}
    if problem is not None and problem not in folders:
        raise UsageError(f"--problem: no example instances for {problem!r}; "
                         f"choose one of {', '.join(sorted(folders))}")
    chosen = [problem] if problem is not None else sorted(folders)
    return [Example(p, f.name, f)
            for p in chosen
            for f in sorted(folders[p].iterdir(), key=lambda f: f.name)
            if f.is_file() and f.name.endswith(".json")]


def copy_examples(dest: str | os.PathLike[str], problem: str | None = None, *,
                  force: bool = False) -> list[Path]:
    """Copy the example instances to ``dest/<problem>/<file>``, each file atomically.

    Every target is checked before anything is written, so a refused copy leaves ``dest``
    untouched.

    Parameters
    ----------
    dest
        The destination folder; created (with parents) if missing.
    problem
        Copy only this problem's examples; None for all.
    force
        Replace files that exist already; without it any existing target is refused.

    Returns
    -------
    list of Path
        The files written, in the order of :func:`list_examples`.

    Raises
    ------
    UsageError
        ``dest`` is an existing file, ``problem`` is unknown, a target is a folder, or (without
        ``force``) a target file exists.
    """
    root = Path(dest)
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root}: exists and is not a folder")
    items = list_examples(problem)
    targets = [root / e.problem / e.name for e in items]
    blocked = [t for t in targets if t.is_dir() or (t.parent.exists() and not t.parent.is_dir())]
    if blocked:
        raise UsageError(f"{blocked[0]}: a folder or file is in the way of an example file")
    existing = [t for t in targets if t.exists()]
    if existing and not force:
        raise UsageError(f"{existing[0]}: exists already ({len(existing)} of the {len(targets)} "
                         "example files do); use --force to overwrite")
    for item, target in zip(items, targets, strict=True):
        atomic_write(target, item.resource.read_bytes())
    return targets


def problem_example(problem: str) -> Example:
    """The small example a problem declares (``ProblemSpec.example``): the one instance the
    generated documentation tables and the registry-wide tests solve.

    Raises
    ------
    UsageError
        The problem is unknown, declares no example, or its file is not shipped.
    """
    from mel_opt.problems import get_problem

    name = get_problem(problem).example
    if not name:
        raise UsageError(f"problem {problem!r} declares no example instance")
    for item in list_examples(problem):
        if item.name == name:
            return item
    raise UsageError(f"problem {problem!r} declares the example {name!r}, which is not among "
                     "its shipped instances")


def load_example(problem: str) -> Any:
    """The problem's example instance (:func:`problem_example`), read and validated."""
    from mel_opt.api import parse_instance
    from mel_opt.io.json_io import parse_json_text

    item = problem_example(problem)
    return parse_instance(parse_json_text(item.resource.read_text(), item.relpath),
                          item.relpath, Path(item.name).stem)
