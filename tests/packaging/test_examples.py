"""``melopt examples`` and :mod:`mel_opt.examples`: the shipped instances, listed and copied."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import mel_opt
from mel_opt.cli import cli
from mel_opt.errors import UsageError
from mel_opt.examples import copy_examples, examples_root, list_examples
from mel_opt.problems import all_problems

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "instances"


def source_files(problem: str | None = None) -> set[str]:
    """``problem/file`` of every instance in the checkout, found without mel_opt's code."""
    return {f"{p.parent.name}/{p.name}" for p in SOURCE.glob("*/*.json")
            if problem is None or p.parent.name == problem}


def test_the_examples_are_the_checkout_instances():
    # from a checkout (PYTHONPATH or editable install) the root is the top-level folder itself
    if (Path(mel_opt.__file__).parent / "example_instances").is_dir():
        pytest.skip("mel_opt is installed from a wheel here")
    assert Path(str(examples_root())) == SOURCE
    items = list_examples()
    assert {e.relpath for e in items} == source_files()
    assert [e.relpath for e in items] == sorted(e.relpath for e in items)


def test_every_problem_has_examples_and_every_example_folder_is_a_problem():
    assert {e.problem for e in list_examples()} == set(all_problems())


def test_copy_is_byte_identical_and_loads(tmp_path):
    written = copy_examples(tmp_path / "ex")
    assert {f"{p.parent.name}/{p.name}" for p in written} == source_files()
    for p in written:
        assert p.read_bytes() == (SOURCE / p.parent.name / p.name).read_bytes(), p
    # a copied instance is a valid instance of the problem of its folder
    for problem in all_problems():
        first = next(p for p in written if p.parent.name == problem)
        assert mel_opt.load_instance(first).problem == problem


def test_copy_one_problem(tmp_path):
    written = copy_examples(tmp_path, "feel")
    assert {p.name for p in written} == {n.split("/")[1] for n in source_files("feel")}
    assert [d.name for d in tmp_path.iterdir()] == ["feel"]


def test_existing_files_are_refused_untouched_and_replaced_with_force(tmp_path):
    copy_examples(tmp_path, "dab")
    victim = tmp_path / "dab" / "worked_example.json"
    victim.write_text("mine")
    with pytest.raises(UsageError, match="exists already.*--force"):
        copy_examples(tmp_path)
    # refused before anything is written: the other problems' folders were not created either
    assert victim.read_text() == "mine"
    assert [d.name for d in tmp_path.iterdir()] == ["dab"]
    copy_examples(tmp_path, "dab", force=True)
    assert victim.read_bytes() == (SOURCE / "dab" / "worked_example.json").read_bytes()
    assert not list(tmp_path.rglob(".*.tmp"))  # the atomic writer left no temporary file


def test_things_in_the_way_are_refused_even_with_force(tmp_path):
    (tmp_path / "dab").write_text("a file where a folder must go")
    with pytest.raises(UsageError, match="in the way"):
        copy_examples(tmp_path, "dab", force=True)
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="not a folder"):
        copy_examples(tmp_path / "file")
    with pytest.raises(UsageError, match="--problem: no example instances for 'nope'.*mel-async"):
        list_examples("nope")


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_cli_copy_refuse_force_and_list(tmp_path):
    res = run("examples", str(tmp_path / "ex"), "--problem", "mel-async")
    assert res.exit_code == 0, res.output
    n = len(source_files("mel-async"))
    assert len(list((tmp_path / "ex" / "mel-async").glob("*.json"))) == n
    assert f"copied {n} example instances (mel-async)" in res.output
    again = run("examples", str(tmp_path / "ex"), "--problem", "mel-async")
    assert again.exit_code == 2 and "use --force" in again.output
    assert "Traceback" not in again.output
    assert run("examples", str(tmp_path / "ex"), "-p", "mel-async", "--force").exit_code == 0

    listed = run("examples", "--list", "--problem", "adaptive-tau")
    assert listed.exit_code == 0
    for name in source_files("adaptive-tau"):
        assert name.split("/")[1] in listed.output
    assert "k5_T15.json" not in listed.output


@pytest.mark.parametrize("args, message", [
    (("examples",), "missing DIRECTORY"),
    (("examples", "somewhere", "--list"), "not both"),
    (("examples", "--list", "--problem", "tsp"), "no example instances for 'tsp'"),
])
def test_cli_usage_errors_exit_2(args, message):
    res = run(*args)
    assert res.exit_code == 2
    assert message in res.output
    assert "Traceback" not in res.output
