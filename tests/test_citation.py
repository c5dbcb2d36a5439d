"""CITATION.cff is a valid Citation File Format 1.2.0 file and agrees with pyproject.toml.

The repository's address is pyproject.toml's ``[project.urls]`` Repository: CITATION.cff's
``repository-code``, and every install and clone line of the README and the instructor guide, use it.

The schema in tests/data/citation-file-format-1.2.0.schema.json is the Citation File Format
project's own JSON schema for version 1.2.0 (its ``$id`` is
https://citation-file-format.github.io/1.2.0/schema.json; CC BY 4.0), copied unchanged so the
test runs without a network.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import course_tables as ct  # noqa: E402

SCHEMA_PATH = ROOT / "tests" / "data" / "citation-file-format-1.2.0.schema.json"


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def citation() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def problems(document: dict[str, Any]) -> list[str]:
    """Every way ``document`` breaks the CFF 1.2.0 schema, as 'path: message' lines."""
    validator = jsonschema.Draft7Validator(schema(), format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))]


def test_the_schema_is_the_cff_1_2_0_schema() -> None:
    loaded = schema()
    assert loaded["$id"] == "https://citation-file-format.github.io/1.2.0/schema.json"
    assert set(loaded["required"]) == {"authors", "cff-version", "message", "title"}
    jsonschema.Draft7Validator.check_schema(loaded)


def test_citation_file_is_valid() -> None:
    document = citation()
    assert document["cff-version"] == "1.2.0"
    found = problems(document)
    assert not found, "CITATION.cff does not follow the CFF 1.2.0 schema:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.pop("authors"), "'authors' is a required property"),
        (lambda d: d.__setitem__("authors", []), "should be non-empty"),
        (lambda d: d.__setitem__("license", "MIT License"), "is not valid under any of the given schemas"),
        (lambda d: d.__setitem__("licence", "MIT"), "Additional properties are not allowed"),
    ],
    ids=["no-authors", "empty-authors", "licence-not-spdx", "misspelt-key"],
)
def test_a_broken_citation_is_refused(change: Any, expected: str) -> None:
    document = copy.deepcopy(citation())
    change(document)
    found = problems(document)
    assert any(expected in p for p in found), found


def test_citation_agrees_with_pyproject() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    document = citation()
    assert document["version"] == project["version"], "bump CITATION.cff's version with pyproject.toml's"
    # pyproject.toml licenses the package (code: MIT); CITATION.cff also names the course material's licence
    assert project["license"] == "MIT"
    assert document["license"] == ["MIT", "CC-BY-4.0"]
    assert "LICENSE" in project["license-files"]
    licence_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    for name in ("MIT License", "Creative Commons Attribution 4.0 International"):
        assert name in licence_text, f"LICENSE does not state the {name}"




def _pyproject() -> dict[str, Any]:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_repository_has_one_address() -> None:
    url = _pyproject()["urls"]["Repository"]
    assert citation()["repository-code"] == url, "CITATION.cff's repository-code is pyproject.toml's Repository"
    for name in ("README.md", "docs/instructor-guide.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "<repo-url>" not in text, f"{name} still says <repo-url>: give {url}"
        installs = re.findall(r"git\+(https://[^\s\"'`@]+)", text)
        clones = re.findall(r"git clone (https://\S+)", text)
        assert installs or name != "README.md", "the README's install lines name the repository"
        for found in installs + clones:
            assert found == url, f"{name} installs or clones {found}, pyproject.toml says {url}"


def test_citation_counts_the_notebooks() -> None:
    said = re.search(r"\b(\w+) notebooks\b", citation()["abstract"], re.I)
    count = len(list((ROOT / "notebooks").glob("*.ipynb")))
    assert said and said[1].lower() == ct.in_words(count), f"CITATION.cff's abstract should count {count} notebooks"
