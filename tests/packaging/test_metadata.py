"""LICENSE, CITATION.cff and the version: the files a distribution is cited and licensed by.

The CFF check here is structural (the fields of CFF 1.2.0 this file uses, read with PyYAML);
``cffconvert --validate -i CITATION.cff`` checks it against the full schema.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import mel_opt

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
PERSON_KEYS = {"family-names", "given-names", "affiliation"}
# the five source works: title -> family names of the authors, in order
SOURCES = {
    "Adaptive Task Allocation for Asynchronous Federated Mobile Edge Learning":
        ["Mohammad", "Sorour"],
    "Data Allocation and Benchmarking in Parallelized Mobile Edge Learning": ["Mays"],
    "Decentralized Data Allocation via Local Benchmarking for Parallelized Mobile Edge Learning":
        ["Mays", "Elsayed", "Hassanein"],
    "Demo Abstract: Distributed Machine Learning at Resource-Limited Edge Nodes":
        ["Tuor", "Wang", "Salonidis", "Ko", "Leung"],
    "Accelerating DNN Training in Wireless Federated Edge Learning Systems":
        ["Ren", "Yu", "Ding"],
}
REFERENCE_TYPES = {"article", "thesis", "conference-paper"}


@pytest.fixture(scope="module")
def cff() -> dict:
    return yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))


def test_license_is_mit_as_declared():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 the mel_opt authors" in text
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "MIT"


def test_cff_toolkit_entry(cff):
    assert cff["cff-version"] == "1.2.0"
    assert cff["type"] == "software"
    assert cff["message"].strip() and cff["title"].startswith("mel_opt")
    assert cff["authors"] == [{"name": "the mel_opt authors"}]
    assert cff["license"] == "MIT"
    # the version is the package's: one release, one citation
    assert str(cff["version"]) == mel_opt.__version__


def test_cff_cites_the_five_source_works(cff):
    refs = cff["references"]
    assert [r["title"].strip() for r in refs] == list(SOURCES)
    for ref in refs:
        title = ref["title"].strip()
        assert ref["type"] in REFERENCE_TYPES, title
        assert [a["family-names"] for a in ref["authors"]] == SOURCES[title]
        for author in ref["authors"]:
            assert set(author) <= PERSON_KEYS and author["given-names"], author
        assert "doi" not in ref  # none is stated in the texts the toolkit was built from
        if "year" in ref:
            assert 2015 <= ref["year"] <= 2026, title
    thesis = next(r for r in refs if r["type"] == "thesis")
    assert thesis["institution"]["name"] == "Queen's University"
    iwcmc = refs[2]
    assert "IWCMC" in iwcmc["collection-title"] and (iwcmc["start"], iwcmc["end"]) == (500, 505)


def test_cff_dates_and_countries_are_well_formed(cff):
    for ref in cff["references"]:
        if "month" in ref:
            assert 1 <= ref["month"] <= 12
        for place in (ref.get("institution"), ref.get("conference")):
            if place and "country" in place:
                assert re.fullmatch(r"[A-Z]{2}", place["country"])  # ISO 3166-1 alpha-2
