"""Guards for the committed notebooks: nbval can only check what was executed and stored."""

import re
from pathlib import Path

import nbformat
import pytest

from lessonlib.notebook_tools import notebook_paths, unexecuted_cells

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = [ROOT / name for name in ("notebooks", "solutions", "exercises") if (ROOT / name).is_dir()]
NOTEBOOKS = notebook_paths(FOLDERS)
LESSONS = [p for p in NOTEBOOKS if p.parent.name == "notebooks"]


def ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def code_cells(path):
    return [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code" and c.source.strip()]


def test_the_lesson_notebooks_exist():
    assert (ROOT / "notebooks" / "01_scaling.ipynb") in LESSONS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_every_code_cell_was_executed(path):
    assert unexecuted_cells(path) == [], f"re-execute {path.name}: make execute"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_stored_outputs_have_no_unexpected_errors(path):
    for cell in code_cells(path):
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if "raises-exception" not in cell.metadata.get("tags", []):
            assert not errors, f"{path.name}: a cell stored an error: {cell.source[:80]!r}"


@pytest.mark.parametrize("path", LESSONS, ids=ids(LESSONS))
def test_at_most_a_quarter_of_outputs_are_ignored(path):
    cells = code_cells(path)
    ignored = [c for c in cells if "nbval-ignore-output" in c.metadata.get("tags", [])]
    assert len(ignored) <= len(cells) / 4, f"{path.name}: {len(ignored)} of {len(cells)} code cells ignored"
    compared = [c for c in cells if c not in ignored and c.get("outputs")]
    assert compared, f"{path.name}: no stored output for nbval to compare"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=ids(NOTEBOOKS))
def test_stored_outputs_name_no_folder_of_the_machine_that_ran_them(path):
    """A full traceback stores the checkout's absolute path; learners see a stranger's folders and
    the output changes with every clone. Errors a learner is meant to read use ``%xmode Minimal``."""
    frame = re.compile(r"/lessonlib/[\w/]+\.py:\d+")  # a traceback frame inside the package, wherever it was
    for cell in code_cells(path):
        for output in cell.get("outputs", []):
            text = str(output)
            assert str(ROOT) not in text and not frame.search(text), (
                f"{path.name}: an output names a folder of the machine that ran it: {cell.source[:80]!r}")
